/* Frames for the fuzz targets: a message of any type with any payload, tagged the way a keyed connection tags it
 * (or mistagged on purpose), so that the inputs reach past the tag check into what it guards. */
#ifndef NR_FUZZ_FRAMES_H
#define NR_FUZZ_FRAMES_H

#include <stdint.h>
#include <string.h>

#include "proto.h"

/* How a record is sent (the low two bits of its first byte). */
enum nr_fuzz_tagging {
    NR_FUZZ_TAGGED = 0,   /* tagged under the key with the next sequence number: accepted */
    NR_FUZZ_WRONG_SEQ = 1, /* tagged with the sequence number after the next one: a replay or a dropped message */
    NR_FUZZ_ALTERED = 2,  /* tagged correctly, then one bit of the header or payload flipped */
    NR_FUZZ_PLAIN = 3,    /* no tag */
};

/* Write the record's frame into out (room for NR_PROTO_TAG_PREFIX + 12 + len + 32 bytes, the frame starting at
 * out + NR_PROTO_TAG_PREFIX); returns the frame's length. *seq is the sender's next sequence number. */
static inline size_t nr_fuzz_frame(uint8_t *out, const uint8_t key[NR_SHA256_BYTES], uint8_t dir, uint64_t *seq,
                                   enum nr_fuzz_tagging how, uint8_t type, const uint8_t *payload, uint16_t len,
                                   uint8_t flip)
{
    uint8_t *f = out + NR_PROTO_TAG_PREFIX;
    f[0] = 'N', f[1] = 'R', f[2] = 'T', f[3] = 'C';
    f[4] = NR_PROTO_VERSION;
    f[5] = type;
    f[6] = how == NR_FUZZ_PLAIN ? 0 : NR_HDR_TAGGED;
    f[7] = 0;
    f[8] = 0, f[9] = 0, f[10] = (uint8_t)(len >> 8), f[11] = (uint8_t)len;
    memcpy(f + NR_PROTO_HDR_BYTES, payload, len);
    size_t n = NR_PROTO_HDR_BYTES + (size_t)len;
    if (how == NR_FUZZ_PLAIN)
        return n;
    nr_proto_tag(key, dir, *seq + (how == NR_FUZZ_WRONG_SEQ), out, n, f + n);
    if (how == NR_FUZZ_ALTERED) { /* any bit but the "tagged" flag: without it the bytes read as another message */
        size_t at = flip % n == 6 ? 5 : flip % n;
        f[at] ^= (uint8_t)(1u << (flip % 8));
    }
    (*seq)++;
    return n + NR_PROTO_TAG_BYTES;
}

#endif
