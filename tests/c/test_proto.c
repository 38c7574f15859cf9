/* Unit tests of the TCP control protocol: every message type survives encode -> decode unchanged, and the decoder
 * refuses bad magic, other versions, reserved bits, unknown types, wrong lengths and out-of-range fields. */
#include <stdlib.h>

#include "check.h"
#include "nr/core.h"
#include "proto.h"

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
    strcpy(m.hello.host, "mk4.sharcnet.ca");
    CHECK(roundtrip(NR_MSG_HELLO, &m, &out, &n) == 0);
    CHECK(out.hello.flags == NR_HELLO_AUTH && out.hello.nonce[31] == 7);
    CHECK_STR(out.hello.host, "mk4.sharcnet.ca");

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
    CHECK(roundtrip(NR_MSG_WELCOME, &m, &out, &n) == 0 && n == NR_PROTO_HDR_BYTES + 48);
    CHECK(out.welcome.max_message_bytes == 1ull << 40 && out.welcome.max_io_bytes == 123 &&
          out.welcome.max_rep_time_s == 1800);

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
    m.test_ack.cookie[5] = 9;
    CHECK(roundtrip(NR_MSG_TEST_ACK, &m, &out, &n) == 0 && out.test_ack.port == 40000 && out.test_ack.cookie[5] == 9);

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

    memcpy(t, buf, n);
    t[4] = 2;
    nr_error_clear(&e);
    CHECK(nr_proto_decode_header(t, &h, &e) == NR_E_VERSION && strstr(e.detail, "version 2"));

    memcpy(t, buf, n);
    t[7] = 1;
    nr_error_clear(&e);
    CHECK(nr_proto_decode_header(t, &h, &e) == NR_E_PROTO);

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
    struct nr_proto_hdr h = {NR_PROTO_VERSION, (uint8_t)type, len};
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
    /* HELLO: host length byte must match the payload, no control characters or spaces */
    uint8_t hello[40] = {0};
    hello[36] = 3;
    memcpy(hello + 37, "abc", 3);
    CHECK(decode_payload(NR_MSG_HELLO, hello, 40) == 0);
    hello[36] = 4;
    CHECK(decode_payload(NR_MSG_HELLO, hello, 40) == NR_E_PROTO);
    hello[36] = 3;
    hello[38] = '\n';
    CHECK(decode_payload(NR_MSG_HELLO, hello, 40) == NR_E_PROTO);
    hello[38] = 'b';
    hello[3] = 2;
    CHECK(decode_payload(NR_MSG_HELLO, hello, 40) == NR_E_PROTO);
    /* ERROR: text length must match; control bytes are neutralised; a bogus code becomes NR_E_PEER */
    uint8_t er[10] = {0x7f, 0xff, 0xff, 0xff, 0, 4, 'a', 0x1b, 'b', 'c'};
    struct nr_proto_hdr h = {NR_PROTO_VERSION, NR_MSG_ERROR, 10};
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
    uint8_t ack[36] = {0};
    CHECK(decode_payload(NR_MSG_TEST_ACK, ack, 36) == NR_E_PROTO);
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
}

int main(int argc, char **argv)
{
    static const struct nr_test_case cases[] = {
        {"roundtrip", test_roundtrip}, {"bad_headers", test_bad_headers}, {"bad_fields", test_bad_fields},
        {"auth_mac", test_auth_mac},   {NULL, NULL},
    };
    return nr_test_main(cases, argc, argv);
}
