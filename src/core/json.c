/* Streaming JSON writer (see nr/json.h). */
#include "nr/json.h"

#include <inttypes.h>
#include <math.h>

#include "nr/error.h"
#include "nr/stats.h"

void nr_json_init(struct nr_json *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->have_key = false;
    j->done = false;
    j->error = 0;
}

static void nr__json_fail(struct nr_json *j, int code)
{
    if (!j->error)
        j->error = code;
}

static void nr__json_indent(struct nr_json *j)
{
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++)
        fputs("  ", j->f);
}

/* Called before every value: checks the position is legal and writes the separator. */
static bool nr__json_before_value(struct nr_json *j)
{
    if (j->error)
        return false;
    if (j->done) {
        nr__json_fail(j, NR_E_INTERNAL);
        return false;
    }
    if (j->depth == 0)
        return true;
    int top = j->depth - 1;
    if (j->kind[top] == 'o') {
        if (!j->have_key) {
            nr__json_fail(j, NR_E_INTERNAL);
            return false;
        }
        j->have_key = false;
        return true;
    }
    if (j->count[top])
        fputc(',', j->f);
    j->count[top] = 1;
    nr__json_indent(j);
    return true;
}

static void nr__json_after_value(struct nr_json *j)
{
    if (j->depth == 0)
        j->done = true;
}

/* Length of the well-formed UTF-8 sequence at p (1..4), or 0 when it is not one: overlong forms, surrogates,
 * code points above U+10FFFF, stray continuation bytes and truncated sequences are all rejected (RFC 3629). */
static size_t nr__utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    size_t n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, min = 0x10000;
    else
        return 0;
    unsigned cp = c & (0x7fu >> n);
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
            return 0;
        cp = cp << 6 | (p[i] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* A JSON string: escapes for quotes, backslash and control characters; well-formed UTF-8 copied as it is; every
 * byte that is not part of well-formed UTF-8 (a Latin-1 host name, an MPI library's message) becomes U+FFFD, so
 * the document stays valid JSON whatever the text. */
static void nr__json_escaped(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        default:
            if (*p < 0x20) {
                fprintf(f, "\\u%04x", *p);
            } else if (*p >= 0x80) {
                size_t n = nr__utf8_len(p);
                if (n == 0) {
                    fputs("\xef\xbf\xbd", f); /* U+FFFD REPLACEMENT CHARACTER */
                    p++;
                } else {
                    fwrite(p, 1, n, f);
                    p += n;
                }
                continue;
            } else {
                fputc(*p, f);
            }
        }
        p++;
    }
    fputc('"', f);
}

static void nr__json_begin(struct nr_json *j, unsigned char kind)
{
    if (!nr__json_before_value(j))
        return;
    if (j->depth >= NR_JSON_MAX_DEPTH) {
        nr__json_fail(j, NR_E_INTERNAL);
        return;
    }
    fputc(kind == 'o' ? '{' : '[', j->f);
    j->kind[j->depth] = kind;
    j->count[j->depth] = 0;
    j->depth++;
}

static void nr__json_end(struct nr_json *j, unsigned char kind)
{
    if (j->error)
        return;
    if (j->depth == 0 || j->kind[j->depth - 1] != kind || j->have_key) {
        nr__json_fail(j, NR_E_INTERNAL);
        return;
    }
    int had = j->count[j->depth - 1];
    j->depth--;
    if (had)
        nr__json_indent(j);
    fputc(kind == 'o' ? '}' : ']', j->f);
    nr__json_after_value(j);
}

void nr_json_begin_object(struct nr_json *j) { nr__json_begin(j, 'o'); }
void nr_json_end_object(struct nr_json *j) { nr__json_end(j, 'o'); }
void nr_json_begin_array(struct nr_json *j) { nr__json_begin(j, 'a'); }
void nr_json_end_array(struct nr_json *j) { nr__json_end(j, 'a'); }

void nr_json_key(struct nr_json *j, const char *key)
{
    if (j->error)
        return;
    if (j->depth == 0 || j->kind[j->depth - 1] != 'o' || j->have_key || !key) {
        nr__json_fail(j, NR_E_INTERNAL);
        return;
    }
    int top = j->depth - 1;
    if (j->count[top])
        fputc(',', j->f);
    j->count[top] = 1;
    nr__json_indent(j);
    nr__json_escaped(j->f, key);
    fputs(": ", j->f);
    j->have_key = true;
}

void nr_json_string(struct nr_json *j, const char *s)
{
    if (!nr__json_before_value(j))
        return;
    if (s)
        nr__json_escaped(j->f, s);
    else
        fputs("null", j->f);
    nr__json_after_value(j);
}

void nr_json_int(struct nr_json *j, int64_t v)
{
    if (!nr__json_before_value(j))
        return;
    fprintf(j->f, "%" PRId64, v);
    nr__json_after_value(j);
}

void nr_json_uint(struct nr_json *j, uint64_t v)
{
    if (!nr__json_before_value(j))
        return;
    fprintf(j->f, "%" PRIu64, v);
    nr__json_after_value(j);
}

void nr_json_double(struct nr_json *j, double v)
{
    if (!nr__json_before_value(j))
        return;
    if (isfinite(v))
        fprintf(j->f, "%.17g", v);
    else
        fputs("null", j->f);
    nr__json_after_value(j);
}

void nr_json_bool(struct nr_json *j, bool v)
{
    if (!nr__json_before_value(j))
        return;
    fputs(v ? "true" : "false", j->f);
    nr__json_after_value(j);
}

void nr_json_null(struct nr_json *j)
{
    if (!nr__json_before_value(j))
        return;
    fputs("null", j->f);
    nr__json_after_value(j);
}

void nr_json_kv_string(struct nr_json *j, const char *key, const char *s) { nr_json_key(j, key); nr_json_string(j, s); }
void nr_json_kv_int(struct nr_json *j, const char *key, int64_t v) { nr_json_key(j, key); nr_json_int(j, v); }
void nr_json_kv_uint(struct nr_json *j, const char *key, uint64_t v) { nr_json_key(j, key); nr_json_uint(j, v); }
void nr_json_kv_double(struct nr_json *j, const char *key, double v) { nr_json_key(j, key); nr_json_double(j, v); }
void nr_json_kv_bool(struct nr_json *j, const char *key, bool v) { nr_json_key(j, key); nr_json_bool(j, v); }

void nr_json_kv_stats(struct nr_json *j, const char *key, const struct nr_stats *s)
{
    nr_json_key(j, key);
    nr_json_begin_object(j);
    nr_json_kv_double(j, "min", s->min);
    nr_json_kv_double(j, "avg", s->avg);
    nr_json_kv_double(j, "max", s->max);
    nr_json_kv_double(j, "median", s->median);
    nr_json_kv_double(j, "stddev", s->stddev);
    nr_json_end_object(j);
}

int nr_json_finish(struct nr_json *j)
{
    if (!j->error && (!j->done || j->depth != 0))
        nr__json_fail(j, NR_E_INTERNAL);
    if (!j->error) {
        fputc('\n', j->f);
        if (fflush(j->f) != 0 || ferror(j->f))
            nr__json_fail(j, NR_E_IO);
    }
    return j->error;
}
