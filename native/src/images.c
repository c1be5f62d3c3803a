/*
 * images.c - the argument checks of the kernels that take whole images as
 * (pointer, size, height, width, channels, stride): the tone and warp
 * kernels (tones.c, warps.c).
 */
#include <stdint.h>

#include "internal.h"

int32_t slip__check_image(const char *name, const void *data, size_t size, int32_t height, int32_t width,
                          int32_t channels, int64_t stride, size_t *extent) {
  if (!data) return slip__fail(SLIP_EINVAL, "%s must not be NULL", name);
  if (height < 1 || width < 1 || height > SLIP_MAX_DIMENSION || width > SLIP_MAX_DIMENSION)
    return slip__fail(SLIP_EINVAL, "%s is %d x %d pixels; each side must be 1 to %d", name, height, width,
                      SLIP_MAX_DIMENSION);
  if (channels < 1 || channels > 4)
    return slip__fail(SLIP_EINVAL, "%s has %d channels; it must have 1 to 4", name, channels);
  int64_t row = (int64_t)width * channels;
  if (stride < row)
    return slip__fail(SLIP_EINVAL, "%s's stride %lld is smaller than a row of %lld bytes", name, (long long)stride,
                      (long long)row);
  /* The span, (height - 1) * stride + row, without overflowing int64_t. */
  if (height > 1 && stride > (INT64_MAX - row) / (height - 1))
    return slip__fail(SLIP_EBUFFER, "%s's stride %lld spans more bytes than any buffer holds", name,
                      (long long)stride);
  uint64_t span = (uint64_t)((int64_t)(height - 1) * stride + row);
  if ((uint64_t)size < span)
    return slip__fail(SLIP_EBUFFER, "%s holds %zu bytes; %d rows of %lld bytes, %lld apart, need %llu", name, size,
                      height, (long long)row, (long long)stride, (unsigned long long)span);
  *extent = (size_t)span;
  return SLIP_OK;
}

int slip__overlap(const void *a, size_t a_size, const void *b, size_t b_size) {
  uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
  return a0 < b0 + b_size && b0 < a0 + a_size;
}
