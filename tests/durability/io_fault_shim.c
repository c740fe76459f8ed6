/* An LD_PRELOAD shim that fails writes and syncs of chosen files (check G4).

   While the file named by SKALD_IO_FAULT_FLAG exists and holds "<KIND> <path part>",
   write, pwrite, writev, fsync, fdatasync and ftruncate on a descriptor whose path
   contains <path part> fail with <KIND>: EIO (a failing disk) or EROFS (a filesystem
   remounted read-only, which Linux will not do for real while files on it are open
   for writing). Everything else, sockets and the log included, works, so the
   server can still answer. SQLite's VFS and Python's os module both call these
   through libc, so both see the fault. Built by tests/durability/test_io_faults.py. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static int fault_for(int fd) {
    const char *flag = getenv("SKALD_IO_FAULT_FLAG");
    if (!flag) return 0;
    int saved = errno;
    char kind[1024] = {0};
    int f = (int)syscall(SYS_openat, AT_FDCWD, flag, O_RDONLY | O_CLOEXEC);
    if (f < 0) { errno = saved; return 0; }
    syscall(SYS_read, f, kind, sizeof kind - 1);
    syscall(SYS_close, f);
    const char *scope = strchr(kind, ' ');
    if (!scope || !scope[1]) { errno = saved; return 0; }
    scope++;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = syscall(SYS_readlinkat, AT_FDCWD, link, path, sizeof path - 1);
    errno = saved;
    if (len <= 0) return 0;
    path[len] = 0;
    if (!strstr(path, scope)) return 0;
    return strncmp(kind, "EROFS", 5) == 0 ? EROFS : EIO;
}

#define FAIL_OR_CALL(type, name, fd, ...)                                   \
    do {                                                                    \
        int code = fault_for(fd);                                           \
        if (code) { errno = code; return -1; }                              \
        static type (*real)() = NULL;                                       \
        if (!real) real = (type (*)())dlsym(RTLD_NEXT, name);               \
        return real(__VA_ARGS__);                                           \
    } while (0)

ssize_t write(int fd, const void *buf, size_t n) { FAIL_OR_CALL(ssize_t, "write", fd, fd, buf, n); }
ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) { FAIL_OR_CALL(ssize_t, "pwrite", fd, fd, buf, n, off); }
ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) { FAIL_OR_CALL(ssize_t, "pwrite64", fd, fd, buf, n, off); }
ssize_t writev(int fd, const struct iovec *iov, int count) { FAIL_OR_CALL(ssize_t, "writev", fd, fd, iov, count); }
ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t off) { FAIL_OR_CALL(ssize_t, "pwritev", fd, fd, iov, count, off); }
int fsync(int fd) { FAIL_OR_CALL(int, "fsync", fd, fd); }
int fdatasync(int fd) { FAIL_OR_CALL(int, "fdatasync", fd, fd); }
int ftruncate(int fd, off_t length) { FAIL_OR_CALL(int, "ftruncate", fd, fd, length); }
int ftruncate64(int fd, off_t length) { FAIL_OR_CALL(int, "ftruncate64", fd, fd, length); }
