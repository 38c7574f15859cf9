/* Error codes and the one message table of netregress.
 *
 * Convention: a function that can fail returns 0 (NR_OK) or a negative NR_E_* code. When the caller passes a
 * struct nr_error, the failing function also fills in what exactly went wrong (the option, the size string, the
 * system call) and the errno captured where it happened. The front end reports the error once, at the top, with
 * nr_error_report(), and turns the code into the process exit status with nr_exit_status().
 */
#ifndef NR_ERROR_H
#define NR_ERROR_H

#include <stddef.h>

/* Exit statuses shared by every kernel (docs/DEVELOPING.md). */
#define NR_EXIT_OK 0
#define NR_EXIT_RUNTIME 1
#define NR_EXIT_USAGE 2
#define NR_EXIT_VALIDATION 3

enum nr_err {
    NR_OK = 0,
    NR_E_USAGE = -1,        /* bad command line: unknown option, missing value, conflicting options */
    NR_E_PARSE = -2,        /* a value does not parse (size, number, list) */
    NR_E_RANGE = -3,        /* a value parses but is outside its limits */
    NR_E_NOMEM = -4,        /* out of memory */
    NR_E_IO = -5,           /* reading or writing a file failed */
    NR_E_SYS = -6,          /* a system call failed (errno captured) */
    NR_E_NET = -7,          /* socket, connect, bind, send or receive failed */
    NR_E_TIMEOUT = -8,      /* a wait ran out of time */
    NR_E_CLOSED = -9,       /* the peer closed the connection */
    NR_E_PROTO = -10,       /* malformed, oversized or unexpected control message */
    NR_E_VERSION = -11,     /* peer speaks another protocol version */
    NR_E_AUTH = -12,        /* authentication failed or required */
    NR_E_PEER = -13,        /* the peer reported a failure (its message is in the detail) */
    NR_E_VALIDATE = -14,    /* a result failed validation (payload, byte counts) */
    NR_E_UNSUPPORTED = -15, /* not available on this system */
    NR_E_MPI = -16,         /* an MPI call failed */
    NR_E_INTERNAL = -17,    /* a bug: an invariant does not hold */
    NR_E_LAST_ = -18
};

/* What went wrong, for the one report at the top. */
struct nr_error {
    int code;          /* NR_E_* (0 when nothing failed) */
    int sys_errno;     /* errno captured where the failure happened, 0 if none */
    char detail[256];  /* the specific part: "-m/--message-size: '12q' is not a size" */
};

/* The fixed message of a code ("invalid value", "connection closed by peer"). Never NULL. */
const char *nr_strerror(int code);

/* Reset *e to "no error". */
void nr_error_clear(struct nr_error *e);

/* Record code and a printf-style detail in *e (e may be NULL). Returns code, so callers can
 * `return nr_error_set(e, NR_E_RANGE, "...", ...)`. The first error recorded wins: a later call on an
 * already failed *e leaves it as it is (the root cause is what the user needs). */
int nr_error_set(struct nr_error *e, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* As nr_error_set(), and also capture errno (call it right after the failing system call). */
int nr_error_sys(struct nr_error *e, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Format the whole message: "<detail>: <errno text>" or "<code text>: <detail>" into buf. Returns buf. */
const char *nr_error_message(const struct nr_error *e, char *buf, size_t len);

/* Print "PROG: error: MESSAGE" once to stderr. */
void nr_error_report(const char *prog, const struct nr_error *e);

/* Process exit status for an error code: 0 ok, 2 usage/parse/range, 3 validation, 1 anything else. */
int nr_exit_status(int code);

#endif
