/* Host names and wall-clock time stamps for report headers.
 *
 * Wall-clock time is used only to label results (started_utc, the "-- Tue Jul 13 17:52:09 2004" header of the
 * Hpcbench files), never to measure.
 */
#ifndef NR_HOST_H
#define NR_HOST_H

#include <stddef.h>
#include <time.h>

#define NR_HOST_MAX 256 /* buffer size for host names, including the NUL */

/* This machine's host name (gethostname), NUL-terminated; "unknown" if it cannot be read. Returns buf. */
const char *nr_hostname(char *buf, size_t len);

/* The short form of a host name: everything before the first '.'. Writes into buf, returns buf. */
const char *nr_hostname_short(const char *name, char *buf, size_t len);

/* ISO 8601 UTC time stamp "2004-07-13T17:52:09Z" for t (JSON started_utc). Returns buf. */
const char *nr_time_utc_iso(time_t t, char *buf, size_t len);

/* ctime-style local time "Tue Jul 13 17:52:09 2004" without the newline (Hpcbench headers). Returns buf. */
const char *nr_time_ctime(time_t t, char *buf, size_t len);

#endif
