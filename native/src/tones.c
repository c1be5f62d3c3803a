/*
 * tones.c - Pillow's tone operations (ImageOps' posterize, solarize, invert,
 * autocontrast and equalize; ImageEnhance's brightness, color, contrast and
 * sharpness) on interleaved 8-bit images, with Pillow's arithmetic so that
 * the bytes are Pillow's:
 *
 *  - ImageOps maps every value through a 256-entry table per channel;
 *  - ImageEnhance blends a "degenerate" image towards the input in single
 *    precision, d + f * (v - d), clipped to 0 .. 255 and truncated;
 *  - gray is the ITU-R 601-2 luma in 16-bit fixed point, rounded;
 *  - ImageFilter.SMOOTH sums single-precision products row by row onto 0.5.
 *
 * Single precision must stay single precision, operation by operation, in
 * the order written: no fused multiply-add (clang fuses by default where FMA
 * is enabled; gcc does not in ISO C mode, which the build sets).  The loops
 * of the blends are compiled twice, for any x86-64 and for CPUs with AVX2
 * (used where the thread's kernels may use it, see slip_thread_state.isa):
 * the same C, whose vectorized operations round as the scalar ones do, so
 * that both give the same bytes.  Nothing here allocates: the tables,
 * histograms and runs of gray values live on the stack.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define SLIP_TONES_VECTOR 1
#endif

enum { LEVELS = 256, MAX_CHANNELS = 4 };

/* The checks every tone kernel makes.  dst may be src itself, with the same
 * stride, when in_place is allowed; otherwise the two must not overlap. */
static int32_t check_tone(const uint8_t *src, size_t src_size, int32_t height, int32_t width, int32_t channels,
                          int64_t src_stride, const uint8_t *dst, size_t dst_size, int64_t dst_stride,
                          int in_place) {
  size_t src_span, dst_span;
  int32_t status = slip__check_image("src", src, src_size, height, width, channels, src_stride, &src_span);
  if (status != SLIP_OK) return status;
  status = slip__check_image("dst", dst, dst_size, height, width, channels, dst_stride, &dst_span);
  if (status != SLIP_OK) return status;
  if (in_place && dst == src && dst_stride == src_stride) return SLIP_OK;
  if (slip__overlap(src, src_span, dst, dst_span))
    return slip__fail(SLIP_EINVAL, in_place ? "dst overlaps src without being src with the same stride"
                                            : "dst overlaps src: the kernel reads the neighbours of each pixel");
  return SLIP_OK;
}

/* dst = tables[c][src] for the values of channel c. */
static void map_channels(const uint8_t *src, int64_t src_stride, int32_t height, int32_t width, int32_t channels,
                         uint8_t *dst, int64_t dst_stride, uint8_t tables[MAX_CHANNELS][LEVELS]) {
  for (int32_t y = 0; y < height; y++) {
    const uint8_t *s = src + y * src_stride;
    uint8_t *d = dst + y * dst_stride;
    for (int32_t x = 0; x < width; x++, s += channels, d += channels)
      for (int32_t c = 0; c < channels; c++) d[c] = tables[c][s[c]];
  }
}

/* The histogram of each channel, as Image.histogram counts it. */
static void histograms(const uint8_t *src, int64_t src_stride, int32_t height, int32_t width, int32_t channels,
                       int64_t counts[MAX_CHANNELS][LEVELS]) {
  memset(counts, 0, sizeof(int64_t) * MAX_CHANNELS * LEVELS);
  for (int32_t y = 0; y < height; y++) {
    const uint8_t *s = src + y * src_stride;
    for (int32_t x = 0; x < width; x++, s += channels)
      for (int32_t c = 0; c < channels; c++) counts[c][s[c]]++;
  }
}

static void identity(uint8_t table[LEVELS]) {
  for (int v = 0; v < LEVELS; v++) table[v] = (uint8_t)v;
}

/* A single-precision value stored as Pillow's blend and filter store one:
 * 0 at or below 0 (and for NaN), 255 at or above 255, else truncated.
 * Written without branches, so that loops of it vectorize. */
static inline uint8_t clip8(float t) {
  float high = 255.0f < t ? 255.0f : t; /* NaN stays NaN */
  return (uint8_t)(int32_t)(high > 0.0f ? high : 0.0f);
}

/* Image.blend of one value: degenerate + alpha * (value - degenerate). */
static inline uint8_t blend(int32_t degenerate, int32_t value, float alpha) {
  return clip8((float)degenerate + alpha * (float)(value - degenerate));
}

/* Pillow's RGB -> L: 601-2 luma in 16-bit fixed point, rounded half up. */
static inline uint8_t luma(uint32_t r, uint32_t g, uint32_t b) {
  return (uint8_t)((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

/* One SMOOTH kernel row at the values a, b, c: three single-precision
 * products summed left to right, b weighted `middle`. */
static inline float kernel_row(uint8_t a, uint8_t b, uint8_t c, float side, float middle) {
  return (float)a * side + (float)b * middle + (float)c * side;
}

/* The loops of the blends, one row at a time.  Each body is inlined into a
 * portable function and into an AVX2 one. */
#define ROW_BODY static inline __attribute__((always_inline))

/* n values blended with one degenerate value (brightness, contrast). */
ROW_BODY void blend_row_body(const uint8_t *s, uint8_t *d, size_t n, int32_t degenerate, float alpha) {
  for (size_t i = 0; i < n; i++) d[i] = blend(degenerate, s[i], alpha);
}

/* A row of width RGB pixels blended with their gray values, a run of pixels
 * at a time: the run's gray values, each repeated for its R, G and B, then
 * one blend per value (a loop that vectorizes).  d may be s. */
ROW_BODY void color_row_body(const uint8_t *s, uint8_t *d, int32_t width, float alpha) {
  enum { RUN = 256 };
  uint8_t gray[3 * RUN];
  for (int32_t x = 0; x < width; x += RUN) {
    const uint8_t *run = s + 3 * (size_t)x;
    uint8_t *out = d + 3 * (size_t)x;
    size_t n = (size_t)(width - x < RUN ? width - x : RUN);
    for (size_t p = 0; p < n; p++)
      gray[3 * p] = gray[3 * p + 1] = gray[3 * p + 2] = luma(run[3 * p], run[3 * p + 1], run[3 * p + 2]);
    for (size_t i = 0; i < 3 * n; i++) out[i] = blend(gray[i], run[i], alpha);
  }
}

/* The sum of the gray values of a row of width RGB pixels. */
ROW_BODY int64_t gray_sum_body(const uint8_t *s, int32_t width) {
  uint32_t total = 0; /* at most 255 * SLIP_MAX_DIMENSION */
  for (int32_t x = 0; x < width; x++) total += luma(s[3 * x], s[3 * x + 1], s[3 * x + 2]);
  return total;
}

/* The values step .. row - step - 1 of a row s, between the rows above and
 * below it, blended with the image smoothed by SMOOTH, as Pillow's filter
 * adds it: 0.5, then the row below, the row itself and the row above. */
ROW_BODY void sharpen_row_body(const uint8_t *above, const uint8_t *s, const uint8_t *below, uint8_t *d, size_t row,
                               size_t step, float alpha) {
  const float side = 1.0f / 13.0f, centre = 5.0f / 13.0f;
  for (size_t i = step; i < row - step; i++) {
    size_t l = i - step, r = i + step;
    float total = 0.5f + kernel_row(below[l], below[i], below[r], side, side);
    total = total + kernel_row(s[l], s[i], s[r], side, centre);
    /* the sum lies in [0.5, 256): stored as a blended value is, it is its integer part, at most 255 */
    int32_t smoothed = (int32_t)(total + kernel_row(above[l], above[i], above[r], side, side));
    d[i] = blend(smoothed < 255 ? smoothed : 255, s[i], alpha);
  }
}

/* The row loops for one instruction set. */
typedef struct row_kernels {
  void (*blend)(const uint8_t *s, uint8_t *d, size_t n, int32_t degenerate, float alpha);
  void (*color)(const uint8_t *s, uint8_t *d, int32_t width, float alpha);
  int64_t (*gray_sum)(const uint8_t *s, int32_t width);
  void (*sharpen)(const uint8_t *above, const uint8_t *s, const uint8_t *below, uint8_t *d, size_t row, size_t step,
                  float alpha);
} row_kernels;

#define ROW_KERNELS(name, target)                                                                                \
  target static void blend_row_##name(const uint8_t *s, uint8_t *d, size_t n, int32_t degenerate, float alpha) { \
    blend_row_body(s, d, n, degenerate, alpha);                                                                 \
  }                                                                                                              \
  target static void color_row_##name(const uint8_t *s, uint8_t *d, int32_t width, float alpha) {               \
    color_row_body(s, d, width, alpha);                                                                         \
  }                                                                                                              \
  target static int64_t gray_sum_##name(const uint8_t *s, int32_t width) { return gray_sum_body(s, width); }      \
  target static void sharpen_row_##name(const uint8_t *above, const uint8_t *s, const uint8_t *below, uint8_t *d, \
                                        size_t row, size_t step, float alpha) {                                  \
    sharpen_row_body(above, s, below, d, row, step, alpha);                                                     \
  }                                                                                                              \
  static const row_kernels name##_rows = {blend_row_##name, color_row_##name, gray_sum_##name, sharpen_row_##name};

ROW_KERNELS(portable, )
#if SLIP_TONES_VECTOR
ROW_KERNELS(avx2, __attribute__((target("avx2"))))
#endif

/* The row loops the calling thread uses. */
static const row_kernels *thread_rows(void) {
#if SLIP_TONES_VECTOR
  slip_thread_state *ts = slip__thread_state();
  if (ts && (ts->isa & SLIP__ISA_AVX2)) return &avx2_rows;
#endif
  return &portable_rows;
}

/* Every value of an image blended with one degenerate value. */
static void blend_all(const uint8_t *src, int64_t src_stride, int32_t height, int32_t width, int32_t channels,
                      uint8_t *dst, int64_t dst_stride, int32_t degenerate, double factor) {
  const row_kernels *rows = thread_rows();
  for (int32_t y = 0; y < height; y++)
    rows->blend(src + y * src_stride, dst + y * dst_stride, (size_t)width * (size_t)channels, degenerate,
                (float)factor);
}

/* d[i] = the blend of s[i] with itself: s[i] for a finite alpha, 0 for an
 * infinite or NaN one (0 times it is NaN). */
static void blend_itself(const uint8_t *s, uint8_t *d, size_t n, float alpha) {
  for (size_t i = 0; i < n; i++) d[i] = blend(s[i], s[i], alpha);
}

SLIP_API int32_t slip_posterize(const uint8_t *src, size_t src_size, int32_t height, int32_t width, int32_t channels,
                                int64_t src_stride, uint8_t *dst, size_t dst_size, int64_t dst_stride, int64_t bits) {
  int32_t status = check_tone(src, src_size, height, width, channels, src_stride, dst, dst_size, dst_stride, 1);
  if (status != SLIP_OK) return status;
  int keep = bits < 0 ? 0 : bits > 8 ? 8 : (int)bits;
  uint8_t mask = (uint8_t)((0xFF00u >> keep) & 0xFFu);
  size_t row = (size_t)width * (size_t)channels;
  for (int32_t y = 0; y < height; y++) {
    const uint8_t *s = src + y * src_stride;
    uint8_t *d = dst + y * dst_stride;
    for (size_t i = 0; i < row; i++) d[i] = s[i] & mask;
  }
  return SLIP_OK;
}

SLIP_API int32_t slip_solarize(const uint8_t *src, size_t src_size, int32_t height, int32_t width, int32_t channels,
                               int64_t src_stride, uint8_t *dst, size_t dst_size, int64_t dst_stride,
                               double threshold) {
  int32_t status = check_tone(src, src_size, height, width, channels, src_stride, dst, dst_size, dst_stride, 1);
  if (status != SLIP_OK) return status;
  /* v >= threshold exactly when v >= ceil(threshold), v an integer; NaN inverts all. */
  int32_t cut = !(threshold > 0.0) ? 0 : threshold > 255.0 ? 256 : (int32_t)ceil(threshold);
  size_t row = (size_t)width * (size_t)channels;
  for (int32_t y = 0; y < height; y++) {
    const uint8_t *s = src + y * src_stride;
    uint8_t *d = dst + y * dst_stride;
    for (size_t i = 0; i < row; i++) d[i] = s[i] >= cut ? (uint8_t)(255 - s[i]) : s[i];
  }
  return SLIP_OK;
}

SLIP_API int32_t slip_invert(const uint8_t *src, size_t src_size, int32_t height, int32_t width, int32_t channels,
                             int64_t src_stride, uint8_t *dst, size_t dst_size, int64_t dst_stride) {
  int32_t status = check_tone(src, src_size, height, width, channels, src_stride, dst, dst_size, dst_stride, 1);
  if (status != SLIP_OK) return status;
  size_t row = (size_t)width * (size_t)channels;
  for (int32_t y = 0; y < height; y++) {
    const uint8_t *s = src + y * src_stride;
    uint8_t *d = dst + y * dst_stride;
    for (size_t i = 0; i < row; i++) d[i] = (uint8_t)(255 - s[i]);
  }
  return SLIP_OK;
}

/* ImageOps.autocontrast's table of one channel: its lowest value lo maps to
 * 0, its highest hi to 255, in double precision; one value: the identity. */
static void autocontrast_table(const int64_t counts[LEVELS], uint8_t table[LEVELS]) {
  int32_t lo = 0, hi = LEVELS - 1;
  while (lo < LEVELS && counts[lo] == 0) lo++;
  while (hi >= 0 && counts[hi] == 0) hi--;
  if (hi <= lo) {
    identity(table);
    return;
  }
  double scale = 255.0 / (double)(hi - lo);
  double offset = -(double)lo * scale;
  for (int32_t v = 0; v < LEVELS; v++) {
    int64_t level = (int64_t)((double)v * scale + offset);
    table[v] = (uint8_t)(level < 0 ? 0 : level > 255 ? 255 : level);
  }
}

/* ImageOps.equalize's table of one channel; one value, or a step of 0: the identity. */
static void equalize_table(const int64_t counts[LEVELS], uint8_t table[LEVELS]) {
  int64_t present = 0, total = 0, last = 0;
  for (int32_t v = 0; v < LEVELS; v++) {
    if (counts[v]) {
      present++;
      total += counts[v];
      last = counts[v];
    }
  }
  int64_t step = (total - last) / 255;
  if (present <= 1 || step == 0) {
    identity(table);
    return;
  }
  int64_t below = step / 2;
  for (int32_t v = 0; v < LEVELS; v++) {
    int64_t level = below / step;
    table[v] = (uint8_t)(level > 255 ? 255 : level);
    below += counts[v];
  }
}

/* Map each channel through the table `make` builds from its histogram. */
static int32_t map_by_histograms(const uint8_t *src, size_t src_size, int32_t height, int32_t width, int32_t channels,
                                 int64_t src_stride, uint8_t *dst, size_t dst_size, int64_t dst_stride,
                                 void (*make)(const int64_t counts[LEVELS], uint8_t table[LEVELS])) {
  int32_t status = check_tone(src, src_size, height, width, channels, src_stride, dst, dst_size, dst_stride, 1);
  if (status != SLIP_OK) return status;
  int64_t counts[MAX_CHANNELS][LEVELS];
  uint8_t tables[MAX_CHANNELS][LEVELS];
  histograms(src, src_stride, height, width, channels, counts);
  for (int32_t c = 0; c < channels; c++) make(counts[c], tables[c]);
  map_channels(src, src_stride, height, width, channels, dst, dst_stride, tables);
  return SLIP_OK;
}

SLIP_API int32_t slip_autocontrast(const uint8_t *src, size_t src_size, int32_t height, int32_t width,
                                   int32_t channels, int64_t src_stride, uint8_t *dst, size_t dst_size,
                                   int64_t dst_stride) {
  return map_by_histograms(src, src_size, height, width, channels, src_stride, dst, dst_size, dst_stride,
                           autocontrast_table);
}

SLIP_API int32_t slip_equalize(const uint8_t *src, size_t src_size, int32_t height, int32_t width, int32_t channels,
                               int64_t src_stride, uint8_t *dst, size_t dst_size, int64_t dst_stride) {
  return map_by_histograms(src, src_size, height, width, channels, src_stride, dst, dst_size, dst_stride,
                           equalize_table);
}

SLIP_API int32_t slip_brightness(const uint8_t *src, size_t src_size, int32_t height, int32_t width,
                                 int32_t channels, int64_t src_stride, uint8_t *dst, size_t dst_size,
                                 int64_t dst_stride, double factor) {
  int32_t status = check_tone(src, src_size, height, width, channels, src_stride, dst, dst_size, dst_stride, 1);
  if (status != SLIP_OK) return status;
  blend_all(src, src_stride, height, width, channels, dst, dst_stride, 0, factor);
  return SLIP_OK;
}

/* The checks of the kernels that take RGB or one-channel images. */
static int32_t check_gray_or_rgb(int32_t channels) {
  if (channels == 1 || channels == 3) return SLIP_OK;
  return slip__fail(SLIP_EINVAL, "the image has %d channels; this kernel takes RGB (3) or one channel", channels);
}

SLIP_API int32_t slip_color(const uint8_t *src, size_t src_size, int32_t height, int32_t width, int32_t channels,
                            int64_t src_stride, uint8_t *dst, size_t dst_size, int64_t dst_stride, double factor) {
  int32_t status = check_tone(src, src_size, height, width, channels, src_stride, dst, dst_size, dst_stride, 1);
  if (status == SLIP_OK) status = check_gray_or_rgb(channels);
  if (status != SLIP_OK) return status;
  if (channels == 1) { /* Pillow's Color leaves an L image as it is, whatever the factor */
    if (dst != src)
      for (int32_t y = 0; y < height; y++) memcpy(dst + y * dst_stride, src + y * src_stride, (size_t)width);
    return SLIP_OK;
  }
  const row_kernels *rows = thread_rows();
  for (int32_t y = 0; y < height; y++) rows->color(src + y * src_stride, dst + y * dst_stride, width, (float)factor);
  return SLIP_OK;
}

SLIP_API int32_t slip_contrast(const uint8_t *src, size_t src_size, int32_t height, int32_t width, int32_t channels,
                               int64_t src_stride, uint8_t *dst, size_t dst_size, int64_t dst_stride,
                               double factor) {
  int32_t status = check_tone(src, src_size, height, width, channels, src_stride, dst, dst_size, dst_stride, 1);
  if (status == SLIP_OK) status = check_gray_or_rgb(channels);
  if (status != SLIP_OK) return status;
  /* int(ImageStat.Stat(image.convert("L")).mean[0] + 0.5) */
  const row_kernels *rows = thread_rows();
  int64_t total = 0;
  for (int32_t y = 0; y < height; y++) {
    const uint8_t *s = src + y * src_stride;
    if (channels == 1)
      for (int32_t x = 0; x < width; x++) total += s[x];
    else
      total += rows->gray_sum(s, width);
  }
  double pixels = (double)height * (double)width;
  int32_t mean = (int32_t)((double)total / pixels + 0.5);
  blend_all(src, src_stride, height, width, channels, dst, dst_stride, mean, factor);
  return SLIP_OK;
}

SLIP_API int32_t slip_sharpness(const uint8_t *src, size_t src_size, int32_t height, int32_t width,
                                int32_t channels, int64_t src_stride, uint8_t *dst, size_t dst_size,
                                int64_t dst_stride, double factor) {
  int32_t status = check_tone(src, src_size, height, width, channels, src_stride, dst, dst_size, dst_stride, 0);
  if (status != SLIP_OK) return status;
  size_t row = (size_t)width * (size_t)channels, step = (size_t)channels;
  float alpha = (float)factor;
  /* The smoothed image's outermost rows and columns are the image's own, as
   * is the whole of an image smaller than the filter's kernel: each value is
   * blended with itself (kept, for a finite factor). */
  for (int32_t y = 0; y < height; y++) {
    const uint8_t *s = src + y * src_stride;
    uint8_t *d = dst + y * dst_stride;
    if (y == 0 || y == height - 1 || height < 3 || width < 3) {
      blend_itself(s, d, row, alpha);
      continue;
    }
    blend_itself(s, d, step, alpha);
    blend_itself(s + row - step, d + row - step, step, alpha);
  }
  if (height < 3 || width < 3) return SLIP_OK;
  const row_kernels *rows = thread_rows();
  for (int32_t y = 1; y < height - 1; y++) {
    const uint8_t *s = src + y * src_stride;
    rows->sharpen(s - src_stride, s, s + src_stride, dst + y * dst_stride, row, step, alpha);
  }
  return SLIP_OK;
}
