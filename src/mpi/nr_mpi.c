/* Shared MPI layer of the MPI kernels: see nr_mpi.h. */
#include "nr_mpi.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nr/timer.h"

/* Seconds a failing rank leaves the launcher to forward its last words before MPI_Abort (nr_mpi_fail_loop). */
#define NR__ABORT_GRACE_S 0.2
/* Seconds every rank gives MPI_Finalize (and the agreement before it) once a watchdog runs. */
#define NR__FINALIZE_S 60.0

int nr_mpi_check(int mpi_rc, const char *what, struct nr_error *err)
{
    if (mpi_rc == MPI_SUCCESS)
        return NR_OK;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpi_rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", mpi_rc);
    return nr_error_set(err, NR_E_MPI, "%s: %s", what, msg);
}

/* Ranks on this rank's node, for the memory budget (1 when it cannot be told). MPI-3 asks the library; an MPI-1/2
 * library (LAM/MPI 7.1 is MPI 1.2) has no MPI_Comm_split_type, so there the ranks compare host names instead. */
static int count_local_ranks(const struct nr_mpi *m)
{
    int n = 1;
#if MPI_VERSION >= 3
    (void)m;    /* the library knows the node; only the MPI-1/2 path reads host names */
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &n);
        MPI_Comm_free(&node);
    }
#else
    char *all = malloc((size_t)m->size * NR_HOST_MAX);
    char mine[NR_HOST_MAX] = {0};
    snprintf(mine, sizeof mine, "%s", m->host);
    if (all && MPI_Allgather(mine, NR_HOST_MAX, MPI_CHAR, all, NR_HOST_MAX, MPI_CHAR, MPI_COMM_WORLD) == MPI_SUCCESS) {
        n = 0;
        for (int r = 0; r < m->size; r++)
            n += strncmp(all + (size_t)r * NR_HOST_MAX, mine, NR_HOST_MAX) == 0;
    }
    free(all);
#endif
    return n > 0 ? n : 1;
}

int nr_mpi_init(int *argc, char ***argv, struct nr_mpi *m, struct nr_error *err)
{
    memset(m, 0, sizeof *m);
    int rc = nr_mpi_check(MPI_Init(argc, argv), "MPI_Init", err);
    if (rc < 0)
        return rc;
    /* Until the handler is set a failure aborts the job, which is also an honest outcome. */
    if ((rc = nr_mpi_check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
                           err)) < 0 ||
        (rc = nr_mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &m->rank), "MPI_Comm_rank", err)) < 0 ||
        (rc = nr_mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &m->size), "MPI_Comm_size", err)) < 0)
        return rc;
    char full[NR_HOST_MAX];
    nr_hostname_short(nr_hostname(full, sizeof full), m->host, sizeof m->host);
    m->local_ranks = count_local_ranks(m);
    return NR_OK;
}

int nr_mpi_start(int *argc, char ***argv, const struct nr_opt_set *set, const char *const *json, const char *mode,
                 struct nr_mpi *m, struct nr_error *err)
{
    time_t started = time(NULL);
    int rc = nr_mpi_init(argc, argv, m, err);
    if (rc < 0)
        return rc;
    rc = nr_mpi_parse(set, *argc, *argv, err);
    nr_mpi_set_report(m, set->prog, *json, mode, started);
    return rc;
}

int nr_mpi_agree(int rc, struct nr_error *err)
{
    int me, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* The lowest failing rank speaks for all. */
    int mine = rc < 0 ? me : size, first = size;
    if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS)
        return rc < 0 ? rc : nr_error_set(err, NR_E_MPI, "MPI_Allreduce failed while agreeing on the status");
    if (first == size)
        return NR_OK;
    struct nr_error e = *err;
    if (me != first)
        memset(&e, 0, sizeof e);
    MPI_Bcast(&e, (int)sizeof e, MPI_BYTE, first, MPI_COMM_WORLD);
    if (first != 0 && e.detail[0]) {
        char tagged[sizeof e.detail + 32];
        snprintf(tagged, sizeof tagged, "rank %d: %s", first, e.detail);
        tagged[sizeof e.detail - 1] = '\0'; /* the tag may push the end of a long message out */
        memcpy(e.detail, tagged, sizeof e.detail);
    }
    *err = e;
    return e.code ? e.code : NR_E_INTERNAL;
}

int nr_mpi_parse(const struct nr_opt_set *set, int argc, char **argv, struct nr_error *err)
{
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    int positional = argc;
    int rc = nr_opt_parse(set, argc, argv, &positional, err);
    if (rc == NR_OK && positional < argc)
        rc = nr_error_set(err, NR_E_USAGE, "unexpected argument '%s'", argv[positional]);
    if (rc == NR_OPT_HELP && me == 0)
        nr_opt_help(set, stdout);
    if (rc == NR_OPT_VERSION && me == 0)
        printf("%s %s\n", set->prog, nr_version());
    if (rc > 0)
        return rc;
    return nr_mpi_agree(rc, err);
}

int nr_mpi_finish(const char *prog, int rc, struct nr_error *err)
{
    int me = 0, init = 0, fini = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fini);
    if (init && !fini) {
        nr_mpi_watch("the final agreement and MPI_Finalize", NR__FINALIZE_S);
        if (rc <= 0)
            rc = nr_mpi_agree(rc, err);
        MPI_Comm_rank(MPI_COMM_WORLD, &me);
    }
    if (rc < 0 && me == 0)
        nr_error_report(prog, err);
    fflush(stdout);
    if (init && !fini)
        MPI_Finalize();
    nr_mpi_watch_stop();
    return rc > 0 ? NR_EXIT_OK : nr_exit_status(rc);
}

uint64_t nr_mpi_memory_budget(const struct nr_mpi *m)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t phys = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : (uint64_t)1 << 32;
    return phys / 2 / (uint64_t)(m->local_ranks > 0 ? m->local_ranks : 1);
}

#if MPI_VERSION >= 3
/* Keep the first line of text, with runs of white space (MPICH separates its fields with tabs) made one space and
 * no white space at either end. */
static void nr__first_line(char *text)
{
    size_t o = 0;
    bool space = false;
    for (size_t i = 0; text[i] && text[i] != '\n' && text[i] != '\r'; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (isspace(ch) || ch < 0x20 || ch == 0x7f) {
            space = o > 0;
            continue;
        }
        if (space)
            text[o++] = ' ';
        space = false;
        text[o++] = (char)ch;
    }
    text[o] = '\0';
}
#endif

void nr_mpi_library(struct nr_mpi_library *lib)
{
    memset(lib, 0, sizeof *lib);
    int major = 0, minor = 0;
    if (MPI_Get_version(&major, &minor) == MPI_SUCCESS)
        snprintf(lib->standard, sizeof lib->standard, "%d.%d", major, minor);
#if MPI_VERSION >= 3
    char text[MPI_MAX_LIBRARY_VERSION_STRING + 1];
    int len = 0;
    if (MPI_Get_library_version(text, &len) == MPI_SUCCESS) {
        text[len < 0 ? 0 : len > MPI_MAX_LIBRARY_VERSION_STRING ? MPI_MAX_LIBRARY_VERSION_STRING : len] = '\0';
        nr__first_line(text);
        size_t n = strlen(text);
        if (n >= sizeof lib->library) { /* cut at a character boundary: never half a UTF-8 sequence */
            n = sizeof lib->library - 1;
            while (n > 0 && ((unsigned char)text[n] & 0xc0) == 0x80)
                n--;
        }
        memcpy(lib->library, text, n);
        lib->library[n] = '\0';
    }
#elif defined(LAM_MAJOR_VERSION) && defined(LAM_MINOR_VERSION) && defined(LAM_RELEASE_VERSION)
    /* MPI 1.2 has no MPI_Get_library_version: LAM/MPI names itself in its headers (lam_config.h via mpi.h). */
    snprintf(lib->library, sizeof lib->library, "LAM/MPI %d.%d.%d", LAM_MAJOR_VERSION, LAM_MINOR_VERSION,
             LAM_RELEASE_VERSION);
#endif
}

void nr_mpi_library_json(struct nr_json *j)
{
    struct nr_mpi_library lib;
    nr_mpi_library(&lib);
    nr_json_key(j, "mpi");
    nr_json_begin_object(j);
    nr_json_kv_string(j, "library", lib.library[0] ? lib.library : NULL);
    nr_json_kv_string(j, "standard", lib.standard[0] ? lib.standard : NULL);
    nr_json_end_object(j);
}

FILE *nr_mpi_json_begin(struct nr_json *j, const char *path, const char *tool, const char *mode, time_t started,
                        int status, const struct nr_error *failure)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    nr_json_init(j, f);
    char msg[320];
    struct nr_result_meta meta = {tool, mode, started, status,
                                  status ? nr_error_message(failure, msg, sizeof msg) : NULL};
    nr_result_json_begin(j, &meta);
    nr_mpi_library_json(j);
    return f;
}

int nr_mpi_json_end(struct nr_json *j, FILE *f)
{
    nr_json_end_object(j);
    int rc = nr_json_finish(j);
    return fclose(f) != 0 || rc != 0 ? -1 : 0;
}

void nr_mpi_set_report(struct nr_mpi *m, const char *prog, const char *json, const char *mode, time_t started)
{
    m->prog = prog;
    m->json = json;
    m->mode = mode;
    m->started = started;
}

void nr_mpi_fail_loop(const struct nr_mpi *m, struct nr_error *err)
{
    if (err->code == 0)
        nr_error_set(err, NR_E_INTERNAL, "a timed loop failed without an error");
    char tagged[sizeof err->detail + 128];
    snprintf(tagged, sizeof tagged, "rank %d: %s; ending every rank (the others wait inside the loop)", m->rank,
             err->detail);
    tagged[sizeof err->detail - 1] = '\0'; /* a long message loses its end, not the rank */
    memcpy(err->detail, tagged, sizeof err->detail);
    nr_error_report(m->prog ? m->prog : "netregress", err);
    if (m->json) {
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.rank%d.tmp", m->json, m->rank);
        struct nr_json j;
        FILE *f = nr_mpi_json_begin(&j, tmp, m->prog ? m->prog : "netregress", m->mode ? m->mode : "unknown",
                                    m->started, err->code, err);
        if (f) {
            nr_json_kv_int(&j, "failed_rank", m->rank);
            nr_json_kv_int(&j, "processes", m->size);
            if (nr_mpi_json_end(&j, f) == 0)
                rename(tmp, m->json);
            else
                unlink(tmp);
        }
    }
    fflush(stdout);
    fflush(stderr);
    /* The launcher's output forwarding (Hydra's proxy, srun) may end before it has passed on what this rank just
     * wrote once MPI_Abort kills the job: MPICH's mpiexec lost the message above in 2 of 30 four-rank runs under
     * ASan (4 of 20 on a loaded machine), 0 of 30 with this pause. A moment first, on this failure path only. */
    nr_sleep_s(NR__ABORT_GRACE_S);
    MPI_Abort(MPI_COMM_WORLD, NR_EXIT_RUNTIME);
    _exit(NR_EXIT_RUNTIME); /* MPI_Abort does not return; if a library's does, end this rank anyway */
}
