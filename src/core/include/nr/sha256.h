/* SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for the shared-secret authentication of the TCP control
 * protocol. Small and dependency-free; not constant-time beyond what the algorithm is by itself, which is
 * adequate for a challenge/response between benchmark processes. Compare MACs with nr_mem_equal_ct().
 */
#ifndef NR_SHA256_H
#define NR_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define NR_SHA256_BYTES 32

struct nr_sha256 {
    uint32_t h[8];
    uint64_t total_bytes;
    unsigned char block[64];
    size_t fill;
};

void nr_sha256_init(struct nr_sha256 *s);
void nr_sha256_update(struct nr_sha256 *s, const void *data, size_t len);
void nr_sha256_final(struct nr_sha256 *s, unsigned char out[NR_SHA256_BYTES]);

/* One-shot SHA-256. */
void nr_sha256(const void *data, size_t len, unsigned char out[NR_SHA256_BYTES]);

/* HMAC-SHA-256 of msg under key. */
void nr_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                    unsigned char out[NR_SHA256_BYTES]);

/* 1 if a and b are equal; the time taken does not depend on where they differ. */
int nr_mem_equal_ct(const void *a, const void *b, size_t len);

#endif
