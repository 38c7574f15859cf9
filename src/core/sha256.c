/* SHA-256 and HMAC-SHA-256, written from FIPS 180-4 and RFC 2104 (see nr/sha256.h). */
#include "nr/sha256.h"

#include <string.h>

static const uint32_t nr__k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t nr__rotr(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void nr__sha256_block(struct nr_sha256 *s, const unsigned char *p)
{
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 | (uint32_t)p[4 * t + 2] << 8 | p[4 * t + 3];
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = nr__rotr(w[t - 15], 7) ^ nr__rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = nr__rotr(w[t - 2], 17) ^ nr__rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t t1 = h + (nr__rotr(e, 6) ^ nr__rotr(e, 11) ^ nr__rotr(e, 25)) + ((e & f) ^ (~e & g)) + nr__k[t] + w[t];
        uint32_t t2 = (nr__rotr(a, 2) ^ nr__rotr(a, 13) ^ nr__rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    s->h[0] += a;
    s->h[1] += b;
    s->h[2] += c;
    s->h[3] += d;
    s->h[4] += e;
    s->h[5] += f;
    s->h[6] += g;
    s->h[7] += h;
}

void nr_sha256_init(struct nr_sha256 *s)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof iv);
    s->total_bytes = 0;
    s->fill = 0;
}

void nr_sha256_update(struct nr_sha256 *s, const void *data, size_t len)
{
    const unsigned char *p = data;
    s->total_bytes += len;
    while (len > 0) {
        size_t take = 64 - s->fill;
        if (take > len)
            take = len;
        memcpy(s->block + s->fill, p, take);
        s->fill += take;
        p += take;
        len -= take;
        if (s->fill == 64) {
            nr__sha256_block(s, s->block);
            s->fill = 0;
        }
    }
}

void nr_sha256_final(struct nr_sha256 *s, unsigned char out[NR_SHA256_BYTES])
{
    uint64_t bits = s->total_bytes * 8;
    unsigned char pad = 0x80;
    nr_sha256_update(s, &pad, 1);
    pad = 0;
    while (s->fill != 56)
        nr_sha256_update(s, &pad, 1);
    unsigned char len_be[8];
    for (int i = 0; i < 8; i++)
        len_be[i] = (unsigned char)(bits >> (56 - 8 * i));
    nr_sha256_update(s, len_be, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(s->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)s->h[i];
    }
}

void nr_sha256(const void *data, size_t len, unsigned char out[NR_SHA256_BYTES])
{
    struct nr_sha256 s;
    nr_sha256_init(&s);
    nr_sha256_update(&s, data, len);
    nr_sha256_final(&s, out);
}

void nr_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                    unsigned char out[NR_SHA256_BYTES])
{
    unsigned char k[64] = {0}, pad[64], inner[NR_SHA256_BYTES];
    if (key_len > 64)
        nr_sha256(key, key_len, k);
    else if (key_len > 0)
        memcpy(k, key, key_len);
    struct nr_sha256 s;
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    nr_sha256_init(&s);
    nr_sha256_update(&s, pad, 64);
    nr_sha256_update(&s, msg, msg_len);
    nr_sha256_final(&s, inner);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    nr_sha256_init(&s);
    nr_sha256_update(&s, pad, 64);
    nr_sha256_update(&s, inner, sizeof inner);
    nr_sha256_final(&s, out);
}

int nr_mem_equal_ct(const void *a, const void *b, size_t len)
{
    const volatile unsigned char *x = a, *y = b;
    unsigned char diff = 0;
    for (size_t i = 0; i < len; i++)
        diff |= (unsigned char)(x[i] ^ y[i]);
    return diff == 0;
}
