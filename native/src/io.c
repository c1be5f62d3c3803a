/*
 * io.c - positional reads of whole byte ranges, for the page reader.
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

SLIP_API int32_t slip_pread(int32_t fd, void *buf, size_t count, int64_t offset) {
  if (!buf && count) return slip__fail(SLIP_EINVAL, "buf must not be NULL");
  if (offset < 0) return slip__fail(SLIP_EINVAL, "offset %lld is negative", (long long)offset);
  uint8_t *p = buf;
  size_t done = 0;
  while (done < count) {
    ssize_t n = pread(fd, p + done, count - done, (off_t)(offset + (int64_t)done));
    if (n < 0) {
      if (errno == EINTR) continue;
      char reason[128];
      if (strerror_r(errno, reason, sizeof reason) != 0) reason[0] = '\0';
      return slip__fail(SLIP_EIO, "pread of %zu bytes at offset %lld from fd %d: %s", count, (long long)offset, fd,
                        reason);
    }
    if (n == 0)
      return slip__fail(SLIP_EEOF, "fd %d ended after %zu of %zu bytes requested at offset %lld", fd, done, count,
                        (long long)offset);
    done += (size_t)n;
  }
  return SLIP_OK;
}
