/* nr-linkmap: the rechecks, the slow directions measured again alone (see linkmap.h). */
#include "linkmap.h"

static int lm_cmp_recheck(const void *a, const void *b)
{
    const struct lm_recheck *x = a, *y = b;
    if (x->mbps_before != y->mbps_before)
        return x->mbps_before < y->mbps_before ? -1 : 1;
    return x->src != y->src ? x->src - y->src : x->dst - y->dst;
}

/* Rank 0, when the plan's rounds are done (--recheck-below): each direction's figure, a link's figure its slower
 * direction, and every direction below the fraction of the upper median link, slowest first, at most
 * --recheck-max, gets a round of its own after the plan's (lm_plan_round). Candidates are read from the matrix in
 * one pass; only those below the line are held. */
int lm_plan_recheck(struct lm_ctx *c, struct nr_error *err)
{
    const size_t n = (size_t)c->m->size, nn = n * n;
    c->recheck_planned = true;
    c->recheck_median = lm_median_link(c, err);
    if (isnan(c->recheck_median))
        return err->code < 0 ? err->code : NR_OK;
    const double below = c->o->recheck_below * c->recheck_median;
    size_t nsel = 0, cap = 0;
    for (size_t i = 0; i < nn; i++) {
        const float v = c->matrix[i];
        if (!(v > 0) || !(v < below))
            continue; /* not measured, failed (its failure stands), or fast enough */
        if (nsel == cap) {
            cap = cap ? 2 * cap : 64;
            struct lm_recheck *grown = realloc(c->recheck, sizeof *grown * cap);
            if (!grown)
                return nr_error_set(err, NR_E_NOMEM, "out of memory for the rechecks");
            c->recheck = grown;
        }
        c->recheck[nsel++] = (struct lm_recheck){(int)(i / n), (int)(i % n), -1, v, NAN};
    }
    const int want = nsel < (size_t)c->o->recheck_max ? (int)nsel : c->o->recheck_max;
    if (want == 0)
        return NR_OK;
    qsort(c->recheck, nsel, sizeof *c->recheck, lm_cmp_recheck);
    for (int i = 0; i < want; i++)
        c->recheck[i].round = c->nrounds + i;
    c->nrecheck = want;
    c->nrounds += want;
    char more[96] = "";
    if ((size_t)want < nsel)
        snprintf(more, sizeof more, "; the slowest %d of %zu (--recheck-max)", want, nsel);
    printf("# recheck: %d direction(s) below %g x the median link (%.1f Mbit/s), each measured again alone%s\n", want,
           c->o->recheck_below, c->recheck_median, more);
    fflush(stdout);
    return NR_OK;
}
