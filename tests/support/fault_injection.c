// An LD_PRELOAD library that simulates a full disk for the fault tests, without root or a small file system:
//   MEGATON_FAULT_ENOSPC_DIR=D     writes to files under directory D count against a budget
//   MEGATON_FAULT_ENOSPC_AFTER=N   this process may write N bytes there (default 0); a write beyond fails with ENOSPC
//   MEGATON_FAULT_FALLOCATE_OK=1   fallocate() there always succeeds (without it, an allocation beyond what is left of
//                                  the budget fails with ENOSPC; allocations do not use the budget up)
//   MEGATON_FAULT_STALL_PATH=GLOB  a write to a file whose absolute path matches the shell pattern GLOB blocks
//                                  forever (a save caught mid-write, deterministically, for the kill tests)
//   MEGATON_FAULT_STALL_UNTIL=F    with STALL_PATH: the write blocks only until file F exists (a signal delivered
//                                  mid-save, then the save let go)
// Every write-family call of libc is wrapped (write, pwrite, writev, pwritev and their 64-bit names), so stdio,
// iostreams, HDF5 and MPI-IO (Open MPI's ompio) all meet the "full" disk. Each process has its own budget.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static atomic_llong g_written;

// Whether fd names a file under MEGATON_FAULT_ENOSPC_DIR.
static int watched(int fd) {
  const char* dir = getenv("MEGATON_FAULT_ENOSPC_DIR");
  if (!dir || !*dir) return 0;
  char link[64], path[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  const size_t len = strlen(dir);
  return strncmp(path, dir, len) == 0 && (path[len] == '/' || path[len] == '\0');
}

// Blocks forever when fd's path matches MEGATON_FAULT_STALL_PATH.
static void stall_if_asked(int fd) {
  const char* s = getenv("MEGATON_FAULT_STALL_PATH");
  if (!s || !*s) return;
  char link[64], path[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return;
  path[n] = '\0';
  if (fnmatch(s, path, 0) != 0) return;
  const char* until = getenv("MEGATON_FAULT_STALL_UNTIL");
  if (!until || !*until)
    for (;;) pause();
  while (access(until, F_OK) != 0) usleep(10000);
}

// 1 when `n` more bytes to fd exceed the budget (the write must fail), else counts them.
static int over_budget(int fd, size_t n) {
  stall_if_asked(fd);
  if (!watched(fd)) return 0;
  const char* after = getenv("MEGATON_FAULT_ENOSPC_AFTER");
  const long long budget = after ? atoll(after) : 0;
  if (atomic_fetch_add(&g_written, (long long)n) + (long long)n > budget) {
    errno = ENOSPC;
    return 1;
  }
  return 0;
}

// 1 when allocating `n` bytes would not fit in what is left of the budget.
static int cannot_allocate(int fd, long long n) {
  if (!watched(fd) || getenv("MEGATON_FAULT_FALLOCATE_OK")) return 0;
  const char* after = getenv("MEGATON_FAULT_ENOSPC_AFTER");
  const long long budget = after ? atoll(after) : 0;
  return atomic_load(&g_written) + n > budget;
}

static size_t iov_bytes(const struct iovec* iov, int cnt) {
  size_t n = 0;
  for (int i = 0; i < cnt; ++i) n += iov[i].iov_len;
  return n;
}

#define REAL(name, type) ((type)dlsym(RTLD_NEXT, name))

ssize_t write(int fd, const void* buf, size_t n) {
  if (over_budget(fd, n)) return -1;
  return REAL("write", ssize_t(*)(int, const void*, size_t))(fd, buf, n);
}
ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  if (over_budget(fd, n)) return -1;
  return REAL("pwrite", ssize_t(*)(int, const void*, size_t, off_t))(fd, buf, n, off);
}
ssize_t pwrite64(int fd, const void* buf, size_t n, off_t off) {
  if (over_budget(fd, n)) return -1;
  return REAL("pwrite64", ssize_t(*)(int, const void*, size_t, off_t))(fd, buf, n, off);
}
ssize_t writev(int fd, const struct iovec* iov, int cnt) {
  if (over_budget(fd, iov_bytes(iov, cnt))) return -1;
  return REAL("writev", ssize_t(*)(int, const struct iovec*, int))(fd, iov, cnt);
}
ssize_t pwritev(int fd, const struct iovec* iov, int cnt, off_t off) {
  if (over_budget(fd, iov_bytes(iov, cnt))) return -1;
  return REAL("pwritev", ssize_t(*)(int, const struct iovec*, int, off_t))(fd, iov, cnt, off);
}
ssize_t pwritev64(int fd, const struct iovec* iov, int cnt, off_t off) {
  if (over_budget(fd, iov_bytes(iov, cnt))) return -1;
  return REAL("pwritev64", ssize_t(*)(int, const struct iovec*, int, off_t))(fd, iov, cnt, off);
}
int fallocate(int fd, int mode, off_t off, off_t len) {
  if (cannot_allocate(fd, (long long)len)) {
    errno = ENOSPC;
    return -1;
  }
  return REAL("fallocate", int (*)(int, int, off_t, off_t))(fd, mode, off, len);
}
int fallocate64(int fd, int mode, off_t off, off_t len) {
  if (cannot_allocate(fd, (long long)len)) {
    errno = ENOSPC;
    return -1;
  }
  return REAL("fallocate64", int (*)(int, int, off_t, off_t))(fd, mode, off, len);
}
