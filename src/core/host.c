/* Host names and wall-clock labels (see nr/host.h). */
#include "nr/host.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *nr_hostname(char *buf, size_t len)
{
    if (!buf || len == 0)
        return "";
    if (gethostname(buf, len) != 0 || buf[0] == '\0')
        snprintf(buf, len, "unknown");
    buf[len - 1] = '\0';
    return buf;
}

const char *nr_hostname_short(const char *name, char *buf, size_t len)
{
    if (!buf || len == 0)
        return "";
    size_t n = strcspn(name ? name : "", ".");
    if (n >= len)
        n = len - 1;
    memcpy(buf, name ? name : "", n);
    buf[n] = '\0';
    return buf;
}

const char *nr_time_utc_iso(time_t t, char *buf, size_t len)
{
    struct tm tm;
    if (!buf || len == 0)
        return "";
    if (!gmtime_r(&t, &tm) || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, len, "unknown");
    return buf;
}

const char *nr_time_ctime(time_t t, char *buf, size_t len)
{
    struct tm tm;
    if (!buf || len == 0)
        return "";
    if (!localtime_r(&t, &tm) || strftime(buf, len, "%a %b %e %H:%M:%S %Y", &tm) == 0)
        snprintf(buf, len, "unknown");
    return buf;
}
