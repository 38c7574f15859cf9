/* Limits and small helpers shared by nr-tcptest and nr-tcpserver.
 *
 * The limits are named once here and used both in the checks and in the error texts / --help ranges.
 */
#ifndef NR_TCP_TCP_H
#define NR_TCP_TCP_H

#include <stddef.h>
#include <stdint.h>

struct nr_error;

#define NR_TCP_DEFAULT_PORT 5677
#define NR_TCP_MSG_MAX (1u << 30)        /* largest message size (-m, -A, 2^-e) */
#define NR_TCP_EXP_MAX 30                /* largest -e exponent: 2^30 bytes */
#define NR_TCP_IO_MAX (16u << 20)        /* largest single read/write (-d) */
#define NR_TCP_BUF_MAX (1u << 30)        /* largest socket buffer request (-b) */
#define NR_TCP_MSS_MIN 88                /* Linux refuses smaller TCP_MAXSEG values */
#define NR_TCP_MSS_MAX 65535
#define NR_TCP_REPS_MAX 10000            /* most repetitions / latency trials (-r) */
#define NR_TCP_TIME_MAX 600.0            /* longest test time (-t), seconds */
#define NR_TCP_TIME_MIN 0.01
#define NR_TCP_ITER_MAX (1ull << 40)     /* most iterations of one repetition */
#define NR_TCP_TOTAL_MAX (1ull << 52)    /* most payload bytes of one repetition (4 PiB) */
#define NR_TCP_TIMEOUT_DEFAULT 30.0      /* idle timeout of both sides, seconds */
#define NR_TCP_TIMEOUT_MAX 3600.0
#define NR_TCP_REP_TIME_DEFAULT 1800.0   /* server: longest repetition it serves, seconds */
#define NR_TCP_AUTH_MAX 4096             /* longest shared secret in an --auth-file */

/* Read a shared secret from path (surrounding whitespace stripped) into key[NR_TCP_AUTH_MAX].
 * Returns the length (> 0) or a negative NR_E_* (unreadable, empty, too long). */
int nr_tcp_read_secret(const char *path, unsigned char *key, struct nr_error *err);

/* Hpcbench TOS levels of -q: 0 = default, 1..4 = IPTOS_LOWDELAY, _THROUGHPUT, _RELIABILITY, _MINCOST. */
#define NR_TCP_TOS_LEVEL_MAX 4
uint8_t nr_tcp_tos_byte(int level);
/* "Default", "IPTOS_Maximize_Throughput", ... for an effective TOS byte; other values as hex into buf. */
const char *nr_tcp_tos_name(uint8_t tos, char *buf, size_t len);

#endif
