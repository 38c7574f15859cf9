/* Linux system monitor from /proc, and the Hpcbench system-log layout.
 *
 * A sampler (struct nr_sysmon) reads cumulative counters: /proc/stat (per-CPU user/system/idle jiffies, total
 * interrupts, context switches), /proc/vmstat (pages and swap in/out), /proc/meminfo (memory in use =
 * MemTotal - MemAvailable), /proc/net/dev (packets and bytes per interface) and /proc/interrupts (interrupts of
 * each interface's IRQs per CPU; an interface's IRQs are those listed in its device's msi_irqs in sysfs and
 * those whose /proc/interrupts action names the interface or its device, e.g. "eth0-rx-0" or "virtio2-input.0").
 *
 * nr_sysmon_record() appends one row to the log: the change of every counter since the previous mark, and CPU
 * percentages over that interval. A front end records a pre-test row, one row per repetition and a post-test row
 * (Hpcbench: "two more entries than test repetition"). Sampling reads files: never do it inside a timed loop.
 *
 * A log can be written in the Hpcbench layout (FILE.c_log / FILE.s_log), as JSON, and serialised to a compact
 * text form and parsed back, so a peer (TCP server, secondary MPI rank) can ship its log to the side that
 * writes the files. The parser treats its input as untrusted and enforces the NR_SYSMON_MAX_* limits.
 */
#ifndef NR_SYSMON_H
#define NR_SYSMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "nr/host.h"

struct nr_error;
struct nr_json;

#define NR_SYSMON_MAX_CPUS 4096  /* most CPUs a log may describe */
#define NR_SYSMON_MAX_IFS 32     /* most network interfaces a log may describe */
#define NR_SYSMON_IFNAME_MAX 32  /* interface name buffer, including the NUL */
#define NR_SYSMON_MAX_ROWS 10002 /* most rows a log may hold (repetitions + 2) */

/* One interval of the log: system-wide values (per-CPU and per-interface values are in the log arrays). */
struct nr_sysmon_row {
    double interval_s;   /* length of the interval */
    double load_pct;     /* all CPUs: 100 - idle% (idle includes iowait) */
    double user_pct;     /* all CPUs: user + nice */
    double sys_pct;      /* all CPUs: system + irq + softirq + steal */
    double mem_used_pct; /* (MemTotal - MemAvailable) / MemTotal at the end of the interval */
    uint64_t interrupts; /* all interrupts, all CPUs */
    uint64_t page_in, page_out, swap_in, swap_out; /* pages (vmstat pgpgin/pgpgout/pswpin/pswpout) */
    uint64_t ctxt;       /* context switches */
};

/* Per-interface counters of one row. */
struct nr_sysmon_net {
    uint64_t rx_packets, rx_bytes, tx_packets, tx_bytes;
};

struct nr_sysmon_log {
    char host[NR_HOST_MAX]; /* the host that was monitored */
    time_t started;         /* wall-clock time the monitor was opened (for the header only) */
    int ncpu;               /* CPUs */
    int nif;                /* interfaces */
    char ifname[NR_SYSMON_MAX_IFS][NR_SYSMON_IFNAME_MAX];
    size_t nrows, cap;      /* rows used / allocated */
    struct nr_sysmon_row *rows;   /* [nrows] */
    double *cpu_pct;              /* [nrows][ncpu][3]: load, user, sys in percent */
    struct nr_sysmon_net *net;    /* [nrows][nif] */
    uint64_t *irq;                /* [nrows][nif][ncpu]: interrupts of the interface's IRQs per CPU */
};

/* Opaque sampler. */
struct nr_sysmon;

/* Discover CPUs and interfaces, take the first sample as the mark. Returns 0, NR_E_UNSUPPORTED (no /proc),
 * NR_E_NOMEM, NR_E_IO. */
int nr_sysmon_open(struct nr_sysmon **out, struct nr_error *err);

/* Take a sample and make it the start of the next interval (discarding the time since the last mark). */
int nr_sysmon_mark(struct nr_sysmon *m, struct nr_error *err);

/* Take a sample, append the row "now - mark" to the log, and make now the new mark. */
int nr_sysmon_record(struct nr_sysmon *m, struct nr_error *err);

/* The log recorded so far (owned by the sampler). */
const struct nr_sysmon_log *nr_sysmon_get_log(const struct nr_sysmon *m);

void nr_sysmon_close(struct nr_sysmon *m);

/* Empty log / free a log's arrays (not the struct itself). */
void nr_sysmon_log_init(struct nr_sysmon_log *log);
void nr_sysmon_log_free(struct nr_sysmon_log *log);

/* Write the log in the Hpcbench layout: header, one table per interface, the CPU workload distribution.
 * Returns 0 or NR_E_IO. */
int nr_sysmon_log_write(FILE *f, const struct nr_sysmon_log *log);

/* Write the log as a JSON value under key (object with host, ncpu, interfaces, rows). */
void nr_sysmon_log_json(struct nr_json *j, const char *key, const struct nr_sysmon_log *log);

/* Serialise to a malloc'ed NUL-terminated text (*len = strlen). Returns NULL when out of memory. */
char *nr_sysmon_log_serialize(const struct nr_sysmon_log *log, size_t *len);

/* Parse text produced by nr_sysmon_log_serialize (untrusted: every count is checked against the limits, the
 * numbers must be well formed and the text must end exactly after the last row). *out must be initialised;
 * its previous content is freed. Returns 0, NR_E_PROTO (malformed, with a detail) or NR_E_NOMEM. */
int nr_sysmon_log_parse(const char *text, size_t len, struct nr_sysmon_log *out, struct nr_error *err);

#endif
