/* Hpcbench-style tables and the gnuplot plot writer (see nr/table.h). */
#include "nr/table.h"

#include <string.h>

#include "nr/error.h"
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
