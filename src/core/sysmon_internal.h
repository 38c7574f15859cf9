/* Shared between the system monitor's files (sysmon.c, sysmon_log.c): not part of the public API. */
#ifndef NR_SYSMON_INTERNAL_H
#define NR_SYSMON_INTERNAL_H

#include <stddef.h>

#include "nr/sysmon.h"

/* Make room for at least want rows: 0, NR_E_RANGE (more than NR_SYSMON_MAX_ROWS) or NR_E_NOMEM. */
int nr__sysmon_log_reserve(struct nr_sysmon_log *log, size_t want);

#endif
