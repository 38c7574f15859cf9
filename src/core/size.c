/* Size parsing with binary suffixes, size lists and ranges (see nr/size.h). */
#include "nr/size.h"

#include <stdio.h>
#include <string.h>

#include "nr/error.h"

/* Parse the size in s[0..len-1]. */
static int nr__size_parse_n(const char *s, size_t len, uint64_t *bytes, const char *what, struct nr_error *err)
{
    uint64_t v = 0, mult = 1;
    size_t i = 0;
    if (len == 0)
        return nr_error_set(err, NR_E_PARSE, "%s: empty size", what);
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return nr_error_set(err, NR_E_RANGE, "%s: '%.*s' is too large", what, (int)len, s);
        v = v * 10 + d;
    }
    if (i == 0)
        return nr_error_set(err, NR_E_PARSE, "%s: '%.*s' is not a size (use digits with optional k, M or G)",
                            what, (int)len, s);
    if (i < len) {
        switch (s[i]) {
        case 'k': case 'K': mult = 1024u; break;
        case 'm': case 'M': mult = 1024u * 1024u; break;
        case 'g': case 'G': mult = 1024u * 1024u * 1024u; break;
        default:
            return nr_error_set(err, NR_E_PARSE,
                                "%s: '%.*s' is not a size (use digits with optional k, M or G)", what, (int)len, s);
        }
        if (i + 1 != len)
            return nr_error_set(err, NR_E_PARSE,
                                "%s: '%.*s' is not a size (use digits with optional k, M or G)", what, (int)len, s);
    }
    if (v > UINT64_MAX / mult)
        return nr_error_set(err, NR_E_RANGE, "%s: '%.*s' is too large", what, (int)len, s);
    *bytes = v * mult;
    return NR_OK;
}

int nr_size_parse(const char *s, uint64_t *bytes, const char *what, struct nr_error *err)
{
    if (!s)
        return nr_error_set(err, NR_E_PARSE, "%s: missing size", what);
    return nr__size_parse_n(s, strlen(s), bytes, what, err);
}

static int nr__size_list_add(struct nr_size_list *out, uint64_t v, uint64_t min, uint64_t max, const char *what,
                             struct nr_error *err)
{
    char a[32], b[32], c[32];
    if (v < min || v > max)
        return nr_error_set(err, NR_E_RANGE, "%s: size %s is outside [%s, %s]", what, nr_size_format(v, a, sizeof a),
                            nr_size_format(min, b, sizeof b), nr_size_format(max, c, sizeof c));
    if (out->n >= NR_SIZE_LIST_MAX)
        return nr_error_set(err, NR_E_RANGE, "%s: more than %d sizes", what, NR_SIZE_LIST_MAX);
    out->bytes[out->n++] = v;
    return NR_OK;
}

int nr_size_list_parse(const char *s, uint64_t min, uint64_t max, struct nr_size_list *out, const char *what,
                       struct nr_error *err)
{
    out->n = 0;
    if (!s || !*s)
        return nr_error_set(err, NR_E_PARSE, "%s: empty size list", what);
    const char *p = s;
    for (;;) {
        size_t len = strcspn(p, ",");
        const char *dash = memchr(p, '-', len);
        int rc;
        if (!dash) {
            uint64_t v;
            if ((rc = nr__size_parse_n(p, len, &v, what, err)) < 0)
                return rc;
            if ((rc = nr__size_list_add(out, v, min, max, what, err)) < 0)
                return rc;
        } else {
            uint64_t lo, hi;
            if ((rc = nr__size_parse_n(p, (size_t)(dash - p), &lo, what, err)) < 0)
                return rc;
            if ((rc = nr__size_parse_n(dash + 1, len - (size_t)(dash - p) - 1, &hi, what, err)) < 0)
                return rc;
            if (lo > hi)
                return nr_error_set(err, NR_E_PARSE, "%s: range '%.*s' has MIN > MAX", what, (int)len, p);
            uint64_t v = lo;
            for (;;) {
                if ((rc = nr__size_list_add(out, v, min, max, what, err)) < 0)
                    return rc;
                if (v == hi)
                    break;
                uint64_t next = v == 0 ? 1 : (v > UINT64_MAX / 2 ? hi : v * 2);
                v = next > hi ? hi : next;
            }
        }
        if (p[len] == '\0')
            break;
        p += len + 1;
        if (*p == '\0')
            return nr_error_set(err, NR_E_PARSE, "%s: size list '%s' ends with a comma", what, s);
    }
    return NR_OK;
}

const char *nr_size_format(uint64_t bytes, char *buf, size_t len)
{
    static const char suffix[] = {'G', 'M', 'k'};
    static const uint64_t unit[] = {1024u * 1024u * 1024u, 1024u * 1024u, 1024u};
    for (int i = 0; i < 3; i++) {
        if (bytes != 0 && bytes % unit[i] == 0) {
            snprintf(buf, len, "%llu%c", (unsigned long long)(bytes / unit[i]), suffix[i]);
            return buf;
        }
    }
    snprintf(buf, len, "%llu", (unsigned long long)bytes);
    return buf;
}
