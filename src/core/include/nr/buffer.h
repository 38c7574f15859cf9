/* Message buffers that hold data before anything is measured.
 *
 * A buffer from malloc or calloc that is never written maps the kernel's shared zero page: every page of it is
 * the same physical page, so a shared-memory or single-copy transfer reads one cache-hot 4 KiB page instead of
 * the message, and the first write into a receive buffer pays a page fault inside the timed loop. OSU and IMB
 * write their buffers before timing; every netregress kernel does the same through these functions, before its
 * calibration (and warm-up) runs.
 */
#ifndef NR_BUFFER_H
#define NR_BUFFER_H

#include <stddef.h>
#include <stdint.h>

/* Write a non-zero byte pattern that depends on the position and on seed into every byte of buf. */
void nr_buffer_fill(void *buf, size_t bytes, uint32_t seed);

/* Write n ordinary (normal, finite, non-zero) doubles into x: reductions over them stay in the fast path (no
 * denormals, NaN or overflow however many times they are summed in a test). */
void nr_buffer_fill_doubles(double *x, size_t n, uint32_t seed);

#endif
