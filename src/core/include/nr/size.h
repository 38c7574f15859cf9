/* Byte sizes on the command line: "500k", "8M", "1G", comma lists and MIN-MAX ranges.
 *
 * Suffixes are binary, as in Hpcbench (-b 10k gives a 10240-byte buffer): k/K = 1024, m/M = 1024^2,
 * g/G = 1024^3. A size is decimal digits followed by at most one suffix; nothing else is accepted
 * (no sign, no spaces, no fractions, no "kB"). Values that overflow 64 bits are rejected.
 *
 * A size list is a comma-separated list of sizes and ranges. A range MIN-MAX expands to MIN, 2*MIN, 4*MIN, ...
 * up to MAX, and MAX itself is included when it is not on the doubling sequence; a range starting at 0 goes
 * 0, 1, 2, 4, ... Examples: "1,8k,64k", "1-1M" (21 sizes), "0-8" (0 1 2 4 8).
 */
#ifndef NR_SIZE_H
#define NR_SIZE_H

#include <stddef.h>
#include <stdint.h>

struct nr_error;

#define NR_SIZE_LIST_MAX 256 /* most entries a size list may expand to */

/* An expanded size list (ascending only if the user wrote it so). */
struct nr_size_list {
    size_t n;                        /* number of sizes */
    uint64_t bytes[NR_SIZE_LIST_MAX]; /* the sizes, in the order given */
};

/* Parse one size into *bytes. what names the value in the error detail (e.g. "-m/--message-size").
 * Returns 0, or NR_E_PARSE ("'12q' is not a size") / NR_E_RANGE (overflow). */
int nr_size_parse(const char *s, uint64_t *bytes, const char *what, struct nr_error *err);

/* Parse a size list (see above) into *out. Each size must lie in [min, max] (NR_E_RANGE otherwise);
 * more than NR_SIZE_LIST_MAX entries is NR_E_RANGE, an empty list or a range with MIN > MAX is NR_E_PARSE. */
int nr_size_list_parse(const char *s, uint64_t min, uint64_t max, struct nr_size_list *out, const char *what,
                       struct nr_error *err);

/* Format bytes with the largest exact binary suffix ("64k", "8M", "1000"). Returns buf. */
const char *nr_size_format(uint64_t bytes, char *buf, size_t len);

#endif
