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
    [NR_MSG_HELLO] = {"HELLO", 36, 36},
    [NR_MSG_CLIENT_HELLO] = {"CLIENT_HELLO", 69, 69 + NR_PROTO_HOST_MAX},
    [NR_MSG_WELCOME] = {"WELCOME", 49, 49 + NR_PROTO_HOST_MAX},
    [NR_MSG_TEST_REQ] = {"TEST_REQ", 24, 24},
    [NR_MSG_TEST_ACK] = {"TEST_ACK", 4, 4},
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
        return nr_error_set(err, NR_E_VERSION, "the peer speaks control protocol version %u, this side version %u: "
                            "use nr-tcptest and nr-tcpserver of one netregress release", hdr[4], NR_PROTO_VERSION);
    if ((hdr[6] & ~NR_HDR_TAGGED) || hdr[7] != 0)
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
    out->flags = hdr[6];
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
        if (nr__get_host(p + 48, h->length - 48, m->welcome.host) != 0)
            goto bad;
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
        len = 36;
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
        len = 48 + nr__put_host(p + 48, m->welcome.host);
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
        len = 4;
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

/* ---- message authentication ---- */

void nr_proto_auth_mac(const void *key, size_t key_len, const char *role, const uint8_t server_nonce[NR_PROTO_NONCE_BYTES],
                       const uint8_t client_nonce[NR_PROTO_NONCE_BYTES], uint8_t mac[NR_SHA256_BYTES])
{
    uint8_t msg[64 + 2 * NR_PROTO_NONCE_BYTES];
    int n = snprintf((char *)msg, 64, "nr-tcp-v2/%s", role);
    if (n < 0 || n >= 64)
        n = 63;
    memcpy(msg + n, server_nonce, NR_PROTO_NONCE_BYTES);
    memcpy(msg + n + NR_PROTO_NONCE_BYTES, client_nonce, NR_PROTO_NONCE_BYTES);
    nr_hmac_sha256(key, key_len, msg, (size_t)n + 2 * NR_PROTO_NONCE_BYTES, mac);
}

void nr_proto_conn_key(struct nr_proto_conn *c, const void *secret, size_t key_len,
                       const uint8_t server_nonce[NR_PROTO_NONCE_BYTES],
                       const uint8_t client_nonce[NR_PROTO_NONCE_BYTES], int server)
{
    nr_proto_auth_mac(key_len ? secret : "", key_len, "session", server_nonce, client_nonce, c->key);
    c->keyed = 1;
    c->send_dir = server ? 'S' : 'C';
    c->recv_dir = server ? 'C' : 'S';
    c->send_seq = c->recv_seq = 0;
}

void nr_proto_tag(const uint8_t key[NR_SHA256_BYTES], uint8_t dir, uint64_t seq, uint8_t *msg, size_t frame_len,
                  uint8_t tag[NR_PROTO_TAG_BYTES])
{
    msg[0] = dir;
    nr__put64(msg + 1, seq);
    nr_hmac_sha256(key, NR_SHA256_BYTES, msg, NR_PROTO_TAG_PREFIX + frame_len, tag);
}

void nr_proto_data_cookie(const struct nr_proto_conn *c, uint16_t port, uint8_t cookie[NR_PROTO_COOKIE_BYTES])
{
    uint8_t msg[16] = "nr-tcp-v2/data";
    nr__put16(msg + 14, port);
    nr_hmac_sha256(c->key, sizeof c->key, msg, sizeof msg, cookie);
}

/* ---- framed I/O ---- */

void nr_proto_conn_init(struct nr_proto_conn *c, int fd, double timeout_s)
{
    /* Control messages are small and answered at once: Nagle's algorithm would hold one behind the unacknowledged
     * previous one until the peer's delayed ACK (40 ms), right where a repetition ends. */
    int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    memset(c, 0, sizeof *c);
    c->fd = fd;
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
    /* [tag prefix][header][payload][tag]: the prefix is scratch for nr_proto_tag, the rest goes out in one write */
    uint8_t small[NR_PROTO_TAG_PREFIX + NR_PROTO_HDR_BYTES + NR_PROTO_SMALL_MAX + NR_PROTO_TAG_BYTES];
    uint8_t *buf = small;
    size_t cap = sizeof small - NR_PROTO_TAG_PREFIX - NR_PROTO_TAG_BYTES;
    if (type == NR_MSG_SYSLOG) {
        cap = NR_PROTO_HDR_BYTES + (size_t)m->syslog.length;
        buf = malloc(NR_PROTO_TAG_PREFIX + cap + NR_PROTO_TAG_BYTES);
        if (!buf)
            return nr_error_set(err, NR_E_NOMEM, "out of memory sending the system log");
    }
    uint8_t *frame = buf + NR_PROTO_TAG_PREFIX;
    size_t n = nr_proto_encode(frame, cap, type, m);
    if (n && c->keyed) {
        frame[6] |= NR_HDR_TAGGED;
        nr_proto_tag(c->key, c->send_dir, c->send_seq++, buf, n, frame + n);
        n += NR_PROTO_TAG_BYTES;
    }
    int rc = n ? nr_tcp_write_all(c->fd, frame, n, c->timeout_s, err)
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
    const char *name = nr_proto_type_name(h->type);
    if (h->length > c->max_payload)
        return nr_error_set(err, NR_E_PROTO, "%s message of %u bytes exceeds the %u this side accepts", name,
                            h->length, c->max_payload);
    int tagged = (h->flags & NR_HDR_TAGGED) != 0;
    if (tagged && !c->keyed)
        return nr_error_set(err, NR_E_PROTO, "tagged %s message before the handshake", name);
    /* After the handshake only a refusal in place of the first tagged message may come untagged. */
    if (c->keyed && !tagged && !(h->type == NR_MSG_ERROR && c->recv_seq == 0))
        return nr_error_set(err, NR_E_AUTH, "unauthenticated %s message after the handshake", name);
    size_t need = NR_PROTO_TAG_PREFIX + NR_PROTO_HDR_BYTES + (size_t)h->length + NR_PROTO_TAG_BYTES;
    if (need > c->cap) {
        uint8_t *b = realloc(c->buf, need);
        if (!b)
            return nr_error_set(err, NR_E_NOMEM, "out of memory receiving a %u-byte message", h->length);
        c->buf = b;
        c->cap = need;
    }
    uint8_t *frame = c->buf + NR_PROTO_TAG_PREFIX, *payload = frame + NR_PROTO_HDR_BYTES;
    memcpy(frame, hdr, sizeof hdr);
    size_t body = (size_t)h->length + (tagged ? NR_PROTO_TAG_BYTES : 0);
    if (body && (rc = nr_tcp_read_all(c->fd, payload, body, timeout_s, err)) < 0)
        return rc;
    if (tagged) {
        uint8_t want[NR_PROTO_TAG_BYTES], got[NR_PROTO_TAG_BYTES];
        memcpy(got, payload + h->length, sizeof got);
        nr_proto_tag(c->key, c->recv_dir, c->recv_seq, c->buf, NR_PROTO_HDR_BYTES + h->length, want);
        if (!nr_mem_equal_ct(want, got, sizeof want))
            return nr_error_set(err, NR_E_AUTH, "%s message #%llu failed its authentication check (altered, "
                                "replayed or out of order)", name, (unsigned long long)c->recv_seq);
        c->recv_seq++;
    }
    return nr_proto_decode(h, payload, m, err);
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

int nr_proto_client_handshake(struct nr_proto_conn *c, const void *secret, size_t key_len, const char *client_host,
                              struct nr_msg_welcome *w, struct nr_error *err)
{
    union nr_msg in, m;
    int rc = nr_proto_expect(c, NR_MSG_HELLO, 0, &in, "server", err);
    if (rc < 0)
        return rc;
    uint8_t server_nonce[NR_PROTO_NONCE_BYTES];
    memcpy(server_nonce, in.hello.nonce, sizeof server_nonce);
    if (key_len && !(in.hello.flags & NR_HELLO_AUTH))
        return nr_error_set(err, NR_E_AUTH, "--auth-file given but the server does not authenticate (start it with "
                                            "--auth-file too)");
    memset(&m, 0, sizeof m);
    if ((rc = nr_tcp_random(m.client_hello.nonce, NR_PROTO_NONCE_BYTES, err)) < 0)
        return rc;
    if (key_len) {
        m.client_hello.flags = NR_CHELLO_MAC;
        nr_proto_auth_mac(secret, key_len, "client", server_nonce, m.client_hello.nonce, m.client_hello.mac);
    }
    snprintf(m.client_hello.host, sizeof m.client_hello.host, "%s", client_host);
    if ((rc = nr_proto_send(c, NR_MSG_CLIENT_HELLO, &m, err)) < 0)
        return rc;
    nr_proto_conn_key(c, secret, key_len, server_nonce, m.client_hello.nonce, 0);
    struct nr_error werr; /* a WELCOME whose tag fails under our secret: the server does not hold it */
    nr_error_clear(&werr);
    if ((rc = nr_proto_expect(c, NR_MSG_WELCOME, 0, &in, "server", &werr)) == NR_E_AUTH && key_len)
        return nr_error_set(err, NR_E_AUTH, "the server could not prove it holds the shared secret");
    if (rc < 0) {
        if (err && !err->code)
            *err = werr;
        return rc;
    }
    if (key_len) {
        uint8_t want[NR_SHA256_BYTES];
        nr_proto_auth_mac(secret, key_len, "server", server_nonce, m.client_hello.nonce, want);
        if (!nr_mem_equal_ct(want, in.welcome.mac, sizeof want))
            return nr_error_set(err, NR_E_AUTH, "the server could not prove it holds the shared secret");
    }
    *w = in.welcome;
    return NR_OK;
}
