/*
 * fuzz_jpeg_info.c - libFuzzer harness for slip_jpeg_info.
 *
 * Any input must give SLIP_OK with a plausible description or a documented
 * error status, and leave *info untouched on failure; anything else (a crash,
 * a sanitizer report, an undocumented status) aborts the run.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slipstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  slip_jpeg_info_t info, untouched;
  memset(&info, 0x5a, sizeof info);
  memcpy(&untouched, &info, sizeof info);
  int32_t status = slip_jpeg_info(data, size, &info);
  if (status == SLIP_OK) {
    if (info.height < 1 || info.width < 1 || info.height > SLIP_MAX_DIMENSION || info.width > SLIP_MAX_DIMENSION)
      abort();
    if (info.components != 1 && info.components != 3 && info.components != 4) abort();
    if (info.colorspace < SLIP_COLORSPACE_UNKNOWN || info.colorspace > SLIP_COLORSPACE_YCCK) abort();
    if (info.subsampling < SLIP_SUBSAMPLING_444 || info.subsampling > SLIP_SUBSAMPLING_OTHER) abort();
    if (info.mcu_height < 8 || info.mcu_width < 8) abort();
    return 0;
  }
  switch (status) {
    case SLIP_ENOTJPEG: case SLIP_ECORRUPT: case SLIP_ETRUNCATED: case SLIP_EUNSUPPORTED: case SLIP_ETOOBIG:
      break;
    default:
      abort();
  }
  if (memcmp(&info, &untouched, sizeof info) != 0) abort();
  if (slip_last_error()[0] == '\0') abort(); /* every failure explains itself */
  return 0;
}
