/* netregress measurement core: include this one header to get the whole public API of nr_core.
 *
 *   nr/buffer.h  message buffers written before timing (no shared zero page)
 *   nr/calib.h   iteration count calibrated to a time budget
 *   nr/cpulimit.h  the CPU cgroup of this process: quota and throttled time
 *   nr/error.h   error codes, struct nr_error, the message table, exit statuses
 *   nr/timer.h   monotonic clock, sleeping, getrusage process times
 *   nr/host.h    host names, time stamps for headers
 *   nr/stats.h   min/avg/max/median/stddev, bucket histograms
 *   nr/repeat.h  repetition counts: fixed, or stopped when the median's interval is narrow enough
 *   nr/size.h    sizes with k/M/G suffixes, size lists and MIN-MAX ranges
 *   nr/opt.h     option tables, parser, generated --help
 *   nr/json.h    streaming JSON writer
 *   nr/result.h  result records and the common JSON skeleton
 *   nr/table.h   Hpcbench-style tables, gnuplot plot files
 *   nr/sysmon.h  /proc system monitor, system-log writer and serialisation
 *   nr/sha256.h  SHA-256 and HMAC-SHA-256
 */
#ifndef NR_CORE_H
#define NR_CORE_H

#include "nr/buffer.h"
#include "nr/calib.h"
#include "nr/cpulimit.h"
#include "nr/error.h"
#include "nr/host.h"
#include "nr/json.h"
#include "nr/opt.h"
#include "nr/repeat.h"
#include "nr/result.h"
#include "nr/sha256.h"
#include "nr/size.h"
#include "nr/stats.h"
#include "nr/sysmon.h"
#include "nr/table.h"
#include "nr/timer.h"

#endif
