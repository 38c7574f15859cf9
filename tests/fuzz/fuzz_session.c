/* libFuzzer target for a whole nr-tcpserver session: the input is everything a client sends on the control
 * connection (pre-written into one end of a socket pair whose write side is then shut down), and the real session
 * code (srv.c) serves it on the other end: handshake, authentication, test request and limits, repetitions. The
 * property is that the session always returns (no crash, no hang, no leak under ASan) whatever a client sends, and
 * within the server's session cap: a session that outlives its cap by more than the slack aborts the run.
 * The first input byte chooses whether the server requires a shared secret.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nr/timer.h"
#include "srv.h"

#define NR__CAP_S 0.5   /* the session cap of every fuzzed session */
#define NR__SLACK_S 1.0 /* how far past the cap a session may end (one idle wait of the protocol layer) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return 0;
    int big = 1 << 20;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    size_t off = 1;
    while (off < size) {
        ssize_t n = write(sv[1], data + off, size - off);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    shutdown(sv[1], SHUT_WR);
    static const unsigned char key[] = "fuzz-secret";
    struct nr_tcpsrv_cfg cfg = {.idle_timeout_s = 0.05, .handshake_s = 0.05, .max_rep_s = 1.0,
                                .max_session_s = NR__CAP_S, .key = (data[0] & 1) ? key : NULL,
                                .key_len = (data[0] & 1) ? 11 : 0, .host = "fuzz", .log = NULL};
    struct sockaddr_storage peer;
    memset(&peer, 0, sizeof peer);
    peer.ss_family = AF_UNIX;
    double t0 = nr_now_s();
    nr_tcpsrv_session(&cfg, sv[0], &peer); /* closes sv[0] */
    double took = nr_now_s() - t0;
    if (took > NR__CAP_S + NR__SLACK_S) {
        fprintf(stderr, "fuzz_session: a session lasted %.2f s, past its %.1f-s cap\n", took, NR__CAP_S);
        abort();
    }
    close(sv[1]);
    return 0;
}
