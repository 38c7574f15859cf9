/* tools/simcentre's platform loader for SimGrid (smpirun -platform nr-simfabric.so): the simulated fabric is the
 * fat tree of $NR_SIMFABRIC/fabric.xml (a FAT_TREE cluster, SimGrid's static d-mod-k routing), and the faults of
 * $NR_SIMFABRIC/faults.txt are then applied to it: one line per link, "LINK BANDWIDTH" (bytes/s; '#' starts a
 * comment). SimGrid refuses a bandwidth profile (trace_connect) on a cluster's links once they are sealed, which
 * they are when the XML is read, but lets their bandwidth be set; so the XML describes the healthy fabric and this
 * sets the slow links. A line that is not "LINK BANDWIDTH" ends the simulation naming it; a link the fabric does not
 * have ends it in SimGrid's lookup ("Link not found: NAME"). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <simgrid/engine.h>
#include <simgrid/link.h>
#include <xbt/asserts.h>

/* SimGrid calls this with its engine (a C++ reference) when the platform file is this library. */
void load_platform(const void *engine);

void load_platform(const void *engine)
{
    (void)engine;
    const char *dir = getenv("NR_SIMFABRIC");
    char path[PATH_MAX];
    xbt_assert(dir && *dir, "nr-simfabric: NR_SIMFABRIC names no directory (tools/simcentre sets it)");
    xbt_assert(snprintf(path, sizeof path, "%s/fabric.xml", dir) < (int)sizeof path, "nr-simfabric: path too long");
    simgrid_load_platform(path);
    xbt_assert(snprintf(path, sizeof path, "%s/faults.txt", dir) < (int)sizeof path, "nr-simfabric: path too long");
    FILE *f = fopen(path, "r");
    if (!f) {
        xbt_assert(errno == ENOENT, "nr-simfabric: cannot read %s: %s", path, strerror(errno));
        return; /* a healthy fabric */
    }
    char line[512], name[256];
    double bandwidth = 0;
    for (int lineno = 1; fgets(line, sizeof line, f); lineno++) {
        char *hash = strchr(line, '#'), extra = 0;
        if (hash)
            *hash = '\0';
        if (strspn(line, " \t\r\n") == strlen(line))
            continue;
        xbt_assert(sscanf(line, "%255s %lf %c", name, &bandwidth, &extra) == 2 && bandwidth > 0,
                   "nr-simfabric: %s line %d: expected 'LINK BANDWIDTH' (bytes/s > 0): %s", path, lineno, line);
        sg_link_set_bandwidth(sg_link_by_name(name), bandwidth);
    }
    fclose(f);
}
