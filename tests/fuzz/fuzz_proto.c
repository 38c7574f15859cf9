/* libFuzzer target for everything the TCP kernels decode from a peer: control-message headers and payloads, and
 * the serialised system log a server ships to the client.
 *
 * The first input byte picks what to feed:
 *   0  a raw byte stream, decoded frame after frame as a connection would (header check, then payload);
 *   1  a payload for the message type in the second byte with a correct header, so every payload decoder is
 *      exercised beyond the magic/length gate;
 *   2  a system-log text for nr_sysmon_log_parse.
 * Every message that decodes is encoded again and must decode to the same message (round trip), so the fuzzer
 * checks more than "no crash".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nr/core.h"
#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t nr__buf[NR_PROTO_HDR_BYTES + NR_PROTO_SYSLOG_MAX];

static void nr__roundtrip(const struct nr_proto_hdr *h, const union nr_msg *m)
{
    size_t n = nr_proto_encode(nr__buf, sizeof nr__buf, h->type, m);
    if (n == 0)
        abort(); /* anything the decoder accepts must be encodable */
    struct nr_proto_hdr h2;
    union nr_msg m2;
    if (nr_proto_decode_header(nr__buf, &h2, NULL) != 0 || h2.type != h->type ||
        nr_proto_decode(&h2, nr__buf + NR_PROTO_HDR_BYTES, &m2, NULL) != 0)
        abort();
    if (h->type == NR_MSG_SYSLOG) {
        if (m2.syslog.length != m->syslog.length || memcmp(m2.syslog.text, m->syslog.text, m->syslog.length) != 0)
            abort();
    } else if (h->type == NR_MSG_ERROR) {
        if (m2.error.code != m->error.code || strcmp(m2.error.text, m->error.text) != 0)
            abort();
    } else if (memcmp(&m2, m, sizeof m2) != 0) {
        abort();
    }
}

static void nr__decode_stream(const uint8_t *p, size_t n)
{
    while (n >= NR_PROTO_HDR_BYTES) {
        struct nr_proto_hdr h;
        struct nr_error e;
        nr_error_clear(&e);
        if (nr_proto_decode_header(p, &h, &e) != 0)
            return;
        p += NR_PROTO_HDR_BYTES;
        n -= NR_PROTO_HDR_BYTES;
        if (h.length > n)
            return;
        /* Decode from an exactly sized heap copy so ASan sees any read past the payload. */
        uint8_t *copy = malloc(h.length ? h.length : 1);
        memcpy(copy, p, h.length);
        union nr_msg m;
        if (nr_proto_decode(&h, copy, &m, &e) == 0)
            nr__roundtrip(&h, &m);
        free(copy);
        p += h.length;
        n -= h.length;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0] % 3;
    data++;
    size--;
    if (mode == 0) {
        nr__decode_stream(data, size);
    } else if (mode == 1 && size >= 1) {
        struct nr_proto_hdr h = {NR_PROTO_VERSION, data[0], (uint32_t)(size - 1)};
        uint8_t *copy = malloc(size);
        memcpy(copy, data + 1, size - 1);
        union nr_msg m;
        if (nr_proto_decode(&h, copy, &m, NULL) == 0)
            nr__roundtrip(&h, &m);
        free(copy);
    } else if (mode == 2) {
        char *copy = malloc(size ? size : 1);
        memcpy(copy, data, size);
        struct nr_sysmon_log log;
        nr_sysmon_log_init(&log);
        if (nr_sysmon_log_parse(copy, size, &log, NULL) == 0) {
            /* What parses must serialise and parse back to the same shape. */
            size_t len;
            char *text = nr_sysmon_log_serialize(&log, &len);
            struct nr_sysmon_log again;
            nr_sysmon_log_init(&again);
            if (!text || nr_sysmon_log_parse(text, len, &again, NULL) != 0 || again.nrows != log.nrows ||
                again.ncpu != log.ncpu || again.nif != log.nif)
                abort();
            free(text);
            nr_sysmon_log_free(&again);
        }
        nr_sysmon_log_free(&log);
        free(copy);
    }
    return 0;
}
