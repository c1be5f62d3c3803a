/*
 * policies.c - one step of an augmentation policy (torchvision's
 * TrivialAugmentWide, RandAugment, AutoAugment and AugMix; timm's
 * RandAugment): the Pillow AFFINE data of a geometric operation, built as
 * torchvision or timm builds it, and the warp or tone kernel that computes
 * the step's pixels.
 *
 * The matrices are torchvision's, operation for operation in double
 * precision: _get_inverse_affine_matrix for shears and translations, and
 * Image.rotate's matrix for rotations, whose angle is reduced modulo 360 as
 * Python's % reduces a float and whose cosine and sines are rounded as
 * Python's round(v, 15) rounds them (the exact value of the double, half to
 * even at the 15th decimal).  No fused multiply-add, as in warps.c.  Nothing
 * here allocates.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

/* torchvision builds its matrices with Python's math.cos, sin and tan, the C
 * library's; so must these kernels, to the last bit.  The self-contained
 * wheel is linked by Zig, whose compiler runtime (linked in for its 128-bit
 * and float16 helpers) carries a cos, sin and tan of its own that would take
 * the C library's place and differ in the last bit: its build names the C
 * library's symbol version (CMake's SLIPSTREAM_LIBM_VERSION), and these
 * references then bind to the C library's functions only. */
#if defined(SLIP_LIBM_VERSION)
__asm__(".symver cos, cos@" SLIP_LIBM_VERSION);
__asm__(".symver sin, sin@" SLIP_LIBM_VERSION);
__asm__(".symver tan, tan@" SLIP_LIBM_VERSION);
#endif

/* CPython's math.radians factor and math.degrees factor. */
#define DEGREE (3.141592653589793 / 180.0)
#define RADIAN (180.0 / 3.141592653589793)

/* The images, fill and output of one step. */
typedef struct step_images {
  const uint8_t *src;
  size_t src_size;
  int32_t height, width, channels;
  int64_t src_stride;
  uint8_t *dst;
  size_t dst_size;
  int64_t dst_stride;
  const uint8_t *fill;
  size_t fill_size;
  int32_t nearest;
} step_images;

/* The exact rounding error of p = a * b (Dekker's two-product with
 * Veltkamp's split, no fused multiply-add needed). */
static double product_error(double a, double b, double p) {
  const double split = 134217729.0; /* 2^27 + 1 */
  double c = split * a;
  double a_hi = c - (c - a), a_lo = a - a_hi;
  c = split * b;
  double b_hi = c - (c - b), b_lo = b - b_hi;
  return a_lo * b_lo - (((p - a_hi * b_hi) - a_lo * b_hi) - a_hi * b_lo);
}

/* Python's round(v, 15) for |v| <= 1: the exact value of v rounded half to
 * even at the 15th decimal.  v * 1e15 and its rounding error give the exact
 * product, whose fraction decides. */
static double round15(double v) {
  double magnitude = fabs(v);
  double p = magnitude * 1e15;
  double error = product_error(magnitude, 1e15, p);
  double n = floor(p);
  double fraction = p - n; /* exact: n and p are within a factor of two, or n is 0 */
  if (fraction > 0.5 || (fraction == 0.5 && (error > 0.0 || (error == 0.0 && fmod(n, 2.0) == 1.0)))) n += 1.0;
  return copysign(n / 1e15, v);
}

/* Python's angle % 360.0: the remainder takes the divisor's sign, a zero
 * one is +0. */
static double modulo_360(double angle) {
  double mod = fmod(angle, 360.0);
  if (mod != 0.0) { /* NaN too: it stays NaN */
    if (mod < 0.0) mod += 360.0;
  } else {
    mod = 0.0;
  }
  return mod;
}

/* Image.rotate's AFFINE data for `angle` degrees counter-clockwise about
 * (cx, cy), without expand or translate. */
static void rotation_inverse(double cx, double cy, double angle, double m[6]) {
  double theta = -(modulo_360(angle) * DEGREE);
  double c = round15(cos(theta)), s = round15(sin(theta));
  m[0] = c;
  m[1] = s;
  m[3] = round15(-sin(theta));
  m[4] = c;
  m[2] = m[0] * -cx + m[1] * -cy + 0.0 + cx;
  m[5] = m[3] * -cx + m[4] * -cy + 0.0 + cy;
}

/* torchvision's _get_inverse_affine_matrix((cx, cy), angle, (tx, ty), scale,
 * (shear_x, shear_y)), in its order of operations. */
static void affine_inverse(double cx, double cy, double angle, double tx, double ty, double scale, double shear_x,
                           double shear_y, double m[6]) {
  double rot = angle * DEGREE, sx = shear_x * DEGREE, sy = shear_y * DEGREE;
  double a = cos(rot - sy) / cos(sy);
  double b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
  double c = sin(rot - sy) / cos(sy);
  double d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);
  m[0] = d / scale;
  m[1] = -b / scale;
  m[2] = 0.0 / scale;
  m[3] = -c / scale;
  m[4] = a / scale;
  m[5] = 0.0 / scale;
  m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
  m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
  m[2] += cx;
  m[5] += cy;
}

static void set_matrix(double m[6], double m0, double m1, double m2, double m3, double m4, double m5) {
  m[0] = m0;
  m[1] = m1;
  m[2] = m2;
  m[3] = m3;
  m[4] = m4;
  m[5] = m5;
}

static int is_identity(const double m[6]) {
  return m[0] == 1.0 && m[1] == 0.0 && m[2] == 0.0 && m[3] == 0.0 && m[4] == 1.0 && m[5] == 0.0;
}

/* The checks every step makes first, whatever its operation. */
static int32_t check_step(double magnitude, const step_images *im, const double *inverse, size_t inverse_size) {
  size_t src_span, dst_span;
  int32_t status = slip__check_image("src", im->src, im->src_size, im->height, im->width, im->channels,
                                     im->src_stride, &src_span);
  if (status != SLIP_OK) return status;
  status = slip__check_image("dst", im->dst, im->dst_size, im->height, im->width, im->channels, im->dst_stride,
                             &dst_span);
  if (status != SLIP_OK) return status;
  if (slip__overlap(im->src, src_span, im->dst, dst_span)) return slip__fail(SLIP_EINVAL, "dst overlaps src");
  if (!im->fill || !inverse) return slip__fail(SLIP_EINVAL, "fill and inverse must not be NULL");
  if (im->fill_size < (size_t)im->channels)
    return slip__fail(SLIP_EBUFFER, "fill holds %zu values; an image of %d channels needs %d", im->fill_size,
                      im->channels, im->channels);
  if (inverse_size < 6) return slip__fail(SLIP_EBUFFER, "inverse holds %zu values; the map has 6", inverse_size);
  if (isnan(magnitude)) return slip__fail(SLIP_EINVAL, "the magnitude is not a number");
  return SLIP_OK;
}

static void copy_rows(const step_images *im) {
  size_t row = (size_t)im->width * (size_t)im->channels;
  for (int32_t y = 0; y < im->height; y++) memcpy(im->dst + y * im->dst_stride, im->src + y * im->src_stride, row);
}

/* The tone kernels, by what they take. */
typedef enum tone {
  TONE_COPY,
  TONE_BRIGHTNESS,
  TONE_COLOR,
  TONE_CONTRAST,
  TONE_SHARPNESS,
  TONE_POSTERIZE,
  TONE_SOLARIZE,
  TONE_SOLARIZE_ADD,
  TONE_AUTOCONTRAST,
  TONE_EQUALIZE,
  TONE_INVERT
} tone;

/* What one operation of a table does: warp by the AFFINE data m, or run
 * the tone kernel `kind` with `value`. */
typedef struct step_action {
  int geometric;
  double m[6];
  tone kind;
  double value;
} step_action;

/* torchvision's operation op at magnitude for an image of height x width. */
static void torchvision_action(int32_t op, double magnitude, int32_t height, int32_t width, step_action *a) {
  static const tone tones[] = {
      [SLIP_PRIMITIVE_IDENTITY] = TONE_COPY,       [SLIP_PRIMITIVE_BRIGHTNESS] = TONE_BRIGHTNESS,
      [SLIP_PRIMITIVE_COLOR] = TONE_COLOR,         [SLIP_PRIMITIVE_CONTRAST] = TONE_CONTRAST,
      [SLIP_PRIMITIVE_SHARPNESS] = TONE_SHARPNESS, [SLIP_PRIMITIVE_POSTERIZE] = TONE_POSTERIZE,
      [SLIP_PRIMITIVE_SOLARIZE] = TONE_SOLARIZE,   [SLIP_PRIMITIVE_AUTOCONTRAST] = TONE_AUTOCONTRAST,
      [SLIP_PRIMITIVE_EQUALIZE] = TONE_EQUALIZE,   [SLIP_PRIMITIVE_INVERT] = TONE_INVERT};
  a->geometric = 1;
  switch (op) {
  case SLIP_PRIMITIVE_SHEAR_X:
  case SLIP_PRIMITIVE_SHEAR_Y: {
    double degrees = atan(magnitude) * RADIAN;
    affine_inverse(0.0, 0.0, 0.0, 0.0, 0.0, 1.0, op == SLIP_PRIMITIVE_SHEAR_X ? degrees : 0.0,
                   op == SLIP_PRIMITIVE_SHEAR_Y ? degrees : 0.0, a->m);
    return;
  }
  case SLIP_PRIMITIVE_TRANSLATE_X:
  case SLIP_PRIMITIVE_TRANSLATE_Y: {
    double shift = trunc(magnitude); /* torchvision passes whole pixels */
    affine_inverse(width * 0.5, height * 0.5, 0.0, op == SLIP_PRIMITIVE_TRANSLATE_X ? shift : 0.0,
                   op == SLIP_PRIMITIVE_TRANSLATE_Y ? shift : 0.0, 1.0, 0.0, 0.0, a->m);
    return;
  }
  case SLIP_PRIMITIVE_ROTATE: rotation_inverse(width / 2.0, height / 2.0, magnitude, a->m); return;
  default: break;
  }
  a->geometric = 0;
  a->kind = tones[op];
  int enhancement = a->kind == TONE_BRIGHTNESS || a->kind == TONE_COLOR || a->kind == TONE_CONTRAST ||
                    a->kind == TONE_SHARPNESS;
  a->value = enhancement ? 1.0 + magnitude : magnitude; /* torchvision's enhancement factors */
}

/* timm's operation op with argument for an image of height x width. */
static void timm_action(int32_t op, double argument, int32_t height, int32_t width, step_action *a) {
  static const tone tones[] = {
      [SLIP_TIMM_AUTO_CONTRAST] = TONE_AUTOCONTRAST,     [SLIP_TIMM_EQUALIZE] = TONE_EQUALIZE,
      [SLIP_TIMM_INVERT] = TONE_INVERT,                  [SLIP_TIMM_POSTERIZE] = TONE_POSTERIZE,
      [SLIP_TIMM_POSTERIZE_INCREASING] = TONE_POSTERIZE, [SLIP_TIMM_SOLARIZE] = TONE_SOLARIZE,
      [SLIP_TIMM_SOLARIZE_INCREASING] = TONE_SOLARIZE,   [SLIP_TIMM_SOLARIZE_ADD] = TONE_SOLARIZE_ADD,
      [SLIP_TIMM_COLOR] = TONE_COLOR,                    [SLIP_TIMM_COLOR_INCREASING] = TONE_COLOR,
      [SLIP_TIMM_CONTRAST] = TONE_CONTRAST,              [SLIP_TIMM_CONTRAST_INCREASING] = TONE_CONTRAST,
      [SLIP_TIMM_BRIGHTNESS] = TONE_BRIGHTNESS,          [SLIP_TIMM_BRIGHTNESS_INCREASING] = TONE_BRIGHTNESS,
      [SLIP_TIMM_SHARPNESS] = TONE_SHARPNESS,            [SLIP_TIMM_SHARPNESS_INCREASING] = TONE_SHARPNESS};
  a->geometric = 1;
  switch (op) {
  case SLIP_TIMM_ROTATE: rotation_inverse(width / 2.0, height / 2.0, argument, a->m); return;
  case SLIP_TIMM_SHEAR_X: set_matrix(a->m, 1.0, argument, 0.0, 0.0, 1.0, 0.0); return;
  case SLIP_TIMM_SHEAR_Y: set_matrix(a->m, 1.0, 0.0, 0.0, argument, 1.0, 0.0); return;
  case SLIP_TIMM_TRANSLATE_X_REL: set_matrix(a->m, 1.0, 0.0, argument * width, 0.0, 1.0, 0.0); return;
  case SLIP_TIMM_TRANSLATE_Y_REL: set_matrix(a->m, 1.0, 0.0, 0.0, 0.0, 1.0, argument * height); return;
  default: break;
  }
  a->geometric = 0;
  a->kind = tones[op];
  a->value = argument;
}

/* timm's solarize_add: values below `threshold` raised by `add`, clipped to
 * 0 .. 255 (as Image.point clips its table); the others kept. */
static void solarize_add(const step_images *im, int32_t add, int32_t threshold) {
  uint8_t table[256];
  for (int32_t v = 0; v < 256; v++) {
    int32_t raised = v + add;
    table[v] = (uint8_t)(v >= threshold ? v : raised < 0 ? 0 : raised > 255 ? 255 : raised);
  }
  size_t row = (size_t)im->width * (size_t)im->channels;
  for (int32_t y = 0; y < im->height; y++) {
    const uint8_t *s = im->src + y * im->src_stride;
    uint8_t *d = im->dst + y * im->dst_stride;
    for (size_t i = 0; i < row; i++) d[i] = table[s[i]];
  }
}

/* A whole number of levels from a value that is not NaN: truncated and
 * clamped to lo .. hi (a magnitude's bits, solarize_add's levels). */
static int32_t whole_levels(double v, int32_t lo, int32_t hi) {
  return v <= (double)lo ? lo : v >= (double)hi ? hi : (int32_t)v;
}

/* The tone kernel of a step. */
static int32_t run_tone(const step_images *im, tone kind, double value) {
  const uint8_t *s = im->src;
  size_t ss = im->src_size, ds = im->dst_size;
  int32_t h = im->height, w = im->width, c = im->channels;
  int64_t st = im->src_stride, dt = im->dst_stride;
  uint8_t *d = im->dst;
  switch (kind) {
  case TONE_COPY: copy_rows(im); return SLIP_OK;
  case TONE_BRIGHTNESS: return slip_brightness(s, ss, h, w, c, st, d, ds, dt, value);
  case TONE_COLOR: return slip_color(s, ss, h, w, c, st, d, ds, dt, value);
  case TONE_CONTRAST: return slip_contrast(s, ss, h, w, c, st, d, ds, dt, value);
  case TONE_SHARPNESS: return slip_sharpness(s, ss, h, w, c, st, d, ds, dt, value);
  case TONE_POSTERIZE: return slip_posterize(s, ss, h, w, c, st, d, ds, dt, whole_levels(value, 0, 8));
  case TONE_SOLARIZE: return slip_solarize(s, ss, h, w, c, st, d, ds, dt, value);
  case TONE_SOLARIZE_ADD: solarize_add(im, whole_levels(value, -256, 256), 128); return SLIP_OK;
  case TONE_AUTOCONTRAST: return slip_autocontrast(s, ss, h, w, c, st, d, ds, dt);
  case TONE_EQUALIZE: return slip_equalize(s, ss, h, w, c, st, d, ds, dt);
  case TONE_INVERT: return slip_invert(s, ss, h, w, c, st, d, ds, dt);
  }
  return slip__fail(SLIP_EINVAL, "no tone kernel %d", (int)kind);
}

/* One step of a table whose operations `describe` says, `known` whether op
 * is one of them: 1 when it moved pixels (its map in inverse), 0 when it
 * changed values or copied (the identity in inverse), or a failure. */
static int32_t run_step(int known, const char *table, int32_t op, double value, const step_images *im,
                        double *inverse, size_t inverse_size,
                        void (*describe)(int32_t, double, int32_t, int32_t, step_action *)) {
  if (!known) return slip__fail(SLIP_EINVAL, "op %d is not a %s", op, table);
  int32_t status = check_step(value, im, inverse, inverse_size);
  if (status != SLIP_OK) return status;
  step_action a;
  describe(op, value, im->height, im->width, &a);
  if (a.geometric && !is_identity(a.m)) {
    status = slip_warp_affine(im->src, im->src_size, im->height, im->width, im->channels, im->src_stride, im->dst,
                              im->dst_size, im->height, im->width, im->dst_stride, a.m, im->nearest, im->fill,
                              im->fill_size);
    if (status != SLIP_OK) return status;
    memcpy(inverse, a.m, sizeof a.m);
    return 1;
  }
  if (a.geometric) { /* a map of magnitude 0: Pillow's pixels are the image's */
    copy_rows(im);
  } else {
    if ((a.kind == TONE_COLOR || a.kind == TONE_CONTRAST) && im->channels != 1 && im->channels != 3)
      return slip__fail(SLIP_EINVAL, "the image has %d channels; color and contrast take RGB (3) or one channel",
                        im->channels);
    status = run_tone(im, a.kind, a.value);
    if (status != SLIP_OK) return status;
  }
  set_matrix(inverse, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0);
  return 0;
}

SLIP_API int32_t slip_policy_step(int32_t op, double magnitude, const uint8_t *src, size_t src_size, int32_t height,
                                  int32_t width, int32_t channels, int64_t src_stride, uint8_t *dst, size_t dst_size,
                                  int64_t dst_stride, const uint8_t *fill, size_t fill_size, int32_t nearest,
                                  double *inverse, size_t inverse_size) {
  step_images im = {src, src_size, height, width, channels, src_stride, dst, dst_size, dst_stride, fill, fill_size,
                    nearest};
  return run_step(op >= SLIP_PRIMITIVE_IDENTITY && op <= SLIP_PRIMITIVE_INVERT, "slip_primitive", op, magnitude, &im,
                  inverse, inverse_size, torchvision_action);
}

SLIP_API int32_t slip_timm_step(int32_t op, double argument, const uint8_t *src, size_t src_size, int32_t height,
                                int32_t width, int32_t channels, int64_t src_stride, uint8_t *dst, size_t dst_size,
                                int64_t dst_stride, const uint8_t *fill, size_t fill_size, int32_t nearest,
                                double *inverse, size_t inverse_size) {
  step_images im = {src, src_size, height, width, channels, src_stride, dst, dst_size, dst_stride, fill, fill_size,
                    nearest};
  return run_step(op >= SLIP_TIMM_AUTO_CONTRAST && op <= SLIP_TIMM_TRANSLATE_Y_REL, "slip_timm_op", op, argument,
                  &im, inverse, inverse_size, timm_action);
}
