/*
 * address_range.c - one reserved stretch of address space whose pages are
 * filled, one part at a time, with file mappings or anonymous memory.
 *
 * A dataset of many files (shards, or the page files of a node-local cache)
 * is read by compiled decoders that know one base address and each value's
 * offset from it.  Reserving the dataset's whole extent once (PROT_NONE,
 * MAP_NORESERVE: address space only, no memory) and mapping each file's
 * bytes at their place in it with MAP_FIXED gives the decoders that single
 * address space with no copy.  Releasing maps PROT_NONE anonymous memory
 * back over the place, again with MAP_FIXED: the reservation never has a
 * hole that another thread's mmap could take, and the file's pages (an
 * evicted cache file's disk blocks included) are let go at once.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

/* Fail with SLIP_EIO naming the operation and errno's reason. */
static int32_t os_failure(const char *what, size_t length) {
  char reason[128];
  if (strerror_r(errno, reason, sizeof reason) != 0) reason[0] = '\0';
  return slip__fail(errno == ENOMEM ? SLIP_ENOMEM : SLIP_EIO, "%s of %zu bytes: %s", what, length, reason);
}

/* SLIP_OK when `at` and `length` are whole, non-empty runs of OS pages. */
static int32_t check_place(const void *at, size_t length) {
  uintptr_t os_page = (uintptr_t)sysconf(_SC_PAGESIZE);
  if (!at || !length) return slip__fail(SLIP_EINVAL, "address and length must be non-zero");
  if ((uintptr_t)at % os_page || length % os_page)
    return slip__fail(SLIP_EINVAL, "address %p and length %zu must be multiples of the OS page size (%zu bytes)", at,
                      length, (size_t)os_page);
  return SLIP_OK;
}

SLIP_API int32_t slip_range_reserve(size_t length, uint64_t *base) {
  if (!base) return slip__fail(SLIP_EINVAL, "base must not be NULL");
  *base = 0;
  uintptr_t os_page = (uintptr_t)sysconf(_SC_PAGESIZE);
  if (!length || length % os_page)
    return slip__fail(SLIP_EINVAL, "length %zu must be a non-zero multiple of the OS page size (%zu bytes)", length,
                      (size_t)os_page);
  void *at = mmap(NULL, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (at == MAP_FAILED) return os_failure("reserving an address range", length);
  *base = (uint64_t)(uintptr_t)at;
  return SLIP_OK;
}

SLIP_API int32_t slip_range_map_file(void *at, size_t length, int32_t fd, int64_t offset, int32_t populate) {
  int32_t status = check_place(at, length);
  if (status != SLIP_OK) return status;
  if (offset < 0 || (uint64_t)offset % (uint64_t)sysconf(_SC_PAGESIZE))
    return slip__fail(SLIP_EINVAL, "file offset %lld must be a non-negative multiple of the OS page size",
                      (long long)offset);
  int flags = MAP_SHARED | MAP_FIXED;
#ifdef MAP_POPULATE
  if (populate) flags |= MAP_POPULATE;
#else
  (void)populate;
#endif
  if (mmap(at, length, PROT_READ, flags, fd, (off_t)offset) == MAP_FAILED) return os_failure("mapping a file", length);
  return SLIP_OK;
}

SLIP_API int32_t slip_range_map_memory(void *at, size_t length, int32_t writable) {
  int32_t status = check_place(at, length);
  if (status != SLIP_OK) return status;
  int protection = writable ? PROT_READ | PROT_WRITE : PROT_READ;
  if (mmap(at, length, protection, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
    return os_failure("mapping memory", length);
  return SLIP_OK;
}

SLIP_API int32_t slip_range_release(void *at, size_t length) {
  int32_t status = check_place(at, length);
  if (status != SLIP_OK) return status;
  if (mmap(at, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED)
    return os_failure("releasing a part of an address range", length);
  return SLIP_OK;
}

SLIP_API int32_t slip_range_free(void *base, size_t length) {
  int32_t status = check_place(base, length);
  if (status != SLIP_OK) return status;
  if (munmap(base, length) != 0) return os_failure("freeing an address range", length);
  return SLIP_OK;
}
