/*
 * fuzz_planes.c - libFuzzer harness for the planar YCbCr 4:2:0 functions:
 * slip_jpeg_decode_planes on JPEG input, and slip_planes_crop_resize on the
 * planes it makes and on hostile planes whose claimed size disagrees with
 * the bytes given.
 *
 * The first 8 bytes of an input choose the crop (as fractions of the
 * image), the output size (1 to 64 pixels a side), the flags and filter, and
 * with them the claimed image size of the hostile call; the rest is a JPEG
 * (the layout of fuzz_decode_crop_resize's inputs, whose seeds serve both).  Buffers
 * are exactly as large as the header documents, inside canaries, so
 * AddressSanitizer and the canaries see any access past them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

enum { PARAMS = 8 };

/* Crop the planes of a height x width image (size bytes at planes) as the parameters p say. */
static void crop(const uint8_t *p, const uint8_t *planes, size_t size, int32_t height, int32_t width) {
  int32_t y = (int32_t)((int64_t)height * p[0] / 256), x = (int32_t)((int64_t)width * p[1] / 256);
  int32_t h = 1 + (int32_t)((int64_t)(height - y - 1) * p[2] / 255);
  int32_t w = 1 + (int32_t)((int64_t)(width - x - 1) * p[3] / 255);
  int32_t out_h = 1 + p[4] % 64, out_w = 1 + p[5] % 64;
  int32_t flags = p[6] & SLIP_DECODE_FLIP_X, interp = (p[6] >> 1) % 3;
  int64_t stride = (int64_t)out_w * 3 + (p[7] & 3);
  size_t out_size = (size_t)(out_h - 1) * (size_t)stride + (size_t)out_w * 3;
  uint8_t *block = guarded(out_size);
  int32_t status = slip_planes_crop_resize(planes, size, height, width, y, x, h, w, out_h, out_w, flags, interp,
                                           block + CANARY, out_size, stride);
  check_status(status);
  check_guards(block, out_size);
  free(block);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < PARAMS) return 0;
  const uint8_t *p = data;
  data += PARAMS;
  size -= PARAMS;

  /* Hostile planes: the JPEG's bytes taken as planes of a claimed size they may not fill. */
  int32_t claimed_h = 1 + (p[0] | p[4] << 8) % 512, claimed_w = 1 + (p[1] | p[5] << 8) % 512;
  uint8_t *raw = guarded(size);
  memcpy(raw + CANARY, data, size);
  crop(p, raw + CANARY, size, claimed_h, claimed_w);
  check_guards(raw, size);
  free(raw);

  slip_jpeg_info_t info;
  if (slip_jpeg_info(data, size, &info) != SLIP_OK) return 0;
  /* Bound the work per input; huge claimed sizes are the header checks' business. */
  if ((int64_t)info.height * info.width > 4096 * 4096) return 0;
  int64_t bytes = slip_planes_bytes(info.height, info.width);
  if (bytes < 0) abort();
  uint8_t *planes = guarded((size_t)bytes);
  int32_t status = slip_jpeg_decode_planes(data, size, planes + CANARY, (size_t)bytes);
  check_status(status);
  check_guards(planes, (size_t)bytes);
  if (status == SLIP_OK) crop(p, planes + CANARY, (size_t)bytes, info.height, info.width);
  free(planes);
  return 0;
}
