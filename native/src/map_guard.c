/*
 * map_guard.c - memory-mapped files that survive being truncated.
 *
 * Reading a page of a shared file mapping that lies past the file's current
 * end raises SIGBUS, whose default action ends the process: a dataset file
 * truncated or rewritten in place (`cp other.slip train.slip` truncates
 * first) kills every process reading it through a mapping, in whatever code
 * touches the page - libjpeg, Numba-compiled loops, NumPy.  None of them can
 * be made to check first.
 *
 * Instead, a SIGBUS handler looks up the faulting address in a table of
 * guarded mappings.  Inside one, it maps a page of zeros over the lost page
 * and returns; the faulting load runs again, reads zeros, and the code goes
 * on: a decoder sees bytes that are not a JPEG and fails, a copy copies
 * zeros.  The handler counts the fault in the mapping's entry, and the
 * mapping's owner, which polls the count (slip_guard_faults) after its work,
 * reports the file as changed instead of handing on what it read.  Any other
 * SIGBUS goes to the handler that was installed before this one.
 *
 * The handler only reads atomics and calls mmap(2), a plain system call;
 * nothing in it allocates, locks or touches libc state.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

/* One slot per guarded mapping: every local shard of an open dataset takes
 * one, so as many as Linux lets a process map by default (vm.max_map_count,
 * 65530).  The array is zero-initialised BSS, 1.5 MiB of address space whose
 * pages are touched only as slots are used (and all of them only by the scan
 * of an actual SIGBUS). */
#define GUARD_SLOTS 65536

typedef struct guard_slot {
  _Atomic uintptr_t start; /* 0: free */
  _Atomic size_t length;
  _Atomic int64_t faults;
} guard_slot;

static guard_slot slots[GUARD_SLOTS];
static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER; /* guards slot allocation and installation */
static struct sigaction previous;                           /* SIGBUS's action before ours */
static _Atomic int gave_up;                                 /* an unguarded SIGBUS was handed on */
static uintptr_t page_size;

/* Hand a SIGBUS that is not ours to the action that was there before ours,
 * as if ours had never been installed: restore it and let the fault happen
 * again (a signal sent by kill(2) is raised again).  If the earlier action
 * hands the signal back to this one, the default action ends the process. */
static void hand_on(int sig, const siginfo_t *info) {
  if (atomic_exchange(&gave_up, 1)) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
  } else {
    sigaction(sig, &previous, NULL);
  }
  if (info->si_code <= 0) raise(sig); /* delivered when this handler returns */
}

static void on_sigbus(int sig, siginfo_t *info, void *context) {
  (void)context;
  int saved_errno = errno;
  uintptr_t address = (uintptr_t)info->si_addr;
  if (info->si_code > 0) { /* raised by the kernel for a memory access */
    for (int i = 0; i < GUARD_SLOTS; i++) {
      uintptr_t start = atomic_load_explicit(&slots[i].start, memory_order_acquire);
      if (!start || address < start || address - start >= atomic_load(&slots[i].length)) continue;
      void *page = (void *)(address & ~(page_size - 1));
      if (mmap(page, page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) break;
      atomic_fetch_add(&slots[i].faults, 1);
      errno = saved_errno;
      return;
    }
  }
  hand_on(sig, info);
  errno = saved_errno;
}

/* Make on_sigbus the SIGBUS action, keeping the current one to hand other
 * faults to; again if another handler has replaced it since (Python's
 * faulthandler.enable(), say), which is then the one handed to. */
static int32_t install(void) {
  struct sigaction current;
  if (sigaction(SIGBUS, NULL, &current) != 0) return slip__fail(SLIP_EIO, "cannot read the SIGBUS action");
  if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_sigbus) return SLIP_OK;
  struct sigaction ours;
  memset(&ours, 0, sizeof ours);
  ours.sa_sigaction = on_sigbus;
  ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&ours.sa_mask);
  page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
  previous = current;
  atomic_store(&gave_up, 0);
  if (sigaction(SIGBUS, &ours, NULL) != 0) return slip__fail(SLIP_EIO, "cannot install the SIGBUS handler");
  return SLIP_OK;
}

SLIP_API int32_t slip_guard_mapping(const void *address, size_t length, int32_t *guard) {
  if (!address || !length || !guard) return slip__fail(SLIP_EINVAL, "address, length and guard must be non-zero");
  pthread_mutex_lock(&registry);
  int32_t status = install();
  int32_t found = -1;
  for (int32_t i = 0; status == SLIP_OK && i < GUARD_SLOTS && found < 0; i++) {
    if (atomic_load(&slots[i].start)) continue;
    atomic_store(&slots[i].length, length);
    atomic_store(&slots[i].faults, 0);
    atomic_store_explicit(&slots[i].start, (uintptr_t)address, memory_order_release);
    found = i;
  }
  pthread_mutex_unlock(&registry);
  if (status != SLIP_OK) return status;
  if (found < 0) return slip__fail(SLIP_ETOOBIG, "all %d guarded mappings are in use", GUARD_SLOTS);
  *guard = found;
  return SLIP_OK;
}

SLIP_API int64_t slip_guard_faults(int32_t guard) {
  if (guard < 0 || guard >= GUARD_SLOTS || !atomic_load(&slots[guard].start))
    return slip__fail(SLIP_EINVAL, "guard %d is not a guarded mapping", guard);
  return atomic_load(&slots[guard].faults);
}

SLIP_API int32_t slip_unguard_mapping(int32_t guard) {
  if (guard < 0 || guard >= GUARD_SLOTS) return slip__fail(SLIP_EINVAL, "guard %d is not a guarded mapping", guard);
  pthread_mutex_lock(&registry);
  uintptr_t was = atomic_exchange_explicit(&slots[guard].start, 0, memory_order_release);
  pthread_mutex_unlock(&registry);
  if (!was) return slip__fail(SLIP_EINVAL, "guard %d is not a guarded mapping", guard);
  return SLIP_OK;
}
