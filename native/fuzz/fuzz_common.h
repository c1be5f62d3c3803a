/*
 * fuzz_common.h - what the libFuzzer harnesses of the image kernels share:
 * the statuses a kernel may answer hostile input with, and output buffers
 * inside canaries.
 */
#ifndef SLIPSTREAM_FUZZ_COMMON_H
#define SLIPSTREAM_FUZZ_COMMON_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slipstream.h"

enum { CANARY = 64 };

/* Abort unless status is one a kernel may answer bad data with (never
 * SLIP_EINVAL: the harnesses pass valid arguments), and a failure comes
 * with a detail message. */
static void check_status(int32_t status) {
  switch (status) {
    case SLIP_OK: case SLIP_ENOTJPEG: case SLIP_ECORRUPT: case SLIP_ETRUNCATED: case SLIP_EUNSUPPORTED:
    case SLIP_ETOOBIG: case SLIP_ENOMEM:
      break;
    default:
      abort();
  }
  if (status != SLIP_OK && slip_last_error()[0] == '\0') abort();
}

/* A block of size bytes with CANARY bytes of 0xA5 on each side; the usable bytes start at block + CANARY. */
static uint8_t *guarded(size_t size) {
  uint8_t *block = malloc(size + 2 * CANARY);
  if (block == NULL) abort();
  memset(block, 0xA5, size + 2 * CANARY);
  return block;
}

/* Abort when anything wrote over the canaries of a guarded() block. */
static void check_guards(const uint8_t *block, size_t size) {
  for (size_t i = 0; i < CANARY; i++)
    if (block[i] != 0xA5 || block[CANARY + size + i] != 0xA5) abort();
}

#endif
