/*
 * state.c - library identity, status names, per-thread error detail and
 * per-thread scratch state.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The package's version, which the build passes from pyproject.toml (its
 * one written place); builds of the sources alone, such as the sanitizer
 * and fuzzing harnesses, have none. */
#ifndef SLIP_VERSION_STRING
#define SLIP_VERSION_STRING "0+unknown"
#endif

static _Thread_local char last_error[512];
static _Thread_local slip_thread_state *thread_state;
static pthread_key_t state_key;
static pthread_once_t state_key_once = PTHREAD_ONCE_INIT;

SLIP_API const char *slip_version(void) { return SLIP_VERSION_STRING; }

SLIP_API int32_t slip_abi_version(void) { return SLIP_ABI_VERSION; }

SLIP_API const char *slip_strerror(int32_t status) {
  switch (status) {
  case SLIP_OK: return "SLIP_OK: success";
  case SLIP_EINVAL: return "SLIP_EINVAL: invalid argument";
  case SLIP_ENOMEM: return "SLIP_ENOMEM: out of memory";
  case SLIP_EBUFFER: return "SLIP_EBUFFER: output buffer too small";
  case SLIP_ENOTJPEG: return "SLIP_ENOTJPEG: not a JPEG image";
  case SLIP_ECORRUPT: return "SLIP_ECORRUPT: corrupt data";
  case SLIP_ETRUNCATED: return "SLIP_ETRUNCATED: truncated data";
  case SLIP_EUNSUPPORTED: return "SLIP_EUNSUPPORTED: unsupported data";
  case SLIP_ETOOBIG: return "SLIP_ETOOBIG: image or video exceeds size limits";
  case SLIP_EIO: return "SLIP_EIO: I/O error";
  case SLIP_EEOF: return "SLIP_EEOF: unexpected end of file";
  case SLIP_ESHORT: return "SLIP_ESHORT: the video is shorter than the window of frames";
  default: return "unknown status";
  }
}

SLIP_API const char *slip_last_error(void) { return last_error; }

int32_t slip__fail(int32_t status, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, args);
  va_end(args);
  return status;
}

static void destroy_state(void *p) {
  slip_thread_state *ts = p;
  if (ts->dec_ready) jpeg_destroy_decompress(&ts->dec);
  free(ts->block.data);
  free(ts->rows.data);
  free(ts->weights.data);
  free(ts->accum.data);
  free(ts->sub.data);
  free(ts->planes.data);
  free(ts->chroma.data);
  free(ts->splice_blocks.data);
  free(ts->splice_out.data);
  free(ts);
  thread_state = NULL;
}

static void make_state_key(void) {
  /* If this fails the states are still created and used, only not freed at
   * thread exit; there is nothing better to do from a pthread_once routine. */
  (void)pthread_key_create(&state_key, destroy_state);
}

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

/* The SLIP__ISA_* extensions of this x86 CPU whose registers the operating
 * system saves: CPUID for the CPU, XGETBV for the OS's AVX state.
 * (__builtin_cpu_supports would do, but not every compiler knows "f16c".) */
static int32_t cpu_isa(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  const unsigned osxsave = 1u << 27, avx = 1u << 28, f16c = 1u << 29;
  if ((c & (osxsave | avx)) != (osxsave | avx)) return 0;
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 6u) != 6u) return 0; /* XMM and YMM state */
  int32_t isa = (c & f16c) ? SLIP__ISA_F16C : 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 5))) isa |= SLIP__ISA_AVX2;
  return isa;
}
#else
static int32_t cpu_isa(void) { return 0; }
#endif

/* The SLIP__ISA_* extensions the kernels may use: the CPU's, unless the
 * environment asks for the portable kernels. */
static int32_t usable_isa(void) {
  const char *portable = getenv("SLIPSTREAM_PORTABLE_KERNELS");
  if (portable && *portable && strcmp(portable, "0") != 0) return 0;
  return cpu_isa();
}

slip_thread_state *slip__thread_state(void) {
  if (thread_state) return thread_state;
  pthread_once(&state_key_once, make_state_key);
  slip_thread_state *ts = calloc(1, sizeof *ts);
  if (!ts) {
    slip__fail(SLIP_ENOMEM, "cannot allocate %zu bytes of per-thread state", sizeof *ts);
    return NULL;
  }
  ts->isa = usable_isa();
  pthread_setspecific(state_key, ts);
  thread_state = ts;
  return ts;
}

void *slip__scratch_reserve(slip_scratch *s, size_t n) {
  if (n <= s->capacity) return s->data;
  /* Grow geometrically so that a slowly increasing workload settles quickly. */
  size_t grown = s->capacity + s->capacity / 2;
  size_t capacity = n > grown ? n : grown;
  void *data = malloc(capacity);
  if (!data) {
    slip__fail(SLIP_ENOMEM, "cannot allocate %zu bytes of scratch memory", capacity);
    return NULL;
  }
  free(s->data);
  s->data = data;
  s->capacity = capacity;
  return data;
}
