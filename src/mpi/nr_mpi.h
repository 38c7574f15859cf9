/* The MPI layer shared by nr-mpitest, nr-mpicoll and nr-ebb: start-up, option parsing on every rank, checked MPI
 * calls, and the one rule every front end follows for errors: a failure on any rank is agreed on by all ranks
 * (collectively), reported once by rank 0 with the failing rank's message, and every rank exits with the same
 * non-zero status. No rank waits forever for a peer that has already given up: a failure inside a timed loop, where
 * the partner (or every other rank) is inside a call this rank will not make again and no collective agreement can
 * be reached, ends the whole job at once (nr_mpi_fail_loop: the failing rank reports the error, writes the error
 * document itself and calls MPI_Abort).
 */
#ifndef NR_MPI_H
#define NR_MPI_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "nr/core.h"

/* The kernels are written against MPI 3; two gaps of older libraries (LAM/MPI 7.1.4 is MPI 1.2) are bridged here,
 * chosen by the standard's own MPI_VERSION / MPI_SUBVERSION macros:
 *   NR_MPI_UINT64   MPI_UINT64_T (MPI 2.2) or, before it, MPI_UNSIGNED_LONG_LONG (checked to be 64 bits);
 *   NR_MPI_IN(p)    a send buffer: MPI 3 declares them const, older headers do not, so a const pointer is cast. */
#if MPI_VERSION > 2 || (MPI_VERSION == 2 && MPI_SUBVERSION >= 2)
#define NR_MPI_UINT64 MPI_UINT64_T
#else
#define NR_MPI_UINT64 MPI_UNSIGNED_LONG_LONG
_Static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "MPI_UNSIGNED_LONG_LONG stands in for uint64_t");
#endif
#if MPI_VERSION >= 3
#define NR_MPI_IN(p) (p)
#else
#define NR_MPI_IN(p) ((void *)(uintptr_t)(p))
#endif

struct nr_mpi {
    int rank;                     /* rank in MPI_COMM_WORLD */
    int size;                     /* number of ranks */
    char host[NR_HOST_MAX];       /* this rank's host name (short) */
    int local_ranks;              /* ranks sharing this rank's node (memory budget) */
    /* what nr_mpi_fail_loop() needs to report a failure by itself (nr_mpi_set_report) */
    const char *prog;             /* "nr-ebb" */
    const char *json;             /* --json FILE, NULL = none */
    const char *mode;             /* the JSON mode */
    time_t started;               /* the run's start (started_utc) */
};

/* Record what a failing rank needs to report alone (the kernel calls it once its options are parsed). */
void nr_mpi_set_report(struct nr_mpi *m, const char *prog, const char *json, const char *mode, time_t started);

/* A failure inside a timed loop: the other ranks are inside calls this rank will not make, so agreeing on the
 * failure would wait forever. This rank names itself in err ("rank N: ..."), prints it once, writes the error
 * document to m->json (status "error", the message, "failed_rank"; written to a temporary file and renamed, so
 * the file is whole whichever rank writes it) and ends every rank with MPI_Abort (exit status 1). Never returns. */
#if defined(__GNUC__)
__attribute__((noreturn))
#endif
void nr_mpi_fail_loop(const struct nr_mpi *m, struct nr_error *err);

/* MPI_Init with errors returned (not fatal) on MPI_COMM_WORLD; fills m. */
int nr_mpi_init(int *argc, char ***argv, struct nr_mpi *m, struct nr_error *err);

/* The start every kernel's main shares: MPI_Init (nr_mpi_init), the options parsed on every rank and agreed on
 * (nr_mpi_parse), and what a failing rank reports alone (nr_mpi_set_report: set->prog, *json once parsed, mode and
 * the start time). Returns as nr_mpi_parse does, or nr_mpi_init's error; end with nr_mpi_finish either way. */
int nr_mpi_start(int *argc, char ***argv, const struct nr_opt_set *set, const char *const *json, const char *mode,
                 struct nr_mpi *m, struct nr_error *err);

/* Turn an MPI return code into NR_E_MPI with the library's message; NR_OK for MPI_SUCCESS. */
int nr_mpi_check(int mpi_rc, const char *what, struct nr_error *err);

/* Collective: every rank passes its own status; returns the lowest failing rank's code on every rank (NR_OK when
 * all succeeded) and copies that rank's error into err everywhere. */
int nr_mpi_agree(int rc, struct nr_error *err);

/* Parse the options on every rank (argv is the same everywhere) and agree on the outcome. Returns NR_OK,
 * NR_OPT_HELP / NR_OPT_VERSION (rank 0 printed them), or a negative code (agreed). */
int nr_mpi_parse(const struct nr_opt_set *set, int argc, char **argv, struct nr_error *err);

/* Agree on rc, let rank 0 report a failure, finalize, and return the process exit status. */
int nr_mpi_finish(const char *prog, int rc, struct nr_error *err);

/* Deadlines (nr_watch.c). Every blocking phase of a kernel has one: a rank whose phase lasts longer than its budget
 * (a stopped or frozen rank or node) ends the job within the budget plus 6 s (the probe's patience and the abort;
 * 16 s more when rank 0 is the one stopped: NR_MPI_WATCH_SLACK_S in all), with one line that names the phase and the
 * ranks (and nodes) that did not answer, the error document (--json, "failed_rank") and exit status 1. When every
 * rank answers (alive: slow, or a hung library or network) rank 0 waits four budgets more, saying so, first. A
 * watchdog thread per rank does this without MPI: it answers probes over TCP (a stopped process cannot), and when the
 * deadline passes rank 0 probes every rank, or rank 1 probes rank 0 (nr_watch.c says how). Nothing runs in the timed
 * loops: a phase is armed before it starts. */
#define NR_MPI_WATCH_SLACK_S 25.0

/* Collective: listen for probes, exchange the endpoints, start the thread, and arm the first phase. */
int nr_mpi_watch_start(struct nr_mpi *m, double budget_s, const char *phase, struct nr_error *err);

/* A new phase (what the error line names) with budget_s seconds from now (<= 0: no deadline). Local and cheap;
 * call it outside timed loops. */
void nr_mpi_watch(const char *phase, double budget_s);

/* End the thread and close the listener (no-op when not started). */
void nr_mpi_watch_stop(void);

/* Bytes this rank may allocate: half the node's memory shared among the node's ranks. */
uint64_t nr_mpi_memory_budget(const struct nr_mpi *m);

/* The MPI library this kernel runs with, as the library names itself. */
#define NR_MPI_LIBRARY_MAX 256
struct nr_mpi_library {
    char library[NR_MPI_LIBRARY_MAX]; /* MPI_Get_library_version's first line, white space made single spaces;
                                         LAM/MPI (MPI 1.2, no such call): "LAM/MPI 7.1.4" from its headers; "" when
                                         unknown */
    char standard[16];                /* MPI_Get_version: "3.1" */
};
void nr_mpi_library(struct nr_mpi_library *lib);

/* "mpi": {"library": .. (null when unknown), "standard": "3.1"} */
void nr_mpi_library_json(struct nr_json *j);

/* Rank 0's result document: open `path` and write the common head (schema, tool, mode, status, the failure's
 * message when status != 0, started_utc) and the MPI library ("mpi"). Returns the file, or NULL when it cannot be
 * written. */
FILE *nr_mpi_json_begin(struct nr_json *j, const char *path, const char *tool, const char *mode, time_t started,
                        int status, const struct nr_error *failure);
/* Close the top-level object and the file: 0 on success, -1 when the document or the file is incomplete. */
int nr_mpi_json_end(struct nr_json *j, FILE *f);

#endif
