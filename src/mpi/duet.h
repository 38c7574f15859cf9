/* nr-mpitest --duet tcp|shm: duet benchmarking (Bulej et al., ICPE 2020). Absolute CPU-bound figures swing several
 * times with the state of a (virtual) host, so they cannot catch an MPI stack that became 2x slower. Every MPI
 * repetition is paired with one repetition of a yardstick that does not go through the MPI stack, run by the same
 * two processes with the same message size and pattern, right before or after it (the order drawn at random per
 * pair): a change of the host's state hits both, and the ratio MPI / yardstick stays put.
 *
 * Yardsticks: `tcp`, a raw TCP connection from rank 0 to rank 1 (rank 1 listens on the IPv4 address of
 * --duet-iface, by default the loopback interface when both ranks share a host); `shm`, a POSIX shared-memory
 * segment with a ring of chunk slots per direction (two copies per message, as an MPI shared-memory transport
 * makes). Both wait as most MPI libraries do, polling without sleeping; with `sleep` set, the tcp yardstick waits in
 * poll() as a library that blocks in select() does (LAM/MPI's tcp RPI), so both pay the host's wake-up latency and
 * the ratio divides it out. MPI is the control plane only: set-up, the order,
 * the barrier before each timed run. Every wait inside a yardstick run has a deadline; a failure there ends the job
 * (nr_mpi_fail_loop), as one inside an MPI run does.
 */
#ifndef NR_DUET_H
#define NR_DUET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nr_mpi.h"

enum nr_duet_kind { NR_DUET_OFF = 0, NR_DUET_TCP, NR_DUET_SHM };

/* How the two ranks move messages in a run (nr-mpitest's patterns). */
enum nr_duet_pattern {
    NR_DUET_STREAM,    /* rank 0 sends, rank 1 receives; rank 1's 1-byte acknowledgement of the last ends the run */
    NR_DUET_EXCHANGE,  /* both send and receive at once (-i -n) */
    NR_DUET_ROUNDTRIP  /* rank 1 returns each message after it arrived (-i, latency) */
};

struct nr_duet_link;

struct nr_duet {
    int kind;                   /* NR_DUET_* */
    bool latency;               /* figures are round-trip times in us, else throughput in Mbit/s */
    bool sleep;                 /* tcp: wait in poll() instead of polling without sleeping (--duet-sleep) */
    const struct nr_mpi *mpi_ctx;
    char peer_host[NR_HOST_MAX];
    char iface[64];             /* tcp: the interface, and rank 1's address and port */
    char address[16];
    uint16_t port;
    uint64_t seed;              /* rank 0's seed of the order */
    unsigned char *yard_first;  /* per pair: 1 when the yardstick runs first */
    struct nr_calib calib;      /* the yardstick's own calibration to the same target */
    struct nr_rep *reps;        /* the yardstick's repetitions */
    double *mpi, *yard, *ratio; /* per recorded pair: the MPI figure, the yardstick's, MPI / yardstick */
    size_t npairs, cap;
    struct nr_duet_link *link;
};

/* --duet's parser (NR_OPT_CALL into an int): "tcp" or "shm". */
int nr_duet_parse_kind(const char *arg, void *dest, const struct nr_opt *opt, struct nr_error *err);

/* "tcp", "shm". */
const char *nr_duet_name(int kind);

/* Collective: set up the yardstick `kind` between ranks 0 and 1 (iface NULL: the default) and draw the order of
 * `pairs` pairs on rank 0. Agreed: every rank gets the same outcome. */
int nr_duet_open(struct nr_duet *d, int kind, const char *iface, const struct nr_mpi *m, const char *peer_host,
                 size_t pairs, bool latency, struct nr_error *err);

/* The timed part of one yardstick run: `iters` messages of `size` bytes in pattern `how`. A failure ends every
 * rank (nr_mpi_fail_loop, naming the yardstick, the message and what failed); returns NR_OK otherwise. */
int nr_duet_transfer(struct nr_duet *d, enum nr_duet_pattern how, const unsigned char *sbuf, unsigned char *rbuf,
                     uint64_t size, uint64_t iters);

/* Record a pair's figures (both in the same unit). */
void nr_duet_record(struct nr_duet *d, double mpi_figure, double yard_figure);

/* Rank 0's text: a line per pair, and the ratio's spread at the end. */
void nr_duet_print_pair(const struct nr_duet *d, size_t i);
void nr_duet_print_summary(const struct nr_duet *d);

/* NR_E_VALIDATE when most yardstick runs fell far short of the target (nr_calib_verdict). */
int nr_duet_verdict(const struct nr_duet *d, struct nr_error *err);

/* "duet": {...} (docs/json-schema.md); nothing when no pair was recorded. */
void nr_duet_json(struct nr_json *j, const struct nr_duet *d);

void nr_duet_close(struct nr_duet *d);

#endif
