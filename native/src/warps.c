/*
 * warps.c - the affine and perspective warps of Pillow's Image.transform on
 * interleaved 8-bit images, pixel for pixel: output pixel (x, y) is centred
 * on (x + 0.5, y + 0.5) and mapped into the source by the inverse map that
 * Pillow takes as its data.  Nearest neighbour takes the pixel containing
 * the point (a point below 0 or not a number is outside); bilinear blends
 * the four pixel centres around it, edges clamped, in double precision, and
 * truncates.  Nearest affine warps follow Pillow's three paths, which pick
 * different pixels where a point falls within rounding of a pixel's edge: a
 * pure scale sums its coordinates step by step, other maps sum them in 16.16
 * fixed point when every coordinate fits, else in double precision.
 *
 * Double precision stays double precision, operation by operation, in the
 * order written (no fused multiply-add, as in tones.c).  Nothing here
 * allocates.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

/* Pillow's check_fixed: coordinates below this in magnitude fit 16.16 fixed point. */
#define FIXED_LIMIT 32768.0

/* The source and output images of a warp, and its fill colour. */
typedef struct warp_images {
  const uint8_t *src;
  int64_t src_stride;
  int32_t src_h, src_w, channels;
  uint8_t *dst;
  int64_t dst_stride;
  int32_t dst_h, dst_w;
  const uint8_t *fill;
} warp_images;

static inline void put_pixel(uint8_t *d, const uint8_t *s, int32_t channels) {
  if (channels == 3) {
    d[0] = s[0];
    d[1] = s[1];
    d[2] = s[2];
  } else {
    for (int32_t c = 0; c < channels; c++) d[c] = s[c];
  }
}

/* Whether Pillow's coordinate v (-1 below 0, else truncated) is a pixel of
 * 0 .. size - 1; false for NaN. */
static inline int inside(double v, int32_t size) { return v >= 0.0 && v < (double)size; }

static inline const uint8_t *source_pixel(const warp_images *im, int64_t row, int64_t column) {
  return im->src + row * im->src_stride + column * im->channels;
}

/* Nearest neighbour at source point (xin, yin), into out. */
static inline void nearest_at(const warp_images *im, double xin, double yin, uint8_t *out) {
  if (inside(xin, im->src_w) && inside(yin, im->src_h))
    put_pixel(out, source_pixel(im, (int64_t)yin, (int64_t)xin), im->channels);
  else
    put_pixel(out, im->fill, im->channels);
}

static inline int64_t clamp_index(int64_t v, int32_t size) { return v < 0 ? 0 : v < size ? v : size - 1; }

/* Pillow's bilinear filter at source point (xin, yin), into out. */
static inline void bilinear_at(const warp_images *im, double xin, double yin, uint8_t *out) {
  if (!(inside(xin, im->src_w) && inside(yin, im->src_h))) {
    put_pixel(out, im->fill, im->channels);
    return;
  }
  xin -= 0.5;
  yin -= 0.5;
  int64_t fx = (int64_t)floor(xin), fy = (int64_t)floor(yin); /* -1 .. size - 1 */
  double dx = xin - (double)fx, dy = yin - (double)fy;
  int32_t channels = im->channels;
  int64_t x0 = clamp_index(fx, im->src_w) * channels, x1 = clamp_index(fx + 1, im->src_w) * channels;
  const uint8_t *row = im->src + clamp_index(fy, im->src_h) * im->src_stride;
  int below = fy + 1 >= 0 && fy + 1 < im->src_h;
  const uint8_t *next = below ? im->src + (fy + 1) * im->src_stride : row;
  for (int32_t c = 0; c < channels; c++) {
    int32_t a = row[x0 + c], b = row[x1 + c];
    double v1 = (double)a + (double)(b - a) * dx, v2 = v1;
    if (below) {
      a = next[x0 + c];
      b = next[x1 + c];
      v2 = (double)a + (double)(b - a) * dx;
    }
    out[c] = (uint8_t)(int64_t)(v1 + (v2 - v1) * dy);
  }
}

/* Pillow's ImagingScaleAffine (m1 = m3 = 0): coordinates summed step by
 * step from the first pixel's centre, the same columns on every row. */
static void scale_nearest(const warp_images *im, const double *m) {
  int32_t channels = im->channels;
  double yo = m[5] + m[4] * 0.5;
  for (int32_t y = 0; y < im->dst_h; y++, yo += m[4]) {
    uint8_t *d = im->dst + y * im->dst_stride;
    int row_inside = inside(yo, im->src_h);
    const uint8_t *row = row_inside ? im->src + (int64_t)yo * im->src_stride : NULL;
    double xo = m[2] + m[0] * 0.5;
    for (int32_t x = 0; x < im->dst_w; x++, xo += m[0], d += channels) {
      if (row_inside && inside(xo, im->src_w))
        put_pixel(d, row + (int64_t)xo * channels, channels);
      else
        put_pixel(d, im->fill, channels);
    }
  }
}

/* Pillow's FIX: 16.16 fixed point, rounded half up. */
static inline int64_t fixed(double v) { return (int64_t)floor(v * 65536.0 + 0.5); }

/* Pillow's check_fixed at output point (x, y). */
static inline int fits_fixed(const double *m, double x, double y) {
  return fabs(x * m[0] + y * m[1] + m[2]) < FIXED_LIMIT && fabs(x * m[3] + y * m[4] + m[5]) < FIXED_LIMIT;
}

/* Pillow's affine_fixed: 16.16 fixed-point sums, the pixel the integer part
 * (a negative sum is outside). */
static void fixed_nearest(const warp_images *im, const double *m) {
  int32_t channels = im->channels;
  int64_t m0 = fixed(m[0]), m1 = fixed(m[1]), m3 = fixed(m[3]), m4 = fixed(m[4]);
  int64_t xo = fixed(m[2] + m[0] * 0.5 + m[1] * 0.5), yo = fixed(m[5] + m[3] * 0.5 + m[4] * 0.5);
  for (int32_t y = 0; y < im->dst_h; y++, xo += m1, yo += m4) {
    uint8_t *d = im->dst + y * im->dst_stride;
    int64_t xx = xo, yy = yo;
    for (int32_t x = 0; x < im->dst_w; x++, xx += m0, yy += m3, d += channels) {
      if (xx >= 0 && yy >= 0 && (xx >> 16) < im->src_w && (yy >> 16) < im->src_h)
        put_pixel(d, source_pixel(im, yy >> 16, xx >> 16), channels);
      else
        put_pixel(d, im->fill, channels);
    }
  }
}

/* Pillow's floating-point affine loop: row and column sums in double precision. */
static void float_nearest(const warp_images *im, const double *m) {
  int32_t channels = im->channels;
  double xo = m[2] + m[1] * 0.5 + m[0] * 0.5, yo = m[5] + m[4] * 0.5 + m[3] * 0.5;
  for (int32_t y = 0; y < im->dst_h; y++, xo += m[1], yo += m[4]) {
    uint8_t *d = im->dst + y * im->dst_stride;
    double xx = xo, yy = yo;
    for (int32_t x = 0; x < im->dst_w; x++, xx += m[0], yy += m[3], d += channels) nearest_at(im, xx, yy, d);
  }
}

/* Whether the map only shifts by whole pixels, where the bilinear filter
 * weighs one pixel 1 and the others 0. */
static int whole_pixel_shift(const double *m) {
  return m[0] == 1.0 && m[1] == 0.0 && m[3] == 0.0 && m[4] == 1.0 && fabs(m[2]) < FIXED_LIMIT &&
         fabs(m[5]) < FIXED_LIMIT && m[2] == floor(m[2]) && m[5] == floor(m[5]);
}

static void fill_pixels(uint8_t *d, const uint8_t *fill, int32_t channels, int64_t count) {
  for (int64_t k = 0; k < count; k++, d += channels) put_pixel(d, fill, channels);
}

/* The bilinear warp of a whole-pixel shift: output pixel (x, y) is source
 * pixel (x + m2, y + m5), else fill; rows copied, the same values. */
static void shift(const warp_images *im, const double *m) {
  int32_t channels = im->channels;
  int64_t dx = (int64_t)m[2], dy = (int64_t)m[5], out_w = im->dst_w;
  int64_t start = -dx < 0 ? 0 : -dx > out_w ? out_w : -dx;
  int64_t stop = im->src_w - dx < out_w ? im->src_w - dx : out_w;
  if (stop < 0) stop = 0;
  for (int32_t y = 0; y < im->dst_h; y++) {
    uint8_t *d = im->dst + y * im->dst_stride;
    int64_t row = y + dy;
    if (row < 0 || row >= im->src_h || start >= stop) {
      fill_pixels(d, im->fill, channels, out_w);
      continue;
    }
    fill_pixels(d, im->fill, channels, start);
    memcpy(d + start * channels, source_pixel(im, row, start + dx), (size_t)((stop - start) * channels));
    fill_pixels(d + stop * channels, im->fill, channels, out_w - stop);
  }
}

/* Pillow's generic transform with the affine map and the bilinear filter. */
static void affine_bilinear(const warp_images *im, const double *m) {
  for (int32_t y = 0; y < im->dst_h; y++) {
    uint8_t *d = im->dst + y * im->dst_stride;
    double yin = y + 0.5;
    for (int32_t x = 0; x < im->dst_w; x++, d += im->channels) {
      double xin = x + 0.5;
      bilinear_at(im, m[0] * xin + m[1] * yin + m[2], m[3] * xin + m[4] * yin + m[5], d);
    }
  }
}

/* The checks of both warps; on success *im describes the images. */
static int32_t check_warp(const uint8_t *src, size_t src_size, int32_t src_h, int32_t src_w, int32_t channels,
                          int64_t src_stride, uint8_t *dst, size_t dst_size, int32_t dst_h, int32_t dst_w,
                          int64_t dst_stride, const double *matrix, const uint8_t *fill, size_t fill_size,
                          warp_images *im) {
  size_t src_span, dst_span;
  int32_t status = slip__check_image("src", src, src_size, src_h, src_w, channels, src_stride, &src_span);
  if (status != SLIP_OK) return status;
  status = slip__check_image("dst", dst, dst_size, dst_h, dst_w, channels, dst_stride, &dst_span);
  if (status != SLIP_OK) return status;
  if (!matrix || !fill) return slip__fail(SLIP_EINVAL, "the map's coefficients and fill must not be NULL");
  if (fill_size < (size_t)channels)
    return slip__fail(SLIP_EBUFFER, "fill holds %zu values; an image of %d channels needs %d", fill_size, channels,
                      channels);
  if (slip__overlap(src, src_span, dst, dst_span)) return slip__fail(SLIP_EINVAL, "dst overlaps src");
  *im = (warp_images){src, src_stride, src_h, src_w, channels, dst, dst_stride, dst_h, dst_w, fill};
  return SLIP_OK;
}

SLIP_API int32_t slip_warp_affine(const uint8_t *src, size_t src_size, int32_t src_h, int32_t src_w,
                                  int32_t channels, int64_t src_stride, uint8_t *dst, size_t dst_size, int32_t dst_h,
                                  int32_t dst_w, int64_t dst_stride, const double *matrix, int32_t nearest,
                                  const uint8_t *fill, size_t fill_size) {
  warp_images im;
  int32_t status = check_warp(src, src_size, src_h, src_w, channels, src_stride, dst, dst_size, dst_h, dst_w,
                              dst_stride, matrix, fill, fill_size, &im);
  if (status != SLIP_OK) return status;
  const double *m = matrix;
  double w = dst_w, h = dst_h;
  if (!nearest) {
    if (whole_pixel_shift(m))
      shift(&im, m);
    else
      affine_bilinear(&im, m);
  } else if (m[1] == 0.0 && m[3] == 0.0) {
    scale_nearest(&im, m);
  } else if (fits_fixed(m, 0, 0) && fits_fixed(m, w, h) && fits_fixed(m, 0, h) && fits_fixed(m, w, 0)) {
    fixed_nearest(&im, m);
  } else {
    float_nearest(&im, m);
  }
  return SLIP_OK;
}

SLIP_API int32_t slip_warp_perspective(const uint8_t *src, size_t src_size, int32_t src_h, int32_t src_w,
                                       int32_t channels, int64_t src_stride, uint8_t *dst, size_t dst_size,
                                       int32_t dst_h, int32_t dst_w, int64_t dst_stride, const double *coefficients,
                                       int32_t nearest, const uint8_t *fill, size_t fill_size) {
  warp_images im;
  int32_t status = check_warp(src, src_size, src_h, src_w, channels, src_stride, dst, dst_size, dst_h, dst_w,
                              dst_stride, coefficients, fill, fill_size, &im);
  if (status != SLIP_OK) return status;
  const double *a = coefficients;
  for (int32_t y = 0; y < dst_h; y++) {
    uint8_t *d = dst + y * dst_stride;
    double yin = y + 0.5;
    for (int32_t x = 0; x < dst_w; x++, d += channels) {
      double xin = x + 0.5;
      double w = a[6] * xin + a[7] * yin + 1;
      double xx = -1.0, yy = -1.0; /* where w is 0: outside */
      if (w != 0.0) {
        xx = (a[0] * xin + a[1] * yin + a[2]) / w;
        yy = (a[3] * xin + a[4] * yin + a[5]) / w;
      }
      if (nearest)
        nearest_at(&im, xx, yy, d);
      else
        bilinear_at(&im, xx, yy, d);
    }
  }
  return SLIP_OK;
}
