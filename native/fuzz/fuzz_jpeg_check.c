/*
 * fuzz_jpeg_check.c - differential libFuzzer harness for slip_jpeg_check and
 * slip_jpeg_scan against the decode they stand for.
 *
 * For every input: slip_jpeg_check must return exactly the status of
 * slip_jpeg_decode of the whole image at scale 1/8, and slip_jpeg_scan may
 * return 1 only when that decode succeeds.  Any disagreement aborts, so the
 * fuzzer hunts for a file the scanner passes and libjpeg refuses (a weaker
 * check) or one the check refuses and libjpeg decodes (a stricter one), and
 * AddressSanitizer watches the scanner's reads.
 */
#include <stdint.h>
#include <stdlib.h>

#include "slipstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  slip_jpeg_info_t info;
  int32_t eighth = slip_jpeg_info(data, size, &info);
  if (eighth == SLIP_OK) {
    /* Bound the work per input; huge claimed sizes are the header checks' business. */
    if ((int64_t)info.height * info.width > 4096 * 4096) return 0;
    int32_t h = (info.height + 7) / 8, w = (info.width + 7) / 8;
    size_t bytes = (size_t)h * (size_t)w * 3;
    uint8_t *out = malloc(bytes);
    if (out == NULL) abort();
    eighth = slip_jpeg_decode(data, size, 0, 0, info.height, info.width, 8, 0, out, bytes, (int64_t)w * 3);
    free(out);
  }
  int32_t scanned = slip_jpeg_scan(data, size);
  int32_t checked = slip_jpeg_check(data, size);
  if (checked != eighth) abort();
  if (scanned == 1 && eighth != SLIP_OK) abort();
  if (scanned != 0 && scanned != 1 && scanned >= 0) abort();
  return 0;
}
