/*
 * planes.c - images stored as planar YCbCr 4:2:0 (the layout of
 * slip_planes_bytes): conversion from RGB, and the kernel that crops,
 * resizes and converts the planes to RGB, reading only the rows a crop needs
 * and resampling the chroma at its own resolution.
 *
 * Colour conversion follows JFIF (ITU-R BT.601, full range): from RGB in
 * 16-bit fixed point, as JPEG encoders compute it; to RGB in single
 * precision from the filtered planes, rounded once.
 *
 * The crop's passes (vertical, horizontal, colour) have AVX2 versions for
 * CPUs that have it, each with the portable code's operations in the same
 * order, so that both give the same bytes.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

/* Same bytes also means no fused multiply-add in the portable code, which
 * the AVX2 code does not use: clang fuses by default where FMA is enabled
 * (-march=native); gcc does not in ISO C mode (-std=c11, as the build sets). */
#if defined(__clang__)
#pragma clang fp contract(off)
#endif

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SLIP_PLANES_VECTOR 1
#endif

enum { FIX_BITS = 16, HALF = 1 << (FIX_BITS - 1) };
#define FIX(x) ((int32_t)((x) * (1 << FIX_BITS) + 0.5))

static uint8_t clamp_u8(int32_t v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

SLIP_API int64_t slip_planes_bytes(int32_t height, int32_t width) {
  if (height < 1 || width < 1 || height > SLIP_MAX_DIMENSION || width > SLIP_MAX_DIMENSION)
    return slip__fail(SLIP_EINVAL, "image size %d x %d is outside 1 to %d pixels a side", height, width,
                      SLIP_MAX_DIMENSION);
  int64_t c_height = (height + 1) / 2, c_width = (width + 1) / 2;
  return (int64_t)height * width + 2 * c_height * c_width;
}

SLIP_API int32_t slip_rgb_to_planes(const uint8_t *src, int32_t height, int32_t width, int64_t src_stride,
                                    uint8_t *out, size_t out_size) {
  if (!src || !out) return slip__fail(SLIP_EINVAL, "src and out must not be NULL");
  int64_t need = slip_planes_bytes(height, width);
  if (need < 0) return (int32_t)need;
  if (src_stride < (int64_t)width * 3)
    return slip__fail(SLIP_EINVAL, "src_stride %lld is smaller than a row of %d RGB pixels", (long long)src_stride,
                      width);
  if (out_size < (uint64_t)need)
    return slip__fail(SLIP_EBUFFER, "the planes of a %d x %d image need %lld bytes, out has %zu", height, width,
                      (long long)need, out_size);
  int32_t c_height = (height + 1) / 2, c_width = (width + 1) / 2;
  uint8_t *y_out = out, *cb_out = out + (size_t)height * width;
  uint8_t *cr_out = cb_out + (size_t)c_height * c_width;
  for (int32_t i = 0; i < height; i++) {
    const uint8_t *p = src + i * src_stride;
    for (int32_t j = 0; j < width; j++, p += 3)
      y_out[(size_t)i * width + j] =
          (uint8_t)((FIX(0.29900) * p[0] + FIX(0.58700) * p[1] + FIX(0.11400) * p[2] + HALF) >> FIX_BITS);
  }
  /* Each chroma sample is the mean of the (up to four) pixels it covers,
   * computed from the sums of their components so that rounding happens once. */
  for (int32_t ci = 0; ci < c_height; ci++) {
    for (int32_t cj = 0; cj < c_width; cj++) {
      int32_t r = 0, g = 0, b = 0, n = 0;
      for (int32_t i = 2 * ci; i < 2 * ci + 2 && i < height; i++) {
        for (int32_t j = 2 * cj; j < 2 * cj + 2 && j < width; j++, n++) {
          const uint8_t *p = src + i * src_stride + (int64_t)j * 3;
          r += p[0];
          g += p[1];
          b += p[2];
        }
      }
      int64_t cb = -(int64_t)FIX(0.16874) * r - (int64_t)FIX(0.33126) * g + (int64_t)FIX(0.50000) * b;
      int64_t cr = (int64_t)FIX(0.50000) * r - (int64_t)FIX(0.41869) * g - (int64_t)FIX(0.08131) * b;
      int64_t offset = ((int64_t)128 << FIX_BITS) * n, round = (int64_t)n << (FIX_BITS - 1);
      int64_t scale = (int64_t)n << FIX_BITS;
      cb_out[(size_t)ci * c_width + cj] = clamp_u8((int32_t)((cb + offset + round) / scale));
      cr_out[(size_t)ci * c_width + cj] = clamp_u8((int32_t)((cr + offset + round) / scale));
    }
  }
  return SLIP_OK;
}

/* The taps of one axis of one plane: n output pixels over [start, start + length) of a plane of `size`
 * samples, padded to kmax taps each (zero weights), in reverse order when mirrored. */
typedef struct plane_axis {
  slip_axis_taps *taps;
  float *weights;
  int32_t stride; /* weights per output pixel */
  int32_t kmax;   /* taps per output pixel after padding */
  int32_t lo, hi; /* the source samples any tap reads */
  /* With AVX2, the same taps for blocks of 8 output pixels whose samples lie
   * within block_reach[b] (16 or 32) consecutive ones from block_base[b] on
   * (0: the block's samples spread wider): block b's tap k is the 8 floats at
   * block_weights[(b * kmax + k) * 8], and lane i reads sample
   * block_base[b] + block_at[8 * b + i] + k. */
  float *block_weights;
  int32_t *block_at;
  int32_t *block_base, *block_reach;
} plane_axis;

/* Output pixels rounded up to whole blocks of 8. */
static size_t whole_blocks(int32_t n) { return ((size_t)n + 7) / 8 * 8; }

static size_t axis_bytes(double length, int32_t n, int32_t interp) {
  size_t stride = (size_t)slip__max_taps(length, n, interp);
  return (size_t)n * (sizeof(slip_axis_taps) + stride * sizeof(float)) +
         whole_blocks(n) * (stride * sizeof(float) + sizeof(int32_t)) + whole_blocks(n) / 8 * 2 * sizeof(int32_t);
}

/* Fill a (its memory at mem, axis_bytes of it) for n output pixels from the interval [start, start + length) of
 * a plane of `size` samples; taps are limited to the samples the interval touches. */
static void plane_axis_init(plane_axis *a, uint8_t *mem, double start, double length, int32_t n, int32_t size,
                            int32_t interp, int flip) {
  int32_t lo = (int32_t)floor(start), hi = (int32_t)ceil(start + length);
  if (lo < 0) lo = 0;
  if (hi > size) hi = size;
  a->stride = slip__max_taps(length, n, interp);
  a->taps = (slip_axis_taps *)mem;
  a->weights = (float *)(mem + (size_t)n * sizeof(slip_axis_taps));
  slip__compute_taps(start, length, n, lo, hi, interp, a->stride, a->taps, a->weights);
  a->kmax = slip__pad_taps(a->taps, a->weights, a->stride, n, flip, &a->lo, &a->hi);
  a->block_weights = a->weights + (size_t)n * (size_t)a->stride;
  a->block_at = (int32_t *)(a->block_weights + whole_blocks(n) * (size_t)a->stride);
  a->block_base = a->block_at + whole_blocks(n);
  a->block_reach = a->block_base + whole_blocks(n) / 8;
}

#if SLIP_PLANES_VECTOR
/* Fill a's blocks for its first n / 8 * 8 output pixels (the rest go through horizontal()). */
static void plane_axis_blocks(plane_axis *a, int32_t n) {
  for (int32_t j = 0; j + 8 <= n; j += 8) {
    float *w = a->block_weights + (size_t)j * (size_t)a->kmax;
    for (int32_t k = 0; k < a->kmax; k++)
      for (int32_t lane = 0; lane < 8; lane++) w[k * 8 + lane] = a->weights[(size_t)(j + lane) * a->stride + k];
    /* Mirrored taps run backwards: the block's first sample is its lowest lane's. */
    int32_t low = a->taps[j].first, high = low;
    for (int32_t lane = 1; lane < 8; lane++) {
      int32_t first = a->taps[j + lane].first;
      low = first < low ? first : low;
      high = first > high ? first : high;
    }
    int32_t span = high + a->kmax - low;
    a->block_base[j / 8] = low - a->lo;
    a->block_reach[j / 8] = span <= 16 ? 16 : span <= 32 ? 32 : 0;
    for (int32_t lane = 0; lane < 8; lane++) a->block_at[j + lane] = a->taps[j + lane].first - low;
  }
}
#endif

/* acc[i] = sum over k < taps of w[k] * row[k * stride + i] for i < n, tap by tap: each pass over acc is one
 * multiply-add of a row, which vectorizes whatever the number of taps. */
static inline __attribute__((always_inline)) void filter_rows(const uint8_t *row, int64_t stride, const float *w,
                                                              int32_t taps, int32_t n, float *acc) {
  for (int32_t i = 0; i < n; i++) acc[i] = w[0] * row[i];
  for (int32_t k = 1; k < taps; k++) {
    const uint8_t *src = row + (int64_t)k * stride;
    float wk = w[k];
    for (int32_t i = 0; i < n; i++) acc[i] += wk * src[i];
  }
}

static void filter_rows_portable(const uint8_t *row, int64_t stride, const float *w, int32_t taps, int32_t n,
                                 float *acc) {
  filter_rows(row, stride, w, taps, n, acc);
}

#if SLIP_PLANES_VECTOR
/* The same, compiled for AVX2: eight samples per instruction, the same operations (AVX2 brings no fused
 * multiply-add, so none is formed). */
__attribute__((target("avx2"))) static void filter_rows_avx2(const uint8_t *row, int64_t stride, const float *w,
                                                              int32_t taps, int32_t n, float *acc) {
  filter_rows(row, stride, w, taps, n, acc);
}
#endif

/* acc[i] = sum over the taps of output row r of weight * plane sample, for the columns [x.lo, x.hi). */
static void vertical(int avx2, const uint8_t *plane, int64_t stride, const plane_axis *y, int32_t r,
                     const plane_axis *x, float *acc) {
  const float *w = y->weights + (size_t)r * (size_t)y->stride;
  const uint8_t *row = plane + (int64_t)y->taps[r].first * stride + x->lo;
  int32_t n = x->hi - x->lo, taps = y->taps[r].count;
#if SLIP_PLANES_VECTOR
  if (avx2) {
    filter_rows_avx2(row, stride, w, taps, n, acc);
    return;
  }
#endif
  (void)avx2;
  filter_rows_portable(row, stride, w, taps, n, acc);
}

/* out[j] = sum over the kmax (padded) taps of output pixel j of weight * acc; inlined with a constant kmax, the
 * tap loop unrolls. */
static inline __attribute__((always_inline)) void horizontal_taps(const float *acc, const plane_axis *x, int32_t n,
                                                                  int32_t kmax, float *out) {
  for (int32_t j = 0; j < n; j++) {
    const float *w = x->weights + (size_t)j * (size_t)x->stride, *a = acc + (x->taps[j].first - x->lo);
    float sum = w[0] * a[0];
    for (int32_t k = 1; k < kmax; k++) sum += w[k] * a[k];
    out[j] = sum;
  }
}

static void horizontal(const float *acc, const plane_axis *x, int32_t n, float *out) {
  switch (x->kmax) {
  case 1: horizontal_taps(acc, x, n, 1, out); break;
  case 2: horizontal_taps(acc, x, n, 2, out); break;
  case 3: horizontal_taps(acc, x, n, 3, out); break;
  case 4: horizontal_taps(acc, x, n, 4, out); break;
  case 5: horizontal_taps(acc, x, n, 5, out); break;
  case 6: horizontal_taps(acc, x, n, 6, out); break;
  default: horizontal_taps(acc, x, n, x->kmax, out);
  }
}

/* out (n RGB pixels) from n filtered samples of Y, Cb and Cr: m's conversion, rounded once. */
static void ycbcr_to_rgb_row(const slip__ycbcr_matrix *m, const float *y, const float *cb, const float *cr, int32_t n,
                             uint8_t *out) {
  for (int32_t j = 0; j < n; j++, out += 3) {
    float l = (y[j] - m->y_offset) * m->y_scale + 0.5f, b = cb[j] - 128.0f, r = cr[j] - 128.0f;
    float rgb[3] = {l + m->cr_r * r, l - m->cb_g * b - m->cr_g * r, l + m->cb_b * b};
    for (int c = 0; c < 3; c++) {
      float v = rgb[c];
      out[c] = (uint8_t)(v <= 0.0f ? 0 : v >= 255.0f ? 255 : (int32_t)v);
    }
  }
}

#if SLIP_PLANES_VECTOR
/* horizontal() of output pixels [j, j + n) alone. */
static void horizontal_part(const float *acc, const plane_axis *x, int32_t j, int32_t n, float *out) {
  plane_axis part = *x;
  part.taps += j;
  part.weights += (size_t)j * (size_t)x->stride;
  horizontal(acc, &part, n, out + j);
}

/*
 * horizontal() for AVX2, 8 output pixels at a time: the 16 or 32 samples a
 * block reads are loaded once and each tap's are picked from them by lane,
 * and each lane does the same multiplications and additions in the same
 * order as horizontal_taps (no fused multiply-add: AVX2 has none), so the
 * results are identical.  Blocks whose samples spread wider (shrinking by
 * more than about 3) and pixels past the last whole block go through
 * horizontal(); acc has 32 readable floats past any block's first sample.
 */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) __m256 block_taps(
    const float *from, const float *w, __m256i at, int32_t kmax, int wide) {
  __m256 s0 = _mm256_loadu_ps(from), s1 = _mm256_loadu_ps(from + 8), s2 = s0, s3 = s1;
  if (wide) {
    s2 = _mm256_loadu_ps(from + 16);
    s3 = _mm256_loadu_ps(from + 24);
  }
  __m256 sum = _mm256_setzero_ps();
  for (int32_t k = 0; k < kmax; k++, at = _mm256_add_epi32(at, _mm256_set1_epi32(1))) {
    /* vpermps reads the low 3 bits of each index; bits 3 and 4, moved to the sign that blendv reads, pick the
     * register. */
    __m256 bit3 = _mm256_castsi256_ps(_mm256_slli_epi32(at, 28));
    __m256 v = _mm256_blendv_ps(_mm256_permutevar8x32_ps(s0, at), _mm256_permutevar8x32_ps(s1, at), bit3);
    if (wide) {
      __m256 upper = _mm256_blendv_ps(_mm256_permutevar8x32_ps(s2, at), _mm256_permutevar8x32_ps(s3, at), bit3);
      v = _mm256_blendv_ps(v, upper, _mm256_castsi256_ps(_mm256_slli_epi32(at, 27)));
    }
    __m256 product = _mm256_mul_ps(_mm256_loadu_ps(w + 8 * k), v);
    sum = k == 0 ? product : _mm256_add_ps(sum, product);
  }
  return sum;
}

__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void horizontal_blocks_taps(
    const float *acc, const plane_axis *x, int32_t n, int32_t kmax, float *out) {
  int32_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const float *w = x->block_weights + (size_t)j * (size_t)kmax, *from = acc + x->block_base[j / 8];
    __m256i at = _mm256_loadu_si256((const __m256i *)(x->block_at + j));
    switch (x->block_reach[j / 8]) {
    case 16: _mm256_storeu_ps(out + j, block_taps(from, w, at, kmax, 0)); break;
    case 32: _mm256_storeu_ps(out + j, block_taps(from, w, at, kmax, 1)); break;
    default: { /* this block and the spread ones after it, in one call */
      int32_t end = j + 8;
      while (end + 8 <= n && x->block_reach[end / 8] == 0) end += 8;
      horizontal_part(acc, x, j, end - j, out);
      j = end - 8;
    }
    }
  }
  if (j < n) horizontal_part(acc, x, j, n - j, out);
}

__attribute__((target("avx2"))) static void horizontal_blocks(const float *acc, const plane_axis *x, int32_t n,
                                                               float *out) {
  switch (x->kmax) {
  case 1: horizontal_blocks_taps(acc, x, n, 1, out); break;
  case 2: horizontal_blocks_taps(acc, x, n, 2, out); break;
  case 3: horizontal_blocks_taps(acc, x, n, 3, out); break;
  case 4: horizontal_blocks_taps(acc, x, n, 4, out); break;
  case 5: horizontal_blocks_taps(acc, x, n, 5, out); break;
  case 6: horizontal_blocks_taps(acc, x, n, 6, out); break;
  default: horizontal_blocks_taps(acc, x, n, x->kmax, out);
  }
}

/* 8 filtered values as bytes, as ycbcr_to_rgb_row rounds them: 0 at or below 0, 255 at or above 255, truncated
 * between; in 8 16-bit lanes. */
__attribute__((target("avx2"))) static inline __m128i to_words(__m256 v) {
  __m256i i = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(255.0f)));
  return _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
}

/*
 * ycbcr_to_rgb_row for AVX2, 16 pixels at a time with the same operations in
 * the same order (identical bytes); the three channels' 16 bytes are
 * interleaved into 48 by byte shuffles.  The last n % 16 pixels go through
 * ycbcr_to_rgb_row.
 */
__attribute__((target("avx2"))) static void ycbcr_to_rgb_row_avx2(const slip__ycbcr_matrix *m, const float *y,
                                                                   const float *cb, const float *cr, int32_t n,
                                                                   uint8_t *out) {
#define X -128
  /* Byte i of output chunk q is channel (16q + i) % 3 of pixel (16q + i) / 3. */
  const __m128i take[3][3] = {
      {_mm_setr_epi8(0, X, X, 1, X, X, 2, X, X, 3, X, X, 4, X, X, 5),
       _mm_setr_epi8(X, 0, X, X, 1, X, X, 2, X, X, 3, X, X, 4, X, X),
       _mm_setr_epi8(X, X, 0, X, X, 1, X, X, 2, X, X, 3, X, X, 4, X)},
      {_mm_setr_epi8(X, X, 6, X, X, 7, X, X, 8, X, X, 9, X, X, 10, X),
       _mm_setr_epi8(5, X, X, 6, X, X, 7, X, X, 8, X, X, 9, X, X, 10),
       _mm_setr_epi8(X, 5, X, X, 6, X, X, 7, X, X, 8, X, X, 9, X, X)},
      {_mm_setr_epi8(X, 11, X, X, 12, X, X, 13, X, X, 14, X, X, 15, X, X),
       _mm_setr_epi8(X, X, 11, X, X, 12, X, X, 13, X, X, 14, X, X, 15, X),
       _mm_setr_epi8(10, X, X, 11, X, X, 12, X, X, 13, X, X, 14, X, X, 15)}};
#undef X
  const __m256 half = _mm256_set1_ps(0.5f), offset = _mm256_set1_ps(128.0f);
  const __m256 y_offset = _mm256_set1_ps(m->y_offset), y_scale = _mm256_set1_ps(m->y_scale);
  const __m256 cr_r = _mm256_set1_ps(m->cr_r), cb_g = _mm256_set1_ps(m->cb_g), cr_g = _mm256_set1_ps(m->cr_g);
  const __m256 cb_b = _mm256_set1_ps(m->cb_b);
  int32_t j = 0;
  for (; j + 16 <= n; j += 16, out += 48) {
    __m128i words[3][2];
    for (int h = 0; h < 2; h++) {
      __m256 l = _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(y + j + 8 * h), y_offset), y_scale), half);
      __m256 b = _mm256_sub_ps(_mm256_loadu_ps(cb + j + 8 * h), offset);
      __m256 r = _mm256_sub_ps(_mm256_loadu_ps(cr + j + 8 * h), offset);
      words[0][h] = to_words(_mm256_add_ps(l, _mm256_mul_ps(cr_r, r)));
      words[1][h] = to_words(_mm256_sub_ps(_mm256_sub_ps(l, _mm256_mul_ps(cb_g, b)), _mm256_mul_ps(cr_g, r)));
      words[2][h] = to_words(_mm256_add_ps(l, _mm256_mul_ps(cb_b, b)));
    }
    __m128i channel[3];
    for (int c = 0; c < 3; c++) channel[c] = _mm_packus_epi16(words[c][0], words[c][1]);
    for (int q = 0; q < 3; q++) {
      __m128i chunk = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(channel[0], take[q][0]),
                                                _mm_shuffle_epi8(channel[1], take[q][1])),
                                   _mm_shuffle_epi8(channel[2], take[q][2]));
      _mm_storeu_si128((__m128i *)(out + 16 * q), chunk);
    }
  }
  if (j < n) ycbcr_to_rgb_row(m, y + j, cb + j, cr + j, n - j, out);
}
#endif

int32_t slip__check_planes_crop(int32_t height, int32_t width, int32_t y, int32_t x, int32_t h, int32_t w,
                                int32_t out_h, int32_t out_w, int32_t flags, int32_t interp) {
  if (y < 0 || x < 0 || h <= 0 || w <= 0 || (int64_t)y + h > height || (int64_t)x + w > width)
    return slip__fail(SLIP_EINVAL, "crop (y=%d, x=%d, h=%d, w=%d) does not lie inside the %d x %d image", y, x, h, w,
                      height, width);
  if (out_h <= 0 || out_w <= 0 || out_h > SLIP_MAX_DIMENSION || out_w > SLIP_MAX_DIMENSION)
    return slip__fail(SLIP_EINVAL, "output size %d x %d is outside 1 to %d pixels a side", out_h, out_w,
                      SLIP_MAX_DIMENSION);
  if (flags & ~(SLIP_DECODE_FLIP_X | SLIP_DECODE_FAST_IDCT))
    return slip__fail(SLIP_EINVAL, "unknown decode flags 0x%x", (unsigned)flags);
  if (interp != SLIP_INTERP_AREA && interp != SLIP_INTERP_BILINEAR && interp != SLIP_INTERP_BICUBIC)
    return slip__fail(SLIP_EINVAL, "unknown interpolation %d", interp);
  return SLIP_OK;
}

const slip__ycbcr_matrix slip__jfif = {0.0f, 1.0f, 1.402f, 0.344136f, 0.714136f, 1.772f};

SLIP_API int32_t slip_planes_crop_resize(const uint8_t *planes, size_t size, int32_t height, int32_t width,
                                         int32_t y, int32_t x, int32_t h, int32_t w, int32_t out_h, int32_t out_w,
                                         int32_t flags, int32_t interp, uint8_t *out, size_t out_size,
                                         int64_t out_stride) {
  if (!planes || !out) return slip__fail(SLIP_EINVAL, "planes and out must not be NULL");
  int64_t need = slip_planes_bytes(height, width);
  if (need < 0) return (int32_t)need;
  if (size < (uint64_t)need)
    return slip__fail(SLIP_ETRUNCATED, "the planes of a %d x %d image are %lld bytes, but only %zu were given",
                      height, width, (long long)need, size);
  int32_t c_height = (height + 1) / 2, c_width = (width + 1) / 2;
  slip__planes_view view = {planes, planes + (size_t)height * width,
                            planes + (size_t)height * width + (size_t)c_height * c_width, width, c_width, height,
                            width};
  return slip__planes_view_crop_resize(&view, &slip__jfif, y, x, h, w, out_h, out_w, flags, interp, out, out_size,
                                       out_stride);
}

int32_t slip__planes_view_crop_resize(const slip__planes_view *p, const slip__ycbcr_matrix *m, int32_t y, int32_t x,
                                      int32_t h, int32_t w, int32_t out_h, int32_t out_w, int32_t flags,
                                      int32_t interp, uint8_t *out, size_t out_size, int64_t out_stride) {
  int32_t height = p->height, width = p->width;
  int32_t status = slip__check_planes_crop(height, width, y, x, h, w, out_h, out_w, flags, interp);
  if (status != SLIP_OK) return status;
  uint64_t row = (uint64_t)out_w * 3, out_need;
  if (out_stride < (int64_t)row)
    return slip__fail(SLIP_EINVAL, "out_stride %lld is smaller than a row of %d pixels", (long long)out_stride, out_w);
  if (__builtin_mul_overflow((uint64_t)(out_h - 1), (uint64_t)out_stride, &out_need) ||
      __builtin_add_overflow(out_need, row, &out_need) || out_size < out_need)
    return slip__fail(SLIP_EBUFFER, "output of %d x %d pixels with stride %lld does not fit in %zu bytes", out_h,
                      out_w, (long long)out_stride, out_size);
  slip_thread_state *ts = slip__thread_state();
  if (!ts) return SLIP_ENOMEM;
  int flip = (flags & SLIP_DECODE_FLIP_X) != 0;
  int32_t c_height = (height + 1) / 2, c_width = (width + 1) / 2;
  const uint8_t *cb = p->cb, *cr = p->cr;
  int64_t c_stride = p->c_stride;
  /* A chroma sample covers 2 x 2 luma pixels, its centre between them (JPEG's
   * siting), so the crop is the same rectangle at half the coordinates.  Where
   * the chroma is enlarged it is interpolated linearly, as a JPEG decoder's
   * smooth upsampling does; where it shrinks, the crop's own filter applies. */
  int32_t c_interp = (out_h * 2 > h || out_w * 2 > w) ? SLIP_INTERP_BILINEAR : interp;
  double c_scale = 0.5;
  if (c_width <= 2) {
    /* libjpeg-turbo upsamples smoothly only chroma more than 2 samples wide;
     * narrower chroma it replicates over each 2 x 2 pixels, in both
     * directions.  So does this: the chroma is replicated to full size and
     * filtered as the luma is. */
    uint8_t *full = slip__scratch_reserve(&ts->chroma, 2 * (size_t)height * width);
    if (!full) return SLIP_ENOMEM;
    for (int32_t i = 0; i < height; i++)
      for (int32_t j = 0; j < width; j++) {
        size_t from = (size_t)(i / 2) * (size_t)c_stride + j / 2, to = (size_t)i * width + j;
        full[to] = cb[from];
        full[(size_t)height * width + to] = cr[from];
      }
    cb = full;
    cr = full + (size_t)height * width;
    c_height = height;
    c_width = width;
    c_stride = width;
    c_interp = interp;
    c_scale = 1.0;
  }
  size_t luma_y = axis_bytes(h, out_h, interp), luma_x = axis_bytes(w, out_w, interp);
  size_t chroma_y = axis_bytes(h * c_scale, out_h, c_interp), chroma_x = axis_bytes(w * c_scale, out_w, c_interp);
  uint8_t *mem = slip__scratch_reserve(&ts->weights, luma_y + luma_x + chroma_y + chroma_x + 4 * sizeof(float));
  if (!mem) return SLIP_ENOMEM;
  plane_axis ly, lx, cy, cx;
  plane_axis_init(&ly, mem, y, h, out_h, height, interp, 0);
  plane_axis_init(&lx, mem + luma_y, x, w, out_w, width, interp, flip);
  plane_axis_init(&cy, mem + luma_y + luma_x, y * c_scale, h * c_scale, out_h, c_height, c_interp, 0);
  plane_axis_init(&cx, mem + luma_y + luma_x + chroma_y, x * c_scale, w * c_scale, out_w, c_width, c_interp, flip);
  int avx2 = (ts->isa & SLIP__ISA_AVX2) != 0;
#if SLIP_PLANES_VECTOR
  if (avx2) {
    plane_axis_blocks(&lx, out_w);
    plane_axis_blocks(&cx, out_w);
  }
#endif
  /* Rows of vertically filtered samples, padded for the last pixel's padded taps and for the 32 samples
   * horizontal_blocks loads from a block's first, then the filtered output row of each plane. */
  size_t luma_n = (size_t)(lx.hi - lx.lo) + (size_t)lx.kmax + 32;
  size_t chroma_n = (size_t)(cx.hi - cx.lo) + (size_t)cx.kmax + 32;
  float *acc = slip__scratch_reserve(&ts->planes, (luma_n + 2 * chroma_n + 3 * (size_t)out_w) * sizeof(float));
  if (!acc) return SLIP_ENOMEM;
  float *acc_cb = acc + luma_n, *acc_cr = acc_cb + chroma_n;
  float *row_y = acc_cr + chroma_n, *row_cb = row_y + out_w, *row_cr = row_cb + out_w;
  memset(acc, 0, (luma_n + 2 * chroma_n) * sizeof(float));
  for (int32_t r = 0; r < out_h; r++) {
    vertical(avx2, p->y, p->y_stride, &ly, r, &lx, acc);
    vertical(avx2, cb, c_stride, &cy, r, &cx, acc_cb);
    vertical(avx2, cr, c_stride, &cy, r, &cx, acc_cr);
    uint8_t *rgb = out + (int64_t)r * out_stride;
#if SLIP_PLANES_VECTOR
    if (avx2) {
      horizontal_blocks(acc, &lx, out_w, row_y);
      horizontal_blocks(acc_cb, &cx, out_w, row_cb);
      horizontal_blocks(acc_cr, &cx, out_w, row_cr);
      ycbcr_to_rgb_row_avx2(m, row_y, row_cb, row_cr, out_w, rgb);
      continue;
    }
#endif
    horizontal(acc, &lx, out_w, row_y);
    horizontal(acc_cb, &cx, out_w, row_cb);
    horizontal(acc_cr, &cx, out_w, row_cr);
    ycbcr_to_rgb_row(m, row_y, row_cb, row_cr, out_w, rgb);
  }
  return SLIP_OK;
}
