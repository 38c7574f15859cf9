/* The system log in the result JSON (the "syslog"/"sysmon" objects of docs/json-schema.md). See nr/sysmon.h. */
#include "nr/sysmon.h"

#include "nr/json.h"

void nr_sysmon_log_json(struct nr_json *j, const char *key, const struct nr_sysmon_log *log)
{
    size_t ncpu = (size_t)log->ncpu, nif = (size_t)log->nif;
    nr_json_key(j, key);
    nr_json_begin_object(j);
    nr_json_kv_string(j, "host", log->host);
    nr_json_kv_int(j, "ncpu", log->ncpu);
    nr_json_key(j, "interfaces");
    nr_json_begin_array(j);
    for (size_t i = 0; i < nif; i++)
        nr_json_string(j, log->ifname[i]);
    nr_json_end_array(j);
    nr_json_key(j, "rows");
    nr_json_begin_array(j);
    for (size_t r = 0; r < log->nrows; r++) {
        const struct nr_sysmon_row *w = &log->rows[r];
        nr_json_begin_object(j);
        nr_json_kv_double(j, "interval_s", w->interval_s);
        nr_json_kv_double(j, "cpu_load_pct", w->load_pct);
        nr_json_kv_double(j, "cpu_user_pct", w->user_pct);
        nr_json_kv_double(j, "cpu_sys_pct", w->sys_pct);
        nr_json_kv_double(j, "mem_used_pct", w->mem_used_pct);
        nr_json_kv_uint(j, "interrupts", w->interrupts);
        nr_json_kv_uint(j, "page_in", w->page_in);
        nr_json_kv_uint(j, "page_out", w->page_out);
        nr_json_kv_uint(j, "swap_in", w->swap_in);
        nr_json_kv_uint(j, "swap_out", w->swap_out);
        nr_json_kv_uint(j, "context_switches", w->ctxt);
        nr_json_key(j, "cpus");
        nr_json_begin_array(j);
        for (size_t c = 0; c < ncpu; c++) {
            const double *p = &log->cpu_pct[(r * ncpu + c) * 3];
            nr_json_begin_object(j);
            nr_json_kv_double(j, "load_pct", p[0]);
            nr_json_kv_double(j, "user_pct", p[1]);
            nr_json_kv_double(j, "sys_pct", p[2]);
            nr_json_end_object(j);
        }
        nr_json_end_array(j);
        nr_json_key(j, "net");
        nr_json_begin_object(j);
        for (size_t i = 0; i < nif; i++) {
            const struct nr_sysmon_net *n = &log->net[r * nif + i];
            nr_json_key(j, log->ifname[i]);
            nr_json_begin_object(j);
            nr_json_kv_uint(j, "rx_packets", n->rx_packets);
            nr_json_kv_uint(j, "rx_bytes", n->rx_bytes);
            nr_json_kv_uint(j, "tx_packets", n->tx_packets);
            nr_json_kv_uint(j, "tx_bytes", n->tx_bytes);
            nr_json_key(j, "interrupts_per_cpu");
            nr_json_begin_array(j);
            for (size_t c = 0; c < ncpu; c++)
                nr_json_uint(j, log->irq[(r * nif + i) * ncpu + c]);
            nr_json_end_array(j);
            nr_json_end_object(j);
        }
        nr_json_end_object(j);
        nr_json_end_object(j);
    }
    nr_json_end_array(j);
    nr_json_end_object(j);
}
