/* Message buffers filled before measurement (see nr/buffer.h). */
#include "nr/buffer.h"

void nr_buffer_fill(void *buf, size_t bytes, uint32_t seed)
{
    unsigned char *b = buf;
    for (size_t i = 0; i < bytes; i++) {
        unsigned v = (unsigned)((i * 131u + seed * 29u + (i >> 12) * 7u) & 0xffu);
        b[i] = (unsigned char)(v ? v : 0xa5u); /* never 0: a zero byte pattern is what an untouched page reads */
    }
}

void nr_buffer_fill_doubles(double *x, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 1.0 + (double)((i + seed) % 1024u) / 1024.0;
}
