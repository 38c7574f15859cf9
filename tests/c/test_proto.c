/* Unit tests of the TCP control protocol: every message type survives encode -> decode unchanged, the decoder
 * refuses bad magic, other versions, reserved bits, unknown types, wrong lengths and out-of-range fields, tagged
 * messages that were altered, replayed, reflected or left untagged are refused, and the handshake between the real
 * client and server code keys both ends alike (or fails with the message that names why). */
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "nr/core.h"
#include "proto.h"
#include "srv.h"

/* Encode m, decode it back into *out; returns the decode status. */
static int roundtrip(int type, const union nr_msg *m, union nr_msg *out, size_t *wire_len)
{
    static uint8_t buf[NR_PROTO_HDR_BYTES + NR_PROTO_SYSLOG_MAX];
    size_t n = nr_proto_encode(buf, sizeof buf, type, m);
    *wire_len = n;
    if (n < NR_PROTO_HDR_BYTES)
        return -100;
    struct nr_proto_hdr h;
    struct nr_error e;
    nr_error_clear(&e);
    int rc = nr_proto_decode_header(buf, &h, &e);
    if (rc < 0)
        return rc;
    if (h.type != type || h.length + NR_PROTO_HDR_BYTES != n)
        return -101;
    return nr_proto_decode(&h, buf + NR_PROTO_HDR_BYTES, out, &e);
}

static void test_roundtrip(void)
{
    union nr_msg m, out;
    size_t n;
    memset(&m, 0, sizeof m);
    m.hello.flags = NR_HELLO_AUTH;
    memset(m.hello.nonce, 7, sizeof m.hello.nonce);
    CHECK(roundtrip(NR_MSG_HELLO, &m, &out, &n) == 0 && n == NR_PROTO_HDR_BYTES + 36); /* no name before auth */
    CHECK(out.hello.flags == NR_HELLO_AUTH && out.hello.nonce[31] == 7);

    memset(&m, 0, sizeof m);
    m.client_hello.flags = NR_CHELLO_MAC;
    memset(m.client_hello.mac, 0xee, sizeof m.client_hello.mac);
    strcpy(m.client_hello.host, "host with space"); /* encoder replaces what the decoder would refuse */
    CHECK(roundtrip(NR_MSG_CLIENT_HELLO, &m, &out, &n) == 0);
    CHECK(out.client_hello.mac[0] == 0xee);
    CHECK_STR(out.client_hello.host, "host_with_space");

    memset(&m, 0, sizeof m);
    m.welcome.max_message_bytes = 1ull << 40;
    m.welcome.max_io_bytes = 123;
    m.welcome.max_rep_time_s = 1800;
    strcpy(m.welcome.host, "mk4.sharcnet.ca");
    CHECK(roundtrip(NR_MSG_WELCOME, &m, &out, &n) == 0 && n == NR_PROTO_HDR_BYTES + 49 + 15);
    CHECK(out.welcome.max_message_bytes == 1ull << 40 && out.welcome.max_io_bytes == 123 &&
          out.welcome.max_rep_time_s == 1800);
    CHECK_STR(out.welcome.host, "mk4.sharcnet.ca");

    memset(&m, 0, sizeof m);
    m.test_req.mode = NR_MODE_PINGPONG;
    m.test_req.flags = NR_REQ_BLOCKING | NR_REQ_SYSMON;
    m.test_req.tos = 0x08;
    m.test_req.buffer_bytes = 512000;
    m.test_req.mss_bytes = 8192;
    m.test_req.io_bytes = 65536;
    m.test_req.max_message_bytes = 1u << 25;
    CHECK(roundtrip(NR_MSG_TEST_REQ, &m, &out, &n) == 0);
    CHECK(memcmp(&out.test_req, &m.test_req, sizeof m.test_req) == 0);

    memset(&m, 0, sizeof m);
    m.test_ack.port = 40000;
    CHECK(roundtrip(NR_MSG_TEST_ACK, &m, &out, &n) == 0 && out.test_ack.port == 40000 &&
          n == NR_PROTO_HDR_BYTES + 4); /* the cookie is derived on both sides, never sent */

    memset(&m, 0, sizeof m);
    m.sockinfo.rcvbuf_bytes = 87380;
    m.sockinfo.sndbuf_bytes = 16384;
    m.sockinfo.mss_bytes = 1448;
    m.sockinfo.nodelay = 1;
    m.sockinfo.tos = 0x10;
    CHECK(roundtrip(NR_MSG_SOCKINFO, &m, &out, &n) == 0);
    CHECK(out.sockinfo.rcvbuf_bytes == 87380 && out.sockinfo.sndbuf_bytes == 16384 && out.sockinfo.mss_bytes == 1448 &&
          out.sockinfo.nodelay == 1 && out.sockinfo.blocking == 0 && out.sockinfo.tos == 0x10);

    memset(&m, 0, sizeof m);
    m.start.index = 3;
    m.start.flags = NR_START_MEASURED;
    m.start.iterations = 8969;
    m.start.size_bytes = 65536;
    CHECK(roundtrip(NR_MSG_START, &m, &out, &n) == 0 && memcmp(&out.start, &m.start, sizeof m.start) == 0);

    memset(&m, 0, sizeof m);
    m.done.bytes = 587792384;
    m.done.elapsed_ns = 5010000000ull;
    m.done.user_us = 120000;
    m.done.sys_us = 2900000;
    CHECK(roundtrip(NR_MSG_DONE, &m, &out, &n) == 0 && memcmp(&out.done, &m.done, sizeof m.done) == 0);

    m.sample.action = NR_SAMPLE_RECORD;
    CHECK(roundtrip(NR_MSG_SAMPLE, &m, &out, &n) == 0 && out.sample.action == NR_SAMPLE_RECORD);

    m.syslog.text = "nr-sysmon 1\n";
    m.syslog.length = 12;
    CHECK(roundtrip(NR_MSG_SYSLOG, &m, &out, &n) == 0 && out.syslog.length == 12 &&
          memcmp(out.syslog.text, "nr-sysmon 1\n", 12) == 0);

    memset(&m, 0, sizeof m);
    m.error.code = NR_E_RANGE;
    strcpy(m.error.text, "message size 2147483648 exceeds the server limit 1073741824");
    CHECK(roundtrip(NR_MSG_ERROR, &m, &out, &n) == 0 && out.error.code == NR_E_RANGE);
    CHECK_STR(out.error.text, m.error.text);

    CHECK(roundtrip(NR_MSG_READY, NULL, &out, &n) == 0 && n == NR_PROTO_HDR_BYTES);
    CHECK(roundtrip(NR_MSG_BYE, NULL, &out, &n) == 0);
    CHECK(roundtrip(NR_MSG_FINISH, NULL, &out, &n) == 0);
}

static void test_bad_headers(void)
{
    uint8_t buf[64];
    union nr_msg m;
    memset(&m, 0, sizeof m);
    m.start.iterations = 1;
    m.start.size_bytes = 1;
    size_t n = nr_proto_encode(buf, sizeof buf, NR_MSG_START, &m);
    CHECK(n == NR_PROTO_HDR_BYTES + 24);
    struct nr_proto_hdr h;
    struct nr_error e;
    uint8_t t[64];

    memcpy(t, buf, n);
    t[0] ^= 1;
    nr_error_clear(&e);
    CHECK(nr_proto_decode_header(t, &h, &e) == NR_E_PROTO && strstr(e.detail, "magic"));

    /* A peer of protocol version 1 (before tags) is told which versions meet. */
    memcpy(t, buf, n);
    t[4] = 1;
    nr_error_clear(&e);
    CHECK(nr_proto_decode_header(t, &h, &e) == NR_E_VERSION && strstr(e.detail, "version 1, this side version 2"));

    memcpy(t, buf, n);
    t[7] = 1;
    nr_error_clear(&e);
    CHECK(nr_proto_decode_header(t, &h, &e) == NR_E_PROTO);
    memcpy(t, buf, n);
    t[6] = 2; /* flags other than "tagged" */
    nr_error_clear(&e);
    CHECK(nr_proto_decode_header(t, &h, &e) == NR_E_PROTO);
    t[6] = NR_HDR_TAGGED;
    CHECK(nr_proto_decode_header(t, &h, &e) == 0 && h.flags == NR_HDR_TAGGED);

    int types[] = {0, NR_MSG_TYPE_END_, 255};
    for (int i = 0; i < 3; i++) {
        memcpy(t, buf, n);
        t[5] = (uint8_t)types[i];
        nr_error_clear(&e);
        CHECK(nr_proto_decode_header(t, &h, &e) == NR_E_PROTO && strstr(e.detail, "unknown message type"));
    }
    /* A START with the length of any other value is refused before its payload is read. */
    uint32_t lens[] = {0, 23, 25, 0xffffffffu, NR_PROTO_SYSLOG_MAX};
    for (int i = 0; i < 5; i++) {
        memcpy(t, buf, n);
        t[8] = (uint8_t)(lens[i] >> 24);
        t[9] = (uint8_t)(lens[i] >> 16);
        t[10] = (uint8_t)(lens[i] >> 8);
        t[11] = (uint8_t)lens[i];
        nr_error_clear(&e);
        CHECK(nr_proto_decode_header(t, &h, &e) == NR_E_PROTO && strstr(e.detail, "invalid length"));
    }
    /* SYSLOG above its cap. */
    m.syslog.length = NR_PROTO_SYSLOG_MAX;
    n = nr_proto_encode(t, sizeof t, NR_MSG_SYSLOG, &m);
    CHECK(n == 0); /* does not fit in 64 bytes: refused, not overflowed */
    memcpy(t, buf, NR_PROTO_HDR_BYTES);
    t[5] = NR_MSG_SYSLOG;
    uint32_t big = NR_PROTO_SYSLOG_MAX + 1;
    t[8] = (uint8_t)(big >> 24);
    t[9] = (uint8_t)(big >> 16);
    t[10] = (uint8_t)(big >> 8);
    t[11] = (uint8_t)big;
    nr_error_clear(&e);
    CHECK(nr_proto_decode_header(t, &h, &e) == NR_E_PROTO);
}

static int decode_payload(int type, const uint8_t *p, uint32_t len)
{
    struct nr_proto_hdr h = {NR_PROTO_VERSION, (uint8_t)type, len, 0};
    union nr_msg m;
    struct nr_error e;
    nr_error_clear(&e);
    return nr_proto_decode(&h, p, &m, &e);
}

static void test_bad_fields(void)
{
    uint8_t p[600];
    memset(p, 0, sizeof p);
    /* TEST_REQ: mode 0 and 4, unknown flag bits, reserved byte, zero io size / zero max message */
    uint8_t req[24] = {NR_MODE_STREAM, NR_REQ_BLOCKING, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0,
                       0, 0, 0, 0, 0, 1, 0, 0};
    CHECK(decode_payload(NR_MSG_TEST_REQ, req, 24) == 0);
    req[0] = 0;
    CHECK(decode_payload(NR_MSG_TEST_REQ, req, 24) == NR_E_PROTO);
    req[0] = 4;
    CHECK(decode_payload(NR_MSG_TEST_REQ, req, 24) == NR_E_PROTO);
    req[0] = NR_MODE_LATENCY;
    req[1] = 0x10;
    CHECK(decode_payload(NR_MSG_TEST_REQ, req, 24) == NR_E_PROTO);
    req[1] = 0;
    req[3] = 1;
    CHECK(decode_payload(NR_MSG_TEST_REQ, req, 24) == NR_E_PROTO);
    req[3] = 0;
    req[13] = 0;
    CHECK(decode_payload(NR_MSG_TEST_REQ, req, 24) == NR_E_PROTO);
    /* START: zero iterations or size, unknown flags */
    uint8_t st[24] = {0};
    st[15] = 1;
    st[23] = 1;
    CHECK(decode_payload(NR_MSG_START, st, 24) == 0);
    st[7] = 2;
    CHECK(decode_payload(NR_MSG_START, st, 24) == NR_E_PROTO);
    st[7] = 0;
    st[15] = 0;
    CHECK(decode_payload(NR_MSG_START, st, 24) == NR_E_PROTO);
    /* HELLO: flags and nonce only (a host name after them is refused); unknown flags */
    uint8_t hello[40] = {0};
    CHECK(decode_payload(NR_MSG_HELLO, hello, 36) == 0);
    CHECK(decode_payload(NR_MSG_HELLO, hello, 40) == NR_E_PROTO);
    hello[3] = 2;
    CHECK(decode_payload(NR_MSG_HELLO, hello, 36) == NR_E_PROTO);
    /* WELCOME: host length byte must match the payload, no control characters or spaces */
    uint8_t wel[52] = {0};
    wel[48] = 3;
    memcpy(wel + 49, "abc", 3);
    CHECK(decode_payload(NR_MSG_WELCOME, wel, 52) == 0);
    wel[48] = 4;
    CHECK(decode_payload(NR_MSG_WELCOME, wel, 52) == NR_E_PROTO);
    wel[48] = 3;
    wel[50] = '\n';
    CHECK(decode_payload(NR_MSG_WELCOME, wel, 52) == NR_E_PROTO);
    /* ERROR: text length must match; control bytes are neutralised; a bogus code becomes NR_E_PEER */
    uint8_t er[10] = {0x7f, 0xff, 0xff, 0xff, 0, 4, 'a', 0x1b, 'b', 'c'};
    struct nr_proto_hdr h = {NR_PROTO_VERSION, NR_MSG_ERROR, 10, 0};
    union nr_msg m;
    CHECK(nr_proto_decode(&h, er, &m, NULL) == 0);
    CHECK_STR(m.error.text, "a?bc");
    CHECK(m.error.code == NR_E_PEER);
    er[5] = 5;
    CHECK(decode_payload(NR_MSG_ERROR, er, 10) == NR_E_PROTO);
    /* SAMPLE action 2, SOCKINFO unknown flag bits, TEST_ACK port 0 */
    uint8_t one = 2;
    CHECK(decode_payload(NR_MSG_SAMPLE, &one, 1) == NR_E_PROTO);
    uint8_t si[16] = {0};
    si[12] = 8;
    CHECK(decode_payload(NR_MSG_SOCKINFO, si, 16) == NR_E_PROTO);
    uint8_t ack[4] = {0};
    CHECK(decode_payload(NR_MSG_TEST_ACK, ack, 4) == NR_E_PROTO);
    ack[1] = 1;
    CHECK(decode_payload(NR_MSG_TEST_ACK, ack, 4) == 0);
    CHECK(decode_payload(NR_MSG_TEST_ACK, ack, 36) == NR_E_PROTO); /* version 1 carried the cookie here */
    /* Lengths are re-checked by the payload decoder as well. */
    CHECK(decode_payload(NR_MSG_DONE, p, 31) == NR_E_PROTO);
    CHECK(decode_payload(0, p, 0) == NR_E_PROTO);
    CHECK(decode_payload(NR_MSG_TYPE_END_, p, 0) == NR_E_PROTO);
}

static void test_auth_mac(void)
{
    uint8_t sn[NR_PROTO_NONCE_BYTES], cn[NR_PROTO_NONCE_BYTES], a[32], b[32], c[32];
    memset(sn, 1, sizeof sn);
    memset(cn, 2, sizeof cn);
    nr_proto_auth_mac("secret", 6, "client", sn, cn, a);
    nr_proto_auth_mac("secret", 6, "server", sn, cn, b);
    nr_proto_auth_mac("secreT", 6, "client", sn, cn, c);
    CHECK(memcmp(a, b, 32) != 0); /* a client MAC cannot be replayed as the server's */
    CHECK(memcmp(a, c, 32) != 0);
    cn[0] = 3;
    nr_proto_auth_mac("secret", 6, "client", sn, cn, c);
    CHECK(memcmp(a, c, 32) != 0); /* fresh nonce, fresh MAC */
    nr_proto_auth_mac("secret", 6, "session", sn, cn, c);
    CHECK(memcmp(a, c, 32) != 0 && memcmp(b, c, 32) != 0); /* the session key is neither proof */
}

/* Keyed ends of one connection: a client end and a server end on a socket pair each (the bytes between them are the
 * test's to pass on, alter or replay). */
struct keyed_pair {
    int c[2], s[2];                 /* c[0]: the client's socket, c[1] the test's; s[0] the server's, s[1] the test's */
    struct nr_proto_conn client, server;
};

static void keyed_open(struct keyed_pair *k, const char *client_secret, const char *server_secret)
{
    uint8_t sn[NR_PROTO_NONCE_BYTES], cn[NR_PROTO_NONCE_BYTES];
    memset(sn, 5, sizeof sn);
    memset(cn, 6, sizeof cn);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, k->c) == 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, k->s) == 0);
    nr_proto_conn_init(&k->client, k->c[0], 1.0);
    nr_proto_conn_init(&k->server, k->s[0], 1.0);
    nr_proto_conn_key(&k->client, client_secret, strlen(client_secret), sn, cn, 0);
    nr_proto_conn_key(&k->server, server_secret, strlen(server_secret), sn, cn, 1);
}

static void keyed_close(struct keyed_pair *k)
{
    nr_proto_conn_free(&k->client);
    nr_proto_conn_free(&k->server);
    close(k->c[0]), close(k->c[1]), close(k->s[0]), close(k->s[1]);
}

/* What end sent on fd's pair, as raw bytes (n of them). */
static size_t raw_take(int fd, uint8_t *buf, size_t cap)
{
    ssize_t n = recv(fd, buf, cap, MSG_DONTWAIT);
    return n > 0 ? (size_t)n : 0;
}

static int recv_type(struct nr_proto_conn *c, struct nr_error *e)
{
    struct nr_proto_hdr h = {0};
    union nr_msg m;
    nr_error_clear(e);
    int rc = nr_proto_recv(c, 0.2, &h, &m, e);
    return rc < 0 ? rc : h.type;
}

static void test_tags(void)
{
    struct keyed_pair k;
    struct nr_error e;
    union nr_msg m;
    uint8_t raw[256];
    memset(&m, 0, sizeof m);
    m.start.iterations = 10;
    m.start.size_bytes = 64;

    /* In order, each message once: accepted; the sequence numbers advance on both ends. */
    keyed_open(&k, "s3cret", "s3cret");
    for (int i = 0; i < 3; i++) {
        CHECK(nr_proto_send(&k.client, NR_MSG_START, &m, NULL) == 0);
        size_t n = raw_take(k.c[1], raw, sizeof raw);
        CHECK(n == NR_PROTO_HDR_BYTES + 24 + NR_PROTO_TAG_BYTES && (raw[6] & NR_HDR_TAGGED));
        CHECK(write(k.s[1], raw, n) == (ssize_t)n);
        CHECK(recv_type(&k.server, &e) == NR_MSG_START);
    }
    CHECK(k.server.recv_seq == 3 && k.client.send_seq == 3);

    /* Replayed: the same bytes again fail (their sequence number is spent). */
    CHECK(write(k.s[1], raw, NR_PROTO_HDR_BYTES + 24 + NR_PROTO_TAG_BYTES) > 0);
    CHECK(recv_type(&k.server, &e) == NR_E_AUTH && strstr(e.detail, "START message #3 failed"));
    keyed_close(&k);

    /* Altered (one payload bit), and dropped (the second of two arrives alone): refused. */
    for (int drop = 0; drop < 2; drop++) {
        keyed_open(&k, "s3cret", "s3cret");
        CHECK(nr_proto_send(&k.client, NR_MSG_START, &m, NULL) == 0);
        if (drop) {
            raw_take(k.c[1], raw, sizeof raw);
            CHECK(nr_proto_send(&k.client, NR_MSG_START, &m, NULL) == 0);
        }
        size_t n = raw_take(k.c[1], raw, sizeof raw);
        if (!drop)
            raw[NR_PROTO_HDR_BYTES + 10] ^= 1;
        CHECK(write(k.s[1], raw, n) == (ssize_t)n);
        CHECK(recv_type(&k.server, &e) == NR_E_AUTH);
        keyed_close(&k);
    }

    /* Reflected: the client's own message sent back to it fails (the direction is part of the tag). */
    keyed_open(&k, "s3cret", "s3cret");
    CHECK(nr_proto_send(&k.client, NR_MSG_START, &m, NULL) == 0);
    size_t n = raw_take(k.c[1], raw, sizeof raw);
    CHECK(write(k.c[1], raw, n) == (ssize_t)n);
    CHECK(recv_type(&k.client, &e) == NR_E_AUTH);
    keyed_close(&k);

    /* Another secret, another session key: nothing passes. */
    keyed_open(&k, "s3cret", "S3cret");
    CHECK(nr_proto_send(&k.client, NR_MSG_FINISH, NULL, NULL) == 0);
    n = raw_take(k.c[1], raw, sizeof raw);
    CHECK(write(k.s[1], raw, n) == (ssize_t)n);
    CHECK(recv_type(&k.server, &e) == NR_E_AUTH);
    keyed_close(&k);

    /* Untagged after the handshake: only an ERROR in place of the first tagged message (a refusal). */
    keyed_open(&k, "s3cret", "s3cret");
    uint8_t plain[NR_PROTO_HDR_BYTES + NR_PROTO_SMALL_MAX];
    size_t pn = nr_proto_encode(plain, sizeof plain, NR_MSG_READY, NULL);
    CHECK(write(k.c[1], plain, pn) == (ssize_t)pn);
    CHECK(recv_type(&k.client, &e) == NR_E_AUTH && strstr(e.detail, "unauthenticated READY"));
    memset(&m, 0, sizeof m);
    m.error.code = NR_E_AUTH;
    strcpy(m.error.text, "refused");
    pn = nr_proto_encode(plain, sizeof plain, NR_MSG_ERROR, &m);
    CHECK(write(k.c[1], plain, pn) == (ssize_t)pn);
    CHECK(recv_type(&k.client, &e) == NR_MSG_ERROR);
    CHECK(nr_proto_send(&k.server, NR_MSG_BYE, NULL, NULL) == 0); /* pass one tagged message on */
    n = raw_take(k.s[1], raw, sizeof raw);
    CHECK(write(k.c[1], raw, n) == (ssize_t)n);
    CHECK(recv_type(&k.client, &e) == NR_MSG_BYE);
    CHECK(write(k.c[1], plain, pn) == (ssize_t)pn);
    CHECK(recv_type(&k.client, &e) == NR_E_AUTH);
    keyed_close(&k);

    /* A tagged message on a connection that has no key yet: refused, not read past. */
    uint8_t t[NR_PROTO_HDR_BYTES];
    memcpy(t, plain, sizeof t);
    t[6] = NR_HDR_TAGGED;
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    struct nr_proto_conn fresh;
    nr_proto_conn_init(&fresh, sv[0], 0.2);
    CHECK(write(sv[1], t, sizeof t) == (ssize_t)sizeof t);
    CHECK(recv_type(&fresh, &e) == NR_E_PROTO && strstr(e.detail, "before the handshake"));
    nr_proto_conn_free(&fresh);
    close(sv[0]), close(sv[1]);
}

static void test_data_cookie(void)
{
    struct keyed_pair k, other;
    uint8_t a[32], b[32], c[32], d[32];
    keyed_open(&k, "s3cret", "s3cret");
    keyed_open(&other, "another", "another");
    nr_proto_data_cookie(&k.client, 40000, a);
    nr_proto_data_cookie(&k.server, 40000, b);
    nr_proto_data_cookie(&k.server, 40001, c);
    nr_proto_data_cookie(&other.server, 40000, d);
    CHECK(memcmp(a, b, 32) == 0);                          /* both ends derive the same cookie */
    CHECK(memcmp(a, c, 32) != 0 && memcmp(a, d, 32) != 0); /* bound to the port and to the session */
    CHECK(memcmp(a, k.client.key, 32) != 0);               /* and it is not the session key */
    keyed_close(&k);
    keyed_close(&other);
}

/* The real server session (srv.c) on one end of a socket pair, in a thread. */
struct server_thread {
    struct nr_tcpsrv_cfg cfg;
    int fd;
    int rc;
};

static void *serve(void *arg)
{
    struct server_thread *t = arg;
    struct sockaddr_storage peer;
    memset(&peer, 0, sizeof peer);
    peer.ss_family = AF_UNIX;
    t->rc = nr_tcpsrv_session(&t->cfg, t->fd, &peer);
    return NULL;
}

/* The client handshake (proto.c) against the server session; returns its status, *w the WELCOME. */
static int handshake_with(const char *server_secret, const char *client_secret, struct nr_msg_welcome *w,
                          struct nr_error *e)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    struct server_thread t = {.cfg = {.idle_timeout_s = 2, .handshake_s = 2, .max_rep_s = 10, .max_session_s = 10,
                                      .key = (const unsigned char *)server_secret,
                                      .key_len = server_secret ? (int)strlen(server_secret) : 0, .host = "srv-7",
                                      .log = NULL},
                              .fd = sv[1]};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, serve, &t) == 0);
    struct nr_proto_conn c;
    nr_proto_conn_init(&c, sv[0], 2.0);
    nr_error_clear(e);
    int rc = nr_proto_client_handshake(&c, client_secret, client_secret ? strlen(client_secret) : 0, "cli-3", w, e);
    if (rc == 0) { /* keyed both ways: the server reads our tagged FINISH and answers with a tagged ERROR */
        struct nr_error e2;
        nr_error_clear(&e2);
        CHECK(nr_proto_send(&c, NR_MSG_FINISH, NULL, NULL) == 0);
        union nr_msg m;
        CHECK(nr_proto_expect(&c, NR_MSG_TEST_REQ, 2.0, &m, "server", &e2) == NR_E_PEER);
        CHECK(strstr(e2.detail, "expected TEST_REQ from client, got FINISH") != NULL);
    }
    close(sv[0]);
    nr_proto_conn_free(&c);
    pthread_join(th, NULL);
    return rc;
}

static void test_handshake(void)
{
    struct nr_msg_welcome w;
    struct nr_error e;
    CHECK(handshake_with("k1", "k1", &w, &e) == 0);
    CHECK_STR(w.host, "srv-7");
    CHECK(w.max_io_bytes > 0 && w.max_rep_time_s == 10);
    CHECK(handshake_with(NULL, NULL, &w, &e) == 0); /* --insecure and a client without a secret */
    CHECK(handshake_with("k1", "k2", &w, &e) == NR_E_PEER && strstr(e.detail, "authentication failed"));
    CHECK(handshake_with("k1", NULL, &w, &e) == NR_E_PEER && strstr(e.detail, "requires authentication"));
    CHECK(handshake_with(NULL, "k1", &w, &e) == NR_E_AUTH && strstr(e.detail, "does not authenticate"));
}

int main(int argc, char **argv)
{
    static const struct nr_test_case cases[] = {
        {"roundtrip", test_roundtrip}, {"bad_headers", test_bad_headers}, {"bad_fields", test_bad_fields},
        {"auth_mac", test_auth_mac},   {"tags", test_tags},           {"data_cookie", test_data_cookie},
        {"handshake", test_handshake}, {NULL, NULL},
    };
    return nr_test_main(cases, argc, argv);
}
