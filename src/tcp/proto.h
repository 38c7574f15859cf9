/* The nr-tcptest <-> nr-tcpserver control protocol, version 2.
 *
 * The control connection carries small framed messages; measured payload travels on a separate data connection
 * that carries nothing but payload (so nothing is parsed inside a timed loop). Every message is a 12-byte header
 * followed by a payload of fixed layout (all integers big-endian) and, after the handshake, a 32-byte tag:
 *
 *   0..3 magic "NRTC"   4 version (2)   5 type   6 flags (bit 0: tagged)   7 reserved (0)   8..11 payload length
 *
 * The decoder trusts nothing: magic, version, flags and reserved bits, the type, and the payload length against the
 * exact (or maximum) length of that type are checked before any payload is read or allocated; field values are
 * then range-checked (modes, flag bits, host-name characters, text lengths). Policy limits (largest message size,
 * duration) are the server's business and are checked there.
 *
 * Conversation (C = client, S = server):
 *   S: HELLO{flags, nonce}        C: CLIENT_HELLO{flags, nonce, mac, host}
 *   S: WELCOME{mac, limits, host} | ERROR
 *   C: TEST_REQ{mode, options, io size, largest message}   S: TEST_ACK{data port} | ERROR
 *   C connects the data socket to the data port and sends the 32-byte data cookie; S: SOCKINFO{effective options}
 *   then any number of:  C: START{index, flags, iterations, size}  S: READY  ... data ...  S: DONE{bytes, times}
 *                        C: SAMPLE{mark|record}  S: READY            (system-monitor rows outside repetitions)
 *   C: FINISH   S: SYSLOG{text} (when the test asked for the system monitor) | BYE
 * Either side may send ERROR{code, text} instead of the expected message and then close.
 *
 * Before authentication the server tells a peer nothing but the protocol version (the header), whether it requires
 * the shared secret and a nonce; its name and limits come in WELCOME.
 *
 * Keys. With a shared secret K (--auth-file; K is empty for a server run with --insecure and a client without
 * --auth-file), over the two nonces sn (server) and cn (client), HMAC-SHA256(K, "nr-tcp-v2/" role || sn || cn) is
 *   role "client": CLIENT_HELLO.mac, the client's proof that it holds K;
 *   role "server": WELCOME.mac, the server's proof;
 *   role "session": the session key SK of this connection (never sent).
 * Every message from WELCOME (server) and TEST_REQ (client) on is tagged: tag = HMAC-SHA256(SK, direction ('S' from
 * the server, 'C' from the client) || sequence number (8 bytes, 0 for the first tagged message of that direction) ||
 * header || payload). A message altered, dropped, replayed or reflected fails its tag and ends the session; the only
 * untagged message accepted after CLIENT_HELLO is an ERROR in place of WELCOME (a refusal). The data cookie is
 * HMAC-SHA256(SK, "nr-tcp-v2/data" || data port): both sides derive it, it first crosses the network on the data
 * connection itself, and the data listener takes connections from the control connection's peer address only.
 * Without a shared secret anyone who sees the handshake can derive SK: tags then only catch accidents.
 */
#ifndef NR_TCP_PROTO_H
#define NR_TCP_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "nr/sha256.h"

struct nr_error;

#define NR_PROTO_MAGIC 0x4E525443u /* "NRTC" */
#define NR_PROTO_VERSION 2
#define NR_PROTO_HDR_BYTES 12
#define NR_PROTO_NONCE_BYTES 32
#define NR_PROTO_COOKIE_BYTES 32
#define NR_PROTO_TAG_BYTES 32          /* HMAC-SHA256 tag after the payload of a tagged message */
#define NR_PROTO_TAG_PREFIX 9          /* direction and sequence number, hashed before the frame */
#define NR_HDR_TAGGED 0x1u             /* header flags: a tag follows the payload */
#define NR_PROTO_HOST_MAX 255         /* longest host name in CLIENT_HELLO / WELCOME */
#define NR_PROTO_TEXT_MAX 512         /* longest ERROR text */
#define NR_PROTO_SYSLOG_MAX (4u << 20) /* largest SYSLOG payload */
#define NR_PROTO_SMALL_MAX 1024        /* largest payload of every other message */

enum nr_msg_type {
    NR_MSG_HELLO = 1,
    NR_MSG_CLIENT_HELLO = 2,
    NR_MSG_WELCOME = 3,
    NR_MSG_TEST_REQ = 4,
    NR_MSG_TEST_ACK = 5,
    NR_MSG_SOCKINFO = 6,
    NR_MSG_START = 7,
    NR_MSG_READY = 8,
    NR_MSG_DONE = 9,
    NR_MSG_SAMPLE = 10,
    NR_MSG_FINISH = 11,
    NR_MSG_SYSLOG = 12,
    NR_MSG_ERROR = 13,
    NR_MSG_BYE = 14,
    NR_MSG_TYPE_END_
};

/* Test modes (TEST_REQ.mode): what the server does with the data connection. */
enum nr_tcp_mode {
    NR_MODE_STREAM = 1,   /* client sends, server receives */
    NR_MODE_PINGPONG = 2, /* server returns every message (blocking: whole message; non-blocking: as it arrives) */
    NR_MODE_LATENCY = 3,  /* server returns every message whole, strictly one at a time */
};

#define NR_HELLO_AUTH 0x1u        /* HELLO.flags: the server requires the shared secret */
#define NR_CHELLO_MAC 0x1u        /* CLIENT_HELLO.flags: mac is present */
#define NR_REQ_BLOCKING 0x1u      /* TEST_REQ.flags */
#define NR_REQ_NODELAY 0x2u
#define NR_REQ_CORK 0x4u
#define NR_REQ_SYSMON 0x8u
#define NR_REQ_FLAGS_ALL 0xFu
#define NR_START_MEASURED 0x1u    /* START.flags: a measured repetition (the server records a system-monitor row) */
#define NR_SAMPLE_MARK 0          /* SAMPLE.action */
#define NR_SAMPLE_RECORD 1

struct nr_proto_hdr {
    uint8_t version;
    uint8_t type;
    uint32_t length; /* payload bytes */
    uint8_t flags;   /* NR_HDR_* */
};

struct nr_msg_hello {
    uint32_t flags; /* NR_HELLO_AUTH */
    uint8_t nonce[NR_PROTO_NONCE_BYTES];
};

struct nr_msg_client_hello {
    uint32_t flags;
    uint8_t nonce[NR_PROTO_NONCE_BYTES];
    uint8_t mac[NR_SHA256_BYTES];
    char host[NR_PROTO_HOST_MAX + 1];
};

struct nr_msg_welcome {
    uint8_t mac[NR_SHA256_BYTES];
    uint64_t max_message_bytes; /* server limits, so the client can fail early with a clear message */
    uint32_t max_io_bytes;
    uint32_t max_rep_time_s;
    char host[NR_PROTO_HOST_MAX + 1]; /* the server's name: told only to an authenticated client */
};

struct nr_msg_test_req {
    uint8_t mode;  /* enum nr_tcp_mode */
    uint8_t flags; /* NR_REQ_* */
    uint8_t tos;
    uint32_t buffer_bytes;
    uint32_t mss_bytes;
    uint32_t io_bytes;
    uint64_t max_message_bytes;
};

struct nr_msg_test_ack {
    uint16_t port; /* the data listener; the cookie is derived, not sent (nr_proto_data_cookie) */
};

struct nr_msg_sockinfo {
    uint32_t rcvbuf_bytes, sndbuf_bytes, mss_bytes;
    uint8_t blocking, nodelay, cork, tos;
};

struct nr_msg_start {
    uint32_t index;
    uint32_t flags; /* NR_START_* */
    uint64_t iterations;
    uint64_t size_bytes;
};

struct nr_msg_done {
    uint64_t bytes;      /* payload bytes the server moved (received + sent) */
    uint64_t elapsed_ns; /* server's elapsed time: READY sent to its last payload byte received or sent */
    uint64_t user_us, sys_us; /* server process times over the repetition */
};

struct nr_msg_sample {
    uint8_t action; /* NR_SAMPLE_* */
};

struct nr_msg_syslog {
    const char *text; /* points into the receive buffer */
    uint32_t length;
};

struct nr_msg_error {
    int32_t code; /* NR_E_* of the sender */
    char text[NR_PROTO_TEXT_MAX + 1];
};

union nr_msg {
    struct nr_msg_hello hello;
    struct nr_msg_client_hello client_hello;
    struct nr_msg_welcome welcome;
    struct nr_msg_test_req test_req;
    struct nr_msg_test_ack test_ack;
    struct nr_msg_sockinfo sockinfo;
    struct nr_msg_start start;
    struct nr_msg_done done;
    struct nr_msg_sample sample;
    struct nr_msg_syslog syslog;
    struct nr_msg_error error;
};

/* Name of a message type ("START"), for error texts. */
const char *nr_proto_type_name(int type);

/* Check a received header. Returns 0, NR_E_PROTO (bad magic, reserved bits, unknown type, length not allowed for
 * the type) or NR_E_VERSION. */
int nr_proto_decode_header(const uint8_t hdr[NR_PROTO_HDR_BYTES], struct nr_proto_hdr *out, struct nr_error *err);

/* Decode a payload of h->length bytes for h->type into *out (SYSLOG text points into payload). */
int nr_proto_decode(const struct nr_proto_hdr *h, const uint8_t *payload, union nr_msg *out, struct nr_error *err);

/* Encode header + payload into buf (cap bytes). Returns the total length, or 0 if it does not fit or the message
 * is not valid (e.g. a host name or text longer than the protocol allows). */
size_t nr_proto_encode(uint8_t *buf, size_t cap, int type, const union nr_msg *m);

/* A control connection: the socket, its receive buffer and, after the handshake, its session key. */
struct nr_proto_conn {
    int fd;
    uint8_t *buf;    /* grows to the largest message received (at most NR_PROTO_SYSLOG_MAX of payload) */
    size_t cap;
    double timeout_s; /* default wait for a message */
    uint32_t max_payload; /* largest payload accepted (NR_PROTO_SYSLOG_MAX; a server lowers it to
                             NR_PROTO_SMALL_MAX: it never receives a system log) */
    int keyed;        /* 1: messages are tagged with key (nr_proto_conn_key) */
    uint8_t key[NR_SHA256_BYTES];
    uint8_t send_dir, recv_dir; /* 'C' or 'S' */
    uint64_t send_seq, recv_seq;
};

/* Wrap fd (and set TCP_NODELAY on it: control messages must not wait for Nagle's algorithm). */
void nr_proto_conn_init(struct nr_proto_conn *c, int fd, double timeout_s);
void nr_proto_conn_free(struct nr_proto_conn *c); /* frees the buffer, does not close fd */

/* Send one message (the SYSLOG text is m->syslog.text). */
int nr_proto_send(struct nr_proto_conn *c, int type, const union nr_msg *m, struct nr_error *err);

/* Receive one message of any type within timeout_s (<= 0: the connection's default). */
int nr_proto_recv(struct nr_proto_conn *c, double timeout_s, struct nr_proto_hdr *h, union nr_msg *m,
                  struct nr_error *err);

/* Receive a message of the given type. A peer ERROR becomes NR_E_PEER with "peer_name: <its text>" as detail;
 * any other type is NR_E_PROTO. */
int nr_proto_expect(struct nr_proto_conn *c, int type, double timeout_s, union nr_msg *m, const char *peer_name,
                    struct nr_error *err);

/* Best-effort ERROR{code, text} to the peer (failures ignored: the connection is about to be closed). */
void nr_proto_send_error(struct nr_proto_conn *c, int code, const char *text);

/* HMAC-SHA256(key, "nr-tcp-v2/" role || server nonce || client nonce) for role "client", "server" or "session"
 * (see above). */
void nr_proto_auth_mac(const void *key, size_t key_len, const char *role, const uint8_t server_nonce[NR_PROTO_NONCE_BYTES],
                       const uint8_t client_nonce[NR_PROTO_NONCE_BYTES], uint8_t mac[NR_SHA256_BYTES]);

/* From now on tag every message sent and require the tag on every message received, under the session key of
 * secret (key_len 0: none) and the two nonces; server: this end is the server. */
void nr_proto_conn_key(struct nr_proto_conn *c, const void *secret, size_t key_len,
                       const uint8_t server_nonce[NR_PROTO_NONCE_BYTES],
                       const uint8_t client_nonce[NR_PROTO_NONCE_BYTES], int server);

/* The tag of one message: msg holds NR_PROTO_TAG_PREFIX bytes of scratch (overwritten) followed by the frame
 * (header and payload, frame_len bytes). */
void nr_proto_tag(const uint8_t key[NR_SHA256_BYTES], uint8_t dir, uint64_t seq, uint8_t *msg, size_t frame_len,
                  uint8_t tag[NR_PROTO_TAG_BYTES]);

/* The data cookie of a keyed connection for the data listener on port (see above). */
void nr_proto_data_cookie(const struct nr_proto_conn *c, uint16_t port, uint8_t cookie[NR_PROTO_COOKIE_BYTES]);

/* The client's handshake on c: HELLO, CLIENT_HELLO proving secret (key_len 0: none), WELCOME checked against the
 * server's proof; c is keyed on return. A client with a secret refuses a server that does not authenticate.
 * *w receives the server's name and limits. */
int nr_proto_client_handshake(struct nr_proto_conn *c, const void *secret, size_t key_len, const char *client_host,
                              struct nr_msg_welcome *w, struct nr_error *err);

#endif
