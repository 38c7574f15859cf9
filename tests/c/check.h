/* Minimal assertion helpers for the C unit tests: a failed CHECK prints the expression and location and makes the
 * test case fail (exit 1) after the case has run, so one run shows every broken check of the case. */
#ifndef NR_TEST_CHECK_H
#define NR_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int nr_test_failures;

#define CHECK(cond)                                                                                                  \
    do {                                                                                                             \
        if (!(cond)) {                                                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                                \
            nr_test_failures++;                                                                                      \
        }                                                                                                            \
    } while (0)

#define CHECK_STR(a, b)                                                                                              \
    do {                                                                                                             \
        const char *a_ = (a), *b_ = (b);                                                                             \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                                                     \
            fprintf(stderr, "%s:%d: CHECK_STR failed: \"%s\" != \"%s\"\n", __FILE__, __LINE__, a_ ? a_ : "(null)",   \
                    b_ ? b_ : "(null)");                                                                             \
            nr_test_failures++;                                                                                      \
        }                                                                                                            \
    } while (0)

#define CHECK_NEAR(a, b, eps)                                                                                        \
    do {                                                                                                             \
        double a_ = (a), b_ = (b);                                                                                   \
        if (!(a_ - b_ <= (eps) && b_ - a_ <= (eps))) {                                                               \
            fprintf(stderr, "%s:%d: CHECK_NEAR failed: %.17g vs %.17g\n", __FILE__, __LINE__, a_, b_);               \
            nr_test_failures++;                                                                                      \
        }                                                                                                            \
    } while (0)

/* A table of named cases; main() runs the one named on the command line (one ctest case each). */
struct nr_test_case {
    const char *name;
    void (*fn)(void);
};

static int nr_test_main(const struct nr_test_case *cases, int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASE\n", argv[0]);
        return 2;
    }
    for (const struct nr_test_case *c = cases; c->name; c++) {
        if (strcmp(c->name, argv[1]) == 0) {
            c->fn();
            if (nr_test_failures)
                fprintf(stderr, "%s: %d check(s) failed\n", c->name, nr_test_failures);
            return nr_test_failures ? 1 : 0;
        }
    }
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}

#endif
