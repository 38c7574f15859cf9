/* nr-linkmap: the rechecks, the slow directions measured again alone (see linkmap.h). */
#include "linkmap.h"

/* ---- the rounds ---- */

static int lm_cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int lm_cmp_recheck(const void *a, const void *b)
{
    const struct lm_recheck *x = a, *y = b;
    if (x->mbps_before != y->mbps_before)
        return x->mbps_before < y->mbps_before ? -1 : 1;
    return x->src != y->src ? x->src - y->src : x->dst - y->dst;
}

/* A pair's rate as the link verdict reads it (linkverdict.collect_links): after the warm-up, else the whole. */
static double lm_rate(const struct lm_pair *p)
{
    return p->steady_mbps > 0 && isfinite(p->steady_mbps) ? p->steady_mbps : p->mbps;
}

/* Rank 0, when the plan's rounds are done (--recheck-below): each direction's best ok rate, a link's figure its
 * slower direction, and every direction below the fraction of the upper median link, slowest first, at most
 * --recheck-max, gets a round of its own after the plan's. */
int lm_plan_recheck(struct lm_ctx *c, struct nr_error *err)
{
    const int n = c->m->size;
    const size_t nn = (size_t)n * (size_t)n;
    double *best = malloc(sizeof(double) * nn), *links = malloc(sizeof(double) * (nn / 2 + 1));
    char *failed = calloc(nn, 1);
    int rc = best && links && failed ? NR_OK : nr_error_set(err, NR_E_NOMEM, "out of memory for the rechecks");
    size_t nl = 0, nsel = 0;
    c->recheck_planned = true;
    for (size_t i = 0; rc == NR_OK && i < nn; i++)
        best[i] = NAN;
    for (size_t i = 0; rc == NR_OK && i < c->npairs; i++) {
        const struct lm_pair *p = &c->pairs[i];
        const size_t at = (size_t)p->src * (size_t)n + (size_t)p->dst;
        const double v = lm_rate(p);
        if (p->failed || !(v > 0) || !isfinite(v))
            failed[at] = 1; /* the verdict fails its link whatever a recheck reads */
        else if (isnan(best[at]) || v > best[at])
            best[at] = v;
    }
    for (int a = 0; rc == NR_OK && a < n; a++)
        for (int b = a + 1; b < n; b++) {
            const double x = best[(size_t)a * (size_t)n + (size_t)b], y = best[(size_t)b * (size_t)n + (size_t)a];
            if (!isnan(x) || !isnan(y))
                links[nl++] = isnan(x) ? y : isnan(y) ? x : fmin(x, y);
        }
    if (rc == NR_OK && nl > 0) {
        qsort(links, nl, sizeof *links, lm_cmp_double);
        c->recheck_median = links[nl / 2];
        const double below = c->o->recheck_below * c->recheck_median;
        for (size_t i = 0; i < nn; i++)
            nsel += !failed[i] && best[i] < below;
        if (!(c->recheck = malloc(sizeof *c->recheck * (nsel ? nsel : 1))))
            rc = nr_error_set(err, NR_E_NOMEM, "out of memory for the rechecks");
        for (size_t i = 0, m = 0; rc == NR_OK && i < nn; i++)
            if (!failed[i] && best[i] < below)
                c->recheck[m++] = (struct lm_recheck){(int)(i / (size_t)n), (int)(i % (size_t)n), -1, best[i]};
    }
    const int want = nsel < (size_t)c->o->recheck_max ? (int)nsel : c->o->recheck_max;
    if (rc == NR_OK && want > 0) {
        qsort(c->recheck, nsel, sizeof *c->recheck, lm_cmp_recheck);
        struct lm_round *grown = realloc(c->rounds, sizeof *grown * (size_t)(c->nrounds + want));
        if (!grown)
            rc = nr_error_set(err, NR_E_NOMEM, "out of memory for the rechecks");
        else
            c->rounds = grown;
        for (int i = 0; rc == NR_OK && i < want; i++) {
            c->recheck[i].round = c->nrounds;
            if ((rc = lm_plan_append(c, c->recheck[i].src, c->recheck[i].dst, err)) == NR_OK)
                c->nrecheck = i + 1;
        }
    }
    if (rc == NR_OK && want > 0) {
        char more[96] = "";
        if ((size_t)want < nsel)
            snprintf(more, sizeof more, "; the slowest %d of %zu (--recheck-max)", want, nsel);
        printf("# recheck: %d direction(s) below %g x the median link (%.1f Mbit/s), each measured again alone%s\n",
               want, c->o->recheck_below, c->recheck_median, more);
        fflush(stdout);
    }
    free(best), free(links), free(failed);
    return rc;
}
