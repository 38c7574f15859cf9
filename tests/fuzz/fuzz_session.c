/* libFuzzer target for a whole nr-tcpserver session: the input is everything a client sends on the control
 * connection (pre-written into one end of a socket pair whose write side is then shut down), and the real session
 * code (srv.c) serves it on the other end: handshake, authentication, test request and limits, repetitions. The
 * property is that the session always returns (no crash, no hang, no leak under ASan) whatever a client sends.
 * The first input byte chooses whether the server requires a shared secret.
 */
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "srv.h"

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
    struct nr_tcpsrv_cfg cfg = {0, 0.05, 1.0, (data[0] & 1) ? key : NULL, (data[0] & 1) ? 11 : 0, "fuzz", NULL};
    struct sockaddr_storage peer;
    memset(&peer, 0, sizeof peer);
    peer.ss_family = AF_UNIX;
    nr_tcpsrv_session(&cfg, sv[0], &peer); /* closes sv[0] */
    close(sv[1]);
    return 0;
}
