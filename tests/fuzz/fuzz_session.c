/* libFuzzer target for a whole nr-tcpserver session: the real session code (srv.c) serves one end of a socket pair
 * in a thread, and the input is everything a client sends on the other. The property is that the session always
 * returns (no crash, no hang, no leak under ASan) whatever a client sends, and within the server's session cap: a
 * session that outlives its cap by more than the slack aborts the run.
 *
 * The first input byte: bit 0, the server requires a shared secret; bit 1, the client proves it holds it (else it
 * sends no proof); bit 2, the rest of the input goes out as it is right after the server's HELLO (the handshake
 * fuzzed). Without bit 2 the harness completes the handshake as nr-tcptest does and the rest is records (fuzz_frames.h:
 * tagging, type, length, payload), most of them tagged under the session key so that they reach the code the tags
 * guard (test request, limits, repetitions).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz_frames.h"
#include "nr/core.h"
#include "srv.h"

#define NR__CAP_S 0.5   /* the session cap of every fuzzed session */
#define NR__SLACK_S 1.0 /* how far past the cap a session may end (one idle wait of the protocol layer) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct nr__served {
    struct nr_tcpsrv_cfg cfg;
    int fd;
};

static void *nr__serve(void *arg)
{
    struct nr__served *s = arg;
    struct sockaddr_storage peer;
    memset(&peer, 0, sizeof peer);
    peer.ss_family = AF_UNIX;
    nr_tcpsrv_session(&s->cfg, s->fd, &peer); /* closes fd */
    return NULL;
}

/* The client's side: read HELLO, then send the input (raw, or a handshake and the records). */
static void nr__client(int fd, const uint8_t *data, size_t size, const unsigned char *key, size_t key_len)
{
    struct nr_proto_conn c;
    nr_proto_conn_init(&c, fd, 1.0);
    union nr_msg m;
    if (nr_proto_expect(&c, NR_MSG_HELLO, 1.0, &m, "server", NULL) != 0)
        goto out;
    uint8_t server_nonce[NR_PROTO_NONCE_BYTES];
    memcpy(server_nonce, m.hello.nonce, sizeof server_nonce);
    if (data[0] & 4) {
        if (size > 1)
            send(fd, data + 1, size - 1, MSG_NOSIGNAL); /* the server may be gone already: no SIGPIPE */
        goto out;
    }
    memset(&m, 0, sizeof m);
    memset(m.client_hello.nonce, 0x3c, NR_PROTO_NONCE_BYTES);
    if (data[0] & 2) {
        m.client_hello.flags = NR_CHELLO_MAC;
        nr_proto_auth_mac(key, key_len, "client", server_nonce, m.client_hello.nonce, m.client_hello.mac);
    }
    snprintf(m.client_hello.host, sizeof m.client_hello.host, "fuzz");
    if (nr_proto_send(&c, NR_MSG_CLIENT_HELLO, &m, NULL) != 0)
        goto out;
    nr_proto_conn_key(&c, (data[0] & 2) ? key : NULL, (data[0] & 2) ? key_len : 0, server_nonce,
                      m.client_hello.nonce, 0);
    static uint8_t frame[NR_PROTO_TAG_PREFIX + NR_PROTO_HDR_BYTES + 65536 + NR_PROTO_TAG_BYTES];
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    while (n >= 5) {
        uint16_t len = (uint16_t)(p[3] << 8 | p[4]);
        if (len > n - 5)
            len = (uint16_t)(n - 5);
        size_t w = nr_fuzz_frame(frame, c.key, 'C', &c.send_seq, (enum nr_fuzz_tagging)(p[0] & 3), p[1], p + 5,
                                 len, p[2]);
        if (send(fd, frame + NR_PROTO_TAG_PREFIX, w, MSG_NOSIGNAL) != (ssize_t)w)
            break;
        p += 5 + len;
        n -= 5 + (size_t)len;
    }
out:
    shutdown(fd, SHUT_WR);
    nr_proto_conn_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return 0;
    int big = 1 << 20;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    static const unsigned char key[] = "fuzz-secret";
    struct nr__served s = {.cfg = {.idle_timeout_s = 0.05, .handshake_s = 0.05, .max_rep_s = 1.0,
                                   .max_session_s = NR__CAP_S, .key = (data[0] & 1) ? key : NULL,
                                   .key_len = (data[0] & 1) ? 11 : 0, .host = "fuzz", .log = NULL},
                           .fd = sv[0]};
    double t0 = nr_now_s();
    pthread_t th;
    if (pthread_create(&th, NULL, nr__serve, &s) != 0) {
        close(sv[0]);
        close(sv[1]);
        return 0;
    }
    nr__client(sv[1], data, size, key, 11);
    pthread_join(th, NULL);
    double took = nr_now_s() - t0;
    if (took > NR__CAP_S + NR__SLACK_S) {
        fprintf(stderr, "fuzz_session: a session lasted %.2f s, past its %.1f-s cap\n", took, NR__CAP_S);
        abort();
    }
    close(sv[1]);
    return 0;
}
