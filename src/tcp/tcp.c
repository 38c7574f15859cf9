/* Shared helpers of the TCP kernels: the shared-secret file and IP TOS names (see tcp.h). */
#include "tcp.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "nr/error.h"

int nr_tcp_read_secret(const char *path, unsigned char *key, struct nr_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return nr_error_sys(err, NR_E_IO, "--auth-file: cannot open '%s'", path);
    unsigned char buf[NR_TCP_AUTH_MAX + 2];
    size_t n = fread(buf, 1, sizeof buf, f);
    int bad = ferror(f);
    fclose(f);
    if (bad)
        return nr_error_sys(err, NR_E_IO, "--auth-file: cannot read '%s'", path);
    size_t a = 0;
    while (a < n && isspace(buf[a]))
        a++;
    while (n > a && isspace(buf[n - 1]))
        n--;
    if (n - a > NR_TCP_AUTH_MAX)
        return nr_error_set(err, NR_E_RANGE, "--auth-file: '%s' holds more than %d bytes", path, NR_TCP_AUTH_MAX);
    if (n == a)
        return nr_error_set(err, NR_E_PARSE, "--auth-file: '%s' is empty", path);
    memcpy(key, buf + a, n - a);
    return (int)(n - a);
}

static const struct {
    uint8_t byte;
    const char *name;
} nr__tos[NR_TCP_TOS_LEVEL_MAX + 1] = {
    {0x00, "Default"},
    {0x10, "IPTOS_Minimize_Delay"},
    {0x08, "IPTOS_Maximize_Throughput"},
    {0x04, "IPTOS_Maximize_Reliability"},
    {0x02, "IPTOS_Minimize_Cost"},
};

uint8_t nr_tcp_tos_byte(int level)
{
    return (level >= 0 && level <= NR_TCP_TOS_LEVEL_MAX) ? nr__tos[level].byte : 0;
}

const char *nr_tcp_tos_name(uint8_t tos, char *buf, size_t len)
{
    for (int i = 0; i <= NR_TCP_TOS_LEVEL_MAX; i++)
        if (nr__tos[i].byte == tos)
            return nr__tos[i].name;
    snprintf(buf, len, "0x%02x", tos);
    return buf;
}
