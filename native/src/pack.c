/*
 * pack.c - 8-bit interleaved pixels to tensor layouts and element types,
 * with per-channel normalization in the same pass.
 *
 * Every input is one of 256 byte values per channel, so the normalized,
 * rounded output of each is computed once into a lookup table (kept per
 * thread while mean and std stay the same) and the pixel loop only copies
 * table entries.  This makes the result exact (one correctly rounded
 * conversion from double) and the loop cheap.
 *
 * The loader's case, RGB to planar float16, has a vector path on x86-64
 * CPUs with AVX2 and F16C: eight pixels are split into channels with byte
 * shuffles, normalized in float and converted by the hardware, about twice
 * as fast as the table's three loads and stores per pixel.  Single
 * precision is not the double the contract names, so the tables decide:
 * the vector path is used only for a normalization whose 256 float results
 * per channel, converted by the same instructions, equal the table's every
 * entry (true of ImageNet's mean and std) and are never binary16
 * subnormals, where a thread's flush-to-zero mode could change them.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SLIP_PACK_VECTOR 1
#endif

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

#if SLIP_PACK_VECTOR
/* Whether the vector path's arithmetic, done here one value at a time with
 * the same operations, gives every float16 table entry of t. */
__attribute__((target("avx2,f16c"))) static int vector_gives_tables(slip_pack_tables *t) {
  for (int32_t c = 0; c < t->channels; c++) {
    t->fmean[c] = (float)t->mean[c];
    t->finv[c] = (float)(1.0 / t->std[c]);
    for (int v = 0; v < 256; v++) {
      float r = ((float)v - t->fmean[c]) * t->finv[c];
      if (r != 0.0f && fabsf(r) < 0x1p-14f) return 0;
      if ((uint16_t)_cvtss_sh(r, _MM_FROUND_TO_NEAREST_INT) != t->table.f16[c][v]) return 0;
    }
  }
  return 1;
}

static int vector_matches_tables(slip_pack_tables *t, int32_t isa) {
  const int32_t needed = SLIP__ISA_AVX2 | SLIP__ISA_F16C;
  return (isa & needed) == needed && vector_gives_tables(t);
}

/* Eight RGB pixels (24 bytes at s) normalized into eight float16 values of
 * each of o0, o1, o2. */
__attribute__((target("avx2,f16c"))) static inline void pack8(const uint8_t *s, const slip_pack_tables *t,
                                                               uint16_t *o0, uint16_t *o1, uint16_t *o2) {
  const __m128i lo = _mm_loadu_si128((const __m128i *)s);
  const __m128i hi = _mm_loadl_epi64((const __m128i *)(s + 16));
  /* Byte i of a channel: source byte 3i + c, from lo below 16, else from hi. */
  const __m128i r = _mm_or_si128(_mm_shuffle_epi8(lo, _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1,
                                                                     -1, -1, -1)),
                                 _mm_shuffle_epi8(hi, _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, -1, -1, -1, -1, -1,
                                                                     -1, -1, -1)));
  const __m128i g = _mm_or_si128(_mm_shuffle_epi8(lo, _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1,
                                                                     -1, -1, -1)),
                                 _mm_shuffle_epi8(hi, _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, -1, -1, -1, -1, -1,
                                                                     -1, -1, -1)));
  const __m128i b = _mm_or_si128(_mm_shuffle_epi8(lo, _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1,
                                                                     -1, -1, -1)),
                                 _mm_shuffle_epi8(hi, _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, -1, -1, -1, -1, -1,
                                                                     -1, -1, -1)));
  const __m128i channel[3] = {r, g, b};
  uint16_t *out[3] = {o0, o1, o2};
  for (int c = 0; c < 3; c++) {
    __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(channel[c]));
    v = _mm256_mul_ps(_mm256_sub_ps(v, _mm256_set1_ps(t->fmean[c])), _mm256_set1_ps(t->finv[c]));
    _mm_storeu_si128((__m128i *)out[c], _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
}

/* The planar float16 RGB loop of slip_pack on the vector path; the last
 * width % 8 pixels of a row come from the tables. */
__attribute__((target("avx2,f16c"))) static void pack_rgb_f16_vector(const uint8_t *src, int32_t height,
                                                                     int32_t width, int64_t src_stride,
                                                                     uint8_t *out, int64_t dst_stride_c,
                                                                     int64_t dst_stride_y,
                                                                     const slip_pack_tables *t) {
  const uint16_t *t0 = t->table.f16[0], *t1 = t->table.f16[1], *t2 = t->table.f16[2];
  for (int32_t i = 0; i < height; i++) {
    const uint8_t *s = src + (int64_t)i * src_stride;
    uint16_t *o0 = (uint16_t *)(out + (int64_t)i * dst_stride_y);
    uint16_t *o1 = (uint16_t *)((uint8_t *)o0 + dst_stride_c), *o2 = (uint16_t *)((uint8_t *)o1 + dst_stride_c);
    int32_t j = 0;
    for (; j + 8 <= width; j += 8) pack8(s + (size_t)j * 3, t, o0 + j, o1 + j, o2 + j);
    for (; j < width; j++) {
      o0[j] = t0[s[(size_t)j * 3]];
      o1[j] = t1[s[(size_t)j * 3 + 1]];
      o2[j] = t2[s[(size_t)j * 3 + 2]];
    }
  }
}
#else
static int vector_matches_tables(slip_pack_tables *t, int32_t isa) { return 0; }
#endif

/* The thread's lookup tables for this normalization, rebuilt only when it
 * differs from the previous call's. */
static const slip_pack_tables *pack_tables(slip_pack_tables *t, int32_t isa, int32_t dtype, int32_t channels,
                                           const double *mean, const double *std) {
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
  t->vector = dtype == SLIP_DTYPE_FLOAT16 && channels == 3 && vector_matches_tables(t, isa);
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
    tables = pack_tables(&ts->pack, ts->isa, dtype, channels, mean, std);
  }

  uint8_t *out = dst;
  if (dtype == SLIP_DTYPE_FLOAT16 && channels == 3 && dst_stride_x == 2) {
    /* The loader's case (planar float16): one pass over each source row,
     * three contiguous output rows, no stride arithmetic per element. */
#if SLIP_PACK_VECTOR
    if (tables->vector) {
      pack_rgb_f16_vector(src, height, width, src_stride, out, dst_stride_c, dst_stride_y, tables);
      return SLIP_OK;
    }
#endif
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
