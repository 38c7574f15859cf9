/* The error message table and the helpers that fill and report struct nr_error (see nr/error.h). */
#include "nr/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const nr__messages[] = {
    [0] = "success",
    [-NR_E_USAGE] = "usage error",
    [-NR_E_PARSE] = "invalid value",
    [-NR_E_RANGE] = "value out of range",
    [-NR_E_NOMEM] = "out of memory",
    [-NR_E_IO] = "file I/O failed",
    [-NR_E_SYS] = "system call failed",
    [-NR_E_NET] = "network operation failed",
    [-NR_E_TIMEOUT] = "timed out",
    [-NR_E_CLOSED] = "connection closed by peer",
    [-NR_E_PROTO] = "protocol error",
    [-NR_E_VERSION] = "protocol version mismatch",
    [-NR_E_AUTH] = "authentication failed",
    [-NR_E_PEER] = "peer reported an error",
    [-NR_E_VALIDATE] = "validation failed",
    [-NR_E_UNSUPPORTED] = "not supported",
    [-NR_E_MPI] = "MPI call failed",
    [-NR_E_INTERNAL] = "internal error",
};

const char *nr_strerror(int code)
{
    if (code > 0 || code <= NR_E_LAST_ || !nr__messages[-code])
        return "unknown error";
    return nr__messages[-code];
}

void nr_error_clear(struct nr_error *e)
{
    if (!e)
        return;
    e->code = 0;
    e->sys_errno = 0;
    e->detail[0] = '\0';
}

#if defined(__GNUC__)
__attribute__((format(printf, 4, 0)))
#endif
static int nr__error_vset(struct nr_error *e, int code, int sys_errno, const char *fmt, va_list ap)
{
    if (!e || e->code != 0)
        return code;
    e->code = code;
    e->sys_errno = sys_errno;
    vsnprintf(e->detail, sizeof e->detail, fmt, ap);
    return code;
}

int nr_error_set(struct nr_error *e, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nr__error_vset(e, code, 0, fmt, ap);
    va_end(ap);
    return code;
}

int nr_error_sys(struct nr_error *e, int code, const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    nr__error_vset(e, code, saved, fmt, ap);
    va_end(ap);
    errno = saved;
    return code;
}

const char *nr_error_message(const struct nr_error *e, char *buf, size_t len)
{
    if (!buf || len == 0)
        return "";
    if (!e || e->code == 0) {
        snprintf(buf, len, "%s", nr_strerror(0));
    } else if (e->detail[0] && e->sys_errno) {
        snprintf(buf, len, "%s: %s", e->detail, strerror(e->sys_errno));
    } else if (e->detail[0]) {
        snprintf(buf, len, "%s", e->detail);
    } else if (e->sys_errno) {
        snprintf(buf, len, "%s: %s", nr_strerror(e->code), strerror(e->sys_errno));
    } else {
        snprintf(buf, len, "%s", nr_strerror(e->code));
    }
    return buf;
}

void nr_error_report(const char *prog, const struct nr_error *e)
{
    char msg[512];
    fprintf(stderr, "%s: error: %s\n", prog ? prog : "netregress", nr_error_message(e, msg, sizeof msg));
}

int nr_exit_status(int code)
{
    switch (code) {
    case NR_OK:
        return NR_EXIT_OK;
    case NR_E_USAGE:
    case NR_E_PARSE:
    case NR_E_RANGE:
        return NR_EXIT_USAGE;
    case NR_E_VALIDATE:
        return NR_EXIT_VALIDATION;
    default:
        return NR_EXIT_RUNTIME;
    }
}
