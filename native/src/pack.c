/*
 * pack.c - 8-bit interleaved pixels to tensor layouts and element types,
 * with per-channel normalization in the same pass.
 *
 * Every input is one of 256 byte values per channel, so the normalized,
 * rounded output of each is computed once into a lookup table (kept per
 * thread while mean and std stay the same) and the pixel loop only copies
 * table entries.  This makes the result exact (one correctly rounded
 * conversion from double) and the loop cheap.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

/* Correctly rounded (nearest, ties to even) conversion of a finite double to
 * IEEE 754 binary16 bits. */
static uint16_t half_from_double(double v) {
  uint16_t sign = signbit(v) ? 0x8000u : 0u;
  double a = fabs(v);
  if (isnan(v)) return 0x7e00u;
  if (a < 0x1p-14) {
    /* Subnormal range: a multiple of 2^-24; 1024 units is the smallest
     * normal, whose encoding 0x0400 follows on naturally. */
    return (uint16_t)(sign | (uint16_t)nearbyint(a * 0x1p24));
  }
  int e;
  double m = frexp(a, &e); /* a = m * 2^e, 0.5 <= m < 1 */
  double q = nearbyint(m * 2048.0);
  if (q == 2048.0) {
    q = 1024.0;
    e += 1;
  }
  int biased = e - 1 + 15;
  if (biased >= 31) return (uint16_t)(sign | 0x7c00u);
  return (uint16_t)(sign | (uint16_t)(biased << 10) | (uint16_t)((int)q - 1024));
}

static size_t dtype_size(int32_t dtype) {
  switch (dtype) {
  case SLIP_DTYPE_UINT8: return 1;
  case SLIP_DTYPE_FLOAT16: return 2;
  case SLIP_DTYPE_FLOAT32: return 4;
  default: return 0;
  }
}

/* The thread's lookup tables for this normalization, rebuilt only when it
 * differs from the previous call's. */
static const slip_pack_tables *pack_tables(slip_pack_tables *t, int32_t dtype, int32_t channels, const double *mean,
                                           const double *std) {
  int same = t->valid && t->dtype == dtype && t->channels == channels;
  for (int32_t c = 0; same && c < channels; c++)
    same = t->mean[c] == (mean ? mean[c] : 0.0) && t->std[c] == (std ? std[c] : 1.0);
  if (same) return t;
  t->dtype = dtype;
  t->channels = channels;
  for (int32_t c = 0; c < channels; c++) {
    t->mean[c] = mean ? mean[c] : 0.0;
    t->std[c] = std ? std[c] : 1.0;
    for (int v = 0; v < 256; v++) {
      double n = (v - t->mean[c]) / t->std[c];
      if (dtype == SLIP_DTYPE_FLOAT32) t->table.f32[c][v] = (float)n;
      else t->table.f16[c][v] = half_from_double(n);
    }
  }
  t->valid = 1;
  return t;
}

SLIP_API int32_t slip_pack(const uint8_t *src, int32_t height, int32_t width, int32_t channels, int64_t src_stride,
                           void *dst, int32_t dtype, int64_t dst_stride_c, int64_t dst_stride_y,
                           int64_t dst_stride_x, const double *mean, const double *std) {
  if (!src || !dst) return slip__fail(SLIP_EINVAL, "src and dst must not be NULL");
  if (height <= 0 || width <= 0) return slip__fail(SLIP_EINVAL, "image size %d x %d is not positive", height, width);
  if (channels < 1 || channels > 4) return slip__fail(SLIP_EINVAL, "channels is %d; it must be 1 to 4", channels);
  if (src_stride < (int64_t)width * channels)
    return slip__fail(SLIP_EINVAL, "src_stride %lld is smaller than a row (%lld bytes)", (long long)src_stride,
                      (long long)width * channels);
  size_t size = dtype_size(dtype);
  if (!size) return slip__fail(SLIP_EINVAL, "unknown dtype %d", dtype);
  if (((uintptr_t)dst | (uint64_t)dst_stride_c | (uint64_t)dst_stride_y | (uint64_t)dst_stride_x) % size)
    return slip__fail(SLIP_EINVAL, "dst and its strides must be multiples of the %zu-byte element size", size);
  if (channels > 1 && dst_stride_c == 0)
    return slip__fail(SLIP_EINVAL, "dst_stride_c is 0 for %d channels: they would overwrite each other", channels);
  if (dtype == SLIP_DTYPE_UINT8 && (mean || std))
    return slip__fail(SLIP_EINVAL, "mean and std must be NULL for uint8 output");

  for (int32_t c = 0; c < channels; c++) {
    double m = mean ? mean[c] : 0.0, s = std ? std[c] : 1.0;
    if (!(s != 0.0) || !isfinite(s) || !isfinite(m))
      return slip__fail(SLIP_EINVAL, "channel %d: mean %g and std %g must be finite and std non-zero", c, m, s);
  }
  const slip_pack_tables *tables = NULL;
  if (dtype != SLIP_DTYPE_UINT8) {
    slip_thread_state *ts = slip__thread_state();
    if (!ts) return SLIP_ENOMEM;
    tables = pack_tables(&ts->pack, dtype, channels, mean, std);
  }

  uint8_t *out = dst;
  if (dtype == SLIP_DTYPE_FLOAT16 && channels == 3 && dst_stride_x == 2) {
    /* The loader's case (planar float16): one pass over each source row,
     * three contiguous output rows, no stride arithmetic per element. */
    const uint16_t *t0 = tables->table.f16[0], *t1 = tables->table.f16[1], *t2 = tables->table.f16[2];
    for (int32_t i = 0; i < height; i++) {
      const uint8_t *s = src + (int64_t)i * src_stride;
      uint16_t *o0 = (uint16_t *)(out + (int64_t)i * dst_stride_y);
      uint16_t *o1 = (uint16_t *)((uint8_t *)o0 + dst_stride_c), *o2 = (uint16_t *)((uint8_t *)o1 + dst_stride_c);
      for (int32_t j = 0; j < width; j++, s += 3) {
        o0[j] = t0[s[0]];
        o1[j] = t1[s[1]];
        o2[j] = t2[s[2]];
      }
    }
    return SLIP_OK;
  }
  for (int32_t c = 0; c < channels; c++) {
    for (int32_t i = 0; i < height; i++) {
      const uint8_t *s = src + (int64_t)i * src_stride + c;
      uint8_t *o = out + (int64_t)c * dst_stride_c + (int64_t)i * dst_stride_y;
      if (dtype == SLIP_DTYPE_UINT8) {
        for (int32_t j = 0; j < width; j++) o[(int64_t)j * dst_stride_x] = s[(size_t)j * (size_t)channels];
      } else if (dtype == SLIP_DTYPE_FLOAT16) {
        const uint16_t *t = tables->table.f16[c];
        for (int32_t j = 0; j < width; j++)
          *(uint16_t *)(o + (int64_t)j * dst_stride_x) = t[s[(size_t)j * (size_t)channels]];
      } else {
        const float *t = tables->table.f32[c];
        for (int32_t j = 0; j < width; j++)
          *(float *)(o + (int64_t)j * dst_stride_x) = t[s[(size_t)j * (size_t)channels]];
      }
    }
  }
  return SLIP_OK;
}
