/* Option-table parser and --help generator (see nr/opt.h). */
#include "nr/opt.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nr/error.h"
#include "nr/size.h"

const char *nr_opt_name(const struct nr_opt *opt, char *buf, size_t len)
{
    if (opt->short_name && opt->long_name)
        snprintf(buf, len, "-%c/--%s", opt->short_name, opt->long_name);
    else if (opt->short_name)
        snprintf(buf, len, "-%c", opt->short_name);
    else
        snprintf(buf, len, "--%s", opt->long_name ? opt->long_name : "?");
    return buf;
}

static int nr__opt_takes_value(const struct nr_opt *o)
{
    return o->type != NR_OPT_FLAG && o->type != NR_OPT_COUNT;
}

static int nr__opt_has_limits(const struct nr_opt *o)
{
    return o->min != 0 || o->max != 0;
}

/* Format a limit: sizes with suffixes, integers without decimals, doubles with %g. */
static const char *nr__opt_fmt_limit(const struct nr_opt *o, double v, char *buf, size_t len)
{
    if (o->type == NR_OPT_SIZE || o->type == NR_OPT_SIZE_LIST)
        return nr_size_format((uint64_t)v, buf, len);
    snprintf(buf, len, "%.15g", v);
    return buf;
}

static int nr__opt_range_error(const struct nr_opt *o, const char *arg, struct nr_error *err)
{
    char name[64], lo[32], hi[32];
    return nr_error_set(err, NR_E_RANGE, "%s: %s is outside the allowed range [%s, %s]", nr_opt_name(o, name, sizeof name),
                        arg, nr__opt_fmt_limit(o, o->min, lo, sizeof lo), nr__opt_fmt_limit(o, o->max, hi, sizeof hi));
}

static int nr__opt_store(const struct nr_opt *o, const char *arg, struct nr_error *err)
{
    char name[64];
    nr_opt_name(o, name, sizeof name);
    switch (o->type) {
    case NR_OPT_FLAG:
        *(int *)o->dest = 1;
        return NR_OK;
    case NR_OPT_COUNT:
        ++*(int *)o->dest;
        return NR_OK;
    case NR_OPT_INT: {
        char *end;
        errno = 0;
        long v = strtol(arg, &end, 10);
        if (end == arg || *end != '\0')
            return nr_error_set(err, NR_E_PARSE, "%s: '%s' is not an integer", name, arg);
        if (errno == ERANGE || v < INT32_MIN || v > INT32_MAX ||
            (nr__opt_has_limits(o) && ((double)v < o->min || (double)v > o->max)))
            return nr__opt_range_error(o, arg, err);
        *(int *)o->dest = (int)v;
        return NR_OK;
    }
    case NR_OPT_SIZE: {
        uint64_t v;
        int rc = nr_size_parse(arg, &v, name, err);
        if (rc < 0)
            return rc;
        if (nr__opt_has_limits(o) && ((double)v < o->min || (double)v > o->max))
            return nr__opt_range_error(o, arg, err);
        *(uint64_t *)o->dest = v;
        return NR_OK;
    }
    case NR_OPT_DOUBLE: {
        char *end;
        errno = 0;
        double v = strtod(arg, &end);
        if (end == arg || *end != '\0' || !isfinite(v))
            return nr_error_set(err, NR_E_PARSE, "%s: '%s' is not a number", name, arg);
        if (nr__opt_has_limits(o) && (v < o->min || v > o->max))
            return nr__opt_range_error(o, arg, err);
        *(double *)o->dest = v;
        return NR_OK;
    }
    case NR_OPT_STRING:
        if (!arg[0])
            return nr_error_set(err, NR_E_PARSE, "%s: empty value", name);
        *(const char **)o->dest = arg;
        return NR_OK;
    case NR_OPT_SIZE_LIST: {
        uint64_t lo = 0, hi = UINT64_MAX;
        if (nr__opt_has_limits(o)) {
            lo = (uint64_t)o->min;
            hi = (uint64_t)o->max;
        }
        return nr_size_list_parse(arg, lo, hi, (struct nr_size_list *)o->dest, name, err);
    }
    case NR_OPT_CALL:
        if (!o->parse)
            return nr_error_set(err, NR_E_INTERNAL, "%s: no parser in the option table", name);
        return o->parse(arg, o->dest, o, err);
    default:
        return nr_error_set(err, NR_E_INTERNAL, "%s: bad option type in the table", name);
    }
}

static const struct nr_opt *nr__opt_find_short(const struct nr_opt *opts, char c)
{
    for (const struct nr_opt *o = opts; o->type != NR_OPT_END; o++)
        if (o->type != NR_OPT_SECTION && o->short_name == c)
            return o;
    return NULL;
}

static const struct nr_opt *nr__opt_find_long(const struct nr_opt *opts, const char *name, size_t len)
{
    for (const struct nr_opt *o = opts; o->type != NR_OPT_END; o++)
        if (o->type != NR_OPT_SECTION && o->long_name && strlen(o->long_name) == len &&
            strncmp(o->long_name, name, len) == 0)
            return o;
    return NULL;
}

int nr_opt_parse(const struct nr_opt_set *set, int argc, char **argv, int *positional, struct nr_error *err)
{
    const char *prog = set->prog ? set->prog : "program";
    if (positional)
        *positional = argc;
    /* --help/--version first, so nothing is stored and --help shows the defaults. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if (strcmp(argv[i], "--help") == 0)
            return NR_OPT_HELP;
        if (strcmp(argv[i], "--version") == 0)
            return NR_OPT_VERSION;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            if (i + 1 < argc) {
                if (!positional)
                    return nr_error_set(err, NR_E_USAGE, "unexpected argument '%s' (see %s --help)", argv[i + 1], prog);
                *positional = i + 1;
            }
            return NR_OPT_OK;
        }
        if (a[0] == '-' && a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            const struct nr_opt *o = nr__opt_find_long(set->opts, name, len);
            if (!o)
                return nr_error_set(err, NR_E_USAGE, "unknown option '--%.*s' (see %s --help)", (int)len, name, prog);
            const char *val = NULL;
            if (nr__opt_takes_value(o)) {
                if (eq)
                    val = eq + 1;
                else if (i + 1 < argc)
                    val = argv[++i];
                else
                    return nr_error_set(err, NR_E_USAGE, "option --%s needs a value %s", o->long_name,
                                        o->metavar ? o->metavar : "");
            } else if (eq) {
                return nr_error_set(err, NR_E_USAGE, "option --%s takes no value", o->long_name);
            }
            int rc = nr__opt_store(o, val, err);
            if (rc < 0)
                return rc;
        } else if (a[0] == '-' && a[1] != '\0') {
            for (const char *c = a + 1; *c; c++) {
                const struct nr_opt *o = nr__opt_find_short(set->opts, *c);
                if (!o)
                    return nr_error_set(err, NR_E_USAGE, "unknown option '-%c' (see %s --help)", *c, prog);
                const char *val = NULL;
                if (nr__opt_takes_value(o)) {
                    if (c[1])
                        val = c + 1;
                    else if (i + 1 < argc)
                        val = argv[++i];
                    else
                        return nr_error_set(err, NR_E_USAGE, "option -%c needs a value %s", *c,
                                            o->metavar ? o->metavar : "");
                }
                int rc = nr__opt_store(o, val, err);
                if (rc < 0)
                    return rc;
                if (val)
                    break; /* the rest of the token was the value */
            }
        } else {
            if (!positional)
                return nr_error_set(err, NR_E_USAGE, "unexpected argument '%s' (see %s --help)", a, prog);
            *positional = i;
            return NR_OPT_OK;
        }
    }
    return NR_OPT_OK;
}

/* The default shown in --help, from the destination's current value. Empty string: show nothing. */
static const char *nr__opt_default(const struct nr_opt *o, char *buf, size_t len)
{
    buf[0] = '\0';
    if (o->default_text)
        return o->default_text;
    switch (o->type) {
    case NR_OPT_INT:
        snprintf(buf, len, "%d", *(const int *)o->dest);
        break;
    case NR_OPT_SIZE:
        nr_size_format(*(const uint64_t *)o->dest, buf, len);
        break;
    case NR_OPT_DOUBLE:
        snprintf(buf, len, "%g", *(const double *)o->dest);
        break;
    case NR_OPT_STRING:
        if (*(const char *const *)o->dest)
            snprintf(buf, len, "%s", *(const char *const *)o->dest);
        break;
    default:
        break;
    }
    return buf;
}

void nr_opt_help(const struct nr_opt_set *set, FILE *out)
{
    fprintf(out, "Usage: %s %s\n", set->prog, set->usage ? set->usage : "[OPTIONS]");
    if (set->description)
        fprintf(out, "%s\n", set->description);
    for (const struct nr_opt *o = set->opts; o->type != NR_OPT_END; o++) {
        if (o->type == NR_OPT_SECTION) {
            fprintf(out, "\n%s:\n", o->help);
            continue;
        }
        char lhs[96], def[128], lo[32], hi[32];
        int n = snprintf(lhs, sizeof lhs, "  %s%c%s", o->short_name ? "-" : "  ", o->short_name ? o->short_name : ' ',
                         o->short_name && o->long_name ? "," : " ");
        if (o->long_name)
            n += snprintf(lhs + n, sizeof lhs - (size_t)n, " --%s", o->long_name);
        if (nr__opt_takes_value(o) && o->metavar && n < (int)sizeof lhs)
            snprintf(lhs + n, sizeof lhs - (size_t)n, " %s", o->metavar);
        fprintf(out, "%-30s %s", lhs, o->help ? o->help : "");
        if (nr__opt_takes_value(o) && nr__opt_has_limits(o) && o->type != NR_OPT_CALL)
            fprintf(out, " [%s..%s]", nr__opt_fmt_limit(o, o->min, lo, sizeof lo),
                    nr__opt_fmt_limit(o, o->max, hi, sizeof hi));
        const char *d = nr__opt_default(o, def, sizeof def);
        if (d[0])
            fprintf(out, " (default: %s)", d);
        fputc('\n', out);
    }
    fprintf(out, "\n%-30s %s\n%-30s %s\n", "      --help", "show this help and exit", "      --version",
            "show the version and exit");
    if (set->epilog)
        fprintf(out, "\n%s\n", set->epilog);
}
