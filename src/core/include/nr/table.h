/* Hpcbench-style human-readable tables and gnuplot plot files.
 *
 * A table is a block of '#' comment lines (the header) followed by rows of right-aligned numbers, the layout of
 * the Hpcbench result files (see docs/tcp.md and the seeds). Comment lines keep the files directly usable as
 * gnuplot data; nr_plot_write() writes the gnuplot script (FILE.plot) that plots columns of such a file.
 */
#ifndef NR_TABLE_H
#define NR_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct nr_error;

struct nr_stats;
struct nr_rep;

/* One column: up to three header lines (NULL = blank), width in characters, decimals (0 = integer). */
struct nr_table_col {
    const char *head[3];
    int width;
    int prec;
};

/* The column header: three lines starting with '#', the label column label_width wide. */
void nr_table_header(FILE *f, int label_width, const struct nr_table_col *cols, size_t ncols);

/* One row: label left-aligned in label_width, then v[i] right-aligned in cols[i]. */
void nr_table_row(FILE *f, const char *label, int label_width, const struct nr_table_col *cols, size_t ncols,
                  const double *v);

/* A header line of per-repetition counts: label then each repetition's iterations x factor (factor 1: the
 * iteration count; the message size: the bytes of a repetition), one number when every repetition had the same
 * count, else one per repetition (a re-checked calibration changes the count between repetitions). */
void nr_table_counts_line(FILE *f, const char *label, const struct nr_rep *reps, size_t n, uint64_t factor);

/* "# <what> statistics : Average 937.9449   Minimum 936.2530   Maximum 939.0060" (4 decimals). */
void nr_table_stats_line(FILE *f, const char *what, const struct nr_stats *s);

/* One data series of a plot: columns xcol:ycol of data_file. */
struct nr_plot_series {
    const char *data_file;
    int xcol, ycol;
    const char *title;
};

struct nr_plot {
    const char *title;
    const char *xlabel, *ylabel;
    bool logx;            /* log2 x axis (exponential sweeps) */
    const char *output;   /* the image gnuplot writes (PostScript, e.g. "output.ps") */
    const struct nr_plot_series *series;
    size_t nseries;
};

/* Write a gnuplot script: `gnuplot FILE.plot` writes p->output as colour PostScript (headless).
 * Returns 0 or NR_E_IO. */
int nr_plot_write(FILE *f, const struct nr_plot *p);

/* The -P file of a throughput test whose -o results file is data_path: data_path.plot, drawing column 2
 * (throughput) over column 1 (message size for a sweep, on a log2 axis; repetition number otherwise) into
 * data_path.ps. Returns 0 or NR_E_IO (err says which file). */
int nr_plot_throughput(const char *data_path, const char *title, const char *series_title, bool sweep,
                       struct nr_error *err);

#endif
