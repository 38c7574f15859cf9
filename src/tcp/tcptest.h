/* nr-tcptest internals shared by the driver (client.c) and the writers (report.c). */
#ifndef NR_TCP_TCPTEST_H
#define NR_TCP_TCPTEST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "nr/core.h"
#include "sock.h"

/* Options, one field per flag (defaults in nr_tcptest_defaults()). */
struct nr_tcptest {
    const char *host;        /* -h/--host */
    int port;                /* -p/--port */
    int pingpong;            /* -i/--pingpong: bidirectional instead of stream */
    int nonblocking;         /* -n/--nonblocking */
    int exponent;            /* -e/--exponential N: sweep 1..2^N bytes; -1 = fixed-size test */
    int latency;             /* -a/--latency: round-trip test with 64-byte messages */
    uint64_t latency_size;   /* -A/--latency-size SIZE: round-trip test with SIZE bytes; 0 = not given */
    struct nr_repeat reps;   /* -r/--repetitions N | MIN:MAX, --precision: repetitions, or latency trials */
    uint64_t msg_size;       /* -m/--message-size */
    uint64_t io_size;        /* -d/--io-size: largest single read/write */
    double test_time_s;      /* -t/--time: each repetition is calibrated to last this long */
    int iterations;          /* --iterations N: fixed count instead of calibration (0 = calibrate) */
    uint64_t buffer;         /* -b/--buffer: socket send and receive buffer request, 0 = system default */
    int nodelay;             /* -N/--nodelay */
    int cork;                /* -C/--cork */
    uint64_t mss;            /* -M/--mss, 0 = system default */
    int tos_level;           /* -q/--tos 0..4 */
    const char *output;      /* -o/--output FILE */
    int syslog;              /* -c/--syslog: FILE.c_log and FILE.s_log */
    int plot;                /* -P/--plot: FILE.plot */
    const char *json;        /* --json FILE */
    int verbose;             /* -v/--verbose */
    const char *auth_file;   /* --auth-file FILE */
    double timeout_s;        /* --timeout: idle timeout for connects, messages and data */
};


/* Everything measured, written by report.c. */
struct nr_tcptest_result {
    enum nr_run_kind kind;
    const char *mode;               /* JSON mode name */
    time_t started;
    char client_host[NR_HOST_MAX];
    char server_host[NR_HOST_MAX];
    bool have_sock;                 /* socket info known (connection got that far) */
    struct nr_tcp_sockinfo sock_client, sock_server;
    struct nr_rep *reps;            /* fixed: repetitions; sweep: one per size */
    size_t nreps;
    uint64_t iterations;            /* fixed-size: iterations per repetition; latency: round trips per trial (the
                                       last one's: a re-checked calibration may change it, reps[i] has each) */
    struct nr_repeat rule;          /* how many repetitions ran and why they stopped */
    double *samples;                /* each repetition's figure (throughput, round trip): what the rule reads */
    struct nr_calib calib;          /* the calibration and what the measured runs achieved */
    uint64_t size_bytes;            /* fixed-size and latency message size */
    uint64_t io_bytes;              /* effective largest read/write: -d, at most the largest message */
    double *rtt_us;                 /* latency trials */
    size_t nrtt;
    uint64_t bytes_client, bytes_server; /* totals over measured runs */
    struct nr_sysmon *mon;          /* client monitor (-c) */
    struct nr_sysmon_log server_log;
    bool have_server_log;
};

/* Writers (report.c). Each returns 0 or NR_E_IO with err filled. */
/* The stdout line of run i. */
void nr_tcptest_print_run(const struct nr_tcptest_result *r, size_t i);
/* The stdout lines after the last run: the latency summary, how many repetitions ran and why. */
void nr_tcptest_print_end(const struct nr_tcptest_result *r);
int nr_tcptest_write_output(const char *path, const struct nr_tcptest *o, const struct nr_tcptest_result *r,
                            struct nr_error *err);
int nr_tcptest_write_syslogs(const char *path, const struct nr_tcptest_result *r, struct nr_error *err);
int nr_tcptest_write_plot(const char *path, const struct nr_tcptest *o, const struct nr_tcptest_result *r,
                          struct nr_error *err);
int nr_tcptest_write_json(const char *path, const struct nr_tcptest *o, const struct nr_tcptest_result *r, int status,
                          const char *error, struct nr_error *err);

#endif
