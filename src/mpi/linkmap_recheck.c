/* nr-linkmap: the rechecks, the slow directions measured again in batches that halve down to alone (see linkmap.h). */
#include "linkmap.h"

#define LM_TREE_MAX 100000000L /* leaf switches x cables told apart, at most */

const char *lm_rc_state_name(enum lm_rc_state s)
{
    switch (s) {
    case LM_RC_PENDING:
        return "pending";
    case LM_RC_CLEARED:
        return "cleared";
    case LM_RC_SPLIT:
        return "split";
    case LM_RC_SLOW:
        return "slow";
    case LM_RC_FAILED:
        return "failed";
    }
    return "?";
}

/* ---- --tree FILE: NODE LEAF CABLE a line ---- */

/* A non-negative integer below `limit` from tok, else -1. */
static long lm_tree_number(const char *tok, long limit)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(tok, &end, 10);
    return end != tok && !*end && errno == 0 && v >= 0 && v < limit ? v : -1;
}

int lm_tree_open(struct lm_ctx *c, struct nr_error *err)
{
    const int n = c->m->size;
    const char *path = c->o->tree;
    FILE *f = fopen(path, "r");
    if (!f)
        return nr_error_sys(err, NR_E_USAGE, "cannot read tree file '%s'", path);
    c->tree_leaf = malloc(sizeof(int) * (size_t)n);
    c->tree_cable = malloc(sizeof(int) * (size_t)n);
    int rc = c->tree_leaf && c->tree_cable ? NR_OK : nr_error_set(err, NR_E_NOMEM, "out of memory for the tree");
    for (int r = 0; rc == NR_OK && r < n; r++)
        c->tree_leaf[r] = c->tree_cable[r] = -1;
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0, leaves = 0, cables = 0;
    while (rc == NR_OK && getline(&line, &cap, f) >= 0) {
        char where[300], *save = NULL, *hash = strchr(line, '#');
        snprintf(where, sizeof where, "tree file '%s' line %ld", path, ++lineno);
        if (hash)
            *hash = '\0';
        char *node = strtok_r(line, " \t\r\n", &save);
        if (!node)
            continue;
        char *leaf = strtok_r(NULL, " \t\r\n", &save), *cable = strtok_r(NULL, " \t\r\n", &save);
        const long l = leaf ? lm_tree_number(leaf, 1000000) : -1, u = cable ? lm_tree_number(cable, 100000) : -1;
        int r = -1;
        if (l < 0 || u < 0 || strtok_r(NULL, " \t\r\n", &save))
            rc = nr_error_set(err, NR_E_USAGE, "%s: expected NODE LEAF CABLE (leaf and cable numbers from 0)", where);
        else if ((rc = lm_endpoint(c, node, where, &r, err)) == NR_OK && c->tree_leaf[r] >= 0)
            rc = nr_error_set(err, NR_E_USAGE, "%s: rank %d (%s) is listed twice", where, r, c->hosts[r]);
        if (rc != NR_OK)
            break;
        c->tree_leaf[r] = (int)l, c->tree_cable[r] = (int)u;
        leaves = l + 1 > leaves ? l + 1 : leaves, cables = u + 1 > cables ? u + 1 : cables;
    }
    if (rc == NR_OK && ferror(f))
        rc = nr_error_sys(err, NR_E_USAGE, "cannot read tree file '%s'", path);
    if (rc == NR_OK && leaves * cables > LM_TREE_MAX)
        rc = nr_error_set(err, NR_E_USAGE, "tree file '%s': %ld leaf switches x %ld cables is more than %ld", path,
                          leaves, cables, LM_TREE_MAX);
    free(line);
    fclose(f);
    if (rc != NR_OK)
        return rc;
    c->tree_leaves = (int)leaves, c->tree_cables = (int)cables;
    const size_t cells = (size_t)leaves * (size_t)cables + 1; /* the last: the way of a node the tree does not list */
    c->rc_up_busy = calloc(cells, 1);
    c->rc_down_busy = calloc(cells, 1);
    return c->rc_up_busy && c->rc_down_busy ? NR_OK : nr_error_set(err, NR_E_NOMEM, "out of memory for the tree");
}

/* ---- choosing the suspects ---- */

static int lm_cmp_dir(const void *a, const void *b)
{
    const struct lm_rc_dir *x = a, *y = b;
    if (x->before != y->before)
        return x->before < y->before ? -1 : 1;
    return x->src != y->src ? x->src - y->src : x->dst - y->dst;
}

/* Rank 0, when the plan's rounds are done (--recheck-below): each direction's figure, a link's figure its slower
 * direction, and every direction below the fraction of the upper median link is a suspect; the slowest
 * --recheck-max are taken, their first batch as wide as --recheck-streams allows. Candidates are read from the
 * matrix in one pass; only those below the line are held. */
int lm_plan_recheck(struct lm_ctx *c, struct nr_error *err)
{
    const size_t n = (size_t)c->m->size;
    c->recheck_planned = true;
    c->recheck_median = lm_median_link(c, err);
    if (isnan(c->recheck_median))
        return err->code < 0 ? err->code : NR_OK;
    if (!(c->rc_in_batch = malloc(sizeof(int) * n)) || !(c->rc_node_busy = calloc(n, 1)))
        return nr_error_set(err, NR_E_NOMEM, "out of memory for the rechecks");
    for (size_t r = 0; r < n; r++)
        c->rc_in_batch[r] = -1;
    const double below = c->o->recheck_below * c->recheck_median;
    const int first = c->o->recheck_streams > 0 ? c->o->recheck_streams : (int)n;
    size_t cap = 0;
    for (size_t src = 0; src < n; src++) {
        size_t i, end;
        for (lm_row(c, src, &i, &end); i < end; i++) {
            const float v = c->matrix[i];
            if (!(v > 0) || !(v < below))
                continue; /* not measured, failed (its failure stands), or fast enough */
            c->rc_below++;
            if ((size_t)c->rc_ndir == cap) {
                cap = cap ? 2 * cap : 64;
                struct lm_rc_dir *grown = realloc(c->rc_dir, sizeof *grown * cap);
                if (!grown)
                    return nr_error_set(err, NR_E_NOMEM, "out of memory for the rechecks");
                c->rc_dir = grown;
            }
            c->rc_dir[c->rc_ndir++] =
                (struct lm_rc_dir){(int)src, (int)lm_recv_at(c, src, i), v, first, 0, NAN, LM_RC_PENDING};
        }
    }
    if (c->rc_ndir == 0)
        return NR_OK;
    qsort(c->rc_dir, (size_t)c->rc_ndir, sizeof *c->rc_dir, lm_cmp_dir);
    if (c->rc_ndir > c->o->recheck_max)
        c->rc_ndir = c->o->recheck_max; /* the slowest; the others stay as the plan read them */
    char more[96] = "";
    if ((size_t)c->rc_ndir < c->rc_below)
        snprintf(more, sizeof more, " (the slowest %d of %zu: --recheck-max)", c->rc_ndir, c->rc_below);
    if (c->rc_ndir)
        printf("# recheck: %d direction(s) below %g x the median link (%.1f Mbit/s)%s, measured again in batches that "
               "share no node%s, halved while slow down to alone, at most %d round(s)\n", c->rc_ndir,
               c->o->recheck_below, c->recheck_median, more, c->tree_leaf ? " or switch cable" : "",
               c->o->recheck_rounds);
    fflush(stdout);
    return NR_OK;
}

/* ---- the batches ---- */

/* The switch cables a stream src -> dst takes up out of its leaf and down into dst's (-1: none, inside a leaf).
 * Under static destination-based routing the cable is the destination's, as the tree file says; a node the tree
 * does not list shares one way with every other such stream. */
static void lm_ways(const struct lm_ctx *c, int src, int dst, long *up, long *down)
{
    const int ls = c->tree_leaf[src], ld = c->tree_leaf[dst], u = c->tree_cable[dst];
    const long unknown = (long)c->tree_leaves * c->tree_cables;
    *up = *down = -1;
    if (ls >= 0 && ls == ld)
        return;
    if (ls < 0 || ld < 0) {
        *up = *down = unknown;
        return;
    }
    *up = (long)ls * c->tree_cables + u, *down = (long)ld * c->tree_cables + u;
}

/* Does direction d share a node, or (with --tree) a switch cable, with the batch being built? Marks it in if not. */
static bool lm_batch_take(struct lm_ctx *c, const struct lm_rc_dir *d)
{
    if (c->rc_node_busy[d->src] || c->rc_node_busy[d->dst])
        return false;
    long up = -1, down = -1;
    if (c->tree_leaf) {
        lm_ways(c, d->src, d->dst, &up, &down);
        if ((up >= 0 && c->rc_up_busy[up]) || (down >= 0 && c->rc_down_busy[down]))
            return false;
        if (up >= 0)
            c->rc_up_busy[up] = 1;
        if (down >= 0)
            c->rc_down_busy[down] = 1;
    }
    c->rc_node_busy[d->src] = c->rc_node_busy[d->dst] = 1;
    return true;
}

/* Why no further recheck round may start (NULL: it may). */
static const char *lm_recheck_stop(const struct lm_ctx *c)
{
    if (c->rc_rounds >= c->o->recheck_rounds)
        return "--recheck-rounds";
    const double need = 2 * c->longest_round_s; /* the round, and as much again to end the job */
    if (c->o->time_limit_s > 0 && MPI_Wtime() - c->started_s + need > c->o->time_limit_s)
        return "--time-limit";
    const char *end = getenv("SLURM_JOB_END_TIME");
    const long long at = end ? strtoll(end, NULL, 10) : 0;
    if (at > 0 && (double)time(NULL) + need > (double)at)
        return "the job's end (SLURM_JOB_END_TIME)";
    return NULL;
}

static int lm_log(struct lm_ctx *c, const struct lm_rc_dir *d, int round, struct nr_error *err)
{
    if (c->nrecheck == c->recheck_cap) {
        const int cap = c->recheck_cap ? 2 * c->recheck_cap : 64;
        struct lm_recheck *grown = realloc(c->recheck, sizeof *grown * (size_t)cap);
        if (!grown)
            return nr_error_set(err, NR_E_NOMEM, "out of memory for the rechecks");
        c->recheck = grown, c->recheck_cap = cap;
    }
    c->recheck[c->nrecheck++] = (struct lm_recheck){(int)(d - c->rc_dir), d->src, d->dst, round, 0, d->before, NAN,
                                                    LM_RC_PENDING};
    return NR_OK;
}

/* Rank 0: what the rechecks came to, on stdout. */
static void lm_recheck_summary(const struct lm_ctx *c)
{
    int count[LM_RC_FAILED + 1] = {0};
    for (int i = 0; i < c->rc_ndir; i++)
        count[c->rc_dir[i].state]++;
    printf("# recheck: %d round(s): %d cleared, %d slow alone, %d failed", c->rc_rounds, count[LM_RC_CLEARED],
           count[LM_RC_SLOW], count[LM_RC_FAILED]);
    if (count[LM_RC_PENDING])
        printf(", %d left (%s)", count[LM_RC_PENDING], c->rc_stopped ? c->rc_stopped : "?");
    printf("\n");
    fflush(stdout);
}

/* Rank 0, before the next batch: the caps of the last batch's slow directions. Where another direction of it read
 * the line, they may have been slowed by one of those: measured again in a batch of half as many. Where none did,
 * halving would take 2s - 1 rounds to name s slow links that s rounds alone name, and it cannot name fewer: alone. */
static void lm_recheck_settle(struct lm_ctx *c)
{
    bool cleared = false;
    for (int j = c->rc_batch_first; j < c->nrecheck; j++)
        cleared = cleared || c->recheck[j].outcome == LM_RC_CLEARED;
    for (int j = c->rc_batch_first; j < c->nrecheck && !cleared; j++)
        if (c->recheck[j].outcome == LM_RC_SPLIT)
            c->rc_dir[c->recheck[j].dir].cap = 1;
    c->rc_batch_first = c->nrecheck;
}

/* Rank 0: the next batch. The slowest direction pending leads it and sets how wide it may be (its cap); the others
 * pending join, slowest first, when their own cap allows a batch that wide and they share no node (and, with --tree,
 * no switch cable) with those already in. So a wide batch clears many stalls at once, and each direction is
 * resolved within log2 of its first batch's width + 1 rounds of its own. When the directions waiting to be measured
 * alone are as many as the rounds left, they go first: a round spent on a new batch then would leave one of them
 * slow in a batch, not named. */
int lm_recheck_round(struct lm_ctx *c, int k, struct nr_error *err)
{
    const int n = c->m->size;
    lm_recheck_settle(c);
    int head = -1, alone = -1, waiting = 0;
    for (int i = 0; i < c->rc_ndir; i++) {
        if (c->rc_dir[i].state != LM_RC_PENDING)
            continue;
        head = head < 0 ? i : head;
        if (c->rc_dir[i].cap == 1 && waiting++ == 0)
            alone = i;
    }
    if (head < 0 || (c->rc_stopped = lm_recheck_stop(c))) {
        lm_recheck_summary(c);
        return 0;
    }
    if (waiting >= c->o->recheck_rounds - c->rc_rounds)
        head = alone;
    const int width = c->rc_dir[head].cap;
    for (int r = 0; r < n; r++)
        c->dst_of[r] = -1, c->rc_in_batch[r] = -1;
    int taken = 0;
    const int first = c->nrecheck;
    for (int i = head; i < c->rc_ndir && taken < width; i++) {
        struct lm_rc_dir *d = &c->rc_dir[i];
        if (d->state != LM_RC_PENDING || d->cap < width || !lm_batch_take(c, d))
            continue;
        if (lm_log(c, d, k, err) < 0)
            return err->code;
        c->dst_of[d->src] = d->dst, c->rc_in_batch[d->src] = c->nrecheck - 1;
        taken++;
    }
    for (int i = first; i < c->nrecheck; i++) { /* the marks off for the next batch */
        const struct lm_recheck *x = &c->recheck[i];
        c->recheck[i].streams = taken;
        c->rc_node_busy[x->src] = c->rc_node_busy[x->dst] = 0;
        long up = -1, down = -1;
        if (c->tree_leaf)
            lm_ways(c, x->src, x->dst, &up, &down);
        if (up >= 0)
            c->rc_up_busy[up] = 0;
        if (down >= 0)
            c->rc_down_busy[down] = 0;
    }
    c->rc_streams = taken;
    c->rc_rounds++;
    c->nrounds = k + 1;
    return 1;
}

/* Rank 0: a direction of the recheck round just run read mbps (NAN: failed). Cleared at the line or above; slow
 * alone, it is named; slow among others, it waits for a batch of half as many (or alone: lm_recheck_settle). */
void lm_recheck_read(struct lm_ctx *c, int src, int dst, double mbps)
{
    const int j = src >= 0 && src < c->m->size ? c->rc_in_batch[src] : -1;
    if (j < 0 || c->recheck[j].dst != dst)
        return;
    struct lm_recheck *x = &c->recheck[j];
    struct lm_rc_dir *d = &c->rc_dir[x->dir];
    d->last_streams = c->rc_streams, d->last_mbps = (float)mbps;
    if (isnan(mbps))
        d->state = LM_RC_FAILED;
    else if (mbps >= c->o->recheck_below * c->recheck_median)
        d->state = LM_RC_CLEARED;
    else if (c->rc_streams <= 1)
        d->state = LM_RC_SLOW;
    else
        d->state = LM_RC_PENDING, d->cap = c->rc_streams / 2;
    x->mbps_after = mbps;
    x->outcome = d->state == LM_RC_PENDING ? LM_RC_SPLIT : d->state;
    c->rc_in_batch[src] = -1;
}

void lm_recheck_free(struct lm_ctx *c)
{
    free(c->rc_dir), free(c->recheck), free(c->rc_in_batch), free(c->rc_node_busy);
    free(c->tree_leaf), free(c->tree_cable), free(c->rc_up_busy), free(c->rc_down_busy);
    c->rc_dir = NULL, c->recheck = NULL, c->rc_in_batch = NULL, c->rc_node_busy = NULL;
    c->tree_leaf = c->tree_cable = NULL, c->rc_up_busy = c->rc_down_busy = NULL;
}
