/* A cache line handed back and forth between two CPUs, timed in short samples for a while.
 *
 * Why it exists: on a 2-vCPU virtual machine every CPU-bound figure of the suite (shared-memory MPI latency,
 * loopback TCP round trips) came out bimodal from one launch to the next, the kernels and their peers
 * (NetPIPE, IMB) alike. This probe takes MPI, TCP and the kernels out: if the hand-over time of one cache line
 * between the two CPUs itself jumps between levels over time, the host (where the hypervisor runs the vCPUs),
 * not the software under test, decides those figures.
 *
 * Build and run: cc -O2 -pthread bench/cpu_pair_latency.c -o cpu_pair_latency && ./cpu_pair_latency [SECONDS
 * [CPU_A CPU_B]] -- prints one line per 0.1-s sample (seconds since start, ns per round trip) and a summary.
 * A script, not a test: it asserts nothing.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Alignas(64) _Atomic long line;       /* the cache line: odd = A's turn is over, even = B's */
static _Atomic int stop;
static int cpu_b;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *responder(void *arg) {
    (void)arg;
    if (pin(cpu_b) != 0) { fprintf(stderr, "cannot run on CPU %d\n", cpu_b); exit(2); }
    for (long seen = 0; !atomic_load_explicit(&stop, memory_order_relaxed);) {
        long v = atomic_load_explicit(&line, memory_order_acquire);
        if (v != seen && (v & 1)) { seen = v + 1; atomic_store_explicit(&line, seen, memory_order_release); }
    }
    return NULL;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 30.0;
    int cpu_a = argc > 3 ? atoi(argv[2]) : 0;
    cpu_b = argc > 3 ? atoi(argv[3]) : 1;
    if (seconds <= 0 || seconds > 3600 || argc == 3) {
        fprintf(stderr, "usage: %s [SECONDS (0-3600] [CPU_A CPU_B]]\n", argv[0]);
        return 2;
    }
    if (pin(cpu_a) != 0) { fprintf(stderr, "cannot run on CPU %d\n", cpu_a); return 2; }
    pthread_t t;
    if (pthread_create(&t, NULL, responder, NULL) != 0) { perror("pthread_create"); return 2; }
    int cap = (int)(seconds * 10) + 1, n = 0;
    double *ns = malloc(sizeof *ns * cap), start = now_s();
    long v = 0;
    while (n < cap && now_s() - start < seconds) {
        double t0 = now_s();
        long trips = 0;
        do {                                   /* one sample: as many round trips as fit in 0.1 s */
            atomic_store_explicit(&line, ++v, memory_order_release);
            while (atomic_load_explicit(&line, memory_order_acquire) != v + 1) {}
            ++v, ++trips;
        } while ((trips & 1023) || now_s() - t0 < 0.1);
        ns[n] = (now_s() - t0) / trips * 1e9;
        printf("%7.1f %8.1f\n", t0 - start, ns[n]);
        ++n;
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    qsort(ns, n, sizeof *ns, by_value);
    int slow = 0;
    for (int i = 0; i < n; ++i) slow += ns[i] > 2 * ns[0];
    printf("# CPU %d <-> CPU %d, %d samples of 0.1 s: round trip min %.0f ns, median %.0f, p90 %.0f, max %.0f; "
           "%.0f%% of samples above twice the minimum\n", cpu_a, cpu_b, n, ns[0], ns[n / 2], ns[n * 9 / 10],
           ns[n - 1], 100.0 * slow / n);
    free(ns);
    return 0;
}
