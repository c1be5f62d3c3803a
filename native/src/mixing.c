/*
 * mixing.c - MixUp's blend and CutMix's paste of one sample of a batch.
 *
 * The blend is computed in double precision, lam * a + (1 - lam) * b, each
 * product rounded on its own (no fused multiply-add, as in tones.c), and
 * stored as the element type stores it.  A uint8 value is rounded half to
 * even: clipped to 0 .. 255 first (which changes no rounded value), then
 * rounded by adding 1.5 * 2^52 and taking it away again, exact in the
 * default rounding mode, a loop that vectorizes where one calling rint()
 * would not.
 * Nothing here allocates.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

/* Adding then subtracting it rounds a double of magnitude below 2^51 to a
 * whole number, half to even. */
#define ROUNDING 6755399441055744.0 /* 1.5 * 2^52 */

static inline uint8_t fitted8(double v) {
  double t = v > 0.0 ? v : 0.0; /* NaN stores 0 */
  t = t < 255.0 ? t : 255.0;
  return (uint8_t)(int32_t)((t + ROUNDING) - ROUNDING); /* not folded away: IEEE sums are not associative */
}

static void blend8(const uint8_t *a, const uint8_t *b, uint8_t *d, size_t n, double lam) {
  double other = 1.0 - lam;
  for (size_t j = 0; j < n; j++) d[j] = fitted8(lam * (double)a[j] + other * (double)b[j]);
}

static void blend32(const float *a, const float *b, float *d, size_t n, double lam) {
  double other = 1.0 - lam;
  for (size_t j = 0; j < n; j++) d[j] = (float)(lam * (double)a[j] + other * (double)b[j]);
}

/* Whether dst overlaps src without being it. */
static int overlaps_apart(const void *src, const void *dst, size_t bytes) {
  return src != dst && slip__overlap(src, bytes, dst, bytes);
}

SLIP_API int32_t slip_mix_blend(const void *a, size_t a_size, const void *b, size_t b_size, void *dst,
                                size_t dst_size, size_t count, int32_t dtype, double lam) {
  if (!a || !b || !dst) return slip__fail(SLIP_EINVAL, "a, b and dst must not be NULL");
  if (dtype != SLIP_DTYPE_UINT8 && dtype != SLIP_DTYPE_FLOAT32)
    return slip__fail(SLIP_EINVAL, "dtype %d is not SLIP_DTYPE_UINT8 or SLIP_DTYPE_FLOAT32", dtype);
  size_t element = dtype == SLIP_DTYPE_UINT8 ? 1 : sizeof(float);
  if (element > 1 && ((uintptr_t)a % element || (uintptr_t)b % element || (uintptr_t)dst % element))
    return slip__fail(SLIP_EINVAL, "float32 arrays must be aligned to 4 bytes");
  if (!isfinite(lam)) return slip__fail(SLIP_EINVAL, "lam is not a finite number");
  if (count > SIZE_MAX / element) return slip__fail(SLIP_EBUFFER, "%zu elements are more than any buffer holds", count);
  size_t bytes = count * element;
  if (a_size < bytes || b_size < bytes || dst_size < bytes)
    return slip__fail(SLIP_EBUFFER, "a, b and dst hold %zu, %zu and %zu bytes; %zu elements need %zu", a_size, b_size,
                      dst_size, count, bytes);
  if (overlaps_apart(a, dst, bytes) || overlaps_apart(b, dst, bytes))
    return slip__fail(SLIP_EINVAL, "dst overlaps a or b without being it");
  if (dtype == SLIP_DTYPE_UINT8)
    blend8(a, b, dst, count, lam);
  else
    blend32(a, b, dst, count, lam);
  return SLIP_OK;
}

SLIP_API int32_t slip_mix_paste(const void *a, size_t a_size, const void *b, size_t b_size, void *dst,
                                size_t dst_size, int32_t planes, int32_t height, int32_t width, int32_t pixel_bytes,
                                int32_t top, int32_t left, int32_t bottom, int32_t right) {
  if (!a || !b || !dst) return slip__fail(SLIP_EINVAL, "a, b and dst must not be NULL");
  if (planes < 1 || height < 1 || width < 1 || planes > SLIP_MAX_DIMENSION || height > SLIP_MAX_DIMENSION ||
      width > SLIP_MAX_DIMENSION)
    return slip__fail(SLIP_EINVAL, "%d planes of %d x %d pixels; each must be 1 to %d", planes, height, width,
                      SLIP_MAX_DIMENSION);
  if (pixel_bytes < 1 || pixel_bytes > 16)
    return slip__fail(SLIP_EINVAL, "pixels of %d bytes; they must have 1 to 16", pixel_bytes);
  if (top < 0 || left < 0 || bottom < top || right < left || bottom > height || right > width)
    return slip__fail(SLIP_EINVAL, "the box rows %d .. %d, columns %d .. %d is not inside %d x %d pixels", top,
                      bottom, left, right, height, width);
  /* at most 65500^3 * 16 bytes: no overflow in 64 bits */
  uint64_t row = (uint64_t)width * (uint64_t)pixel_bytes, plane = row * (uint64_t)height;
  uint64_t bytes = plane * (uint64_t)planes;
  if ((uint64_t)a_size < bytes || (uint64_t)b_size < bytes || (uint64_t)dst_size < bytes)
    return slip__fail(SLIP_EBUFFER, "a, b and dst hold %zu, %zu and %zu bytes; the sample has %llu", a_size, b_size,
                      dst_size, (unsigned long long)bytes);
  if (slip__overlap(a, (size_t)bytes, dst, (size_t)bytes) || slip__overlap(b, (size_t)bytes, dst, (size_t)bytes))
    return slip__fail(SLIP_EINVAL, "dst overlaps a or b");
  memcpy(dst, a, (size_t)bytes);
  size_t offset = (size_t)left * (size_t)pixel_bytes, span = (size_t)(right - left) * (size_t)pixel_bytes;
  if (span == 0) return SLIP_OK;
  for (int32_t p = 0; p < planes; p++)
    for (int32_t r = top; r < bottom; r++) {
      size_t at = (size_t)p * (size_t)plane + (size_t)r * (size_t)row + offset;
      memcpy((uint8_t *)dst + at, (const uint8_t *)b + at, span);
    }
  return SLIP_OK;
}
