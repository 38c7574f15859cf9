/* LD_PRELOAD filter for LAM/MPI 7.1.4 ranks (tools/lamrun preloads it; built only against LAM).
 *
 * LAM's ranks talk to their lamd with writev()/readv() and leave the second iovec entry with length 0 and whatever
 * base the stack held. Linux checks every entry's base against the user address range even at length 0, so a
 * base such as 0x2020202020202020 (seen here: leftover spaces) fails the call with EFAULT and MPI_Init aborts with
 * "Unix errno: 14" (or "The selected RPI failed to initialize"). What the stack holds depends on the environment,
 * so it struck 0 to 6 runs in 6 as variables changed. Zero-length entries carry no data: they are dropped.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <sys/uio.h>

typedef ssize_t (*nr__vec_fn)(int, const struct iovec *, int);

static ssize_t nr__without_empty(const char *name, nr__vec_fn *real, int fd, const struct iovec *iov, int n)
{
    if (!*real && !(*real = (nr__vec_fn)dlsym(RTLD_NEXT, name))) {
        errno = ENOSYS;
        return -1;
    }
    int empty = 0;   /* this sits on LAM's per-message path: copy only when there is something to drop */
    for (int i = 0; i < n && !empty; i++)
        empty = iov[i].iov_len == 0;
    if (!empty || n > IOV_MAX)
        return (*real)(fd, iov, n);
    struct iovec kept[IOV_MAX];
    int m = 0;
    for (int i = 0; i < n; i++)
        if (iov[i].iov_len)
            kept[m++] = iov[i];
    return (*real)(fd, kept, m);
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
    static nr__vec_fn real;
    return nr__without_empty("writev", &real, fd, iov, n);
}

ssize_t readv(int fd, const struct iovec *iov, int n)
{
    static nr__vec_fn real;
    return nr__without_empty("readv", &real, fd, iov, n);
}
