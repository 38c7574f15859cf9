/* Unit tests of nr_core: sizes and size lists, statistics and buckets, the option parser, the JSON writer, errors,
 * SHA-256/HMAC (FIPS 180-4 / RFC 4231 vectors), the system-log serialisation and the CPU cgroup reading. One ctest
 * case per function. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "nr/core.h"

static void test_size_parse(void)
{
    struct nr_error e;
    uint64_t v = 0;
    nr_error_clear(&e);
    CHECK(nr_size_parse("500k", &v, "-b", &e) == 0 && v == 500 * 1024);
    CHECK(nr_size_parse("8M", &v, "-b", &e) == 0 && v == 8u * 1024 * 1024);
    CHECK(nr_size_parse("1G", &v, "-b", &e) == 0 && v == 1024u * 1024 * 1024);
    CHECK(nr_size_parse("10k", &v, "-b", &e) == 0 && v == 10240); /* the seed: -b 10k gives 10240 */
    CHECK(nr_size_parse("0", &v, "-b", &e) == 0 && v == 0);
    CHECK(nr_size_parse("18446744073709551615", &v, "-b", &e) == 0 && v == UINT64_MAX);
    const char *bad[] = {"", "k", "12q", "1.5M", "-1", " 1", "1 ", "1kk", "1kB", "0x10", NULL};
    for (int i = 0; bad[i]; i++) {
        nr_error_clear(&e);
        CHECK(nr_size_parse(bad[i], &v, "-m/--message-size", &e) == NR_E_PARSE);
        CHECK(strstr(e.detail, "-m/--message-size") != NULL);
    }
    nr_error_clear(&e);
    CHECK(nr_size_parse("18446744073709551616", &v, "-m", &e) == NR_E_RANGE);
    nr_error_clear(&e);
    CHECK(nr_size_parse("17179869184G", &v, "-m", &e) == NR_E_RANGE); /* 2^34 G = 2^64: overflow */
    char buf[32];
    CHECK_STR(nr_size_format(65536, buf, sizeof buf), "64k");
    CHECK_STR(nr_size_format(3u << 20, buf, sizeof buf), "3M");
    CHECK_STR(nr_size_format(1000, buf, sizeof buf), "1000");
    CHECK_STR(nr_size_format(0, buf, sizeof buf), "0");
}

static void test_size_list(void)
{
    struct nr_error e;
    struct nr_size_list l;
    nr_error_clear(&e);
    CHECK(nr_size_list_parse("1-1M", 0, UINT64_MAX, &l, "-s", &e) == 0 && l.n == 21);
    CHECK(l.bytes[0] == 1 && l.bytes[20] == 1u << 20);
    CHECK(nr_size_list_parse("0-8", 0, UINT64_MAX, &l, "-s", &e) == 0 && l.n == 5 && l.bytes[0] == 0 &&
          l.bytes[1] == 1 && l.bytes[4] == 8);
    CHECK(nr_size_list_parse("3-20", 0, UINT64_MAX, &l, "-s", &e) == 0 && l.n == 4 && l.bytes[3] == 20); /* 3 6 12 20 */
    CHECK(nr_size_list_parse("1,8k,64k", 0, UINT64_MAX, &l, "-s", &e) == 0 && l.n == 3 && l.bytes[1] == 8192);
    CHECK(nr_size_list_parse("4k-4k", 0, UINT64_MAX, &l, "-s", &e) == 0 && l.n == 1);
    nr_error_clear(&e);
    CHECK(nr_size_list_parse("8-1", 0, UINT64_MAX, &l, "-s", &e) == NR_E_PARSE);
    nr_error_clear(&e);
    CHECK(nr_size_list_parse("1,,2", 0, UINT64_MAX, &l, "-s", &e) == NR_E_PARSE);
    nr_error_clear(&e);
    CHECK(nr_size_list_parse("1,2,", 0, UINT64_MAX, &l, "-s", &e) == NR_E_PARSE);
    nr_error_clear(&e);
    CHECK(nr_size_list_parse("", 0, UINT64_MAX, &l, "-s", &e) == NR_E_PARSE);
    nr_error_clear(&e);
    CHECK(nr_size_list_parse("1-2G", 0, 1u << 30, &l, "-s", &e) == NR_E_RANGE);
    CHECK(strstr(e.detail, "1G") != NULL); /* the limit appears in the message */
    nr_error_clear(&e);
    CHECK(nr_size_list_parse("0-18446744073709551615", 0, UINT64_MAX, &l, "-s", &e) == 0 && l.n == 66);
    char many[4096] = "1";
    for (int i = 0; i < NR_SIZE_LIST_MAX; i++)
        strcat(many, ",1");
    nr_error_clear(&e);
    CHECK(nr_size_list_parse(many, 0, UINT64_MAX, &l, "-s", &e) == NR_E_RANGE);
}

static void test_stats(void)
{
    struct nr_stats s;
    double x[] = {4, 1, 3, 2};
    CHECK(nr_stats_compute(x, 4, &s) == 0);
    CHECK(s.n == 4 && s.min == 1 && s.max == 4);
    CHECK_NEAR(s.avg, 2.5, 1e-12);
    CHECK_NEAR(s.median, 2.5, 1e-12);
    CHECK_NEAR(s.stddev, sqrt(5.0 / 3.0), 1e-12);
    CHECK(x[0] == 4); /* input untouched */
    double one = 7;
    CHECK(nr_stats_compute(&one, 1, &s) == 0 && s.median == 7 && s.stddev == 0);
    double odd[] = {9, 1, 5};
    CHECK(nr_stats_compute(odd, 3, &s) == 0 && s.median == 5);
    CHECK(nr_stats_compute(x, 0, &s) == NR_E_RANGE);
    /* Large offsets: Welford must not lose the variance. */
    double big[] = {1e9 + 1, 1e9 + 2, 1e9 + 3};
    CHECK(nr_stats_compute(big, 3, &s) == 0);
    CHECK_NEAR(s.stddev, 1.0, 1e-6);
}

/* The median's distribution-free interval (binomial order statistics) and the sequential stopping rule. */
static void test_repeat(void)
{
    double lo = 0, hi = 0, cov = 0;
    double four[] = {1, 2, 3, 4};
    CHECK(!nr_median_ci(four, 4, 0.90, &lo, &hi, &cov)); /* [min, max] of 4 covers 87.5 % < 90 % */
    double five[] = {5, 1, 4, 2, 3};
    CHECK(nr_median_ci(five, 5, 0.90, &lo, &hi, &cov) && lo == 1 && hi == 5);
    CHECK_NEAR(cov, 1 - 2.0 / 32, 1e-12);
    CHECK(!nr_median_ci(five, 5, 0.95, &lo, &hi, &cov)); /* 95 % needs 6 */
    /* n = 10 at 90 %: P(B <= 1) = 11/1024 <= 0.05, P(B <= 2) = 56/1024 > 0.05: the 2nd smallest and 2nd largest */
    double ten[] = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
    CHECK(nr_median_ci(ten, 10, 0.90, &lo, &hi, &cov) && lo == 2 && hi == 9);
    CHECK_NEAR(cov, 1 - 2 * 11.0 / 1024, 1e-12);
    /* a large n stays finite (2^-n underflows; the sums are taken in log space) */
    static double many[2000];
    for (int i = 0; i < 2000; i++)
        many[i] = i;
    CHECK(nr_median_ci(many, 2000, 0.90, &lo, &hi, &cov) && lo > 900 && lo < 1000 && hi > 1000 && hi < 1100);

    struct nr_error e;
    struct nr_repeat r = {0};
    const struct nr_opt ropt = {NR_OPT_CALL, 'r', "repetitions", &r, "N|MIN:MAX", "", 1, 100, nr_repeat_parse_opt,
                                NULL};
    nr_error_clear(&e);
    CHECK(nr_repeat_parse_opt("7", &r, &ropt, &e) == 0 && r.min == 7 && r.max == 7 && !nr_repeat_sequential(&r));
    CHECK(nr_repeat_parse_opt("5:20", &r, &ropt, &e) == 0 && r.min == 5 && r.max == 20 && nr_repeat_sequential(&r));
    const char *bad[] = {"", ":", "5:", ":5", "a", "5:x", "5:20:30", "-1", "+5", "0", "5:101", "20:5", NULL};
    const int code[] = {NR_E_PARSE, NR_E_PARSE, NR_E_PARSE, NR_E_PARSE, NR_E_PARSE, NR_E_PARSE, NR_E_PARSE,
                        NR_E_PARSE, NR_E_PARSE, NR_E_RANGE, NR_E_RANGE, NR_E_PARSE};
    for (int i = 0; bad[i]; i++) {
        nr_error_clear(&e);
        int rc = nr_repeat_parse_opt(bad[i], &r, &ropt, &e);
        if (rc != code[i])
            fprintf(stderr, "-r '%s': %d (%s)\n", bad[i], rc, e.detail);
        CHECK(rc == code[i] && strstr(e.detail, "-r/--repetitions") != NULL);
    }
    /* --precision only with MIN:MAX; the default otherwise */
    r = (struct nr_repeat){.min = 5, .max = 5, .precision = 0.01};
    nr_error_clear(&e);
    CHECK(nr_repeat_check(&r, "-r", "--precision", &e) == NR_E_USAGE && strstr(e.detail, "--precision") != NULL);
    r = (struct nr_repeat){.min = 5, .max = 20};
    CHECK(nr_repeat_check(&r, "-r", "--precision", &e) == 0 && r.precision == NR_REPEAT_PRECISION_DEFAULT);

    /* Quiet samples stop at the minimum once an interval exists; noisy ones run to the maximum. */
    double quiet[20], noisy[20];
    for (int i = 0; i < 20; i++)
        quiet[i] = 100 + (i % 3) * 0.1, noisy[i] = 100 + (i % 2 ? 30 : -30) + i;
    r = (struct nr_repeat){.min = 3, .max = 20, .precision = 0.01};
    int n = 0;
    while (nr_repeat_more(&r, quiet, (size_t)++n))
        ;
    CHECK(n == NR_REPEAT_MIN_CI && r.reason == NR_REPEAT_PRECISION && r.have_ci && r.half_width <= 0.01);
    r = (struct nr_repeat){.min = 6, .max = 20, .precision = 0.01};
    n = 0;
    while (nr_repeat_more(&r, quiet, (size_t)++n))
        ;
    CHECK(n == 6 && r.reason == NR_REPEAT_PRECISION); /* never below the minimum */
    r = (struct nr_repeat){.min = 5, .max = 20, .precision = 0.01};
    n = 0;
    while (nr_repeat_more(&r, noisy, (size_t)++n))
        ;
    CHECK(n == 20 && r.reason == NR_REPEAT_MAX && r.half_width > 0.01);
    char line[160];
    CHECK(strstr(nr_repeat_describe(&r, line, sizeof line), "20 of 5..20: maximum count reached") != NULL);
    /* A fixed count runs to its end whatever the samples say. */
    r = (struct nr_repeat){.min = 5, .max = 5};
    n = 0;
    while (nr_repeat_more(&r, noisy, (size_t)++n))
        ;
    CHECK(n == 5 && r.reason == NR_REPEAT_FIXED);
    CHECK_STR(nr_repeat_describe(&r, line, sizeof line), "5");
    CHECK_STR(nr_repeat_reason_name(NR_REPEAT_PRECISION), "precision");
}

static void test_buckets(void)
{
    double x[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10};
    double lo[5];
    uint64_t c[5];
    CHECK(nr_buckets_compute(x, 10, 5, lo, c) == 0);
    CHECK(c[0] == 2 && c[1] == 2 && c[2] == 2 && c[3] == 2 && c[4] == 2); /* 10 (the maximum) is in the last */
    CHECK_NEAR(lo[0], 0, 1e-12);
    CHECK_NEAR(lo[4], 8, 1e-12);
    uint64_t total = 0;
    for (int i = 0; i < 5; i++)
        total += c[i];
    CHECK(total == 10);
    double same[] = {3, 3, 3};
    CHECK(nr_buckets_compute(same, 3, 4, NULL, c) == 0 && c[0] == 3 && c[3] == 0);
    CHECK(nr_buckets_compute(x, 0, 4, NULL, c) == NR_E_RANGE);
}

/* Options used by the parser tests. */
static int o_flag, o_count, o_int;
static uint64_t o_size;
static double o_dbl;
static const char *o_str;
static struct nr_size_list o_list;

static int parse_argv(const char *cmdline, struct nr_error *e)
{
    static const struct nr_opt opts[] = {
        {NR_OPT_SECTION, 0, NULL, NULL, NULL, "Section", 0, 0, NULL, NULL},
        {NR_OPT_FLAG, 'a', "alpha", &o_flag, NULL, "a flag", 0, 0, NULL, NULL},
        {NR_OPT_COUNT, 'v', "verbose", &o_count, NULL, "more", 0, 0, NULL, NULL},
        {NR_OPT_INT, 'r', "repetitions", &o_int, "N", "reps", 1, 100, NULL, NULL},
        {NR_OPT_SIZE, 'm', "message-size", &o_size, "SIZE", "size", 1, 1u << 20, NULL, NULL},
        {NR_OPT_DOUBLE, 't', "time", &o_dbl, "S", "time", 0.01, 600, NULL, NULL},
        {NR_OPT_STRING, 'h', "host", &o_str, "HOST", "host", 0, 0, NULL, NULL},
        {NR_OPT_SIZE_LIST, 0, "sizes", &o_list, "LIST", "sizes", 0, 1u << 20, NULL, "1-1M"},
        {NR_OPT_END, 0, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL},
    };
    static const struct nr_opt_set set = {"prog", "[OPTIONS]", "Test program.", opts, NULL};
    char buf[512], *argv[32];
    int argc = 0;
    snprintf(buf, sizeof buf, "prog %s", cmdline);
    for (char *tok = strtok(buf, " "); tok && argc < 31; tok = strtok(NULL, " "))
        argv[argc++] = tok;
    argv[argc] = NULL;
    o_flag = o_count = 0;
    o_int = 10;
    o_size = 65536;
    o_dbl = 5;
    o_str = "localhost";
    nr_error_clear(e);
    int rc = nr_opt_parse(&set, argc, argv, NULL, e);
    if (rc == NR_OPT_HELP) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        nr_opt_help(&set, f);
        fclose(f);
        CHECK(strstr(text, "-r, --repetitions N") != NULL);
        CHECK(strstr(text, "[1..100]") != NULL);
        CHECK(strstr(text, "(default: 10)") != NULL);   /* defaults, untouched by the other arguments */
        CHECK(strstr(text, "(default: 64k)") != NULL);
        CHECK(strstr(text, "(default: 1-1M)") != NULL);
        CHECK(strstr(text, "Section:") != NULL);
        free(text);
    }
    return rc;
}

static void test_opt_parse(void)
{
    struct nr_error e;
    CHECK(parse_argv("-avv -r5 -m 8k -t 0.3 -h mk4", &e) == 0);
    CHECK(o_flag == 1 && o_count == 2 && o_int == 5 && o_size == 8192 && o_dbl == 0.3);
    CHECK_STR(o_str, "mk4");
    CHECK(parse_argv("--alpha --repetitions=7 --message-size 1M --host=x --sizes=1-8", &e) == 0);
    CHECK(o_flag == 1 && o_int == 7 && o_size == 1u << 20 && o_list.n == 4);
    CHECK_STR(o_str, "x");
    CHECK(parse_argv("-ah mk4", &e) == 0 && o_flag == 1); /* the seed's bundling: -ah HOST */
    CHECK_STR(o_str, "mk4");
    CHECK(parse_argv("-r 7 --help -r 99", &e) == NR_OPT_HELP);
    CHECK(parse_argv("--version", &e) == NR_OPT_VERSION);

    struct {
        const char *args;
        int rc;
        const char *needle;
    } bad[] = {
        {"-r 0", NR_E_RANGE, "-r/--repetitions: 0 is outside the allowed range [1, 100]"},
        {"-r 101", NR_E_RANGE, "[1, 100]"},
        {"-r x", NR_E_PARSE, "not an integer"},
        {"-r 99999999999", NR_E_RANGE, "-r/--repetitions"},
        {"-m 2M", NR_E_RANGE, "[1, 1M]"},
        {"-m 12q", NR_E_PARSE, "-m/--message-size"},
        {"-t nan", NR_E_PARSE, "not a number"},
        {"-t 0", NR_E_RANGE, "-t/--time"},
        {"-x", NR_E_USAGE, "unknown option '-x'"},
        {"--bogus", NR_E_USAGE, "unknown option '--bogus'"},
        {"-r", NR_E_USAGE, "needs a value"},
        {"--host", NR_E_USAGE, "needs a value"},
        {"--alpha=1", NR_E_USAGE, "takes no value"},
        {"stray", NR_E_USAGE, "unexpected argument 'stray'"},
        {"--sizes 8-1", NR_E_PARSE, "MIN > MAX"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse_argv(bad[i].args, &e);
        if (rc != bad[i].rc || !strstr(e.detail, bad[i].needle)) {
            fprintf(stderr, "  '%s': rc %d detail '%s'\n", bad[i].args, rc, e.detail);
            nr_test_failures++;
        }
        CHECK(nr_exit_status(rc) == NR_EXIT_USAGE);
    }
}

static char *json_of(void (*write)(struct nr_json *), int *rc)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct nr_json j;
    nr_json_init(&j, f);
    write(&j);
    *rc = nr_json_finish(&j);
    fclose(f);
    return text;
}

static void json_doc(struct nr_json *j)
{
    struct nr_stats s = {3, 1, 2, 3, 2, 1};
    nr_json_begin_object(j);
    nr_json_kv_string(j, "s", "a\"b\\c\n\x01");
    nr_json_kv_int(j, "i", -5);
    nr_json_kv_uint(j, "u", UINT64_MAX);
    nr_json_kv_double(j, "d", 0.1);
    nr_json_kv_double(j, "nan", NAN);
    nr_json_kv_bool(j, "b", true);
    nr_json_key(j, "empty");
    nr_json_begin_array(j);
    nr_json_end_array(j);
    nr_json_key(j, "arr");
    nr_json_begin_array(j);
    nr_json_int(j, 1);
    nr_json_null(j);
    nr_json_begin_object(j);
    nr_json_end_object(j);
    nr_json_end_array(j);
    nr_json_kv_stats(j, "t", &s);
    nr_json_end_object(j);
}

static void json_value_without_key(struct nr_json *j)
{
    nr_json_begin_object(j);
    nr_json_int(j, 1);
    nr_json_end_object(j);
}

static void json_unbalanced(struct nr_json *j)
{
    nr_json_begin_object(j);
    nr_json_key(j, "a");
    nr_json_begin_array(j);
    nr_json_end_object(j);
}

static void json_unfinished(struct nr_json *j)
{
    nr_json_begin_object(j);
    nr_json_key(j, "a");
}

static void test_json(void)
{
    int rc;
    char *t = json_of(json_doc, &rc);
    CHECK(rc == 0);
    CHECK(strstr(t, "\"s\": \"a\\\"b\\\\c\\n\\u0001\"") != NULL);
    CHECK(strstr(t, "\"i\": -5") != NULL);
    CHECK(strstr(t, "\"u\": 18446744073709551615") != NULL);
    CHECK(strstr(t, "\"d\": 0.10000000000000001") != NULL);
    CHECK(strstr(t, "\"nan\": null") != NULL);
    CHECK(strstr(t, "\"empty\": []") != NULL);
    CHECK(strstr(t, "\"median\": 2") != NULL);
    CHECK(t[strlen(t) - 1] == '\n');
    free(t);
    t = json_of(json_value_without_key, &rc);
    CHECK(rc == NR_E_INTERNAL);
    free(t);
    t = json_of(json_unbalanced, &rc);
    CHECK(rc == NR_E_INTERNAL);
    free(t);
    t = json_of(json_unfinished, &rc);
    CHECK(rc == NR_E_INTERNAL);
    free(t);
}

static void test_result_json(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct nr_json j;
    nr_json_init(&j, f);
    struct nr_result_meta m = {"nr-test", "stream", 0, NR_E_TIMEOUT, "no message from peer within 30 s"};
    struct nr_rep reps[2] = {{65536, 10, 655360, 655360, 800.0, {1, 0.1, 0.2}, {1, 0.3, 0.4}},
                             {65536, 10, 655360, 655361, 900.0, {1, 0.1, 0.2}, {1, 0.3, 0.4}}};
    nr_result_json_begin(&j, &m);
    nr_result_json_reps(&j, reps, 2, "client", "server");
    nr_result_json_sweep(&j, reps, 2, "master", "secondary");
    nr_json_end_object(&j);
    CHECK(nr_json_finish(&j) == 0);
    fclose(f);
    CHECK(strstr(text, "\"schema\": \"netregress-result/1\"") != NULL);
    CHECK(strstr(text, "\"status\": \"error\"") != NULL);
    CHECK(strstr(text, "\"error\": \"no message from peer within 30 s\"") != NULL);
    CHECK(strstr(text, "\"started_utc\": \"1970-01-01T00:00:00Z\"") != NULL);
    CHECK(strstr(text, "\"bytes_server\": 655361") != NULL);
    CHECK(strstr(text, "\"bytes_secondary\": 655361") != NULL);
    CHECK(strstr(text, "\"index\": 2") != NULL);
    free(text);
    CHECK_NEAR(nr_mbps(125000000, 1.0), 1000.0, 1e-9);
    CHECK(nr_mbps(1, 0) == 0);
}

static void test_errors(void)
{
    struct nr_error e;
    char buf[256];
    nr_error_clear(&e);
    CHECK(nr_error_set(&e, NR_E_RANGE, "-r: %d too big", 5) == NR_E_RANGE);
    nr_error_set(&e, NR_E_IO, "second"); /* the first error wins */
    CHECK_STR(nr_error_message(&e, buf, sizeof buf), "-r: 5 too big");
    nr_error_clear(&e);
    errno = ECONNREFUSED;
    nr_error_sys(&e, NR_E_NET, "cannot connect to mk4 port 5677");
    CHECK(strstr(nr_error_message(&e, buf, sizeof buf), "Connection refused") != NULL);
    for (int c = 0; c > NR_E_LAST_; c--)
        CHECK(strcmp(nr_strerror(c), "unknown error") != 0);
    CHECK_STR(nr_strerror(NR_E_LAST_), "unknown error");
    CHECK(nr_exit_status(0) == 0 && nr_exit_status(NR_E_USAGE) == 2 && nr_exit_status(NR_E_PARSE) == 2 &&
          nr_exit_status(NR_E_VALIDATE) == 3 && nr_exit_status(NR_E_NET) == 1 && nr_exit_status(NR_E_PEER) == 1);
}

static void hex(const unsigned char *d, char *out)
{
    for (int i = 0; i < NR_SHA256_BYTES; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

static void test_sha256(void)
{
    unsigned char d[NR_SHA256_BYTES];
    char h[65];
    nr_sha256("abc", 3, d);
    hex(d, h);
    CHECK_STR(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    nr_sha256("", 0, d);
    hex(d, h);
    CHECK_STR(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    nr_sha256(two, strlen(two), d);
    hex(d, h);
    CHECK_STR(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* Streaming in odd pieces gives the same digest as one shot. */
    struct nr_sha256 s;
    nr_sha256_init(&s);
    for (size_t i = 0; i < strlen(two); i += 7)
        nr_sha256_update(&s, two + i, strlen(two) - i < 7 ? strlen(two) - i : 7);
    unsigned char d2[NR_SHA256_BYTES];
    nr_sha256_final(&s, d2);
    CHECK(memcmp(d, d2, sizeof d) == 0);
    /* RFC 4231 test cases 1 and 2. */
    unsigned char key[20];
    memset(key, 0x0b, sizeof key);
    nr_hmac_sha256(key, sizeof key, "Hi There", 8, d);
    hex(d, h);
    CHECK_STR(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    nr_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, d);
    hex(d, h);
    CHECK_STR(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    /* RFC 4231 case 6: a key longer than the block is hashed first. */
    unsigned char longkey[131];
    memset(longkey, 0xaa, sizeof longkey);
    const char *msg6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    nr_hmac_sha256(longkey, sizeof longkey, msg6, strlen(msg6), d);
    hex(d, h);
    CHECK_STR(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    CHECK(nr_mem_equal_ct("abcd", "abcd", 4) && !nr_mem_equal_ct("abcd", "abce", 4));
}

static void test_sysmon(void)
{
    struct nr_sysmon *m;
    struct nr_error e;
    nr_error_clear(&e);
    CHECK(nr_sysmon_open(&m, &e) == 0);
    if (!m)
        return;
    for (int i = 0; i < 3; i++) {
        nr_sleep_s(0.02);
        CHECK(nr_sysmon_record(m, &e) == 0);
    }
    const struct nr_sysmon_log *log = nr_sysmon_get_log(m);
    CHECK(log->nrows == 3 && log->ncpu >= 1 && log->nif >= 1);
    CHECK(log->rows[0].interval_s > 0.015);
    int have_lo = 0;
    for (int i = 0; i < log->nif; i++)
        have_lo |= strcmp(log->ifname[i], "lo") == 0;
    CHECK(have_lo);
    for (size_t r = 0; r < log->nrows; r++)
        CHECK(log->rows[r].load_pct >= 0 && log->rows[r].load_pct <= 100.0001);

    /* Serialise, parse back, compare. */
    size_t len;
    char *text = nr_sysmon_log_serialize(log, &len);
    CHECK(text != NULL);
    struct nr_sysmon_log back;
    nr_sysmon_log_init(&back);
    CHECK(nr_sysmon_log_parse(text, len, &back, &e) == 0);
    CHECK(back.nrows == log->nrows && back.ncpu == log->ncpu && back.nif == log->nif);
    CHECK_STR(back.host, log->host);
    CHECK(back.rows[2].ctxt == log->rows[2].ctxt && back.net[back.nif - 1].rx_bytes == log->net[log->nif - 1].rx_bytes);

    /* The Hpcbench layout: a table per interface with one row per record. */
    char *out = NULL;
    size_t olen = 0;
    FILE *f = open_memstream(&out, &olen);
    CHECK(nr_sysmon_log_write(f, &back) == 0);
    fclose(f);
    CHECK(strstr(out, "# Watch times: 3\n") != NULL);
    CHECK(strstr(out, "statistics of network interface <lo>") != NULL);
    CHECK(strstr(out, "## CPU workload distribution:") != NULL);
    free(out);

    /* Corrupted texts are refused, never crash. */
    const char *bad[] = {"", "nr-sysmon 2\n", "nr-sysmon 1\nhost h\nstarted 0\nncpu 0\nnif 0\nrows 0\nend\n",
                         "nr-sysmon 1\nhost h\nstarted 0\nncpu 1\nnif 0\nrows 99999999\nend\n",
                         "nr-sysmon 1\nhost h\nstarted 0\nncpu 1\nnif 0\nrows 0\nend\ntrailing\n", NULL};
    for (int i = 0; bad[i]; i++) {
        nr_error_clear(&e);
        CHECK(nr_sysmon_log_parse(bad[i], strlen(bad[i]), &back, &e) == NR_E_PROTO);
    }
    /* Every cut that loses part of the text before its closing "end" (only the final newline may go). */
    for (size_t cut = 0; cut + 1 < len; cut += 7) {
        nr_error_clear(&e);
        CHECK(nr_sysmon_log_parse(text, cut, &back, &e) != 0);
    }
    nr_error_clear(&e);
    CHECK(nr_sysmon_log_parse("nr-sysmon 1\nhost h\nstarted 0\nncpu 1\nnif 0\nrows 0\nend\n", 53, &back, &e) == 0);
    free(text);
    nr_sysmon_log_free(&back);
    nr_sysmon_close(m);
}

static void test_table(void)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    const struct nr_table_col cols[] = {{{"Network", "Throughput", "(Mbps)"}, 15, 3}, {{"Iter", NULL, NULL}, 8, 0}};
    double v[] = {938.3068, 8969};
    nr_table_header(f, 1, cols, 2);
    nr_table_row(f, "1", 1, cols, 2, v);
    struct nr_stats s = {1, 936.253, 937.9449, 939.006, 0, 0};
    nr_table_stats_line(f, "Throughput", &s);
    struct nr_plot_series ser = {"out \"x\"", 1, 2, "t"};
    struct nr_plot p = {"title", "x", "y", true, "out.ps", &ser, 1};
    CHECK(nr_plot_write(f, &p) == 0);
    fclose(f);
    CHECK(strstr(out, "#        Network    Iter\n") != NULL);
    CHECK(strstr(out, "1        938.307    8969\n") != NULL);
    CHECK(strstr(out, "# Throughput statistics : Average 937.9449   Minimum 936.2530   Maximum 939.0060\n") != NULL);
    CHECK(strstr(out, "plot \"out \\\"x\\\"\" using 1:2") != NULL);
    CHECK(strstr(out, "set logscale x 2") != NULL);
    free(out);
}

static void json_utf8_doc(struct nr_json *j)
{
    nr_json_begin_object(j);
    nr_json_kv_string(j, "ok", "gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80"); /* well-formed: kept */
    nr_json_kv_string(j, "latin1", "h\xf6st");                 /* a Latin-1 host name */
    nr_json_kv_string(j, "cut", "ab\xe2\x82");                /* truncated sequence at the end */
    nr_json_kv_string(j, "overlong", "\xc0\xaf");              /* overlong '/' */
    nr_json_kv_string(j, "surrogate", "\xed\xa0\x80");        /* U+D800 */
    nr_json_kv_string(j, "big", "\xf4\x90\x80\x80");         /* above U+10FFFF */
    nr_json_end_object(j);
}

/* Every string the writer emits is well-formed UTF-8 (else the document is not JSON): invalid bytes become U+FFFD,
 * valid sequences pass unchanged. */
static void test_json_utf8(void)
{
    int rc;
    char *t = json_of(json_utf8_doc, &rc);
    CHECK(rc == 0);
    CHECK(strstr(t, "\"ok\": \"gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80\"") != NULL);
    CHECK(strstr(t, "\"latin1\": \"h\xef\xbf\xbdst\"") != NULL);
    CHECK(strstr(t, "\"cut\": \"ab\xef\xbf\xbd\xef\xbf\xbd\"") != NULL);
    CHECK(strstr(t, "\"overlong\": \"\xef\xbf\xbd\xef\xbf\xbd\"") != NULL);
    CHECK(strstr(t, "\"surrogate\": \"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"") != NULL);
    CHECK(strstr(t, "\"big\": \"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"") != NULL);
    free(t);
}

/* A fake transfer: each iteration takes us_per_iter microseconds; counts the probes. */
struct fake_probe {
    double us_per_iter;
    int probes;
    int fail_at;
    int stall_at;      /* this probe (1-based) is delayed by stall_s, as a descheduled process would be */
    double stall_s;
};

static int fake_probe_run(void *ctx, uint64_t n, double *elapsed_s, struct nr_error *err)
{
    struct fake_probe *f = ctx;
    if (++f->probes == f->fail_at)
        return nr_error_set(err, NR_E_NET, "probe %d failed", f->probes);
    *elapsed_s = (double)n * f->us_per_iter * 1e-6 + (f->probes == f->stall_at ? f->stall_s : 0);
    return 0;
}

/* The calibration shared by nr-mpitest and nr-tcptest: probes grow until one lasts a tenth of the target, that
 * count is probed again and the median probe decides, the count is scaled to the target; capped; a probe's error is
 * returned; one stalled probe cannot shrink the count; a first measured run that falls short is re-run with a
 * rescaled count, short runs are reported and a test whose runs mostly fell far short fails with the figures. */
static void test_calibrate(void)
{
    struct nr_error e;
    nr_error_clear(&e);
    struct nr_calib c;
    struct fake_probe f = {1.0, 0, 0, 0, 0};
    uint64_t n = 0;
    nr_calib_init(&c, 0.1, (uint64_t)1 << 40);
    CHECK(nr_calibrate(fake_probe_run, &f, &c, &n, &e) == 0);
    CHECK(n == 100000);               /* 0.1 s of 1-us iterations */
    CHECK(f.probes >= 3 && f.probes <= 9 && c.probes == (unsigned)f.probes);
    f = (struct fake_probe){1.0, 0, 0, 0, 0};
    nr_calib_init(&c, 0.1, 5000);
    CHECK(nr_calibrate(fake_probe_run, &f, &c, &n, &e) == 0 && n == 5000);
    f = (struct fake_probe){200000.0, 0, 0, 0, 0}; /* 0.2 s per iteration: one count, confirmed once */
    nr_calib_init(&c, 0.1, 1000);
    CHECK(nr_calibrate(fake_probe_run, &f, &c, &n, &e) == 0 && n == 1 && f.probes == 2);
    f = (struct fake_probe){1.0, 0, 2, 0, 0};
    nr_calib_init(&c, 0.1, 1000000);
    CHECK(nr_calibrate(fake_probe_run, &f, &c, &n, &e) == NR_E_NET);
    nr_error_clear(&e);

    /* The reported failure: a 60-ms stall in the first probe (1 iteration of 100 us) of a 0.5-s target gave 9
     * iterations. Now the stalled count is probed again and the fast rate decides: 5000 iterations. */
    for (int at = 1; at <= 6; at++) {
        f = (struct fake_probe){100.0, 0, 0, at, 0.060};
        nr_calib_init(&c, 0.5, (uint64_t)1 << 40);
        CHECK(nr_calibrate(fake_probe_run, &f, &c, &n, &e) == 0);
        CHECK(n >= 4900 && n <= 5100);
    }

    /* A count that came out too small anyway: the first measured run (0.05 s of a 0.5-s target) is re-run with
     * the count its own rate gives, at most NR_CALIB_RECHECKS times; at the cap or long enough it is kept. */
    nr_calib_init(&c, 0.5, (uint64_t)1 << 40);
    int rechecks = 0;
    uint64_t next = 0;
    CHECK(nr_calib_recheck(&c, 500, 0.05, &rechecks, &next) == 1 && next == 5000 && c.recalibrations == 1);
    CHECK(nr_calib_recheck(&c, 5000, 0.45, &rechecks, &next) == 0 && next == 5000);
    CHECK(nr_calib_recheck(&c, 5000, 0.1, &rechecks, &next) == 1 && next == 25000);
    CHECK(nr_calib_recheck(&c, 25000, 0.1, &rechecks, &next) == 0 && rechecks == NR_CALIB_RECHECKS);
    nr_calib_init(&c, 0.5, 600);
    rechecks = 0;
    CHECK(nr_calib_recheck(&c, 500, 0.05, &rechecks, &next) == 1 && next == 600);
    CHECK(nr_calib_recheck(&c, 600, 0.06, &rechecks, &next) == 0);
    nr_calib_init(&c, 0, 600);        /* a fixed count (--iterations) is never re-run */
    rechecks = 0;
    CHECK(nr_calib_recheck(&c, 5, 0.001, &rechecks, &next) == 0);

    /* The verdict: short runs are a warning, most runs far short (a tenth of the target) fail the test; runs at the
     * cap are not short. */
    nr_calib_init(&c, 0.5, 1000);
    nr_calib_record(&c, 100, 0.5);
    nr_calib_record(&c, 100, 0.1);
    nr_calib_record(&c, 1000, 0.01);
    CHECK(c.runs == 3 && c.short_runs == 1 && c.far_short_runs == 0 && c.capped_runs == 1 && c.achieved_min_s == 0.01);
    CHECK(nr_calib_verdict(&c, &e) == 0);
    nr_calib_record(&c, 100, 0.2);
    CHECK(nr_calib_verdict(&c, &e) == 0 && c.short_runs == 2); /* load that lets up: short, not failed */
    nr_calib_record(&c, 100, 0.02);
    nr_calib_record(&c, 100, 0.03);
    CHECK(nr_calib_verdict(&c, &e) == 0 && c.far_short_runs == 2); /* 2 of 6 far short: not most */
    nr_calib_record(&c, 100, 0.001);
    nr_calib_record(&c, 100, 0.001);
    CHECK(nr_calib_verdict(&c, &e) == 0 && c.far_short_runs == 4); /* half: not most */
    nr_error_clear(&e);
    nr_calib_record(&c, 100, 0.001);
    CHECK(nr_calib_verdict(&c, &e) == NR_E_VALIDATE && strstr(e.detail, "5 of 9 measured runs lasted less than 10 %"));
    nr_error_clear(&e);
    nr_calib_init(&c, 0, 1000);
    nr_calib_record(&c, 3, 0.0001);
    CHECK(nr_calib_verdict(&c, &e) == 0 && c.short_runs == 0);

    /* The JSON object, with the warning only when a run fell short. */
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    struct nr_json j;
    nr_json_init(&j, mf);
    nr_json_begin_object(&j);
    nr_calib_init(&c, 0.5, 1000);
    nr_calib_record(&c, 100, 0.1);
    nr_calib_json(&j, &c);
    nr_json_end_object(&j);
    CHECK(nr_json_finish(&j) == 0);
    fclose(mf);
    CHECK(strstr(buf, "\"calibration\"") && strstr(buf, "\"target_s\": 0.5") && strstr(buf, "\"short_runs\": 1") &&
          strstr(buf, "\"warning\": \"1 of 1 measured runs lasted less than 50 % of the 0.5-s target"));
    free(buf);
}

/* Buffers are written in full, never with zero bytes (a zero page is what an untouched buffer reads), and the
 * doubles of the collective tests are ordinary numbers. */
static void test_buffer(void)
{
    enum { N = 3 * 4096 + 17 };
    unsigned char *b = calloc(1, N), *c = calloc(1, N);
    nr_buffer_fill(b, N, 0);
    nr_buffer_fill(c, N, 1);
    size_t zeros = 0, differ = 0;
    for (size_t i = 0; i < N; i++)
        zeros += b[i] == 0, differ += b[i] != c[i];
    CHECK(zeros == 0);
    CHECK(differ > N / 2);                       /* the seed matters (send and receive buffers differ) */
    CHECK(memcmp(b, b + 4096, 4096) != 0);       /* pages are not copies of each other */
    double x[2048];
    nr_buffer_fill_doubles(x, 2048, 3);
    for (size_t i = 0; i < 2048; i++)
        CHECK(isnormal(x[i]) && x[i] >= 1.0 && x[i] < 2.0);
    free(b);
    free(c);
}

int main(int argc, char **argv)
{
    static const struct nr_test_case cases[] = {
        {"size_parse", test_size_parse}, {"size_list", test_size_list}, {"stats", test_stats},
        {"buckets", test_buckets},       {"repeat", test_repeat},       {"opt_parse", test_opt_parse}, {"json", test_json},
        {"result_json", test_result_json}, {"errors", test_errors},   {"sha256", test_sha256},
        {"sysmon", test_sysmon},         {"table", test_table},         {"buffer", test_buffer},
        {"json_utf8", test_json_utf8},   {"calibrate", test_calibrate},
        {NULL, NULL},
    };
    return nr_test_main(cases, argc, argv);
}
