/* nr-linkmap: options, set-up and the end of the job (the program: linkmap.h). */
#include "linkmap.h"

/* Rank 0: where the matrix files go: --matrix, else linkmatrix.bin beside --json; linkrtt.bin beside the matrix. */
static int lm_matrix_paths(struct lm_ctx *c, struct nr_error *err)
{
    const char *given = c->o->matrix, *beside = given ? given : c->o->json;
    if (!beside)
        return NR_OK;
    const char *slash = strrchr(beside, '/');
    const int dir = slash ? (int)(slash - beside) + 1 : 0;
    if ((given ? snprintf(c->matrix_path, sizeof c->matrix_path, "%s", given)
               : snprintf(c->matrix_path, sizeof c->matrix_path, "%.*s%s", dir, beside, LM_MATRIX_FILE)) >=
            (int)sizeof c->matrix_path ||
        snprintf(c->rtt_path, sizeof c->rtt_path, "%.*s%s", dir, beside, LM_RTT_FILE) >= (int)sizeof c->rtt_path)
        return nr_error_set(err, NR_E_USAGE, "--matrix/--json: path too long: '%s'", beside);
    return NR_OK;
}

/* Every rank's buffers; rank 0's per-rank state, its view of the hosts and its plan. Collective. */
static int lm_setup(struct lm_ctx *c, struct nr_error *err)
{
    const struct lm_opts *o = c->o;
    const int n = c->m->size, me = c->m->rank;
    const bool root = me == 0;
    int rc = NR_OK;
    if (strcmp(o->transport, "mpi") == 0)
        c->transport = LM_MPI;
    else if (strcmp(o->transport, "tcp") == 0)
        c->transport = LM_TCP;
    else
        rc = nr_error_set(err, NR_E_USAGE, "--transport: '%s' is neither mpi nor tcp", o->transport);
    if (rc == NR_OK && strcmp(o->plan, "shift") != 0)
        rc = nr_error_set(err, NR_E_USAGE, "--plan: unknown plan '%s' (shift; or --plan-file FILE)", o->plan);
    else if (rc == NR_OK && o->plan_file && (o->order || o->shifts))
        rc = nr_error_set(err, NR_E_USAGE, "--order and --shifts shape --plan shift, not --plan-file");
    else if (rc == NR_OK && c->transport == LM_TCP && !o->iface == !o->addr)
        rc = nr_error_set(err, NR_E_USAGE, "--transport tcp needs one of --bind-iface IFACE and --bind-addr ADDR");
    else if (rc == NR_OK && c->transport == LM_MPI && (o->iface || o->addr))
        rc = nr_error_set(err, NR_E_USAGE, "--bind-iface and --bind-addr go with --transport tcp");
    else if (rc == NR_OK && c->rt <= o->time_s)
        rc = nr_error_set(err, NR_E_USAGE, "--round-timeout (%.3g s) must be longer than -t (%.3g s)", c->rt,
                          o->time_s);
    else if (rc == NR_OK && n < 2)
        rc = nr_error_set(err, NR_E_USAGE, "needs at least 2 MPI ranks (one per node), got %d", n);
    uint64_t need = (uint64_t)(o->window + 2) * o->msg + 2 * o->rtt_size;
    if (rc == NR_OK && need > nr_mpi_memory_budget(c->m))
        rc = nr_error_set(err, NR_E_RANGE, "-m %llu with -w %d needs more memory than this node allows a rank",
                          (unsigned long long)o->msg, o->window);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    const int w = o->window, many = root && n > w + 2 ? n : w + 2; /* rank 0 waits on every rank at once */
    const size_t ctl = LM_CTL_OWN + (root ? (size_t)(LM_CTL_GROUPS - 1) * (size_t)n : 0);
    c->rbuf_bytes = c->transport == LM_MPI ? (size_t)w * o->msg : o->msg;
    c->sbuf = LM_PAYLOAD_ALLOC(o->msg);
    c->rbuf = malloc(c->rbuf_bytes);
    c->rtt_out = malloc(o->rtt_size);
    c->rtt_in = malloc(o->rtt_size);
    c->rtt_samples = malloc(sizeof(double) * (size_t)o->rtt_trials);
    c->sreq = malloc(sizeof(MPI_Request) * (size_t)many);
    c->rreq = malloc(sizeof(MPI_Request) * (size_t)(w + 1));
    c->creq = malloc(sizeof(MPI_Request) * (size_t)(root ? n : 1));
    c->st = malloc(sizeof(MPI_Status) * (size_t)many);
    c->idx = malloc(sizeof(int) * (size_t)many);
    c->rseq = malloc(sizeof(long long) * (size_t)w);
    c->ctl = malloc(sizeof(MPI_Request) * ctl);
    c->ctl_idx = malloc(sizeof(int) * (size_t)(root && n > LM_CTL_OWN ? n : LM_CTL_OWN));
    c->ctl_st = malloc(sizeof(MPI_Status) * (size_t)(root && n > LM_CTL_OWN ? n : LM_CTL_OWN));
    for (size_t i = 0; c->ctl && i < ctl; i++)
        c->ctl[i] = MPI_REQUEST_NULL;
    bool have = c->sbuf && c->rbuf && c->rtt_out && c->rtt_in && c->rtt_samples && c->sreq && c->rreq && c->creq &&
                c->st && c->idx && c->rseq && c->ctl && c->ctl_idx && c->ctl_st;
    if (root) {
        c->hosts = calloc((size_t)n, sizeof *c->hosts);
        c->missing = calloc((size_t)n, 1);
        c->reports = calloc((size_t)n, sizeof *c->reports);
        c->ready_in = calloc((size_t)n, sizeof(int));
        c->cpu_first = calloc((size_t)n, sizeof *c->cpu_first);
        c->cpu_last = calloc((size_t)n, sizeof *c->cpu_last);
        c->dec = calloc(4 * (size_t)n, sizeof *c->dec);
        c->dst_of = malloc(sizeof(int) * (size_t)n);
        c->src_of = malloc(sizeof(int) * (size_t)n);
        c->prev_of = malloc(sizeof(int) * (size_t)n);
        c->next_of = malloc(sizeof(int) * (size_t)n);
        have = have && c->hosts && c->missing && c->reports && c->ready_in && c->cpu_first && c->cpu_last && c->dec &&
               c->dst_of && c->src_of && c->prev_of && c->next_of;
    }
    if (!have)
        rc = nr_error_set(err, NR_E_NOMEM, "out of memory");
    if (rc == NR_OK) { /* written before anything runs: no shared zero page in any transfer */
        if (!LM_SIMULATED) {
            nr_buffer_fill(c->sbuf, o->msg, (uint32_t)me);
            nr_buffer_fill(c->rbuf, c->rbuf_bytes, (uint32_t)me + 1000u);
        }
        nr_buffer_fill(c->rtt_out, o->rtt_size, (uint32_t)me + 2000u);
        nr_buffer_fill(c->rtt_in, o->rtt_size, (uint32_t)me + 3000u);
    }
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    /* every rank's node, as MPI names it, to rank 0; rank 0's to every rank */
    char name[MPI_MAX_PROCESSOR_NAME + 1] = "";
    int len = 0;
    if (MPI_Get_processor_name(name, &len) == MPI_SUCCESS && len > 0) {
        size_t l = (size_t)(len < MPI_MAX_PROCESSOR_NAME ? len : MPI_MAX_PROCESSOR_NAME);
        l = l < sizeof c->my_host - 1 ? l : sizeof c->my_host - 1;
        memcpy(c->my_host, name, l);
        c->my_host[l] = '\0';
    } else
        snprintf(c->my_host, sizeof c->my_host, "%s", c->m->host);
    snprintf(c->root_host, sizeof c->root_host, "%s", c->my_host);
    rc = nr_mpi_check(MPI_Gather(c->my_host, NR_HOST_MAX, MPI_CHAR, root ? (void *)c->hosts : NULL, NR_HOST_MAX,
                                 MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Gather (host names)", err);
    if (rc == NR_OK)
        rc = nr_mpi_check(MPI_Bcast(c->root_host, NR_HOST_MAX, MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast (host name)",
                          err);
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    /* the plan, the matrix and where it goes: rank 0's alone */
    if (root && (rc = lm_plan_open(c, err)) == NR_OK && (!o->tree || (rc = lm_tree_open(c, err)) == NR_OK) &&
        (rc = lm_matrix_paths(c, err)) == NR_OK && (rc = lm_matrix_alloc(c, err)) == NR_OK) {
        c->nrounds = c->nplanned;
        c->rounds_cap = c->nplanned;
        if (!(c->rounds = calloc((size_t)c->rounds_cap, sizeof *c->rounds)))
            rc = nr_error_set(err, NR_E_NOMEM, "out of memory for the rounds");
    }
    if ((rc = nr_mpi_agree(rc, err)) < 0)
        return rc;
    if (c->transport == LM_TCP)
        rc = lm_tcp_setup(c, err);
    return rc;
}

int main(int argc, char **argv)
{
    struct nr_error err = {0};
    struct nr_mpi mpi;
    time_t started = time(NULL);
    int rc = nr_mpi_init(&argc, &argv, &mpi, &err);
    if (rc < 0)
        return nr_mpi_finish(NR__PROG, rc, &err);
    struct lm_opts o = {.plan = "shift", .transport = "mpi", .msg = 1048576, .window = 8, .time_s = 1.0, .warmup = 0.2,
                        .rtt_size = 8, .rtt_trials = 20, .recheck_max = 10000, .recheck_rounds = 64, .suspect_max = 10000, .slowest = 5};
    const struct nr_opt opts[] = {
        {NR_OPT_SECTION, 0, NULL, NULL, NULL, "What is measured", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "plan", &o.plan, "NAME", "the rounds: shift (round k: position i sends to i+k mod N)", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "order", &o.order, "FILE", "shift: the positions, every rank once by rank or host (the switch tree's order)", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "shifts", &o.shifts, "LIST", "shift: the rounds' shifts, e.g. 1-5,9 (default: 1 .. N-1)", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "plan-file", &o.plan_file, "FILE", "the rounds from a file: one round per line of SRC>DST (rank or host; docs/mpi.md)", 0, 0, NULL, NULL},
        {NR_OPT_SIZE, 'm', "message-size", &o.msg, "SIZE", "message size (MPI) / write size (TCP)", LM_MSG_MIN, 1073741824.0, NULL, NULL},
        {NR_OPT_INT, 'w', "window", &o.window, "N", "MPI messages in flight per pair", 1, 64, NULL, NULL},
        {NR_OPT_DOUBLE, 't', "time", &o.time_s, "SECONDS", "each round's transfer time (senders send until then)", 0.01, 3600, NULL, NULL},
        {NR_OPT_DOUBLE, 0, "warmup", &o.warmup, "FRACTION", "share of -t at a stream's start left out of steady_mbps", 0, 0.9, NULL, "0.2"},
        {NR_OPT_DOUBLE, 0, "round-timeout", &o.round_timeout_s, "SECONDS", "a pair not done by then has failed (0: 10 x -t + 5)", 0, 86400, NULL, "0"},
        {NR_OPT_FLAG, 0, "rtt", &o.rtt, NULL, "also a small-message round trip per pair, one pair at a time", 0, 0, NULL, NULL},
        {NR_OPT_SIZE, 0, "rtt-size", &o.rtt_size, "SIZE", "round-trip message size", 1, 1048576, NULL, NULL},
        {NR_OPT_INT, 0, "rtt-trials", &o.rtt_trials, "N", "timed round trips per pair (median reported)", 1, 10000, NULL, NULL},
        {NR_OPT_DOUBLE, 0, "recheck-below", &o.recheck_below, "F", "measure again each direction below F x the median link, in batches halved down to alone while slow (0: off)", 0, 1, NULL, "0"},
        {NR_OPT_INT, 0, "recheck-max", &o.recheck_max, "N", "directions measured again at most (slowest first)", 0, 100000, NULL, NULL},
        {NR_OPT_INT, 0, "recheck-rounds", &o.recheck_rounds, "N", "recheck rounds at most", 0, 1000000, NULL, NULL},
        {NR_OPT_INT, 0, "recheck-streams", &o.recheck_streams, "N", "streams in a recheck round at most (0: as many as share no node or cable)", 0, 10000000, NULL, "0"},
        {NR_OPT_STRING, 0, "tree", &o.tree, "FILE", "the switch tree, NODE LEAF CABLE a line (the uplink cable a stream to NODE takes): recheck batches share no cable", 0, 0, NULL, NULL},
        {NR_OPT_DOUBLE, 0, "time-limit", &o.time_limit_s, "SECONDS", "no recheck round starts that could end the job after this (0: none; also SLURM_JOB_END_TIME)", 0, 1e9, NULL, "0"},
        {NR_OPT_SECTION, 0, NULL, NULL, NULL, "Transport", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "transport", &o.transport, "mpi|tcp", "data over MPI, or over TCP with MPI as control plane", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "bind-iface", &o.iface, "IFACE", "tcp: listen and connect on this interface's IPv4 address", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "bind-addr", &o.addr, "ADDR", "tcp: this IPv4 address on every rank (one host)", 0, 0, NULL, NULL},
        {NR_OPT_SECTION, 0, NULL, NULL, NULL, "Output", 0, 0, NULL, NULL},
        {NR_OPT_INT, 0, "slowest", &o.slowest, "N", "slowest directions listed", 0, 1000, NULL, NULL},
        {NR_OPT_DOUBLE, 0, "suspect-below", &o.suspect_below, "F", "the JSON lists each direction below F x the median link (0: --recheck-below, else 0.85)", 0, 1, NULL, "0"},
        {NR_OPT_INT, 0, "suspect-max", &o.suspect_max, "N", "suspect directions listed at most (slowest first)", 0, 100000000, NULL, NULL},
        {NR_OPT_STRING, 0, "json", &o.json, "FILE", "machine-readable results (docs/json-schema.md)", 0, 0, NULL, NULL},
        {NR_OPT_STRING, 0, "matrix", &o.matrix, "FILE", "the matrix: dense, 4 bytes a direction of N x N, or sparse, 8 a direction measured (default: linkmatrix.bin beside --json)", 0, 0, NULL, NULL},
        {NR_OPT_END, 0, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL},
    };
    const struct nr_opt_set set = {
        NR__PROG, "[OPTIONS]",
        "Link test of a whole partition as one MPI job (one rank per node): in every round each rank sends to one "
        "rank and receives from one, all at once; the result is the N x N matrix of directed-pair bandwidths, "
        "kept in binary (--matrix), with the suspect directions in the JSON.",
        opts,
        "Examples:\n  srun -N 400 --ntasks-per-node=1 nr-linkmap -t 1 --order tree.txt --json linkmap.json\n"
        "  mpirun -np 4 nr-linkmap --transport tcp --bind-iface eth1 --rtt\n"};
    struct lm_ctx c;
    memset(&c, 0, sizeof c);
    c.o = &o, c.m = &mpi, c.lfd = -1, c.recheck_median = NAN;
    rc = nr_mpi_parse(&set, argc, argv, &err);
    nr_mpi_set_report(&mpi, NR__PROG, o.json, "linkmap", started);
#ifdef NR_LINKMAP_FAULTS
    if (rc == NR_OK && getenv("NR_LINKMAP_FAULT")) {
        for (const char *f = getenv("NR_LINKMAP_FAULT"); rc == NR_OK && *f; f = strchr(f, ',') ? strchr(f, ',') + 1 : "") {
            char k[8] = "";
            int a = 0, b = 0;
            double ms = 0;
            const int got = sscanf(f, "%7[a-z]:%d:%d:%lf", k, &a, &b, &ms);
            if (got < 3 || (strcmp(k, "stall") != 0 && strcmp(k, "hang") != 0 && strcmp(k, "slow") != 0) ||
                (strcmp(k, "slow") == 0 && (got != 4 || !(ms > 0))))
                rc = nr_error_set(&err, NR_E_USAGE, "NR_LINKMAP_FAULT: stall:RANK:ROUND, hang:RANK:ROUND:SECONDS or "
                                  "slow:RANK:ROUND:MS (RANK, ROUND -1: every one), separated by commas");
        }
        rc = nr_mpi_agree(rc, &err);
    }
#endif
    if (rc == NR_OK) {
        c.rt = o.round_timeout_s > 0 ? o.round_timeout_s : 10 * o.time_s + 5;
        rc = lm_setup(&c, &err);
    }
    if (rc == NR_OK && mpi.rank == 0) {
        char sz[32];
        printf("# nr-linkmap %s: %d ranks, plan %s%s%s (%d rounds), transport %s, -m %s%s, -t %g s per round, "
               "round timeout %g s%s\n", nr_version(), mpi.size, c.plan_name, o.order ? " in the order of " : "",
               o.order ? o.order : "", c.nrounds, c.transport == LM_TCP ? "tcp" : "mpi",
               nr_size_format(o.msg, sz, sizeof sz), c.transport == LM_MPI ? "" : " writes", o.time_s, c.rt,
               o.rtt ? ", round trips" : "");
        for (int r = 0; c.transport == LM_TCP && r < mpi.size && mpi.size <= 64; r++) {
            char ep[64];
            printf("# tcp: rank %d (%s) listens on %s\n", r, c.hosts[r], lm_endpoint_str(&c, r, ep, sizeof ep));
        }
        fflush(stdout);
    }
    if (rc == NR_OK) {
        c.started_s = MPI_Wtime();
        nr_cpu_limit_read(&c.cpu_start);
        rc = lm_run(&c, started, &err);
    }
    if (rc == NR_OK && mpi.rank == 0) {
        lm_print_table(&c);
        if (c.nfailures)
            rc = nr_error_set(&err, NR_E_NET, "%zu of %llu streams failed; the first: %s", c.nfailures,
                              (unsigned long long)c.streams, c.failures[0].error ? c.failures[0].error : "?");
    }
    if (rc <= 0 && mpi.rank == 0 && lm_write_json(&c, started, rc, &err) != 0 && rc == NR_OK)
        rc = nr_error_sys(&err, NR_E_IO, "cannot write '%s'", o.json ? o.json : c.matrix_path);
    lm_ctl_release(&c);
    for (int i = 0; i < c.npending; i++)
        close(c.pending[i].fd);
    if (c.lfd >= 0)
        close(c.lfd);
    lm_plan_close(&c.plan);
    lm_matrix_free(&c);
    free(c.dec), free(c.dst_of), free(c.src_of), free(c.prev_of), free(c.next_of);
    free(c.rounds), free(c.hosts), free(c.sbuf), free(c.rbuf), free(c.rtt_out);
    free(c.rtt_in), free(c.rtt_samples), free(c.sreq), free(c.rreq), free(c.creq), free(c.st), free(c.idx);
    free(c.rseq), free(c.missing), free(c.reports), free(c.ready_in), free(c.addr), free(c.port), free(c.ctl);
    free(c.ctl_idx), free(c.ctl_st), free(c.cpu_first), free(c.cpu_last);
    lm_recheck_free(&c);
    return nr_mpi_finish(NR__PROG, rc, &err);
}
