/* Hpcbench-style tables and the gnuplot plot writer (see nr/table.h). */
#include "nr/table.h"

#include <string.h>

#include "nr/error.h"
#include "nr/result.h"
#include "nr/stats.h"

void nr_table_header(FILE *f, int label_width, const struct nr_table_col *cols, size_t ncols)
{
    for (int line = 0; line < 3; line++) {
        fprintf(f, "#%*s", label_width > 1 ? label_width - 1 : 0, "");
        for (size_t i = 0; i < ncols; i++)
            fprintf(f, "%*s", cols[i].width, cols[i].head[line] ? cols[i].head[line] : "");
        fputc('\n', f);
    }
}

void nr_table_row(FILE *f, const char *label, int label_width, const struct nr_table_col *cols, size_t ncols,
                  const double *v)
{
    fprintf(f, "%-*s", label_width, label);
    for (size_t i = 0; i < ncols; i++)
        fprintf(f, "%*.*f", cols[i].width, cols[i].prec, v[i]);
    fputc('\n', f);
}

void nr_table_counts_line(FILE *f, const char *label, const struct nr_rep *reps, size_t n, uint64_t factor)
{
    bool same = true;
    for (size_t i = 1; i < n; i++)
        same = same && reps[i].iterations == reps[0].iterations;
    fputs(label, f);
    for (size_t i = 0; i < (same && n ? 1 : n); i++)
        fprintf(f, "%s%llu", i ? " " : "", (unsigned long long)(reps[i].iterations * factor));
    fputs(same ? "\n" : " (per repetition)\n", f);
}

void nr_table_stats_line(FILE *f, const char *what, const struct nr_stats *s)
{
    fprintf(f, "# %s statistics : Average %.4f   Minimum %.4f   Maximum %.4f\n", what, s->avg, s->min, s->max);
}

/* gnuplot string literal: double quotes, with quotes and backslashes escaped. */
static void nr__plot_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int nr_plot_write(FILE *f, const struct nr_plot *p)
{
    fprintf(f, "# gnuplot script written by netregress: run `gnuplot THIS_FILE` to produce the PostScript plot\n");
    fprintf(f, "set terminal postscript enhanced color\nset output ");
    nr__plot_str(f, p->output);
    fprintf(f, "\nset title ");
    nr__plot_str(f, p->title);
    fprintf(f, "\nset xlabel ");
    nr__plot_str(f, p->xlabel);
    fprintf(f, "\nset ylabel ");
    nr__plot_str(f, p->ylabel);
    fprintf(f, "\nset grid\nset key bottom right\n");
    if (p->logx)
        fprintf(f, "set logscale x 2\n");
    fprintf(f, "plot ");
    for (size_t i = 0; i < p->nseries; i++) {
        const struct nr_plot_series *s = &p->series[i];
        if (i)
            fprintf(f, ", \\\n     ");
        nr__plot_str(f, s->data_file);
        fprintf(f, " using %d:%d title ", s->xcol, s->ycol);
        nr__plot_str(f, s->title);
        fprintf(f, " with linespoints");
    }
    fprintf(f, "\n");
    return (fflush(f) != 0 || ferror(f)) ? NR_E_IO : NR_OK;
}

int nr_plot_throughput(const char *data_path, const char *title, const char *series_title, bool sweep,
                       struct nr_error *err)
{
    char script[4096], image[4096];
    snprintf(script, sizeof script, "%s.plot", data_path);
    snprintf(image, sizeof image, "%s.ps", data_path);
    FILE *f = fopen(script, "w");
    if (!f)
        return nr_error_sys(err, NR_E_IO, "cannot write '%s'", script);
    struct nr_plot_series series = {data_path, 1, 2, series_title};
    struct nr_plot p = {title, sweep ? "Message size (Bytes)" : "Test repetition", "Throughput (Mbps)", sweep, image,
                        &series, 1};
    nr_plot_write(f, &p);
    if (fclose(f) != 0)
        return nr_error_sys(err, NR_E_IO, "writing '%s'", script);
    return NR_OK;
}
