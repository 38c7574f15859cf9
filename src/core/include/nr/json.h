/* A small streaming JSON writer for arbitrary nested objects and arrays.
 *
 * The writer keeps only a nesting stack: values are written to the FILE as they come, with commas and
 * indentation placed automatically. Misuse (a value where a key is needed, unbalanced ends, nesting deeper than
 * NR_JSON_MAX_DEPTH) and I/O errors are remembered and reported by nr_json_finish(), so a writer can be called
 * without checking every step. Doubles are written with up to 17 significant digits; NaN and infinities (which
 * JSON cannot represent) become null. Strings are escaped (quotes, backslash, control characters); well-formed
 * UTF-8 is copied as it is and any other byte becomes U+FFFD, so a non-UTF-8 host name or library message cannot
 * make the document invalid.
 *
 *   struct nr_json j; nr_json_init(&j, f);
 *   nr_json_begin_object(&j);
 *   nr_json_kv_string(&j, "schema", "netregress-result/1");
 *   nr_json_key(&j, "sweep"); nr_json_begin_array(&j); ... nr_json_end_array(&j);
 *   nr_json_end_object(&j);
 *   if (nr_json_finish(&j) < 0) ...
 */
#ifndef NR_JSON_H
#define NR_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct nr_stats;

#define NR_JSON_MAX_DEPTH 32

struct nr_json {
    FILE *f;                         /* output */
    int depth;                       /* current nesting depth */
    unsigned char kind[NR_JSON_MAX_DEPTH];  /* 'o' object or 'a' array per level */
    unsigned char count[NR_JSON_MAX_DEPTH]; /* 0: nothing written yet at this level, 1: something */
    bool have_key;                   /* inside an object: a key was written, a value must follow */
    bool done;                       /* the top-level value is complete */
    int error;                       /* first error (NR_E_INTERNAL misuse, NR_E_IO), 0 if none */
};

void nr_json_init(struct nr_json *j, FILE *f);

void nr_json_begin_object(struct nr_json *j);
void nr_json_end_object(struct nr_json *j);
void nr_json_begin_array(struct nr_json *j);
void nr_json_end_array(struct nr_json *j);

/* Inside an object: the key of the next value. */
void nr_json_key(struct nr_json *j, const char *key);

void nr_json_string(struct nr_json *j, const char *s); /* NULL writes null */
void nr_json_int(struct nr_json *j, int64_t v);
void nr_json_uint(struct nr_json *j, uint64_t v);
void nr_json_double(struct nr_json *j, double v);
void nr_json_bool(struct nr_json *j, bool v);
void nr_json_null(struct nr_json *j);

/* key + value in one call. */
void nr_json_kv_string(struct nr_json *j, const char *key, const char *s);
void nr_json_kv_int(struct nr_json *j, const char *key, int64_t v);
void nr_json_kv_uint(struct nr_json *j, const char *key, uint64_t v);
void nr_json_kv_double(struct nr_json *j, const char *key, double v);
void nr_json_kv_bool(struct nr_json *j, const char *key, bool v);

/* key: {"min":..,"avg":..,"max":..,"median":..,"stddev":..} (the summary entry of the common schema). */
void nr_json_kv_stats(struct nr_json *j, const char *key, const struct nr_stats *s);

/* Check the document is complete and balanced, write the final newline and flush.
 * Returns 0, NR_E_INTERNAL on misuse, or NR_E_IO if writing failed. */
int nr_json_finish(struct nr_json *j);

#endif
