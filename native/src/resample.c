/*
 * resample.c - separable crop+resize of interleaved 8-bit images.
 *
 * For each output row the source rows under the vertical filter are summed
 * into one float row (only the columns the horizontal filter will read);
 * that row is filtered horizontally into a second float row, which one
 * vectorized pass rounds into the destination, mirrored on request.  Weights
 * are computed in double, normalized to sum to one, and applied in float;
 * the single rounding happens at the end.
 */
#include <math.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "internal.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SLIP_RESAMPLE_VECTOR 1
#endif

/* Four floats, for the three channels of a pixel (GCC/Clang vector extension). */
typedef float v4f __attribute__((vector_size(16)));

/* Keys' cubic convolution kernel with a = -0.5 (Pillow's and torchvision's
 * bicubic), at distance x in units of the kernel's own pixel: 1 at 0, 0 at
 * 1 and from 2 on, negative lobes between 1 and 2. */
static double cubic(double x) {
  const double a = -0.5;
  x = fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

/* Half the width of a filter's kernel, in kernel pixels (scaled by the
 * shrink factor when shrinking). */
static double kernel_radius(int32_t interp) { return interp == SLIP_INTERP_BICUBIC ? 2.0 : 1.0; }

/* Weight of source pixel i for the output pixel whose footprint is [a, b)
 * (area) or whose centre is c with the given support (bilinear, bicubic:
 * the kernel stretched by support when shrinking). */
static double tap_weight(int32_t interp, int32_t i, double a, double b, double c, double support) {
  if (interp == SLIP_INTERP_BICUBIC) return cubic((i + 0.5 - c) / support);
  double t;
  if (interp == SLIP_INTERP_AREA) t = fmin(b, i + 1.0) - fmax(a, (double)i);
  else t = 1.0 - fabs(i + 0.5 - c) / support;
  return t > 0 ? t : 0;
}

void slip__compute_taps(double start, double length, int32_t n, int32_t lo, int32_t hi, int32_t interp,
                        int32_t max_taps, slip_axis_taps *taps, float *weights) {
  double scale = length / n;
  double support = scale > 1.0 ? scale : 1.0;
  for (int32_t j = 0; j < n; j++) {
    double a = start + j * scale, b = a + scale, c = start + (j + 0.5) * scale;
    int32_t first, last;
    if (interp == SLIP_INTERP_AREA) {
      first = (int32_t)floor(a);
      last = (int32_t)ceil(b) - 1;
    } else {
      first = (int32_t)floor(c - kernel_radius(interp) * support - 0.5);
      last = (int32_t)ceil(c + kernel_radius(interp) * support - 0.5);
    }
    if (first < lo) first = lo;
    if (last > hi - 1) last = hi - 1;
    /* Keep only the taps with weight, so that the loops touch real data. */
    while (first < last && tap_weight(interp, first, a, b, c, support) == 0) first++;
    while (last > first && tap_weight(interp, last, a, b, c, support) == 0) last--;
    if (last - first + 1 > max_taps) last = first + max_taps - 1;
    double sum = 0;
    for (int32_t i = first; i <= last; i++) sum += tap_weight(interp, i, a, b, c, support);
    float *w = weights + (size_t)j * (size_t)max_taps;
    if (sum > 0) { /* bicubic's sum stays near 1: its negative lobes never outweigh the centre */
      for (int32_t i = first; i <= last; i++) w[i - first] = (float)(tap_weight(interp, i, a, b, c, support) / sum);
    } else { /* unreachable for valid crops; fall back to the nearest pixel */
      first = last = (int32_t)floor(c) < lo ? lo : ((int32_t)floor(c) > hi - 1 ? hi - 1 : (int32_t)floor(c));
      w[0] = 1.0f;
    }
    taps[j].first = first;
    taps[j].count = last - first + 1;
  }
}

/*
 * Horizontal filter of one row of 3-channel float pixels: hrow[j] = sum over
 * k < taps of wx[j][k] * acc[tx[j].first - col_lo + k].  Each pixel is one
 * 4-lane vector (R, G, B and the next pixel's R, whose lane is ignored); the
 * store's fourth lane is overwritten by the next pixel, and both rows have
 * padding for the last one.  Inlined with a constant `taps` the loop unrolls.
 */
static inline __attribute__((always_inline)) void horizontal3(const float *acc, int32_t col_lo,
                                                              const slip_axis_taps *tx, const float *wx, int32_t kx,
                                                              int32_t dst_w, int32_t taps, float *hrow) {
  for (int32_t j = 0; j < dst_w; j++) {
    const float *wj = wx + (size_t)j * (size_t)kx;
    const float *a = acc + (size_t)(tx[j].first - col_lo) * 3;
    v4f sum = {0, 0, 0, 0};
    for (int32_t k = 0; k < taps; k++) {
      v4f v;
      memcpy(&v, a + 3 * k, sizeof v);
      sum += wj[k] * v;
    }
    memcpy(hrow + (size_t)j * 3, &sum, sizeof sum);
  }
}

/*
 * Vertical filter of n samples: acc[i] = sum over k < taps of w[k] *
 * row[k * stride + i], summed in order of k in a register (the same
 * rounding as summing into acc tap by tap, without storing and reloading
 * acc for every tap).  Inlined with a constant `taps` the tap loop unrolls.
 */
static inline __attribute__((always_inline)) void vertical(const uint8_t *row, int64_t stride, const float *w,
                                                           int32_t taps, size_t n, float *acc) {
  for (size_t i = 0; i < n; i++) {
    float sum = w[0] * row[i];
    for (int32_t k = 1; k < taps; k++) sum += w[k] * row[(int64_t)k * stride + (int64_t)i];
    acc[i] = sum;
  }
}

/* vertical() with the tap loop unrolled for the usual counts. */
static inline __attribute__((always_inline)) void vertical_unrolled(const uint8_t *row, int64_t stride,
                                                                    const float *w, int32_t taps, size_t n,
                                                                    float *acc) {
  switch (taps) {
  case 1: vertical(row, stride, w, 1, n, acc); break;
  case 2: vertical(row, stride, w, 2, n, acc); break;
  case 3: vertical(row, stride, w, 3, n, acc); break;
  case 4: vertical(row, stride, w, 4, n, acc); break;
  case 5: vertical(row, stride, w, 5, n, acc); break;
  default: vertical(row, stride, w, taps, n, acc);
  }
}

static void vertical_any(const uint8_t *row, int64_t stride, const float *w, int32_t taps, size_t n, float *acc) {
  vertical_unrolled(row, stride, w, taps, n, acc);
}

#if SLIP_RESAMPLE_VECTOR
/* The same, compiled for AVX2: eight samples per instruction, each with the
 * same operations (AVX2 brings no fused multiply-add, so none is formed). */
__attribute__((target("avx2"))) static void vertical_avx2(const uint8_t *row, int64_t stride, const float *w,
                                                          int32_t taps, size_t n, float *acc) {
  vertical_unrolled(row, stride, w, taps, n, acc);
}

/* Output pixels j and j + 1: taps k of both, a pixel per 128-bit half. */
__attribute__((target("avx2"))) static inline __m256 pixel_pair(const float *a0, const float *a1, int32_t k) {
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(a0 + 3 * k)), _mm_loadu_ps(a1 + 3 * k), 1);
}

/*
 * horizontal3 two output pixels at a time in 256-bit vectors: each lane
 * does the same multiplications and additions in the same order as
 * horizontal3's (adding the first product to zero changes nothing, the
 * products being non-negative), so the results are identical.  pair_w
 * holds, for each pair and tap, pixel j's weight four times and then pixel
 * j + 1's.  An odd last pixel goes through horizontal3.
 */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void horizontal3_pairs_taps(
    const float *acc, int32_t col_lo, const slip_axis_taps *tx, const float *pair_w, const float *wx, int32_t kx,
    int32_t dst_w, int32_t taps, float *hrow) {
  int32_t j = 0;
  for (; j + 2 <= dst_w; j += 2) {
    const float *a0 = acc + (size_t)(tx[j].first - col_lo) * 3, *a1 = acc + (size_t)(tx[j + 1].first - col_lo) * 3;
    const float *w = pair_w + (size_t)(j / 2) * (size_t)taps * 8;
    __m256 sum = _mm256_mul_ps(_mm256_loadu_ps(w), pixel_pair(a0, a1, 0));
    for (int32_t k = 1; k < taps; k++)
      sum = _mm256_add_ps(sum, _mm256_mul_ps(_mm256_loadu_ps(w + 8 * k), pixel_pair(a0, a1, k)));
    /* Pixel j's fourth lane is overwritten by pixel j + 1, as in horizontal3. */
    _mm_storeu_ps(hrow + (size_t)j * 3, _mm256_castps256_ps128(sum));
    _mm_storeu_ps(hrow + (size_t)j * 3 + 3, _mm256_extractf128_ps(sum, 1));
  }
  if (j < dst_w) horizontal3(acc, col_lo, tx + j, wx + (size_t)j * (size_t)kx, kx, 1, taps, hrow + (size_t)j * 3);
}

__attribute__((target("avx2"))) static void horizontal3_pairs(const float *acc, int32_t col_lo, const slip_axis_taps *tx,
                                                               const float *pair_w, const float *wx, int32_t kx,
                                                               int32_t dst_w, int32_t taps, float *hrow) {
  switch (taps) {
  case 1: horizontal3_pairs_taps(acc, col_lo, tx, pair_w, wx, kx, dst_w, 1, hrow); break;
  case 2: horizontal3_pairs_taps(acc, col_lo, tx, pair_w, wx, kx, dst_w, 2, hrow); break;
  case 3: horizontal3_pairs_taps(acc, col_lo, tx, pair_w, wx, kx, dst_w, 3, hrow); break;
  case 4: horizontal3_pairs_taps(acc, col_lo, tx, pair_w, wx, kx, dst_w, 4, hrow); break;
  case 5: horizontal3_pairs_taps(acc, col_lo, tx, pair_w, wx, kx, dst_w, 5, hrow); break;
  case 6: horizontal3_pairs_taps(acc, col_lo, tx, pair_w, wx, kx, dst_w, 6, hrow); break;
  default: horizontal3_pairs_taps(acc, col_lo, tx, pair_w, wx, kx, dst_w, taps, hrow);
  }
}
#endif

int32_t slip__pad_taps(slip_axis_taps *taps, float *weights, int32_t stride, int32_t n, int flip, int32_t *lo,
                       int32_t *hi) {
  int32_t kmax = 1;
  for (int32_t j = 0; j < n; j++) kmax = taps[j].count > kmax ? taps[j].count : kmax;
  *lo = taps[0].first;
  *hi = taps[0].first + taps[0].count;
  for (int32_t j = 0; j < n; j++) {
    for (int32_t k = taps[j].count; k < kmax; k++) weights[(size_t)j * (size_t)stride + (size_t)k] = 0.0f;
    if (taps[j].first < *lo) *lo = taps[j].first;
    if (taps[j].first + taps[j].count > *hi) *hi = taps[j].first + taps[j].count;
  }
  /* Mirroring is the taps in reverse order: output pixel j gets the taps of
   * pixel n - 1 - j, computed exactly as without the flip. */
  for (int32_t j = 0, k = n - 1; flip && j < k; j++, k--) {
    slip_axis_taps t = taps[j];
    taps[j] = taps[k];
    taps[k] = t;
    float *a = weights + (size_t)j * (size_t)stride, *b = weights + (size_t)k * (size_t)stride;
    for (int32_t i = 0; i < kmax; i++) {
      float w = a[i];
      a[i] = b[i];
      b[i] = w;
    }
  }
  return kmax;
}

int32_t slip__max_taps(double length, int32_t n, int32_t interp) {
  double scale = length / n;
  double support = scale > 1.0 ? scale : 1.0;
  double span = interp == SLIP_INTERP_AREA ? scale : 2.0 * kernel_radius(interp) * support;
  return (int32_t)ceil(span) + 2;
}

/* Round a sum to the nearest integer in 0..255.  Bilinear and area sums
 * stay in range but for rounding error; bicubic's negative lobes overshoot
 * at edges, below 0 and above 255, and are clamped (as Pillow clamps). */
static inline uint8_t to_u8(float v) {
  if (!(v > 0.0f)) return 0;
  int32_t q = (int32_t)(v + 0.5f);
  return (uint8_t)(q < 255 ? q : 255);
}

/* out[i] = to_u8(in[i]) for i < n.  Compilers leave the scalar loop scalar
 * (float to int conversion with clamping); SSE2 converts 16 at a time, and
 * its saturating packs clamp exactly as to_u8 does. */
static void row_to_u8(const float *in, size_t n, uint8_t *out) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128 half = _mm_set1_ps(0.5f);
  for (; i + 16 <= n; i += 16) {
    __m128i a = _mm_cvttps_epi32(_mm_add_ps(_mm_loadu_ps(in + i), half));
    __m128i b = _mm_cvttps_epi32(_mm_add_ps(_mm_loadu_ps(in + i + 4), half));
    __m128i c = _mm_cvttps_epi32(_mm_add_ps(_mm_loadu_ps(in + i + 8), half));
    __m128i d = _mm_cvttps_epi32(_mm_add_ps(_mm_loadu_ps(in + i + 12), half));
    _mm_storeu_si128((__m128i *)(out + i), _mm_packus_epi16(_mm_packs_epi32(a, b), _mm_packs_epi32(c, d)));
  }
#endif
  for (; i < n; i++) out[i] = to_u8(in[i]);
}

int32_t slip__resample(slip_thread_state *ts, const uint8_t *src, int32_t src_h, int32_t src_w, int32_t channels,
                       int64_t src_stride, double cy, double cx, double ch, double cw, uint8_t *dst, int32_t dst_h,
                       int32_t dst_w, int64_t dst_stride, int32_t interp, int flip_x) {
  /* Taps are limited to the whole pixels that the crop touches. */
  int32_t y_lo = (int32_t)floor(cy), y_hi = (int32_t)ceil(cy + ch);
  int32_t x_lo = (int32_t)floor(cx), x_hi = (int32_t)ceil(cx + cw);
  if (y_lo < 0) y_lo = 0;
  if (x_lo < 0) x_lo = 0;
  if (y_hi > src_h) y_hi = src_h;
  if (x_hi > src_w) x_hi = src_w;

  int32_t ky = slip__max_taps(ch, dst_h, interp), kx = slip__max_taps(cw, dst_w, interp);
  size_t taps_bytes = ((size_t)dst_h + (size_t)dst_w) * sizeof(slip_axis_taps);
  /* wy, wx, and horizontal3_pairs' weights: 8 floats per pair of output pixels and tap, at most
   * dst_w * kx * 4. */
  size_t weight_bytes = ((size_t)dst_h * (size_t)ky + (size_t)dst_w * (size_t)kx * 5) * sizeof(float);
  uint8_t *mem = slip__scratch_reserve(&ts->weights, taps_bytes + weight_bytes);
  if (!mem) return SLIP_ENOMEM;
  slip_axis_taps *ty = (slip_axis_taps *)mem, *tx = ty + dst_h;
  float *wy = (float *)(mem + taps_bytes), *wx = wy + (size_t)dst_h * (size_t)ky;
  float *pair_w = wx + (size_t)dst_w * (size_t)kx;
  slip__compute_taps(cy, ch, dst_h, y_lo, y_hi, interp, ky, ty, wy);
  slip__compute_taps(cx, cw, dst_w, x_lo, x_hi, interp, kx, tx, wx);

  /* Every output pixel's horizontal taps padded to one count, so that the inner loop has a fixed trip count,
   * and mirrored on request; col_lo .. col_hi - 1 are the columns any of them reads. */
  int32_t col_lo, col_hi;
  int32_t kmax = slip__pad_taps(tx, wx, kx, dst_w, flip_x, &col_lo, &col_hi);

#if SLIP_RESAMPLE_VECTOR
  int avx2 = (ts->isa & SLIP__ISA_AVX2) != 0;
  if (avx2 && channels == 3) {
    for (int32_t j = 0; j + 2 <= dst_w; j += 2) {
      float *p = pair_w + (size_t)(j / 2) * (size_t)kmax * 8;
      for (int32_t k = 0; k < kmax; k++, p += 8) {
        for (int lane = 0; lane < 4; lane++) {
          p[lane] = wx[(size_t)j * (size_t)kx + (size_t)k];
          p[4 + lane] = wx[(size_t)(j + 1) * (size_t)kx + (size_t)k];
        }
      }
    }
  }
#endif

  size_t row_len = (size_t)(col_hi - col_lo) * (size_t)channels;
  /* Padded taps may read up to kmax pixels (plus one float) past the last
   * column; that padding is zero and always multiplied by zero weights. */
  size_t pad = (size_t)kmax * (size_t)channels + 1;
  size_t hrow_len = (size_t)dst_w * (size_t)channels;
  float *acc = slip__scratch_reserve(&ts->accum, (row_len + pad + hrow_len + 1) * sizeof(float));
  if (!acc) return SLIP_ENOMEM;
  memset(acc + row_len, 0, pad * sizeof(float));
  float *hrow = acc + row_len + pad;

  for (int32_t r = 0; r < dst_h; r++) {
    const float *w = wy + (size_t)r * (size_t)ky;
    const uint8_t *row = src + (int64_t)ty[r].first * src_stride + (size_t)col_lo * (size_t)channels;
#if SLIP_RESAMPLE_VECTOR
    if (avx2)
      vertical_avx2(row, src_stride, w, ty[r].count, row_len, acc);
    else
#endif
      vertical_any(row, src_stride, w, ty[r].count, row_len, acc);
    /* Horizontal pass into a float row, then one conversion pass to bytes. */
#if SLIP_RESAMPLE_VECTOR
    if (avx2 && channels == 3) {
      horizontal3_pairs(acc, col_lo, tx, pair_w, wx, kx, dst_w, kmax, hrow);
    } else
#endif
    if (channels == 3) {
      switch (kmax) {
      case 1: horizontal3(acc, col_lo, tx, wx, kx, dst_w, 1, hrow); break;
      case 2: horizontal3(acc, col_lo, tx, wx, kx, dst_w, 2, hrow); break;
      case 3: horizontal3(acc, col_lo, tx, wx, kx, dst_w, 3, hrow); break;
      case 4: horizontal3(acc, col_lo, tx, wx, kx, dst_w, 4, hrow); break;
      case 5: horizontal3(acc, col_lo, tx, wx, kx, dst_w, 5, hrow); break;
      case 6: horizontal3(acc, col_lo, tx, wx, kx, dst_w, 6, hrow); break;
      default: horizontal3(acc, col_lo, tx, wx, kx, dst_w, kmax, hrow);
      }
    } else {
      for (int32_t j = 0; j < dst_w; j++) {
        const float *wj = wx + (size_t)j * (size_t)kx;
        const float *a = acc + (size_t)(tx[j].first - col_lo) * (size_t)channels;
        for (int32_t c = 0; c < channels; c++) {
          float sum = 0;
          for (int32_t k = 0; k < tx[j].count; k++) sum += wj[k] * a[(size_t)k * (size_t)channels + (size_t)c];
          hrow[(size_t)j * (size_t)channels + (size_t)c] = sum;
        }
      }
    }
    row_to_u8(hrow, (size_t)dst_w * (size_t)channels, dst + (int64_t)r * dst_stride);
  }
  return SLIP_OK;
}

/* The checks slip_resize and slip_resize_region share. */
static int32_t check_resize(const uint8_t *src, int32_t src_h, int32_t src_w, int32_t channels, int64_t src_stride,
                            const uint8_t *dst, int32_t dst_h, int32_t dst_w, int64_t dst_stride, int32_t interp) {
  if (!src || !dst) return slip__fail(SLIP_EINVAL, "src and dst must not be NULL");
  if (channels != 1 && channels != 3 && channels != 4)
    return slip__fail(SLIP_EINVAL, "channels is %d; it must be 1, 3 or 4", channels);
  if (src_h <= 0 || src_w <= 0 || dst_h <= 0 || dst_w <= 0)
    return slip__fail(SLIP_EINVAL, "image sizes must be positive (source %d x %d, output %d x %d)", src_h, src_w,
                      dst_h, dst_w);
  if (src_stride < (int64_t)src_w * channels || dst_stride < (int64_t)dst_w * channels)
    return slip__fail(SLIP_EINVAL, "strides (source %lld, output %lld) are smaller than a row",
                      (long long)src_stride, (long long)dst_stride);
  if (interp != SLIP_INTERP_AREA && interp != SLIP_INTERP_BILINEAR && interp != SLIP_INTERP_BICUBIC)
    return slip__fail(SLIP_EINVAL, "unknown interpolation %d", interp);
  return SLIP_OK;
}

SLIP_API int32_t slip_resize(const uint8_t *src, int32_t src_h, int32_t src_w, int32_t channels, int64_t src_stride,
                             int32_t y, int32_t x, int32_t h, int32_t w, uint8_t *dst, int32_t dst_h, int32_t dst_w,
                             int64_t dst_stride, int32_t interp, int32_t flip_x) {
  int32_t status = check_resize(src, src_h, src_w, channels, src_stride, dst, dst_h, dst_w, dst_stride, interp);
  if (status != SLIP_OK) return status;
  if (y < 0 || x < 0 || h <= 0 || w <= 0 || (int64_t)y + h > src_h || (int64_t)x + w > src_w)
    return slip__fail(SLIP_EINVAL, "crop (y=%d, x=%d, h=%d, w=%d) does not lie inside the %d x %d image", y, x, h, w,
                      src_h, src_w);
  slip_thread_state *ts = slip__thread_state();
  if (!ts) return SLIP_ENOMEM;
  return slip__resample(ts, src, src_h, src_w, channels, src_stride, y, x, h, w, dst, dst_h, dst_w, dst_stride,
                        interp, flip_x != 0);
}

SLIP_API int32_t slip_resize_region(const uint8_t *src, int32_t src_h, int32_t src_w, int32_t channels,
                                    int64_t src_stride, double cy, double cx, double ch, double cw, uint8_t *dst,
                                    int32_t dst_h, int32_t dst_w, int64_t dst_stride, int32_t interp, int32_t flip_x) {
  int32_t status = check_resize(src, src_h, src_w, channels, src_stride, dst, dst_h, dst_w, dst_stride, interp);
  if (status != SLIP_OK) return status;
  /* Written so that NaN fails every comparison and is refused. */
  if (!(cy >= 0 && cx >= 0 && ch > 0 && cw > 0 && cy + ch <= src_h && cx + cw <= src_w))
    return slip__fail(SLIP_EINVAL, "rectangle (y=%g, x=%g, h=%g, w=%g) does not lie inside the %d x %d image", cy, cx,
                      ch, cw, src_h, src_w);
  slip_thread_state *ts = slip__thread_state();
  if (!ts) return SLIP_ENOMEM;
  return slip__resample(ts, src, src_h, src_w, channels, src_stride, cy, cx, ch, cw, dst, dst_h, dst_w, dst_stride,
                        interp, flip_x != 0);
}
