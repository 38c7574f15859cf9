/* libFuzzer target for everything the TCP kernels decode from a peer: control-message headers and payloads, tags,
 * and the serialised system log a server ships to the client.
 *
 * The first input byte picks what to feed:
 *   0  a raw byte stream, decoded frame after frame as a connection would (header check, then payload);
 *   1  a payload for the message type in the second byte with a correct header, so every payload decoder is
 *      exercised beyond the magic/length gate;
 *   2  a system-log text for nr_sysmon_log_parse;
 *   3  records (tagging, type, length, payload) framed as fuzz_frames.h says and received on a keyed connection.
 * Every message that decodes is encoded again and must decode to the same message (round trip), and a keyed
 * connection must accept exactly the records tagged correctly and in order (or an untagged ERROR in place of the
 * first), up to the first it refuses, so the fuzzer checks more than "no crash".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_frames.h"
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
        size_t tag = (h.flags & NR_HDR_TAGGED) ? NR_PROTO_TAG_BYTES : 0; /* not checked here: mode 3 does */
        if (h.length + tag > n)
            return;
        /* Decode from an exactly sized heap copy so ASan sees any read past the payload. */
        uint8_t *copy = malloc(h.length ? h.length : 1);
        memcpy(copy, p, h.length);
        union nr_msg m;
        if (nr_proto_decode(&h, copy, &m, &e) == 0)
            nr__roundtrip(&h, &m);
        free(copy);
        p += h.length + tag;
        n -= h.length + tag;
    }
}

/* Mode 3: what a keyed connection accepts of the records, against what it must accept. */
static void nr__keyed_stream(const uint8_t *p, size_t n)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return;
    int big = 1 << 20;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    static struct nr_proto_conn keyed; /* the same session key every time: derived once (SHA-256 is the cost) */
    if (!keyed.keyed) {
        uint8_t sn[NR_PROTO_NONCE_BYTES] = {1}, cn[NR_PROTO_NONCE_BYTES] = {2};
        nr_proto_conn_init(&keyed, -1, 0.01);
        nr_proto_conn_key(&keyed, "fuzz", 4, sn, cn, 1);
    }
    struct nr_proto_conn rx = keyed;
    rx.fd = sv[0];
    int expect[4];           /* per record written: 1 if the receiver must accept it (given all before it were) */
    int nrec = 0;
    uint64_t seq = 0;
    static uint8_t frame[NR_PROTO_TAG_PREFIX + NR_PROTO_HDR_BYTES + 4096 + NR_PROTO_TAG_BYTES];
    while (n >= 4 && nrec < 4) {
        enum nr_fuzz_tagging how = (enum nr_fuzz_tagging)(p[0] & 3);
        uint8_t type = p[1], flip = p[2];
        uint16_t len = p[3] < n - 4 ? p[3] : (uint16_t)(n - 4);
        size_t w = nr_fuzz_frame(frame, rx.key, 'C', &seq, how, type, p + 4, len, flip);
        if (write(sv[1], frame + NR_PROTO_TAG_PREFIX, w) != (ssize_t)w)
            break;
        expect[nrec++] = how == NR_FUZZ_TAGGED || (how == NR_FUZZ_PLAIN && type == NR_MSG_ERROR && seq == 0);
        if (!expect[nrec - 1])
            break; /* the connection ends at the first refusal: nothing after it is read */
        p += 4 + len;
        n -= 4 + (size_t)len;
    }
    shutdown(sv[1], SHUT_WR);
    for (int i = 0; i < nrec; i++) {
        struct nr_proto_hdr h;
        union nr_msg m;
        struct nr_error e;
        nr_error_clear(&e);
        int rc = nr_proto_recv(&rx, 0.01, &h, &m, &e);
        if (rc == NR_E_AUTH && expect[i])
            abort(); /* a correct tag refused */
        if (rc == 0 && !expect[i])
            abort(); /* a wrong, stale, altered or missing tag accepted */
        if (rc != 0)
            break;   /* a refused (or undecodable) message ends the connection */
    }
    nr_proto_conn_free(&rx);
    close(sv[0]);
    close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0] % 4;
    data++;
    size--;
    if (mode == 0) {
        nr__decode_stream(data, size);
    } else if (mode == 1 && size >= 1) {
        struct nr_proto_hdr h = {NR_PROTO_VERSION, data[0], (uint32_t)(size - 1), 0};
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
    } else if (mode == 3) {
        nr__keyed_stream(data, size);
    }
    return 0;
}
