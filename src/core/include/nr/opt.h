/* Table-driven command-line options with generated --help.
 *
 * Each component describes its options once, in a table of struct nr_opt; the parser fills the destinations,
 * checks the limits stated in the table (the same constants appear in the error text and in --help), accepts
 * short options bundled getopt-style ("-ine 25", "-ah host", "-e25") and long options ("--exponential 25",
 * "--exponential=25"), and returns a status. It never prints (except nr_opt_help) and never exits.
 * "--help" and "--version" are built in and are recognised anywhere before "--"; when present nothing else is
 * parsed, so the help text shows the defaults the caller put into the destinations.
 */
#ifndef NR_OPT_H
#define NR_OPT_H

#include <stdio.h>

struct nr_error;
struct nr_opt;

enum nr_opt_type {
    NR_OPT_END = 0,    /* terminates a table */
    NR_OPT_SECTION,    /* not an option: a heading in --help (help = heading text) */
    NR_OPT_FLAG,       /* no value: *(int *)dest = 1 */
    NR_OPT_COUNT,      /* no value: ++*(int *)dest (e.g. -v -v) */
    NR_OPT_INT,        /* int *dest, decimal, checked against [min, max] */
    NR_OPT_SIZE,       /* uint64_t *dest, nr_size_parse() syntax, checked against [min, max] */
    NR_OPT_DOUBLE,     /* double *dest, checked against [min, max] */
    NR_OPT_STRING,     /* const char **dest = the argument (points into argv) */
    NR_OPT_SIZE_LIST,  /* struct nr_size_list *dest, nr_size_list_parse() with [min, max] */
    NR_OPT_CALL,       /* parse(arg, dest, opt, err) does the work (enumerations, special syntax) */
};

/* Parser for NR_OPT_CALL: returns 0 or a negative NR_E_* with err filled (use nr_opt_name() in the text). */
typedef int (*nr_opt_parse_fn)(const char *arg, void *dest, const struct nr_opt *opt, struct nr_error *err);

struct nr_opt {
    enum nr_opt_type type;
    char short_name;          /* 'r' for -r, 0 for none */
    const char *long_name;    /* "repetitions" for --repetitions, NULL for none */
    void *dest;               /* where the value goes (type above) */
    const char *metavar;      /* value placeholder in --help ("N", "SIZE", "FILE"); NULL for flags */
    const char *help;         /* one-line description */
    double min, max;          /* inclusive limits of numeric values; both 0 = unchecked */
    nr_opt_parse_fn parse;    /* NR_OPT_CALL only */
    const char *default_text; /* --help default for values that cannot be printed from dest; NULL = automatic */
};

/* A component's option table plus what --help prints around it. */
struct nr_opt_set {
    const char *prog;        /* program name in usage and errors */
    const char *usage;       /* after "Usage: PROG ", e.g. "[OPTIONS]" */
    const char *description; /* a paragraph under the usage line */
    const struct nr_opt *opts; /* table terminated by an NR_OPT_END entry */
    const char *epilog;      /* text after the options (examples), may be NULL */
};

/* Positive parser statuses (negative ones are NR_E_* errors). */
#define NR_OPT_OK 0
#define NR_OPT_HELP 1    /* --help given: print nr_opt_help() and exit 0 */
#define NR_OPT_VERSION 2 /* --version given */

/* Parse argv[1..argc-1] against set. On success returns NR_OPT_OK/HELP/VERSION. Non-option arguments are
 * collected only if positional != NULL: *positional gets the index of the first one in argv (options and
 * positionals may not interleave: parsing stops at the first positional or after "--"); with positional == NULL
 * any non-option argument is a usage error. Errors: NR_E_USAGE (unknown option, missing value), NR_E_PARSE,
 * NR_E_RANGE, with a one-line detail naming the option in err. */
int nr_opt_parse(const struct nr_opt_set *set, int argc, char **argv, int *positional, struct nr_error *err);

/* Print the generated help (usage, description, every option with its metavar, limits and default). */
void nr_opt_help(const struct nr_opt_set *set, FILE *out);

/* "-r/--repetitions", "-N", "--json": how errors name an option. Returns buf. */
const char *nr_opt_name(const struct nr_opt *opt, char *buf, size_t len);

#endif
