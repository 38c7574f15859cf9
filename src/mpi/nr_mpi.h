/* The MPI layer shared by nr-mpitest, nr-mpicoll and nr-ebb: start-up, option parsing on every rank, checked MPI
 * calls, and the one rule every front end follows for errors: a failure on any rank is agreed on by all ranks
 * (collectively), reported once by rank 0 with the failing rank's message, and every rank exits with the same
 * non-zero status. No rank waits forever for a peer that has already given up.
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
};

/* MPI_Init with errors returned (not fatal) on MPI_COMM_WORLD; fills m. */
int nr_mpi_init(int *argc, char ***argv, struct nr_mpi *m, struct nr_error *err);

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

/* Bytes this rank may allocate: half the node's memory shared among the node's ranks. */
uint64_t nr_mpi_memory_budget(const struct nr_mpi *m);

/* Rank 0's result document: open `path` and write the common head (schema, tool, mode, status, the failure's
 * message when status != 0, started_utc). Returns the file, or NULL when it cannot be written. */
FILE *nr_mpi_json_begin(struct nr_json *j, const char *path, const char *tool, const char *mode, time_t started,
                        int status, const struct nr_error *failure);
/* Close the top-level object and the file: 0 on success, -1 when the document or the file is incomplete. */
int nr_mpi_json_end(struct nr_json *j, FILE *f);

#endif
