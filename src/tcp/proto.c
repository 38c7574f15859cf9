/* Control protocol: encoding, validating decoder, framed send/receive (see proto.h). */
#include "proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "nr/error.h"
#include "sock.h"

/* Allowed payload length of each type: [min, max]. */
static const struct {
    const char *name;
    uint32_t min, max;
} nr__types[NR_MSG_TYPE_END_] = {
    [NR_MSG_HELLO] = {"HELLO", 37, 37 + NR_PROTO_HOST_MAX},
    [NR_MSG_CLIENT_HELLO] = {"CLIENT_HELLO", 69, 69 + NR_PROTO_HOST_MAX},
    [NR_MSG_WELCOME] = {"WELCOME", 48, 48},
    [NR_MSG_TEST_REQ] = {"TEST_REQ", 24, 24},
    [NR_MSG_TEST_ACK] = {"TEST_ACK", 36, 36},
    [NR_MSG_SOCKINFO] = {"SOCKINFO", 16, 16},
    [NR_MSG_START] = {"START", 24, 24},
    [NR_MSG_READY] = {"READY", 0, 0},
    [NR_MSG_DONE] = {"DONE", 32, 32},
    [NR_MSG_SAMPLE] = {"SAMPLE", 1, 1},
    [NR_MSG_FINISH] = {"FINISH", 0, 0},
    [NR_MSG_SYSLOG] = {"SYSLOG", 0, NR_PROTO_SYSLOG_MAX},
    [NR_MSG_ERROR] = {"ERROR", 6, 6 + NR_PROTO_TEXT_MAX},
    [NR_MSG_BYE] = {"BYE", 0, 0},
};

const char *nr_proto_type_name(int type)
{
    if (type <= 0 || type >= NR_MSG_TYPE_END_)
        return "unknown";
    return nr__types[type].name;
}

/* ---- big-endian field access ---- */

static void nr__put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void nr__put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (24 - 8 * i));
}

static void nr__put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint16_t nr__get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t nr__get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t nr__get64(const uint8_t *p)
{
    return (uint64_t)nr__get32(p) << 32 | nr__get32(p + 4);
}

/* ---- decoding ---- */

int nr_proto_decode_header(const uint8_t hdr[NR_PROTO_HDR_BYTES], struct nr_proto_hdr *out, struct nr_error *err)
{
    if (nr__get32(hdr) != NR_PROTO_MAGIC)
        return nr_error_set(err, NR_E_PROTO, "not a netregress control message (bad magic)");
    if (hdr[4] != NR_PROTO_VERSION)
        return nr_error_set(err, NR_E_VERSION, "peer speaks protocol version %u, this is version %u", hdr[4],
                            NR_PROTO_VERSION);
    if (nr__get16(hdr + 6) != 0)
        return nr_error_set(err, NR_E_PROTO, "reserved header bits set");
    uint8_t type = hdr[5];
    if (type == 0 || type >= NR_MSG_TYPE_END_)
        return nr_error_set(err, NR_E_PROTO, "unknown message type %u", type);
    uint32_t len = nr__get32(hdr + 8);
    if (len < nr__types[type].min || len > nr__types[type].max)
        return nr_error_set(err, NR_E_PROTO, "%s message with invalid length %u", nr__types[type].name, len);
    out->version = hdr[4];
    out->type = type;
    out->length = len;
    return NR_OK;
}

/* Copy a length-prefixed printable host name; 0 on success. */
static int nr__get_host(const uint8_t *p, uint32_t avail, char *out)
{
    uint8_t n = p[0];
    if ((uint32_t)n + 1 != avail)
        return -1;
    for (uint8_t i = 0; i < n; i++) {
        if (p[1 + i] <= 0x20 || p[1 + i] >= 0x7f)
            return -1;
        out[i] = (char)p[1 + i];
    }
    out[n] = '\0';
    return 0;
}

int nr_proto_decode(const struct nr_proto_hdr *h, const uint8_t *p, union nr_msg *m, struct nr_error *err)
{
    const char *name = nr_proto_type_name(h->type);
    if (h->type == 0 || h->type >= NR_MSG_TYPE_END_ || h->length < nr__types[h->type].min ||
        h->length > nr__types[h->type].max)
        return nr_error_set(err, NR_E_PROTO, "%s message with invalid length %u", name, h->length);
    memset(m, 0, sizeof *m);
    switch (h->type) {
    case NR_MSG_HELLO:
        m->hello.flags = nr__get32(p);
        if (m->hello.flags & ~NR_HELLO_AUTH)
            goto bad;
        memcpy(m->hello.nonce, p + 4, NR_PROTO_NONCE_BYTES);
        if (nr__get_host(p + 36, h->length - 36, m->hello.host) != 0)
            goto bad;
        return NR_OK;
    case NR_MSG_CLIENT_HELLO:
        m->client_hello.flags = nr__get32(p);
        if (m->client_hello.flags & ~NR_CHELLO_MAC)
            goto bad;
        memcpy(m->client_hello.nonce, p + 4, NR_PROTO_NONCE_BYTES);
        memcpy(m->client_hello.mac, p + 36, NR_SHA256_BYTES);
        if (nr__get_host(p + 68, h->length - 68, m->client_hello.host) != 0)
            goto bad;
        return NR_OK;
    case NR_MSG_WELCOME:
        memcpy(m->welcome.mac, p, NR_SHA256_BYTES);
        m->welcome.max_message_bytes = nr__get64(p + 32);
        m->welcome.max_io_bytes = nr__get32(p + 40);
        m->welcome.max_rep_time_s = nr__get32(p + 44);
        return NR_OK;
    case NR_MSG_TEST_REQ:
        m->test_req.mode = p[0];
        m->test_req.flags = p[1];
        m->test_req.tos = p[2];
        if (m->test_req.mode < NR_MODE_STREAM || m->test_req.mode > NR_MODE_LATENCY ||
            (m->test_req.flags & ~NR_REQ_FLAGS_ALL) || p[3] != 0)
            goto bad;
        m->test_req.buffer_bytes = nr__get32(p + 4);
        m->test_req.mss_bytes = nr__get32(p + 8);
        m->test_req.io_bytes = nr__get32(p + 12);
        m->test_req.max_message_bytes = nr__get64(p + 16);
        if (m->test_req.io_bytes == 0 || m->test_req.max_message_bytes == 0)
            goto bad;
        return NR_OK;
    case NR_MSG_TEST_ACK:
        m->test_ack.port = nr__get16(p);
        if (m->test_ack.port == 0 || nr__get16(p + 2) != 0)
            goto bad;
        memcpy(m->test_ack.cookie, p + 4, NR_PROTO_COOKIE_BYTES);
        return NR_OK;
    case NR_MSG_SOCKINFO:
        m->sockinfo.rcvbuf_bytes = nr__get32(p);
        m->sockinfo.sndbuf_bytes = nr__get32(p + 4);
        m->sockinfo.mss_bytes = nr__get32(p + 8);
        if ((p[12] & ~7u) || nr__get16(p + 14) != 0)
            goto bad;
        m->sockinfo.blocking = p[12] & 1;
        m->sockinfo.nodelay = (p[12] >> 1) & 1;
        m->sockinfo.cork = (p[12] >> 2) & 1;
        m->sockinfo.tos = p[13];
        return NR_OK;
    case NR_MSG_START:
        m->start.index = nr__get32(p);
        m->start.flags = nr__get32(p + 4);
        m->start.iterations = nr__get64(p + 8);
        m->start.size_bytes = nr__get64(p + 16);
        if ((m->start.flags & ~NR_START_MEASURED) || m->start.iterations == 0 || m->start.size_bytes == 0)
            goto bad;
        return NR_OK;
    case NR_MSG_DONE:
        m->done.bytes = nr__get64(p);
        m->done.elapsed_ns = nr__get64(p + 8);
        m->done.user_us = nr__get64(p + 16);
        m->done.sys_us = nr__get64(p + 24);
        return NR_OK;
    case NR_MSG_SAMPLE:
        m->sample.action = p[0];
        if (m->sample.action != NR_SAMPLE_MARK && m->sample.action != NR_SAMPLE_RECORD)
            goto bad;
        return NR_OK;
    case NR_MSG_SYSLOG:
        m->syslog.text = (const char *)p;
        m->syslog.length = h->length;
        return NR_OK;
    case NR_MSG_ERROR: {
        m->error.code = (int32_t)nr__get32(p);
        uint16_t n = nr__get16(p + 4);
        if ((uint32_t)n + 6 != h->length)
            goto bad;
        for (uint16_t i = 0; i < n; i++) {
            char c = (char)p[6 + i];
            m->error.text[i] = (p[6 + i] < 0x20 || p[6 + i] == 0x7f) ? '?' : c; /* never print control bytes */
        }
        m->error.text[n] = '\0';
        if (m->error.code >= 0 || m->error.code <= NR_E_LAST_)
            m->error.code = NR_E_PEER;
        return NR_OK;
    }
    case NR_MSG_READY:
    case NR_MSG_FINISH:
    case NR_MSG_BYE:
        return NR_OK;
    default:
        break;
    }
bad:
    return nr_error_set(err, NR_E_PROTO, "malformed %s message", name);
}

/* ---- encoding ---- */

static uint32_t nr__put_host(uint8_t *p, const char *host)
{
    size_t n = strlen(host);
    if (n > NR_PROTO_HOST_MAX)
        n = NR_PROTO_HOST_MAX;
    p[0] = (uint8_t)n;
    for (size_t i = 0; i < n; i++) /* the decoder accepts printable non-space ASCII only */
        p[1 + i] = (host[i] > 0x20 && host[i] < 0x7f) ? (uint8_t)host[i] : (uint8_t)'_';
    return (uint32_t)n + 1;
}

size_t nr_proto_encode(uint8_t *buf, size_t cap, int type, const union nr_msg *m)
{
    if (type <= 0 || type >= NR_MSG_TYPE_END_)
        return 0;
    uint32_t need = nr__types[type].max;
    if (type == NR_MSG_SYSLOG)
        need = m->syslog.length;
    if (need > NR_PROTO_SYSLOG_MAX || cap < NR_PROTO_HDR_BYTES + (size_t)need)
        return 0;
    uint8_t *p = buf + NR_PROTO_HDR_BYTES;
    uint32_t len = 0;
    switch (type) {
    case NR_MSG_HELLO:
        nr__put32(p, m->hello.flags);
        memcpy(p + 4, m->hello.nonce, NR_PROTO_NONCE_BYTES);
        len = 36 + nr__put_host(p + 36, m->hello.host);
        break;
    case NR_MSG_CLIENT_HELLO:
        nr__put32(p, m->client_hello.flags);
        memcpy(p + 4, m->client_hello.nonce, NR_PROTO_NONCE_BYTES);
        memcpy(p + 36, m->client_hello.mac, NR_SHA256_BYTES);
        len = 68 + nr__put_host(p + 68, m->client_hello.host);
        break;
    case NR_MSG_WELCOME:
        memcpy(p, m->welcome.mac, NR_SHA256_BYTES);
        nr__put64(p + 32, m->welcome.max_message_bytes);
        nr__put32(p + 40, m->welcome.max_io_bytes);
        nr__put32(p + 44, m->welcome.max_rep_time_s);
        len = 48;
        break;
    case NR_MSG_TEST_REQ:
        p[0] = m->test_req.mode;
        p[1] = m->test_req.flags;
        p[2] = m->test_req.tos;
        p[3] = 0;
        nr__put32(p + 4, m->test_req.buffer_bytes);
        nr__put32(p + 8, m->test_req.mss_bytes);
        nr__put32(p + 12, m->test_req.io_bytes);
        nr__put64(p + 16, m->test_req.max_message_bytes);
        len = 24;
        break;
    case NR_MSG_TEST_ACK:
        nr__put16(p, m->test_ack.port);
        nr__put16(p + 2, 0);
        memcpy(p + 4, m->test_ack.cookie, NR_PROTO_COOKIE_BYTES);
        len = 36;
        break;
    case NR_MSG_SOCKINFO:
        nr__put32(p, m->sockinfo.rcvbuf_bytes);
        nr__put32(p + 4, m->sockinfo.sndbuf_bytes);
        nr__put32(p + 8, m->sockinfo.mss_bytes);
        p[12] = (uint8_t)((m->sockinfo.blocking ? 1 : 0) | (m->sockinfo.nodelay ? 2 : 0) | (m->sockinfo.cork ? 4 : 0));
        p[13] = m->sockinfo.tos;
        nr__put16(p + 14, 0);
        len = 16;
        break;
    case NR_MSG_START:
        nr__put32(p, m->start.index);
        nr__put32(p + 4, m->start.flags);
        nr__put64(p + 8, m->start.iterations);
        nr__put64(p + 16, m->start.size_bytes);
        len = 24;
        break;
    case NR_MSG_DONE:
        nr__put64(p, m->done.bytes);
        nr__put64(p + 8, m->done.elapsed_ns);
        nr__put64(p + 16, m->done.user_us);
        nr__put64(p + 24, m->done.sys_us);
        len = 32;
        break;
    case NR_MSG_SAMPLE:
        p[0] = m->sample.action;
        len = 1;
        break;
    case NR_MSG_SYSLOG:
        if (m->syslog.length)
            memcpy(p, m->syslog.text, m->syslog.length);
        len = m->syslog.length;
        break;
    case NR_MSG_ERROR: {
        size_t n = strnlen(m->error.text, NR_PROTO_TEXT_MAX);
        nr__put32(p, (uint32_t)m->error.code);
        nr__put16(p + 4, (uint16_t)n);
        memcpy(p + 6, m->error.text, n);
        len = 6 + (uint32_t)n;
        break;
    }
    default: /* READY, FINISH, BYE: empty */
        break;
    }
    nr__put32(buf, NR_PROTO_MAGIC);
    buf[4] = NR_PROTO_VERSION;
    buf[5] = (uint8_t)type;
    nr__put16(buf + 6, 0);
    nr__put32(buf + 8, len);
    return NR_PROTO_HDR_BYTES + len;
}

/* ---- framed I/O ---- */

void nr_proto_conn_init(struct nr_proto_conn *c, int fd, double timeout_s)
{
    /* Control messages are small and answered at once: Nagle's algorithm would hold one behind the unacknowledged
     * previous one until the peer's delayed ACK (40 ms), right where a repetition ends. */
    int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    c->fd = fd;
    c->buf = NULL;
    c->cap = 0;
    c->timeout_s = timeout_s;
    c->max_payload = NR_PROTO_SYSLOG_MAX;
}

void nr_proto_conn_free(struct nr_proto_conn *c)
{
    free(c->buf);
    c->buf = NULL;
    c->cap = 0;
}

int nr_proto_send(struct nr_proto_conn *c, int type, const union nr_msg *m, struct nr_error *err)
{
    uint8_t small[NR_PROTO_HDR_BYTES + NR_PROTO_SMALL_MAX];
    uint8_t *buf = small;
    size_t cap = sizeof small;
    if (type == NR_MSG_SYSLOG) {
        cap = NR_PROTO_HDR_BYTES + (size_t)m->syslog.length;
        buf = malloc(cap);
        if (!buf)
            return nr_error_set(err, NR_E_NOMEM, "out of memory sending the system log");
    }
    size_t n = nr_proto_encode(buf, cap, type, m);
    int rc = n ? nr_tcp_write_all(c->fd, buf, n, c->timeout_s, err)
               : nr_error_set(err, NR_E_INTERNAL, "cannot encode %s message", nr_proto_type_name(type));
    if (buf != small)
        free(buf);
    return rc;
}

int nr_proto_recv(struct nr_proto_conn *c, double timeout_s, struct nr_proto_hdr *h, union nr_msg *m,
                  struct nr_error *err)
{
    uint8_t hdr[NR_PROTO_HDR_BYTES];
    if (timeout_s <= 0)
        timeout_s = c->timeout_s;
    int rc = nr_tcp_read_all(c->fd, hdr, sizeof hdr, timeout_s, err);
    if (rc < 0)
        return rc;
    if ((rc = nr_proto_decode_header(hdr, h, err)) < 0)
        return rc;
    if (h->length > c->max_payload)
        return nr_error_set(err, NR_E_PROTO, "%s message of %u bytes exceeds the %u this side accepts",
                            nr_proto_type_name(h->type), h->length, c->max_payload);
    size_t need = h->length ? h->length : 1;
    if (need > c->cap) {
        uint8_t *b = realloc(c->buf, need);
        if (!b)
            return nr_error_set(err, NR_E_NOMEM, "out of memory receiving a %u-byte message", h->length);
        c->buf = b;
        c->cap = need;
    }
    if (h->length && (rc = nr_tcp_read_all(c->fd, c->buf, h->length, timeout_s, err)) < 0)
        return rc;
    return nr_proto_decode(h, c->buf, m, err);
}

int nr_proto_expect(struct nr_proto_conn *c, int type, double timeout_s, union nr_msg *m, const char *peer_name,
                    struct nr_error *err)
{
    struct nr_proto_hdr h = {0};   /* GCC 12 -O3 cannot see nr_proto_decode_header fill it */
    int rc = nr_proto_recv(c, timeout_s, &h, m, err);
    if (rc < 0)
        return rc;
    if (h.type == NR_MSG_ERROR)
        return nr_error_set(err, NR_E_PEER, "%s: %s", peer_name, m->error.text);
    if (h.type != type)
        return nr_error_set(err, NR_E_PROTO, "expected %s from %s, got %s", nr_proto_type_name(type), peer_name,
                            nr_proto_type_name(h.type));
    return NR_OK;
}

void nr_proto_send_error(struct nr_proto_conn *c, int code, const char *text)
{
    union nr_msg m;
    memset(&m, 0, sizeof m);
    m.error.code = code < 0 ? code : NR_E_PEER;
    snprintf(m.error.text, sizeof m.error.text, "%s", text ? text : "");
    double saved = c->timeout_s;
    c->timeout_s = 2.0; /* do not hang on a peer that stopped reading */
    nr_proto_send(c, NR_MSG_ERROR, &m, NULL);
    c->timeout_s = saved;
}

void nr_proto_auth_mac(const void *key, size_t key_len, const char *role, const uint8_t server_nonce[NR_PROTO_NONCE_BYTES],
                       const uint8_t client_nonce[NR_PROTO_NONCE_BYTES], uint8_t mac[NR_SHA256_BYTES])
{
    uint8_t msg[64 + 2 * NR_PROTO_NONCE_BYTES];
    int n = snprintf((char *)msg, 64, "nr-tcp-auth-v1/%s", role);
    if (n < 0 || n >= 64)
        n = 63;
    memcpy(msg + n, server_nonce, NR_PROTO_NONCE_BYTES);
    memcpy(msg + n + NR_PROTO_NONCE_BYTES, client_nonce, NR_PROTO_NONCE_BYTES);
    nr_hmac_sha256(key, key_len, msg, (size_t)n + 2 * NR_PROTO_NONCE_BYTES, mac);
}
