/* nr-linkmap: the plans, the rounds every rank runs (see linkmap.h). */
#include "linkmap.h"

/* ---- plans ---- */

int lm_plan_shift(struct lm_ctx *c, struct nr_error *err)
{
    const int n = c->m->size;
    c->nrounds = n - 1;
    c->plan = malloc(sizeof(int) * (size_t)(c->nrounds > 0 ? c->nrounds : 1) * (size_t)n);
    if (!c->plan)
        return nr_error_set(err, NR_E_NOMEM, "out of memory for the plan");
    for (int k = 0; k < c->nrounds; k++)
        for (int r = 0; r < n; r++)
            c->plan[(size_t)k * (size_t)n + (size_t)r] = (r + k + 1) % n;
    snprintf(c->plan_name, sizeof c->plan_name, "shift");
    return NR_OK;
}

/* A plan-file endpoint: a rank number, or the host name (or its short form) of exactly one rank. */
static int lm_endpoint(const struct lm_ctx *c, const char *tok, const char *where, int *out, struct nr_error *err)
{
    const int n = c->m->size;
    if (*tok && strspn(tok, "0123456789") == strlen(tok)) {
        long v = strlen(tok) > 9 ? n : strtol(tok, NULL, 10);
        if (v >= n)
            return nr_error_set(err, NR_E_USAGE, "%s: rank %s does not exist (%d ranks)", where, tok, n);
        *out = (int)v;
        return NR_OK;
    }
    int found = -1, count = 0;
    for (int r = 0; r < n; r++) {
        char shortname[NR_HOST_MAX];
        nr_hostname_short(c->hosts[r], shortname, sizeof shortname);
        if (strcmp(c->hosts[r], tok) == 0 || strcmp(shortname, tok) == 0) {
            if (found < 0)
                found = r;
            count++;
        }
    }
    if (count == 0)
        return nr_error_set(err, NR_E_USAGE, "%s: no rank runs on host '%s'", where, tok);
    if (count > 1)
        return nr_error_set(err, NR_E_USAGE, "%s: host '%s' runs %d ranks: name them by rank number", where, tok,
                            count);
    *out = found;
    return NR_OK;
}

/* Rank 0: read and check the plan file (format in docs/mpi.md). Every error names the line. */
int lm_plan_file(struct lm_ctx *c, struct nr_error *err)
{
    const int n = c->m->size;
    const char *path = c->o->plan_file;
    FILE *f = fopen(path, "r");
    if (!f)
        return nr_error_sys(err, NR_E_USAGE, "cannot read plan file '%s'", path);
    snprintf(c->plan_name, sizeof c->plan_name, "file");
    int *recv_from = malloc(sizeof(int) * (size_t)n);
    int *first_round = NULL;
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    int rc = recv_from ? NR_OK : nr_error_set(err, NR_E_NOMEM, "out of memory for the plan");
    while (rc == NR_OK && getline(&line, &cap, f) >= 0) {
        lineno++;
        char where[300];
        snprintf(where, sizeof where, "plan file '%s' line %ld", path, lineno);
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
        if (!tok)
            continue;
        if (strcmp(tok, "plan") == 0) {
            char *name = strtok_r(NULL, " \t\r\n", &save);
            if (!name || strtok_r(NULL, " \t\r\n", &save) || strlen(name) >= sizeof c->plan_name ||
                strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") != strlen(name))
                rc = nr_error_set(err, NR_E_USAGE, "%s: 'plan' takes one name of letters, digits, '_', '.', '-' "
                                  "(at most %zu)", where, sizeof c->plan_name - 1);
            else
                snprintf(c->plan_name, sizeof c->plan_name, "%s", name);
            continue;
        }
        int *grown = realloc(c->plan, sizeof(int) * (size_t)(c->nrounds + 1) * (size_t)n);
        int *fr = realloc(first_round, sizeof(int) * (size_t)(c->nrounds + 1));
        if (grown)
            c->plan = grown;
        if (fr)
            first_round = fr;
        if (!grown || !fr) {
            rc = nr_error_set(err, NR_E_NOMEM, "out of memory for the plan");
            break;
        }
        int *dst = c->plan + (size_t)c->nrounds * (size_t)n;
        for (int r = 0; r < n; r++)
            dst[r] = -1, recv_from[r] = -1;
        first_round[c->nrounds] = (int)lineno;
        for (; tok && rc == NR_OK; tok = strtok_r(NULL, " \t\r\n", &save)) {
            char *gt = strchr(tok, '>');
            int s = -1, d = -1;
            if (!gt || gt == tok || !gt[1] || strchr(gt + 1, '>')) {
                rc = nr_error_set(err, NR_E_USAGE, "%s: '%s' is not SRC>DST", where, tok);
                break;
            }
            *gt = '\0';
            if ((rc = lm_endpoint(c, tok, where, &s, err)) < 0 || (rc = lm_endpoint(c, gt + 1, where, &d, err)) < 0)
                break;
            if (s == d)
                rc = nr_error_set(err, NR_E_USAGE, "%s: %s>%s is a self pair (rank %d)", where, tok, gt + 1, s);
            else if (dst[s] >= 0)
                rc = nr_error_set(err, NR_E_USAGE, "%s: rank %d (%s) sends twice in one round (to %d and %d)",
                                  where, s, c->hosts[s], dst[s], d);
            else if (recv_from[d] >= 0)
                rc = nr_error_set(err, NR_E_USAGE, "%s: rank %d (%s) receives twice in one round (from %d and %d)",
                                  where, d, c->hosts[d], recv_from[d], s);
            else
                dst[s] = d, recv_from[d] = s;
        }
        c->nrounds++;
    }
    if (rc == NR_OK && ferror(f))
        rc = nr_error_sys(err, NR_E_USAGE, "cannot read plan file '%s'", path);
    if (rc == NR_OK && c->nrounds == 0)
        rc = nr_error_set(err, NR_E_USAGE, "plan file '%s' has no rounds", path);
    fclose(f);
    free(line), free(recv_from), free(first_round);
    return rc;
}

/* A recheck round after the others: src sends to dst, every other rank idles. */
int lm_plan_append(struct lm_ctx *c, int src, int dst, struct nr_error *err)
{
    const int n = c->m->size;
    int *grown = realloc(c->plan, sizeof(int) * (size_t)(c->nrounds + 1) * (size_t)n);
    if (!grown)
        return nr_error_set(err, NR_E_NOMEM, "out of memory for the plan");
    c->plan = grown;
    int *row = c->plan + (size_t)c->nrounds++ * (size_t)n;
    for (int r = 0; r < n; r++)
        row[r] = -1;
    row[src] = dst;
    return NR_OK;
}
