/*
 * fuzz_decode_crop_resize.c - libFuzzer harness for the fused kernel,
 * slip_jpeg_decode_crop_resize, and for slip_jpeg_decode at a DCT scale.
 *
 * The first 8 bytes of an input choose the crop (as fractions of the image),
 * the output size (1 to 64 pixels a side), the flags, the filter and the
 * scale; the rest is the JPEG.  The output buffer is exactly as large as the
 * header documents, so AddressSanitizer sees any write past it, and the
 * canaries around it catch writes the library might make inside a larger
 * allocation.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

enum { PARAMS = 8 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < PARAMS) return 0;
  const uint8_t *p = data;
  data += PARAMS;
  size -= PARAMS;
  slip_jpeg_info_t info;
  if (slip_jpeg_info(data, size, &info) != SLIP_OK) return 0;
  /* Bound the work per input: huge claimed sizes are exercised by the
   * header checks above and by SLIP_MAX_DECODE_MEMORY, not decoded here. */
  if ((int64_t)info.height * info.width > 4096 * 4096) return 0;

  int32_t y = (int32_t)((int64_t)info.height * p[0] / 256), x = (int32_t)((int64_t)info.width * p[1] / 256);
  int32_t h = 1 + (int32_t)((int64_t)(info.height - y - 1) * p[2] / 255);
  int32_t w = 1 + (int32_t)((int64_t)(info.width - x - 1) * p[3] / 255);
  int32_t out_h = 1 + p[4] % 64, out_w = 1 + p[5] % 64;
  int32_t flags = p[6] & (SLIP_DECODE_FLIP_X | SLIP_DECODE_FAST_IDCT);
  int32_t interp = (p[6] >> 2) & 1;
  int64_t stride = (int64_t)out_w * 3 + (p[7] & 3);
  size_t out_size = (size_t)(out_h - 1) * (size_t)stride + (size_t)out_w * 3;

  uint8_t *block = guarded(out_size);
  int32_t status = slip_jpeg_decode_crop_resize(data, size, y, x, h, w, out_h, out_w, flags, interp, block + CANARY,
                                                out_size, stride);
  check_status(status);
  check_guards(block, out_size);
  free(block);

  /* The region decoder on its own, at the scale the fused kernel picked. */
  int32_t d = slip_jpeg_scale_for(h, w, out_h, out_w);
  if (d != 1 && d != 2 && d != 4 && d != 8) abort();
  int32_t rows = (y + h + d - 1) / d - y / d, cols = (x + w + d - 1) / d - x / d;
  size_t region_size = (size_t)rows * (size_t)cols * 3;
  block = guarded(region_size);
  status = slip_jpeg_decode(data, size, y, x, h, w, d, flags, block + CANARY, region_size, (int64_t)cols * 3);
  check_status(status);
  check_guards(block, region_size);
  free(block);
  return 0;
}
