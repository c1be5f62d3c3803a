/*
 * test_native.c - self-contained tests of libslipstream's C ABI
 * (native/include/slipstream.h), with no test framework and no input files.
 *
 * The program encodes its own JPEGs from synthetic images, then checks the
 * decoders (region decoding against full decodes, flips, strides, guard
 * bytes), the fused decode+crop+resize and slip_resize against a double
 * precision reference resampler, the tone, warp, policy-step and mixing
 * kernels, slip_pack against exact conversions, hostile and truncated
 * input, invalid arguments, the encoder's bounds,
 * slip_pread, slip_crc32, the decoding limits, guarded mappings, concurrent
 * decoding, and the status strings.
 *
 * It is meant to be compiled together with the library sources under
 * AddressSanitizer and UndefinedBehaviorSanitizer, so that any out-of-bounds
 * access or undefined behaviour aborts the run.  `make asan` builds and runs
 * it, from the repository root, as
 *
 *   cc -std=c11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
 *      -fno-omit-frame-pointer -Inative/include native/src/[a-z]*.c native/tests/test_native.c \
 *      $(pkg-config --cflags --libs libjpeg) -lpthread -lm -o /tmp/test_native
 *   /tmp/test_native [seed]
 *
 * It prints one line per failing test case (every failed check as well when
 * SLIP_TEST_VERBOSE is set) and finally "N passed, M failed"; the exit
 * status is 0 only when nothing failed.  The optional argument seeds the
 * pseudo-random choices (regions, sizes, mutations); the default is fixed.
 */
#define _POSIX_C_SOURCE 200809L

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jpeglib.h>

#include "slipstream.h"

#if defined(__GNUC__)
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define PRINTF_LIKE(f, a)
#endif

/* ------------------------------------------------------------ test cases */

/* A test case groups related checks; it fails when any of them fails, and
 * reports the first failing check's reason on one line. */
static int n_passed, n_failed;
static char case_name[200];
static char case_reason[512];
static int case_errors;

static void PRINTF_LIKE(1, 2) case_begin(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(case_name, sizeof case_name, fmt, args);
  va_end(args);
  case_errors = 0;
  case_reason[0] = '\0';
}

static int verbose; /* SLIP_TEST_VERBOSE is set: print every failed check too */

/* Records the outcome of one check of the current case; returns ok. */
static int PRINTF_LIKE(2, 3) expect(int ok, const char *fmt, ...) {
  if (ok) return 1;
  if (case_errors++ == 0 || verbose) {
    char reason[sizeof case_reason];
    va_list args;
    va_start(args, fmt);
    vsnprintf(reason, sizeof reason, fmt, args);
    va_end(args);
    if (case_errors == 1) memcpy(case_reason, reason, sizeof reason);
    if (verbose) printf("  check failed in %s: %s\n", case_name, reason);
  }
  return 0;
}

static void case_end(void) {
  if (case_errors == 0) {
    n_passed++;
    return;
  }
  n_failed++;
  if (case_errors > 1) printf("FAIL %s: %s (and %d more failed checks)\n", case_name, case_reason, case_errors - 1);
  else printf("FAIL %s: %s\n", case_name, case_reason);
  fflush(stdout);
}

/* A failure must come with a status code and a detail message. */
static int expect_failure(int32_t status, const char *what) {
  int ok = expect(status < 0, "%s returned %d, expected a negative status", what, status);
  if (ok) ok = expect(slip_last_error()[0] != '\0', "%s failed (%d) with an empty slip_last_error()", what, status);
  return ok;
}

static int expect_status(int32_t status, int32_t want, const char *what) {
  if (!expect(status == want, "%s returned %d (%s), expected %d; detail: %s", what, status, slip_strerror(status),
              want, slip_last_error()))
    return 0;
  return want == SLIP_OK || expect(slip_last_error()[0] != '\0', "%s failed with an empty slip_last_error()", what);
}

/* ------------------------------------------------------------- utilities */

/* xorshift64: a fixed, platform-independent pseudo-random sequence. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_next(void) {
  uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return rng_state = x;
}

/* Uniform in 0 .. n-1 (n > 0). */
static int32_t rng_below(int32_t n) { return (int32_t)(rng_next() % (uint64_t)n); }

/* Uniform in lo .. hi inclusive. */
static int32_t rng_range(int32_t lo, int32_t hi) { return lo + rng_below(hi - lo + 1); }

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "test_native: out of memory (%zu bytes)\n", n);
    exit(2);
  }
  return p;
}

static int32_t ceil_div(int32_t a, int32_t d) { return (int32_t)(((int64_t)a + d - 1) / d); }
static int32_t min_i32(int32_t a, int32_t b) { return a < b ? a : b; }
static int32_t max_i32(int32_t a, int32_t b) { return a > b ? a : b; }

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A compact interleaved image: h rows of w pixels of c bytes, stride w * c. */
typedef struct image {
  int32_t h, w, c;
  uint8_t *px;
} image;

static void image_alloc(image *im, int32_t h, int32_t w, int32_t c) {
  im->h = h, im->w = w, im->c = c;
  im->px = xmalloc((size_t)h * (size_t)w * (size_t)c);
}

static void image_free(image *im) {
  free(im->px);
  im->px = NULL;
}

static size_t row_bytes(const image *im) { return (size_t)im->w * (size_t)im->c; }

/* Copies rows x bytes of a strided block into a new compact image. */
static void image_from(image *im, const uint8_t *src, int64_t stride, int32_t h, int32_t w, int32_t c) {
  image_alloc(im, h, w, c);
  for (int32_t i = 0; i < h; i++) memcpy(im->px + (size_t)i * row_bytes(im), src + i * stride, row_bytes(im));
}

/* Copies the block (y, x, h, w) of src into a new compact image. */
static void image_crop(image *im, const image *src, int32_t y, int32_t x, int32_t h, int32_t w) {
  image_from(im, src->px + (size_t)y * row_bytes(src) + (size_t)x * (size_t)src->c, (int64_t)row_bytes(src), h, w,
             src->c);
}

/* Index of the first differing byte, or -1 when equal (0 when the sizes differ). */
static int64_t image_mismatch(const image *a, const image *b) {
  if (a->h != b->h || a->w != b->w || a->c != b->c) return 0;
  size_t n = (size_t)a->h * row_bytes(a);
  for (size_t i = 0; i < n; i++)
    if (a->px[i] != b->px[i]) return (int64_t)i;
  return -1;
}

/* Largest absolute difference of two images of the same size. */
static int max_abs_diff(const image *a, const image *b) {
  int m = 0;
  size_t n = (size_t)a->h * row_bytes(a);
  for (size_t i = 0; i < n; i++) {
    int d = abs((int)a->px[i] - (int)b->px[i]);
    if (d > m) m = d;
  }
  return m;
}

/* 1 when b is a horizontally mirrored a. */
static int is_mirror(const image *a, const image *b) {
  if (a->h != b->h || a->w != b->w || a->c != b->c) return 0;
  for (int32_t i = 0; i < a->h; i++)
    for (int32_t j = 0; j < a->w; j++)
      if (memcmp(a->px + (size_t)i * row_bytes(a) + (size_t)j * (size_t)a->c,
                 b->px + (size_t)i * row_bytes(b) + (size_t)(a->w - 1 - j) * (size_t)a->c, (size_t)a->c))
        return 0;
  return 1;
}

/* ----------------------------------------------------- guarded buffers */

/* Output buffers are surrounded by guard bytes, and every byte (guards, row
 * padding, pixels) starts with a position-dependent pattern, so that a write
 * outside the pixels a function owns shows even when it stays inside the
 * allocation where AddressSanitizer cannot see it. */
enum { GUARD = 48 };

typedef struct guarded {
  uint8_t *mem;
  uint8_t *p; /* the usable bytes: mem + GUARD */
  size_t size;
} guarded;

static uint8_t fill_byte(size_t i) { return (uint8_t)(0x5Au + i * 151u); }

static void guarded_alloc(guarded *g, size_t size) {
  g->size = size;
  g->mem = xmalloc(size + 2 * GUARD);
  for (size_t i = 0; i < size + 2 * GUARD; i++) g->mem[i] = fill_byte(i);
  g->p = g->mem + GUARD;
}

/* 1 when the guards and the padding after each of `rows` rows of row_len
 * bytes (stride apart) still hold the pattern. */
static int guarded_intact(const guarded *g, int32_t rows, int64_t stride, size_t row_len) {
  for (size_t i = 0; i < GUARD; i++)
    if (g->mem[i] != fill_byte(i) || g->mem[GUARD + g->size + i] != fill_byte(GUARD + g->size + i)) return 0;
  for (int32_t r = 0; r + 1 < rows; r++)
    for (size_t k = row_len; k < (size_t)stride; k++) {
      size_t at = (size_t)r * (size_t)stride + k;
      if (g->p[at] != fill_byte(GUARD + at)) return 0;
    }
  return 1;
}

/* Bytes an output of rows x row_len with the given stride needs: the
 * documented minimum, so that the guard sits right after the last pixel. */
static size_t output_size(int32_t rows, int64_t stride, size_t row_len) {
  return (size_t)(rows - 1) * (size_t)stride + row_len;
}

/* ------------------------------------------------------- test pictures */

/* Smooth gradients plus noise: enough structure that a wrong pixel, row or
 * channel shows, and enough noise to exercise the entropy coder. */
static uint8_t *make_picture(int32_t h, int32_t w, int32_t channels, int32_t noise) {
  uint8_t *px = xmalloc((size_t)h * (size_t)w * (size_t)channels);
  for (int32_t i = 0; i < h; i++)
    for (int32_t j = 0; j < w; j++)
      for (int32_t c = 0; c < channels; c++) {
        int gx = 255 * j / max_i32(w - 1, 1), gy = 255 * i / max_i32(h - 1, 1), v;
        if (channels == 1) v = (gx + gy) / 2;
        else if (c == 0) v = gx;
        else if (c == 1) v = gy;
        else v = 64 + 128 * ((i / 8 + j / 8) % 2) + (i + j) % 32; /* hard edges */
        v += noise ? rng_below(2 * noise + 1) - noise : 0;
        size_t at = ((size_t)i * (size_t)w + (size_t)j) * (size_t)channels + (size_t)c;
        px[at] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
      }
  return px;
}

static uint8_t *make_noise(size_t n) {
  uint8_t *px = xmalloc(n);
  for (size_t i = 0; i < n; i++) px[i] = (uint8_t)(rng_next() >> 56);
  return px;
}

/* One test JPEG and what it was made from. */
typedef struct jpeg_case {
  char name[48];
  int32_t h, w, channels, subsampling, progressive;
  uint8_t *src;  /* h x w x channels source pixels */
  uint8_t *data; /* the JPEG, in an allocation of exactly `size` bytes */
  size_t size;
  image full[4]; /* full decodes at scales 1, 1/2, 1/4, 1/8 (px NULL if failed) */
} jpeg_case;

static const char *const subsampling_names[] = {"444", "422", "420", "440", "411", "441", "gray", "other"};

/* Copy of data[0 .. n) in an allocation of exactly n bytes, so that
 * AddressSanitizer catches any read past the end. */
static uint8_t *exact_copy(const uint8_t *data, size_t n) {
  uint8_t *p = xmalloc(n);
  if (n) memcpy(p, data, n);
  return p;
}

/* The arguments and results of one slip_jpeg_encode call. */
typedef struct encode_call {
  const uint8_t *src;
  int32_t h, w, channels;
  int64_t stride; /* 0 for w * channels */
  int32_t quality, subsampling, flags;
  uint8_t *out;
  size_t capacity, size;
  int32_t status;
  char error[160]; /* slip_last_error() of the encoding thread */
} encode_call;

/* A sequence of encode calls, run in order on one thread. */
typedef struct encode_batch {
  encode_call *calls;
  int n;
} encode_batch;

static void *encode_thread(void *p) {
  encode_batch *b = p;
  for (int k = 0; k < b->n; k++) {
    encode_call *e = &b->calls[k];
    int64_t stride = e->stride ? e->stride : (int64_t)e->w * e->channels;
    e->status = slip_jpeg_encode(e->src, e->h, e->w, e->channels, stride, e->quality, e->subsampling, e->flags,
                                 e->out, e->capacity, &e->size);
    snprintf(e->error, sizeof e->error, "%s", slip_last_error());
  }
  return NULL;
}

/* Runs n slip_jpeg_encode calls on a new thread, whose libjpeg compressor
 * has never been used, so that the test JPEGs do not depend on what the
 * calling thread encoded before (test_encode_reuse checks that separately).
 * Returns the status of the last call. */
static int32_t encode_on_fresh_thread(encode_call *calls, int n) {
  encode_batch batch = {calls, n};
  pthread_t thread;
  if (pthread_create(&thread, NULL, encode_thread, &batch) != 0) {
    fprintf(stderr, "test_native: pthread_create failed\n");
    exit(2);
  }
  pthread_join(thread, NULL);
  return calls[n - 1].status;
}

static encode_call encode_args(const uint8_t *src, int32_t h, int32_t w, int32_t channels, int64_t stride,
                               int32_t quality, int32_t subsampling, int32_t flags, uint8_t *out, size_t capacity) {
  encode_call e = {.src = src, .h = h, .w = w, .channels = channels, .stride = stride, .quality = quality,
                   .subsampling = subsampling, .flags = flags, .out = out, .capacity = capacity};
  return e;
}

/* expect_status for a call made on another thread. */
static int expect_encode_status(const encode_call *e, int32_t want, const char *what) {
  if (!expect(e->status == want, "%s returned %d (%s), expected %d; detail: %s", what, e->status,
              slip_strerror(e->status), want, e->error))
    return 0;
  return want == SLIP_OK || expect(e->error[0] != '\0', "%s failed with an empty slip_last_error()", what);
}

/* Encodes a picture into jc; *e receives the encode call and its outcome. */
static void make_jpeg(jpeg_case *jc, int32_t h, int32_t w, int32_t subsampling, int32_t flags, encode_call *e) {
  memset(jc, 0, sizeof *jc);
  jc->h = h, jc->w = w, jc->subsampling = subsampling;
  jc->channels = subsampling == SLIP_SUBSAMPLING_GRAY ? 1 : 3;
  jc->progressive = (flags & SLIP_ENCODE_PROGRESSIVE) != 0;
  snprintf(jc->name, sizeof jc->name, "%dx%d/%s/%s", w, h, subsampling_names[subsampling],
           jc->progressive ? "prog" : "base");
  jc->src = make_picture(h, w, jc->channels, 10);
  size_t capacity = slip_jpeg_encode_bound(h, w, jc->channels);
  *e = encode_args(jc->src, h, w, jc->channels, 0, 90, subsampling, flags, xmalloc(capacity), capacity);
  if (encode_on_fresh_thread(e, 1) == SLIP_OK) {
    jc->data = exact_copy(e->out, e->size);
    jc->size = e->size;
  }
  free(e->out);
  e->out = NULL;
}

static void free_jpeg(jpeg_case *jc) {
  free(jc->src);
  free(jc->data);
  for (int k = 0; k < 4; k++) image_free(&jc->full[k]);
}

static int scale_index(int32_t d) { return d == 1 ? 0 : d == 2 ? 1 : d == 4 ? 2 : 3; }

/* Walks the marker segments before the first SOS; returns the offset of the
 * first marker `m` (its 0xFF byte), or 0 when there is none. */
static size_t find_marker(const uint8_t *data, size_t size, uint8_t m) {
  size_t pos = 2;
  while (pos + 4 <= size && data[pos] == 0xFF) {
    if (data[pos + 1] == m) return pos;
    if (data[pos + 1] == 0xDA) return 0;
    pos += 2 + ((size_t)data[pos + 2] << 8 | data[pos + 3]);
  }
  return 0;
}

/* Offset just past the first SOS segment: all that slip_jpeg_info reads. */
static size_t header_end(const uint8_t *data, size_t size) {
  size_t sos = find_marker(data, size, 0xDA);
  return sos ? sos + 2 + ((size_t)data[sos + 2] << 8 | data[sos + 3]) : 0;
}

/* Offset of the SOF0 or SOF2 marker, or 0. */
static size_t find_sof(const uint8_t *data, size_t size) {
  size_t sof = find_marker(data, size, 0xC0);
  return sof ? sof : find_marker(data, size, 0xC2);
}

/* ------------------------------------------------ calls under guard */

typedef struct region {
  int32_t y, x, h, w;
} region;

/* slip_jpeg_decode into a padded, guarded buffer; on success *out receives
 * the pixels.  A write outside the output fails the current case. */
static int32_t guarded_decode(const uint8_t *data, size_t size, region r, int32_t d, int32_t flags, image *out) {
  int32_t sy = r.y / d, sx = r.x / d;
  int32_t oh = ceil_div(r.y + r.h, d) - sy, ow = ceil_div(r.x + r.w, d) - sx;
  int64_t stride = (int64_t)ow * 3 + rng_range(1, 13);
  guarded g;
  guarded_alloc(&g, output_size(oh, stride, (size_t)ow * 3));
  int32_t status = slip_jpeg_decode(data, size, r.y, r.x, r.h, r.w, d, flags, g.p, g.size, stride);
  expect(guarded_intact(&g, oh, stride, (size_t)ow * 3),
         "slip_jpeg_decode(y=%d, x=%d, h=%d, w=%d, 1/%d, flags %d) wrote outside its output (status %d)", r.y, r.x,
         r.h, r.w, d, flags, status);
  out->px = NULL;
  if (status == SLIP_OK) image_from(out, g.p, stride, oh, ow, 3);
  free(g.mem);
  return status;
}

/* slip_jpeg_decode_crop_resize into a padded, guarded buffer. */
static int32_t guarded_crop_resize(const uint8_t *data, size_t size, region r, int32_t oh, int32_t ow, int32_t flags,
                                   int32_t interp, image *out) {
  int64_t stride = (int64_t)ow * 3 + rng_range(0, 9);
  guarded g;
  guarded_alloc(&g, output_size(oh, stride, (size_t)ow * 3));
  int32_t status =
      slip_jpeg_decode_crop_resize(data, size, r.y, r.x, r.h, r.w, oh, ow, flags, interp, g.p, g.size, stride);
  expect(guarded_intact(&g, oh, stride, (size_t)ow * 3),
         "slip_jpeg_decode_crop_resize(y=%d, x=%d, h=%d, w=%d -> %dx%d, flags %d, interp %d) wrote outside its "
         "output (status %d)",
         r.y, r.x, r.h, r.w, oh, ow, flags, interp, status);
  out->px = NULL;
  if (status == SLIP_OK) image_from(out, g.p, stride, oh, ow, 3);
  free(g.mem);
  return status;
}

/* ------------------------------------------------ reference resampler */

static const char *interp_name(int32_t interp) {
  return interp == SLIP_INTERP_AREA ? "area" : interp == SLIP_INTERP_BILINEAR ? "bilinear" : "bicubic";
}

/* Normalized weights of n outputs over the source interval [start, start +
 * len), taps limited to pixels lo .. hi-1: w[j * (hi - lo) + (i - lo)].  This
 * is slip_interp's definition written out directly, in double precision. */
static double *ref_weights(double start, double len, int32_t n, int32_t interp, int32_t lo, int32_t hi) {
  int32_t span = hi - lo;
  double scale = len / n, support = scale > 1.0 ? scale : 1.0;
  double *w = xmalloc(sizeof(double) * (size_t)n * (size_t)span);
  for (int32_t j = 0; j < n; j++) {
    double a = start + j * scale, b = a + scale, c = start + (j + 0.5) * scale, sum = 0;
    double *row = w + (size_t)j * (size_t)span;
    for (int32_t i = lo; i < hi; i++) {
      if (interp == SLIP_INTERP_BICUBIC) { /* Keys' kernel, a = -0.5, stretched by support */
        double x = fabs(i + 0.5 - c) / support;
        row[i - lo] = x < 1 ? (1.5 * x - 2.5) * x * x + 1 : x < 2 ? ((-0.5 * x + 2.5) * x - 4) * x + 2 : 0;
      } else {
        double t = interp == SLIP_INTERP_AREA ? fmin(b, i + 1.0) - fmax(a, (double)i) : 1.0 - fabs(i + 0.5 - c) / support;
        row[i - lo] = t > 0 ? t : 0;
      }
      sum += row[i - lo];
    }
    for (int32_t i = 0; i < span; i++) row[i] /= sum;
  }
  return w;
}

/* Resamples the (possibly fractional) rectangle (cy, cx, ch, cw) of src into
 * an oh x ow image, taps limited to the whole pixels the rectangle touches. */
static void ref_resample(const image *src, double cy, double cx, double ch, double cw, int32_t oh, int32_t ow,
                         int32_t interp, int flip, image *out) {
  int32_t ylo = max_i32((int32_t)floor(cy), 0), yhi = min_i32((int32_t)ceil(cy + ch), src->h);
  int32_t xlo = max_i32((int32_t)floor(cx), 0), xhi = min_i32((int32_t)ceil(cx + cw), src->w);
  double *wy = ref_weights(cy, ch, oh, interp, ylo, yhi), *wx = ref_weights(cx, cw, ow, interp, xlo, xhi);
  int32_t sy = yhi - ylo, sx = xhi - xlo, c = src->c;
  image_alloc(out, oh, ow, c);
  double *acc = xmalloc(sizeof(double) * (size_t)sx * (size_t)c);
  for (int32_t r = 0; r < oh; r++) {
    const double *wr = wy + (size_t)r * (size_t)sy;
    for (int32_t k = 0; k < sx * c; k++) acc[k] = 0;
    for (int32_t i = 0; i < sy; i++) {
      if (wr[i] == 0) continue;
      const uint8_t *row = src->px + (size_t)(ylo + i) * row_bytes(src) + (size_t)xlo * (size_t)c;
      for (int32_t k = 0; k < sx * c; k++) acc[k] += wr[i] * row[k];
    }
    for (int32_t j = 0; j < ow; j++) {
      const double *wj = wx + (size_t)j * (size_t)sx;
      uint8_t *o = out->px + (size_t)r * row_bytes(out) + (size_t)(flip ? ow - 1 - j : j) * (size_t)c;
      for (int32_t cc = 0; cc < c; cc++) {
        double s = 0;
        for (int32_t k = 0; k < sx; k++) s += wj[k] * acc[(size_t)k * (size_t)c + (size_t)cc];
        s = floor(s + 0.5);
        o[cc] = (uint8_t)(s < 0 ? 0 : s > 255 ? 255 : s);
      }
    }
  }
  free(acc);
  free(wy);
  free(wx);
}

static int32_t ref_scale_for(int32_t ch, int32_t cw, int32_t oh, int32_t ow) {
  for (int32_t d = 8; d > 1; d /= 2)
    if ((int64_t)ch >= (int64_t)oh * d && (int64_t)cw >= (int64_t)ow * d) return d;
  return 1;
}

/* ------------------------------------------------------ 1: encode, info */

static void test_encode_info(jpeg_case *jc, const encode_call *e) {
  case_begin("encode+info %s", jc->name);
  if (expect_encode_status(e, SLIP_OK, "slip_jpeg_encode")) {
    slip_jpeg_info_t info;
    memset(&info, 0, sizeof info);
    if (expect_status(slip_jpeg_info(jc->data, jc->size, &info), SLIP_OK, "slip_jpeg_info")) {
      int gray = jc->channels == 1;
      int32_t hs = jc->subsampling == SLIP_SUBSAMPLING_422 || jc->subsampling == SLIP_SUBSAMPLING_420 ? 2 : 1;
      int32_t vs = jc->subsampling == SLIP_SUBSAMPLING_440 || jc->subsampling == SLIP_SUBSAMPLING_420 ? 2 : 1;
      expect(info.height == jc->h && info.width == jc->w, "size %dx%d, expected %dx%d", info.width, info.height,
             jc->w, jc->h);
      expect(info.components == (gray ? 1 : 3), "components %d", info.components);
      expect(info.colorspace == (gray ? SLIP_COLORSPACE_GRAY : SLIP_COLORSPACE_YCBCR), "colorspace %d",
             info.colorspace);
      expect(info.subsampling == jc->subsampling, "subsampling %d, expected %d", info.subsampling, jc->subsampling);
      expect(info.progressive == jc->progressive, "progressive %d", info.progressive);
      expect(info.mcu_height == 8 * vs && info.mcu_width == 8 * hs, "MCU %dx%d, expected %dx%d", info.mcu_width,
             info.mcu_height, 8 * hs, 8 * vs);
    }
  }
  case_end();
}

/* ------------------------------------------------ 2: region decoding */

/* Decodes the whole image at each scale; checks flips, gray replication and
 * fidelity to the source, and keeps the results as references. */
static void test_full_decode(jpeg_case *jc, int32_t d) {
  case_begin("decode full %s 1/%d", jc->name, d);
  region all = {0, 0, jc->h, jc->w};
  image *full = &jc->full[scale_index(d)], flipped = {0};
  if (expect_status(guarded_decode(jc->data, jc->size, all, d, 0, full), SLIP_OK, "slip_jpeg_decode")) {
    expect(full->h == ceil_div(jc->h, d) && full->w == ceil_div(jc->w, d), "unexpected size");
    if (expect_status(guarded_decode(jc->data, jc->size, all, d, SLIP_DECODE_FLIP_X, &flipped), SLIP_OK,
                      "slip_jpeg_decode with SLIP_DECODE_FLIP_X"))
      expect(is_mirror(full, &flipped), "the FLIP_X decode is not the mirror of the plain decode");
    image_free(&flipped);
    if (jc->channels == 1) {
      int same = 1;
      for (size_t i = 0; i < (size_t)full->h * (size_t)full->w; i++)
        same &= full->px[3 * i] == full->px[3 * i + 1] && full->px[3 * i] == full->px[3 * i + 2];
      expect(same, "grayscale is not replicated into R, G and B");
    }
    if (d == 1) {
      /* A quality-90 JPEG of a mildly noisy picture stays close to it. */
      double err = 0;
      size_t n = (size_t)jc->h * (size_t)jc->w;
      for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < 3; c++) {
          const uint8_t *s = jc->src + i * (size_t)jc->channels;
          err += fabs((double)full->px[3 * i + c] - (double)(jc->channels == 1 ? s[0] : s[c]));
        }
      err /= 3.0 * (double)n;
      expect(err < 12.0, "mean absolute error %.2f against the source is too large", err);
    }
  }
  case_end();
}

/* A random interval of 0 .. n-1, often a short one. */
static void random_interval(int32_t n, int32_t *start, int32_t *len) {
  if (rng_below(2)) {
    int32_t a = rng_below(n), b = rng_below(n);
    *start = min_i32(a, b);
    *len = max_i32(a, b) - *start + 1;
  } else {
    *start = rng_below(n);
    *len = rng_range(1, min_i32(16, n - *start));
  }
}

/* Mean absolute difference of the JFIF luma of two RGB images of h x w
 * pixels (the chroma of planes is subsampled, their luma is not). */
static double luma_error(const uint8_t *a, int64_t a_stride, const uint8_t *b, int64_t b_stride, int32_t h,
                         int32_t w) {
  double err = 0;
  for (int32_t i = 0; i < h; i++)
    for (int32_t j = 0; j < w; j++) {
      const uint8_t *p = a + i * a_stride + 3 * j, *q = b + i * b_stride + 3 * j;
      err += fabs(0.299 * (p[0] - q[0]) + 0.587 * (p[1] - q[1]) + 0.114 * (p[2] - q[2]));
    }
  return err / ((double)h * (double)w);
}

/* Planar YCbCr 4:2:0: a 4:2:0 (or grey) JPEG's planes, converted back at
 * full size, match its RGB decode within 2 levels; other layouts lose only
 * chroma detail; flips mirror; crops stay close to the decode's crops;
 * buffers of the documented sizes suffice and shorter ones are refused. */
static void test_planes(jpeg_case *jc) {
  case_begin("planes %s", jc->name);
  const image *full = &jc->full[0];
  int32_t h = jc->h, w = jc->w, ch = (h + 1) / 2, cw = (w + 1) / 2;
  int64_t n = slip_planes_bytes(h, w);
  expect(n == (int64_t)h * w + 2 * (int64_t)ch * cw, "slip_planes_bytes(%d, %d) is %lld", h, w, (long long)n);
  uint8_t *planes = xmalloc((size_t)n); /* exactly the planes: AddressSanitizer sees any read past them */
  if (full->px && expect_status(slip_jpeg_decode_planes(jc->data, jc->size, planes, (size_t)n), SLIP_OK,
                                "slip_jpeg_decode_planes")) {
    guarded out;
    int64_t stride = (int64_t)w * 3 + 5;
    guarded_alloc(&out, output_size(h, stride, (size_t)w * 3));
    int32_t status = slip_planes_crop_resize(planes, (size_t)n, h, w, 0, 0, h, w, h, w, 0, SLIP_INTERP_BILINEAR,
                                             out.p, out.size, stride);
    if (expect_status(status, SLIP_OK, "slip_planes_crop_resize of the whole image")) {
      expect(guarded_intact(&out, h, stride, (size_t)w * 3), "slip_planes_crop_resize wrote outside its output");
      image got = {0}, flipped = {0};
      image_from(&got, out.p, stride, h, w, 3);
      /* libjpeg-turbo replicates the chroma of images a few pixels across instead of interpolating it: their
       * decodes are no reference for the planes' smooth chroma. */
      int tiny = h <= 4 || w <= 4;
      int exact = jc->subsampling == SLIP_SUBSAMPLING_GRAY || (jc->subsampling == SLIP_SUBSAMPLING_420 && !tiny);
      double err = luma_error(got.px, (int64_t)w * 3, full->px, (int64_t)w * 3, h, w);
      if (exact) expect(max_abs_diff(&got, full) <= 2, "differs from the decode by %d levels", max_abs_diff(&got, full));
      else expect(err < (tiny ? 8.0 : 1.0), "differs from the decode's luma by %.2f levels on average", err);
      status = slip_planes_crop_resize(planes, (size_t)n, h, w, 0, 0, h, w, h, w, SLIP_DECODE_FLIP_X,
                                       SLIP_INTERP_BILINEAR, out.p, out.size, stride);
      if (expect_status(status, SLIP_OK, "slip_planes_crop_resize with SLIP_DECODE_FLIP_X")) {
        image_from(&flipped, out.p, stride, h, w, 3);
        expect(is_mirror(&got, &flipped), "the FLIP_X output is not the mirror of the plain one");
      }
      image_free(&got);
      image_free(&flipped);
    }
    free(out.mem);
    /* Crops at their own size and resized, each filter: close to the same crop of the decode. */
    for (int k = 0; k < 6; k++) {
      int32_t y, x, rh, rw, oh = rng_range(1, 40), ow = rng_range(1, 40);
      random_interval(h, &y, &rh);
      random_interval(w, &x, &rw);
      if (k < 2) oh = rh, ow = rw;
      guarded crop;
      guarded_alloc(&crop, (size_t)oh * (size_t)ow * 3);
      status = slip_planes_crop_resize(planes, (size_t)n, h, w, y, x, rh, rw, oh, ow, 0, k % 3, crop.p, crop.size,
                                       (int64_t)ow * 3);
      if (expect_status(status, SLIP_OK, "slip_planes_crop_resize of a crop")) {
        expect(guarded_intact(&crop, oh, (int64_t)ow * 3, (size_t)ow * 3), "a crop wrote outside its output");
        image want = {0};
        image_alloc(&want, oh, ow, 3);
        slip_resize(full->px, full->h, full->w, 3, (int64_t)full->w * 3, y, x, rh, rw, want.px, oh, ow,
                    (int64_t)ow * 3, k % 3, 0);
        double err = luma_error(crop.p, (int64_t)ow * 3, want.px, (int64_t)ow * 3, oh, ow);
        expect(err < (h <= 4 || w <= 4 ? 8.0 : 2.0), "crop (%d, %d, %d, %d) to %d x %d differs from the decode's in "
               "luma by %.2f levels on "
               "average", y, x, rh, rw, oh, ow, err);
        image_free(&want);
      }
      free(crop.mem);
    }
    /* Short buffers and bad arguments are refused. */
    uint8_t px[3];
    expect_status(slip_planes_crop_resize(planes, (size_t)n - 1, h, w, 0, 0, 1, 1, 1, 1, 0, 0, px, 3, 3),
                  SLIP_ETRUNCATED, "slip_planes_crop_resize of planes one byte short");
    expect_status(slip_planes_crop_resize(planes, (size_t)n, h, w, 0, 0, 1, 1, 1, 1, 0, 0, px, 2, 3), SLIP_EBUFFER,
                  "slip_planes_crop_resize into a 2-byte output");
    expect_status(slip_planes_crop_resize(planes, (size_t)n, h, w, 0, 0, h + 1, 1, 1, 1, 0, 0, px, 3, 3),
                  SLIP_EINVAL, "slip_planes_crop_resize of a crop taller than the image");
    expect_status(slip_planes_crop_resize(planes, (size_t)n, h, w, 0, 0, 1, 1, 1, 1, 0, 7, px, 3, 3), SLIP_EINVAL,
                  "slip_planes_crop_resize with an unknown filter");
    expect_status(slip_planes_crop_resize(NULL, (size_t)n, h, w, 0, 0, 1, 1, 1, 1, 0, 0, px, 3, 3), SLIP_EINVAL,
                  "slip_planes_crop_resize of NULL planes");
    expect_status(slip_jpeg_decode_planes(jc->data, jc->size, planes, (size_t)n - 1), SLIP_EBUFFER,
                  "slip_jpeg_decode_planes into a buffer one byte short");
  }
  /* Planes from the source pixels: the mean of each 2 x 2 block's chroma. */
  if (jc->channels == 3) {
    expect_status(slip_rgb_to_planes(jc->src, h, w, (int64_t)w * 3, planes, (size_t)n), SLIP_OK, "slip_rgb_to_planes");
    guarded out;
    guarded_alloc(&out, (size_t)h * (size_t)w * 3);
    if (expect_status(slip_planes_crop_resize(planes, (size_t)n, h, w, 0, 0, h, w, h, w, 0, SLIP_INTERP_BILINEAR,
                                              out.p, out.size, (int64_t)w * 3), SLIP_OK,
                      "slip_planes_crop_resize of converted planes")) {
      double err = luma_error(out.p, (int64_t)w * 3, jc->src, (int64_t)w * 3, h, w);
      /* The chroma of an image at most 4 pixels wide is replicated, as
       * libjpeg-turbo does, which follows the pixels less closely than
       * interpolation. */
      expect(err < (w <= 4 ? 2.0 : 1.0), "planes of the source pixels differ from them in luma by %.2f levels on "
             "average", err);
    }
    free(out.mem);
    expect_status(slip_rgb_to_planes(jc->src, h, w, (int64_t)w * 3 - 1, planes, (size_t)n), SLIP_EINVAL,
                  "slip_rgb_to_planes with a short stride");
    expect_status(slip_rgb_to_planes(jc->src, h, w, (int64_t)w * 3, planes, (size_t)n - 1), SLIP_EBUFFER,
                  "slip_rgb_to_planes into a buffer one byte short");
  }
  expect_status((int32_t)slip_planes_bytes(0, w), SLIP_EINVAL, "slip_planes_bytes of a 0-row image");
  free(planes);
  case_end();
}

/* Regions touching every edge and corner, 1-pixel strips, and at least 20
 * random ones; returns how many were written to r (room for 40). */
static int make_regions(int32_t H, int32_t W, region *r) {
  int n = 0;
  int32_t ry, rh, rx, rw;
  random_interval(H, &ry, &rh);
  random_interval(W, &rx, &rw);
  r[n++] = (region){0, 0, H, W};
  r[n++] = (region){0, 0, 1, 1};
  r[n++] = (region){H - 1, W - 1, 1, 1};
  r[n++] = (region){0, W - 1, 1, 1};
  r[n++] = (region){H - 1, 0, 1, 1};
  r[n++] = (region){0, rx, 1, rw};     /* top row */
  r[n++] = (region){H - 1, rx, 1, rw}; /* bottom row */
  r[n++] = (region){ry, 0, rh, 1};     /* left column */
  r[n++] = (region){ry, W - 1, rh, 1}; /* right column */
  r[n++] = (region){ry, 0, rh, W};     /* full-width band */
  r[n++] = (region){0, rx, H, rw};     /* full-height band */
  r[n++] = (region){ry, rx, H - ry, W - rx};
  r[n++] = (region){0, 0, ry + 1, rx + 1};
  for (int k = 0; k < 22; k++) {
    random_interval(H, &r[n].y, &r[n].h);
    random_interval(W, &r[n].x, &r[n].w);
    if (k % 5 == 0) r[n].h = 1;
    if (k % 5 == 1) r[n].w = 1;
    n++;
  }
  return n;
}

/* Region decodes must equal the matching block of the full decode, and the
 * flipped decode must be its mirror. */
static void check_regions(const jpeg_case *jc, int32_t d, int32_t flags, const image *full, const region *regions,
                          int n) {
  for (int k = 0; k < n; k++) {
    region r = regions[k];
    image roi = {0}, flipped = {0}, want = {0};
    int32_t status = guarded_decode(jc->data, jc->size, r, d, flags, &roi);
    if (!expect_status(status, SLIP_OK, "slip_jpeg_decode")) continue;
    int32_t sy = r.y / d, sx = r.x / d;
    image_crop(&want, full, sy, sx, ceil_div(r.y + r.h, d) - sy, ceil_div(r.x + r.w, d) - sx);
    int64_t at = image_mismatch(&roi, &want);
    expect(at < 0,
           "region (y=%d, x=%d, h=%d, w=%d) at 1/%d flags %d differs from the full decode at byte %lld "
           "(row %lld, col %lld)",
           r.y, r.x, r.h, r.w, d, flags, (long long)at, (long long)(at / (int64_t)row_bytes(&want)),
           (long long)(at % (int64_t)row_bytes(&want) / 3));
    if (expect_status(guarded_decode(jc->data, jc->size, r, d, flags | SLIP_DECODE_FLIP_X, &flipped), SLIP_OK,
                      "slip_jpeg_decode with FLIP_X"))
      expect(is_mirror(&roi, &flipped), "region (y=%d, x=%d, h=%d, w=%d) at 1/%d: flipped is not the mirror", r.y,
             r.x, r.h, r.w, d);
    image_free(&roi);
    image_free(&flipped);
    image_free(&want);
  }
}

static void test_regions(jpeg_case *jc, int32_t d) {
  const image *full = &jc->full[scale_index(d)];
  if (!full->px) return; /* the full decode's case already failed */
  case_begin("decode regions %s 1/%d", jc->name, d);
  region regions[40];
  int n = make_regions(jc->h, jc->w, regions);
  check_regions(jc, d, 0, full, regions, n);
  case_end();
}

/* The same identity with the fast IDCT and merged upsampling. */
static void test_regions_fast(jpeg_case *jc) {
  case_begin("decode regions fast flags %s", jc->name);
  const int32_t flags = SLIP_DECODE_FAST_IDCT;
  for (int32_t d = 1; d <= 8; d *= 2) {
    image full = {0};
    region all = {0, 0, jc->h, jc->w}, regions[40];
    if (!expect_status(guarded_decode(jc->data, jc->size, all, d, flags, &full), SLIP_OK, "full fast decode"))
      continue;
    int n = make_regions(jc->h, jc->w, regions);
    check_regions(jc, d, flags, &full, regions, n < 20 ? n : 20);
    image_free(&full);
  }
  case_end();
}

/* ------------------------------------------ 3: fused crop and resize */

static void test_scale_for(void) {
  case_begin("slip_jpeg_scale_for");
  for (int k = 0; k < 2000; k++) {
    int32_t oh = rng_range(1, 300), ow = rng_range(1, 300);
    int32_t ch = rng_range(1, 3000), cw = rng_range(1, 3000);
    if (k % 4 == 0) ch = oh * (1 << rng_below(4)) - rng_below(2), cw = ow * 8; /* at the thresholds */
    if (ch < 1) ch = 1;
    int32_t got = slip_jpeg_scale_for(ch, cw, oh, ow);
    expect(got == ref_scale_for(ch, cw, oh, ow), "scale_for(%d, %d, %d, %d) = %d, expected %d", ch, cw, oh, ow, got,
           ref_scale_for(ch, cw, oh, ow));
  }
  expect(slip_jpeg_scale_for(65500, 65500, 1, 1) == 8, "scale_for of a huge crop");
  expect(slip_jpeg_scale_for(1, 1, 65500, 65500) == 1, "scale_for of a huge output");
  expect(slip_jpeg_scale_for(INT32_MAX, INT32_MAX, INT32_MAX / 4, INT32_MAX / 4) == 4, "scale_for near INT32_MAX");
  expect(slip_jpeg_scale_for(INT32_MAX, INT32_MAX, INT32_MAX / 4 + 1, 1) == 2, "scale_for just past INT32_MAX");
  expect_status(slip_jpeg_scale_for(0, 10, 1, 1), SLIP_EINVAL, "scale_for(crop_h=0)");
  expect_status(slip_jpeg_scale_for(10, -1, 1, 1), SLIP_EINVAL, "scale_for(crop_w=-1)");
  expect_status(slip_jpeg_scale_for(10, 10, 0, 1), SLIP_EINVAL, "scale_for(out_h=0)");
  expect_status(slip_jpeg_scale_for(10, 10, 1, INT32_MIN), SLIP_EINVAL, "scale_for(out_w=INT32_MIN)");
  case_end();
}

/* An output size for a crop of n pixels: 1, larger than the crop, any, or
 * small enough for 1/8 scaling. */
static int32_t random_out_size(int32_t n, int mode) {
  switch (mode) {
  case 0: return 1;
  case 1: return min_i32(n + rng_range(1, 40), 120);
  case 2: return rng_range(1, min_i32(n, 120));
  default: return max_i32(1, min_i32(n / rng_range(8, 12), 120));
  }
}

/* Checks crop_resize against the reference resampler applied to the full
 * decode at the scale it picks, and its flip against the mirror. */
static void test_crop_resize(jpeg_case *jc, int32_t interp) {
  case_begin("crop_resize %s %s", jc->name, interp_name(interp));
  for (int k = 0; k < 14; k++) {
    region r;
    if (k == 0) r = (region){0, 0, jc->h, jc->w};
    else {
      random_interval(jc->h, &r.y, &r.h);
      random_interval(jc->w, &r.x, &r.w);
    }
    int mode = k % 4;
    int32_t oh = random_out_size(r.h, mode), ow = random_out_size(r.w, mode);
    if (mode == 1 && k % 8 == 1) oh = rng_range(1, 4); /* enlarge one axis only */
    int32_t d = slip_jpeg_scale_for(r.h, r.w, oh, ow);
    const image *full = &jc->full[scale_index(d)];
    if (!full->px) continue;
    image got = {0}, flipped = {0}, want = {0};
    if (!expect_status(guarded_crop_resize(jc->data, jc->size, r, oh, ow, 0, interp, &got), SLIP_OK,
                       "slip_jpeg_decode_crop_resize"))
      continue;
    ref_resample(full, (double)r.y / d, (double)r.x / d, (double)r.h / d, (double)r.w / d, oh, ow, interp, 0, &want);
    int diff = max_abs_diff(&got, &want);
    expect(diff <= 1, "crop (y=%d, x=%d, h=%d, w=%d) -> %dx%d at 1/%d differs from the reference by %d", r.y, r.x,
           r.h, r.w, ow, oh, d, diff);
    if (expect_status(guarded_crop_resize(jc->data, jc->size, r, oh, ow, SLIP_DECODE_FLIP_X, interp, &flipped),
                      SLIP_OK, "slip_jpeg_decode_crop_resize with FLIP_X"))
      expect(is_mirror(&got, &flipped), "crop (y=%d, x=%d, h=%d, w=%d) -> %dx%d: flipped is not the mirror", r.y,
             r.x, r.h, r.w, ow, oh);
    image_free(&got);
    image_free(&flipped);
    image_free(&want);
  }
  case_end();
}

/* ---------------------------------------------------------- 4: resize */

/* Runs slip_resize from a padded copy of src into a padded, guarded output. */
static int32_t guarded_resize(const image *src, region r, int32_t oh, int32_t ow, int32_t interp, int flip,
                              image *out) {
  int64_t sstride = (int64_t)row_bytes(src) + rng_range(0, 7);
  uint8_t *s = xmalloc(output_size(src->h, sstride, row_bytes(src)));
  for (int32_t i = 0; i < src->h; i++) memcpy(s + i * sstride, src->px + (size_t)i * row_bytes(src), row_bytes(src));
  int64_t dstride = (int64_t)ow * src->c + rng_range(1, 7);
  guarded g;
  guarded_alloc(&g, output_size(oh, dstride, (size_t)ow * (size_t)src->c));
  int32_t status = slip_resize(s, src->h, src->w, src->c, sstride, r.y, r.x, r.h, r.w, g.p, oh, ow, dstride, interp,
                               flip);
  expect(guarded_intact(&g, oh, dstride, (size_t)ow * (size_t)src->c),
         "slip_resize(%dx%dx%d crop y=%d x=%d h=%d w=%d -> %dx%d) wrote outside its output", src->w, src->h, src->c,
         r.y, r.x, r.h, r.w, ow, oh);
  out->px = NULL;
  if (status == SLIP_OK) image_from(out, g.p, dstride, oh, ow, src->c);
  free(g.mem);
  free(s);
  return status;
}

static void test_resize(int32_t channels, int32_t interp) {
  case_begin("resize %d channels %s", channels, interp_name(interp));
  for (int k = 0; k < 60; k++) {
    image src = {rng_range(1, 70), rng_range(1, 70), channels, NULL};
    if (k == 0) src.h = 1, src.w = 1;  /* one pixel enlarged */
    if (k == 1) src.h = 1, src.w = 70; /* a whole row onto one pixel */
    src.px = make_noise((size_t)src.h * row_bytes(&src));
    region r;
    random_interval(src.h, &r.y, &r.h);
    random_interval(src.w, &r.x, &r.w);
    int32_t oh = random_out_size(r.h, k % 4), ow = random_out_size(r.w, (k / 4) % 4);
    if (k == 0) oh = 50, ow = 37;
    if (k == 1) r = (region){0, 0, 1, 70}, oh = ow = 1;
    image got = {0}, flipped = {0}, want = {0};
    if (expect_status(guarded_resize(&src, r, oh, ow, interp, 0, &got), SLIP_OK, "slip_resize")) {
      ref_resample(&src, r.y, r.x, r.h, r.w, oh, ow, interp, 0, &want);
      int diff = max_abs_diff(&got, &want);
      expect(diff <= 1, "%dx%d crop (y=%d, x=%d, h=%d, w=%d) -> %dx%d differs from the reference by %d", src.w,
             src.h, r.y, r.x, r.h, r.w, ow, oh, diff);
      if (expect_status(guarded_resize(&src, r, oh, ow, interp, 1, &flipped), SLIP_OK, "slip_resize flipped"))
        expect(is_mirror(&got, &flipped), "flipped resize is not the mirror");
    }
    image_free(&got);
    image_free(&flipped);
    image_free(&want);

    /* The identity on an integer crop gives the crop back exactly. */
    if (expect_status(guarded_resize(&src, r, r.h, r.w, interp, 0, &got), SLIP_OK, "identity slip_resize")) {
      image_crop(&want, &src, r.y, r.x, r.h, r.w);
      expect(image_mismatch(&got, &want) < 0, "identity resize of crop (y=%d, x=%d, h=%d, w=%d) changed pixels",
             r.y, r.x, r.h, r.w);
      image_free(&want);
    }
    image_free(&got);

    /* A constant image stays constant, whatever the filter does. */
    uint8_t value[4];
    for (int32_t c = 0; c < channels; c++) value[c] = (uint8_t)rng_below(256);
    for (size_t i = 0; i < (size_t)src.h * (size_t)src.w; i++)
      memcpy(src.px + i * (size_t)channels, value, (size_t)channels);
    if (expect_status(guarded_resize(&src, r, oh, ow, interp, k & 1, &got), SLIP_OK, "constant slip_resize")) {
      int same = 1;
      for (size_t i = 0; i < (size_t)oh * (size_t)ow; i++)
        same &= !memcmp(got.px + i * (size_t)channels, value, (size_t)channels);
      expect(same, "resizing a constant %dx%d image to %dx%d did not give the constant", src.w, src.h, ow, oh);
    }
    image_free(&got);
    image_free(&src);
  }
  case_end();
}

/* ------------------------------------------------ 5b: tones and warps */

/* A tone kernel's call, on a source of `stride` bytes a row into dst. */
typedef int32_t (*tone_fn)(const uint8_t *src, size_t src_size, int32_t h, int32_t w, int32_t c, int64_t src_stride,
                           uint8_t *dst, size_t dst_size, int64_t dst_stride, double arg);

static int32_t tone_posterize(const uint8_t *s, size_t ss, int32_t h, int32_t w, int32_t c, int64_t st, uint8_t *d,
                              size_t ds, int64_t dt, double arg) {
  return slip_posterize(s, ss, h, w, c, st, d, ds, dt, (int64_t)arg);
}
static int32_t tone_invert(const uint8_t *s, size_t ss, int32_t h, int32_t w, int32_t c, int64_t st, uint8_t *d,
                           size_t ds, int64_t dt, double arg) {
  (void)arg;
  return slip_invert(s, ss, h, w, c, st, d, ds, dt);
}
static int32_t tone_autocontrast(const uint8_t *s, size_t ss, int32_t h, int32_t w, int32_t c, int64_t st,
                                 uint8_t *d, size_t ds, int64_t dt, double arg) {
  (void)arg;
  return slip_autocontrast(s, ss, h, w, c, st, d, ds, dt);
}
static int32_t tone_equalize(const uint8_t *s, size_t ss, int32_t h, int32_t w, int32_t c, int64_t st, uint8_t *d,
                             size_t ds, int64_t dt, double arg) {
  (void)arg;
  return slip_equalize(s, ss, h, w, c, st, d, ds, dt);
}

/* Every tone kernel on padded rows into guarded outputs of the documented
 * minimum size: nothing outside the pixels is written, the source is left
 * as it is, in place gives the same bytes, and the identities hold
 * (posterize 8, brightness, color, contrast and sharpness at 1, invert twice). */
static void test_tones(void) {
  case_begin("tone kernels: guarded outputs, in place, identities");
  static const struct {
    const char *name;
    tone_fn fn;
    double arg;
    int identity, in_place;
  } kernels[] = {{"posterize", tone_posterize, 8, 1, 1},       {"posterize 3", tone_posterize, 3, 0, 1},
                 {"solarize", slip_solarize, 100.5, 0, 1},     {"invert", tone_invert, 0, 0, 1},
                 {"autocontrast", tone_autocontrast, 0, 0, 1}, {"equalize", tone_equalize, 0, 0, 1},
                 {"brightness", slip_brightness, 1, 1, 1},     {"brightness 1.7", slip_brightness, 1.7, 0, 1},
                 {"color", slip_color, 1, 1, 1},               {"color NaN", slip_color, NAN, 0, 1},
                 {"contrast", slip_contrast, 1, 1, 1},         {"contrast -inf", slip_contrast, -INFINITY, 0, 1},
                 {"sharpness", slip_sharpness, 1, 1, 0},       {"sharpness 2.5", slip_sharpness, 2.5, 0, 0}};
  static const int32_t sizes[][2] = {{1, 1}, {2, 5}, {5, 2}, {3, 3}, {17, 13}, {64, 47}};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (int32_t c = 1; c <= 4; c++) {
      int32_t h = sizes[s][0], w = sizes[s][1];
      int64_t stride = (int64_t)w * c + rng_below(5);
      size_t row = (size_t)w * (size_t)c, size = output_size(h, stride, row);
      uint8_t *src = make_noise(size), *kept = exact_copy(src, size);
      for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
        if ((kernels[k].fn == slip_color || kernels[k].fn == slip_contrast) && c != 1 && c != 3) continue;
        guarded out;
        guarded_alloc(&out, size);
        int32_t status = kernels[k].fn(src, size, h, w, c, stride, out.p, size, stride, kernels[k].arg);
        if (!expect_status(status, SLIP_OK, kernels[k].name)) {
          free(out.mem);
          continue;
        }
        expect(guarded_intact(&out, h, stride, row), "%s %dx%dx%d wrote outside its pixels", kernels[k].name, h, w,
               c);
        expect(!memcmp(src, kept, size), "%s %dx%dx%d changed its source", kernels[k].name, h, w, c);
        int same = 1;
        for (int32_t y = 0; y < h; y++) same &= !memcmp(out.p + y * stride, src + y * stride, row);
        if (kernels[k].identity) expect(same, "%s %dx%dx%d is not the identity", kernels[k].name, h, w, c);
        if (kernels[k].in_place) {
          uint8_t *copy = exact_copy(src, size);
          expect_status(kernels[k].fn(copy, size, h, w, c, stride, copy, size, stride, kernels[k].arg), SLIP_OK,
                        kernels[k].name);
          same = 1;
          for (int32_t y = 0; y < h; y++) same &= !memcmp(out.p + y * stride, copy + y * stride, row);
          expect(same, "%s %dx%dx%d in place differs", kernels[k].name, h, w, c);
          if (kernels[k].fn == tone_invert) { /* twice is the identity */
            expect_status(slip_invert(copy, size, h, w, c, stride, copy, size, stride), SLIP_OK, "invert again");
            expect(!memcmp(copy, kept, size), "invert twice %dx%dx%d is not the identity", h, w, c);
          }
          free(copy);
        }
        free(out.mem);
      }
      free(src);
      free(kept);
    }
  case_end();
}

/* The warps on every path into guarded outputs of other sizes: nothing
 * outside the pixels is written; the identity gives the source back with
 * either filter and on Pillow's paths (scale, fixed point, floating point,
 * generic bilinear, row copies); a map far off, or not a number, gives fill. */
static void test_warps(void) {
  case_begin("warps: guarded outputs, identities, fill");
  const double identities[][6] = {{1, 0, 0, 0, 1, 0}, {1, 1e-300, 0, 0, 1, 0}, {1, 0, 0, 1e-300, 1, 0}};
  const double far[6] = {1, 0.3, 1e6, 0.2, 1, -1e6}, nan6[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
  const double perspective[8] = {1, 0, 0, 0, 1, 0, 0, 0}, bent[8] = {0.9, 0.1, 1, -0.1, 1.1, 0.5, 0.01, -0.02};
  static const int32_t sizes[][2] = {{1, 1}, {2, 7}, {7, 2}, {23, 17}};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (int32_t c = 1; c <= 4; c++) {
      int32_t h = sizes[s][0], w = sizes[s][1], oh = rng_range(1, 30), ow = rng_range(1, 30);
      uint8_t fill[4] = {11, 22, 33, 44};
      int64_t stride = (int64_t)w * c + rng_below(4), out_stride = (int64_t)ow * c + rng_below(4);
      size_t size = output_size(h, stride, (size_t)w * (size_t)c);
      size_t out_size = output_size(oh, out_stride, (size_t)ow * (size_t)c);
      uint8_t *src = make_noise(size);
      for (int nearest = 0; nearest <= 1; nearest++) {
        for (int k = 0; k < 5; k++) {
          const double *m = k < 3 ? identities[k] : k == 3 ? far : nan6;
          guarded out;
          guarded_alloc(&out, size);
          int32_t status = slip_warp_affine(src, size, h, w, c, stride, out.p, size, h, w, stride, m, nearest, fill,
                                            (size_t)c);
          if (expect_status(status, SLIP_OK, "slip_warp_affine")) {
            expect(guarded_intact(&out, h, stride, (size_t)w * (size_t)c), "affine %d wrote outside its pixels", k);
            int same = 1;
            for (int32_t y = 0; y < h; y++)
              for (int32_t x = 0; x < w; x++)
                same &= !memcmp(out.p + y * stride + (int64_t)x * c,
                                k < 3 ? src + y * stride + (int64_t)x * c : fill, (size_t)c);
            expect(same, "affine %d (nearest %d) of %dx%dx%d is not %s", k, nearest, h, w, c,
                   k < 3 ? "the source" : "fill");
          }
          free(out.mem);
        }
        for (int k = 0; k < 2; k++) {
          guarded out;
          guarded_alloc(&out, out_size);
          int32_t status = slip_warp_perspective(src, size, h, w, c, stride, out.p, out_size, oh, ow, out_stride,
                                                 k ? bent : perspective, nearest, fill, (size_t)c);
          if (expect_status(status, SLIP_OK, "slip_warp_perspective"))
            expect(guarded_intact(&out, oh, out_stride, (size_t)ow * (size_t)c),
                   "perspective %d wrote outside its pixels", k);
          free(out.mem);
          guarded_alloc(&out, out_size);
          status = slip_warp_affine(src, size, h, w, c, stride, out.p, out_size, oh, ow, out_stride,
                                    k ? bent : perspective, nearest, fill, (size_t)c);
          if (expect_status(status, SLIP_OK, "slip_warp_affine to another size"))
            expect(guarded_intact(&out, oh, out_stride, (size_t)ow * (size_t)c),
                   "affine to another size wrote outside its pixels");
          free(out.mem);
        }
      }
      expect_status(slip_warp_affine(src, size, h, w, c, stride, (uint8_t *)src, size, h, w, stride, far, 1, fill,
                                     (size_t)c),
                    SLIP_EINVAL, "a warp in place");
      expect_status(slip_warp_affine(src, size, h, w, c, stride, NULL, 0, oh, ow, out_stride, far, 1, fill,
                                     (size_t)c),
                    SLIP_EINVAL, "a NULL dst");
      free(src);
    }
  case_end();
}

/* A noisy h x w x c source whose rows are padded by up to max_pad bytes,
 * and a copy to check that a kernel leaves it as it is. */
typedef struct padded_source {
  int64_t stride;
  size_t row, size; /* bytes of a row's pixels; bytes of the image, the documented minimum */
  uint8_t *src, *kept;
} padded_source;

static padded_source padded_noise(int32_t h, int32_t w, int32_t c, int32_t max_pad) {
  padded_source p;
  p.stride = (int64_t)w * c + rng_below(max_pad + 1);
  p.row = (size_t)w * (size_t)c;
  p.size = output_size(h, p.stride, p.row);
  p.src = make_noise(p.size);
  p.kept = exact_copy(p.src, p.size);
  return p;
}

/* Policy steps into guarded outputs: every operation of both tables writes
 * only its pixels and says whether it moved them (a geometric step of
 * magnitude 0 copies, with the identity map); each step equals the kernel it
 * stands for; hostile arguments fail and write neither dst nor the map. */
/* test_policy_steps on one h x w x c image: every operation of both tables. */
static void policy_steps_on(int32_t h, int32_t w, int32_t c, const uint8_t *fill) {
  padded_source p = padded_noise(h, w, c, 2);
  int64_t stride = p.stride;
  size_t row = p.row, size = p.size;
  const uint8_t *src = p.src;
  for (int table = 0; table < 2; table++)
    for (int32_t op = 0; op <= (table ? SLIP_TIMM_TRANSLATE_Y_REL : SLIP_PRIMITIVE_INVERT); op++) {
      int colour = table ? op >= SLIP_TIMM_COLOR && op <= SLIP_TIMM_CONTRAST_INCREASING
                         : op == SLIP_PRIMITIVE_COLOR || op == SLIP_PRIMITIVE_CONTRAST;
      for (int k = 0; k < 2; k++) {
        double magnitude = k ? 0.0 : table ? 0.3 : 11.5, inverse[6] = {0};
        guarded out;
        guarded_alloc(&out, size);
        int32_t moved = table ? slip_timm_step(op, magnitude, src, size, h, w, c, stride, out.p, size, stride, fill,
                                               (size_t)c, k, inverse, 6)
                              : slip_policy_step(op, magnitude, src, size, h, w, c, stride, out.p, size, stride,
                                                 fill, (size_t)c, k, inverse, 6);
        if (colour && c != 1 && c != 3) {
          expect_status(moved, SLIP_EINVAL, "a colour step of 2 or 4 channels");
          free(out.mem);
          continue;
        }
        expect(moved == 0 || moved == 1, "table %d op %d returned %d (%s)", table, op, moved, slip_last_error());
        expect(guarded_intact(&out, h, stride, row), "table %d op %d %dx%dx%d wrote outside its pixels", table, op,
               h, w, c);
        int identity = inverse[0] == 1 && inverse[1] == 0 && inverse[2] == 0 && inverse[3] == 0 &&
                       inverse[4] == 1 && inverse[5] == 0;
        expect(moved || identity, "table %d op %d moved nothing but its map is not the identity", table, op);
        if (moved) {
          guarded warped;
          guarded_alloc(&warped, size);
          expect_status(slip_warp_affine(src, size, h, w, c, stride, warped.p, size, h, w, stride, inverse, k, fill,
                                         (size_t)c),
                        SLIP_OK, "the step's own warp");
          expect(!memcmp(warped.p, out.p, size), "table %d op %d is not the warp of its map", table, op);
          free(warped.mem);
        }
        free(out.mem);
      }
    }
  expect(!memcmp(src, p.kept, size), "a step changed its source");
  if (c == 3) { /* the kernels they stand for */
    uint8_t *a = xmalloc(size), *b = xmalloc(size);
    double inverse[6];
    expect_status(slip_policy_step(SLIP_PRIMITIVE_SHARPNESS, 0.4, src, size, h, w, c, stride, a, size, stride, fill,
                                   3, 1, inverse, 6),
                  0, "sharpness step");
    expect_status(slip_sharpness(src, size, h, w, c, stride, b, size, stride, 1.4), SLIP_OK, "sharpness");
    expect(!memcmp(a, b, size), "the sharpness step is not slip_sharpness at 1 + magnitude");
    expect_status(slip_timm_step(SLIP_TIMM_POSTERIZE, 3.9, src, size, h, w, c, stride, a, size, stride, fill, 3, 1,
                                 inverse, 6),
                  0, "posterize step");
    expect_status(slip_posterize(src, size, h, w, c, stride, b, size, stride, 3), SLIP_OK, "posterize");
    expect(!memcmp(a, b, size), "the posterize step is not slip_posterize of the whole bits");
    free(a);
    free(b);
  }
  free(p.src);
  free(p.kept);
}

static void test_policy_steps(void) {
  case_begin("policy steps: guarded outputs, kernels, refusals");
  const uint8_t fill[4] = {7, 8, 9, 10};
  static const int32_t sizes[][2] = {{1, 1}, {3, 2}, {17, 13}};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (int32_t c = 1; c <= 4; c++) policy_steps_on(sizes[s][0], sizes[s][1], c, fill);
  /* hostile arguments: nothing written */
  uint8_t src[6 * 5 * 3], dst[6 * 5 * 3];
  double inverse[6] = {3, 3, 3, 3, 3, 3};
  memset(src, 100, sizeof src);
  memset(dst, 41, sizeof dst);
  size_t n = sizeof src;
  static const struct {
    int timm, in_place;
    int32_t op;
    double value;
    size_t dst_short, fill_size, inverse_size; /* dst_short: bytes short of the image */
    int32_t status;
    const char *what;
  } hostile[] = {{0, 0, -1, 1, 0, 3, 6, SLIP_EINVAL, "an unknown op"},
                 {1, 0, 21, 1, 0, 3, 6, SLIP_EINVAL, "an op past timm's"},
                 {0, 0, SLIP_PRIMITIVE_ROTATE, NAN, 0, 3, 6, SLIP_EINVAL, "a NaN magnitude"},
                 {0, 0, SLIP_PRIMITIVE_ROTATE, 1, 0, 3, 5, SLIP_EBUFFER, "an inverse of 5 values"},
                 {1, 0, SLIP_TIMM_SHEAR_X, 1, 1, 3, 6, SLIP_EBUFFER, "an output one byte short"},
                 {1, 1, SLIP_TIMM_SHEAR_X, 1, 0, 3, 6, SLIP_EINVAL, "a step in place"},
                 {0, 0, SLIP_PRIMITIVE_INVERT, 1, 0, 2, 6, SLIP_EBUFFER, "a fill short of a channel"}};
  for (size_t k = 0; k < sizeof hostile / sizeof hostile[0]; k++) {
    uint8_t *out = hostile[k].in_place ? src : dst;
    size_t out_size = n - hostile[k].dst_short;
    int32_t status = hostile[k].timm ? slip_timm_step(hostile[k].op, hostile[k].value, src, n, 6, 5, 3, 15, out,
                                                      out_size, 15, fill, hostile[k].fill_size, 1, inverse,
                                                      hostile[k].inverse_size)
                                     : slip_policy_step(hostile[k].op, hostile[k].value, src, n, 6, 5, 3, 15, out,
                                                        out_size, 15, fill, hostile[k].fill_size, 1, inverse,
                                                        hostile[k].inverse_size);
    expect_status(status, hostile[k].status, hostile[k].what);
  }
  expect_status(slip_policy_step(SLIP_PRIMITIVE_ROTATE, 1, src, n, 6, 5, 3, 15, dst, n, 15, fill, 3, 1, NULL, 6),
                SLIP_EINVAL, "a NULL inverse");
  int untouched = inverse[0] == 3 && inverse[5] == 3;
  for (size_t i = 0; i < n; i++) untouched &= dst[i] == 41 && src[i] == 100;
  expect(untouched, "a refused step wrote something");
  case_end();
}

/* MixUp's blend (ties to even, clipping, float32 rounding, in place) and
 * CutMix's paste (guarded output, both layouts), and their refusals. */
static void test_mixing(void) {
  case_begin("mixing: blend and paste");
  uint8_t a8[256], b8[256], d8[256];
  for (int i = 0; i < 256; i++) a8[i] = (uint8_t)i, b8[i] = (uint8_t)(i + 1);
  expect_status(slip_mix_blend(a8, 256, b8, 256, d8, 256, 256, SLIP_DTYPE_UINT8, 0.5), SLIP_OK, "blend uint8");
  int even = 1;
  for (int i = 0; i < 255; i++) even &= d8[i] == ((i % 2) ? i + 1 : i); /* i + 0.5: to the even neighbour */
  expect(even, "uint8 ties do not round to even");
  expect_status(slip_mix_blend(a8, 256, b8, 256, d8, 256, 256, SLIP_DTYPE_UINT8, 3.0), SLIP_OK, "extrapolated");
  int clipped = d8[0] == 0 && d8[200] == 198 && d8[255] == 255; /* 3 i - 2 (i + 1); b[255] is 0 */
  expect(clipped, "an extrapolated blend is not clipped (%d %d %d)", d8[0], d8[200], d8[255]);
  float af[64], bf[64];
  for (int i = 0; i < 64; i++) af[i] = (float)i * 0.37f - 5.0f, bf[i] = (float)(63 - i) * 1.3f;
  float expected[64];
  for (int i = 0; i < 64; i++) expected[i] = (float)(0.3 * (double)af[i] + (1.0 - 0.3) * (double)bf[i]);
  expect_status(slip_mix_blend(af, sizeof af, bf, sizeof bf, af, sizeof af, 64, SLIP_DTYPE_FLOAT32, 0.3), SLIP_OK,
                "blend float32 in place");
  expect(!memcmp(af, expected, sizeof af), "the float32 blend is not rounded once from double");
  expect_status(slip_mix_blend(a8, 256, b8, 256, a8 + 1, 255, 255, SLIP_DTYPE_UINT8, 0.5), SLIP_EINVAL,
                "a dst overlapping a");
  expect_status(slip_mix_blend(a8, 256, b8, 256, d8, 256, 256, SLIP_DTYPE_UINT8, NAN), SLIP_EINVAL, "a NaN lam");
  expect_status(slip_mix_blend(a8, 256, b8, 256, d8, 256, 256, SLIP_DTYPE_FLOAT16, 0.5), SLIP_EINVAL, "float16");
  expect_status(slip_mix_blend(a8, 256, b8, 255, d8, 256, 256, SLIP_DTYPE_UINT8, 0.5), SLIP_EBUFFER,
                "a b one byte short");
  expect_status(slip_mix_blend(NULL, 256, b8, 256, d8, 256, 256, SLIP_DTYPE_UINT8, 0.5), SLIP_EINVAL, "a NULL a");
  expect_status(slip_mix_blend((uint8_t *)af + 1, 200, bf, 256, d8, 256, 10, SLIP_DTYPE_FLOAT32, 0.5), SLIP_EINVAL,
                "a misaligned float32 a");
  /* the paste: 3 planes of 7 x 9 float32 pixels, and an image of 7 x 9 RGB pixels */
  for (int layout = 0; layout < 2; layout++) {
    int32_t planes = layout ? 1 : 3, pixel = layout ? 3 : 4, h = 7, w = 9;
    size_t bytes = (size_t)planes * h * w * (size_t)pixel;
    uint8_t *a = make_noise(bytes), *b = make_noise(bytes);
    guarded out;
    guarded_alloc(&out, bytes);
    expect_status(slip_mix_paste(a, bytes, b, bytes, out.p, bytes, planes, h, w, pixel, 2, 3, 6, 8), SLIP_OK,
                  "paste");
    expect(guarded_intact(&out, 1, 0, bytes), "the paste wrote outside the sample");
    int right = 1;
    for (int32_t p = 0; p < planes; p++)
      for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++) {
          size_t at = (((size_t)p * h + (size_t)y) * w + (size_t)x) * (size_t)pixel;
          const uint8_t *from = y >= 2 && y < 6 && x >= 3 && x < 8 ? b : a;
          right &= !memcmp(out.p + at, from + at, (size_t)pixel);
        }
    expect(right, "layout %d: the box is not the partner's and the rest the sample's", layout);
    expect_status(slip_mix_paste(a, bytes, b, bytes, out.p, bytes, planes, h, w, pixel, 0, 0, 0, 0), SLIP_OK,
                  "an empty box");
    expect(!memcmp(out.p, a, bytes), "an empty box pasted something");
    uint8_t before = out.p[0];
    expect_status(slip_mix_paste(a, bytes, b, bytes, out.p, bytes, planes, h, w, pixel, 2, 3, 8, 8), SLIP_EINVAL,
                  "a box below the plane");
    expect_status(slip_mix_paste(a, bytes, b, bytes, out.p, bytes, planes, h, w, pixel, 5, 3, 2, 8), SLIP_EINVAL,
                  "an inverted box");
    expect_status(slip_mix_paste(a, bytes, b, bytes, out.p, bytes - 1, planes, h, w, pixel, 2, 3, 6, 8),
                  SLIP_EBUFFER, "an output one byte short");
    expect_status(slip_mix_paste(a, bytes, b, bytes, a, bytes, planes, h, w, pixel, 2, 3, 6, 8), SLIP_EINVAL,
                  "a paste in place");
    expect_status(slip_mix_paste(a, bytes, b, bytes, out.p, bytes, planes, h, w, 17, 2, 3, 6, 8), SLIP_EINVAL,
                  "pixels of 17 bytes");
    expect(out.p[0] == before && guarded_intact(&out, 1, 0, bytes), "a refused paste wrote something");
    free(out.mem);
    free(a);
    free(b);
  }
  case_end();
}

/* ------------------------------------------------------------ 5: pack */

static double half_to_double(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return (h & 0x8000) ? -v : v;
}

/* 1 when h is v rounded to the nearest binary16, ties to even: no
 * neighbouring half (same sign, magnitude one unit either way) is closer. */
static int is_nearest_half(uint16_t h, double v) {
  if ((v > 0 && (h & 0x8000)) || (v < 0 && !(h & 0x8000))) return 0;
  uint16_t mag = h & 0x7fff, sign = h & 0x8000;
  double e = fabs(half_to_double(h) - v);
  for (int step = -1; step <= 1; step += 2) {
    int n = (int)mag + step;
    if (n < 0 || n > 0x7bff) continue;
    double en = fabs(half_to_double((uint16_t)(sign | n)) - v);
    if (en < e || (en == e && (mag & 1))) return 0;
  }
  return 1;
}

static void test_pack(int32_t dtype, int hwc, int normalize) {
  static const char *const names[] = {"uint8", "float16", "float32"};
  case_begin("pack %s %s%s", names[dtype], hwc ? "HWC" : "CHW", normalize ? " normalized" : "");
  size_t size = dtype == SLIP_DTYPE_UINT8 ? 1 : dtype == SLIP_DTYPE_FLOAT16 ? 2 : 4;
  for (int k = 0; k < 40; k++) {
    int32_t h = rng_range(1, 24), w = rng_range(1, 24), c = rng_range(1, 4);
    int64_t sstride = (int64_t)w * c + rng_range(0, 5);
    uint8_t *src = make_noise(output_size(h, sstride, (size_t)w * (size_t)c));
    double mean[4], std[4];
    for (int32_t i = 0; i < c; i++) {
      mean[i] = rng_below(256000) / 1000.0;
      std[i] = (rng_below(2) ? 1 : -1) * (0.5 + rng_below(100000) / 1000.0);
    }
    /* Padded layouts: extra elements between rows (and channels) that must stay untouched. */
    int64_t pad = k % 2 ? rng_range(1, 3) : 0;
    int64_t sx = hwc ? c : 1, sy = hwc ? (w * c + pad * c) : w + pad, sc = hwc ? 1 : (h * sy + pad);
    size_t elements = hwc ? (size_t)(h * sy) : (size_t)(c * sc);
    guarded g;
    guarded_alloc(&g, elements * size);
    int32_t status = slip_pack(src, h, w, c, sstride, g.p, dtype, sc * (int64_t)size, sy * (int64_t)size,
                               sx * (int64_t)size, normalize ? mean : NULL, normalize ? std : NULL);
    if (expect_status(status, SLIP_OK, "slip_pack")) {
      /* Every element the layout does not address keeps its pattern. */
      uint8_t *written = xmalloc(elements);
      memset(written, 0, elements);
      for (int32_t ci = 0; ci < c; ci++)
        for (int32_t i = 0; i < h; i++)
          for (int32_t j = 0; j < w; j++) {
            size_t e = (size_t)(ci * sc + i * sy + j * sx);
            written[e] = 1;
            uint8_t v = src[i * sstride + j * c + ci];
            double want = normalize ? (v - mean[ci]) / std[ci] : v;
            const uint8_t *o = g.p + e * size;
            if (dtype == SLIP_DTYPE_UINT8) {
              expect(*o == v, "uint8 element (%d, %d, %d) is %d, expected %d", ci, i, j, *o, v);
            } else if (dtype == SLIP_DTYPE_FLOAT32) {
              float f;
              memcpy(&f, o, 4);
              expect(f == (float)want, "float32 element (%d, %d, %d) is %.9g, expected %.9g", ci, i, j, f,
                     (float)want);
            } else {
              uint16_t bits;
              memcpy(&bits, o, 2);
              expect(is_nearest_half(bits, want), "float16 element (%d, %d, %d) is 0x%04x (%g), expected %g rounded",
                     ci, i, j, bits, half_to_double(bits), want);
            }
          }
      int intact = 1;
      for (size_t e = 0; e < elements; e++)
        for (size_t b = 0; b < size && !written[e]; b++) intact &= g.p[e * size + b] == fill_byte(GUARD + e * size + b);
      expect(intact && guarded_intact(&g, 1, 0, 0), "slip_pack wrote outside the elements of its layout");
      free(written);
    }
    free(g.mem);
    free(src);
  }
  case_end();
}

static void test_pack_rejects(void) {
  case_begin("pack rejects bad arguments");
  uint8_t src[4 * 4 * 3] = {0};
  _Alignas(8) uint8_t dst[4 * 4 * 3 * 4 + 8];
  double mean[3] = {1, 2, 3}, std[3] = {1, 2, 3}, zero[3] = {1, 0, 1}, nan3[3] = {NAN, 0, 0};
  expect_status(slip_pack(src, 4, 4, 3, 12, dst, SLIP_DTYPE_FLOAT32, 64, 16, 4, NULL, NULL), SLIP_OK, "valid pack");
  expect_status(slip_pack(src, 4, 4, 3, 12, dst + 2, SLIP_DTYPE_FLOAT32, 64, 16, 4, NULL, NULL), SLIP_EINVAL,
                "misaligned float32 dst");
  expect_status(slip_pack(src, 4, 4, 3, 12, dst, SLIP_DTYPE_FLOAT32, 64, 16, 6, NULL, NULL), SLIP_EINVAL,
                "float32 stride_x 6");
  expect_status(slip_pack(src, 4, 4, 3, 12, dst, SLIP_DTYPE_FLOAT32, 64, 18, 4, NULL, NULL), SLIP_EINVAL,
                "float32 stride_y 18");
  expect_status(slip_pack(src, 4, 4, 3, 12, dst, SLIP_DTYPE_FLOAT32, 66, 16, 4, NULL, NULL), SLIP_EINVAL,
                "float32 stride_c 66");
  expect_status(slip_pack(src, 4, 4, 3, 12, dst + 1, SLIP_DTYPE_FLOAT16, 32, 8, 2, NULL, NULL), SLIP_EINVAL,
                "misaligned float16 dst");
  expect_status(slip_pack(src, 4, 4, 3, 12, dst, SLIP_DTYPE_FLOAT16, 32, 8, 3, NULL, NULL), SLIP_EINVAL,
                "float16 stride_x 3");
  expect_status(slip_pack(src, 4, 4, 3, 12, dst, SLIP_DTYPE_UINT8, 16, 4, 1, mean, NULL), SLIP_EINVAL,
                "uint8 with mean");
  expect_status(slip_pack(src, 4, 4, 3, 12, dst, SLIP_DTYPE_UINT8, 16, 4, 1, NULL, std), SLIP_EINVAL,
                "uint8 with std");
  expect_status(slip_pack(src, 4, 4, 3, 12, dst, SLIP_DTYPE_FLOAT32, 64, 16, 4, mean, zero), SLIP_EINVAL,
                "zero std");
  expect_status(slip_pack(src, 4, 4, 3, 12, dst, SLIP_DTYPE_FLOAT32, 64, 16, 4, nan3, NULL), SLIP_EINVAL,
                "NaN mean");
  expect_status(slip_pack(src, 4, 4, 3, 12, dst, 3, 64, 16, 4, NULL, NULL), SLIP_EINVAL, "dtype 3");
  expect_status(slip_pack(src, 4, 4, 3, 12, dst, -1, 64, 16, 4, NULL, NULL), SLIP_EINVAL, "dtype -1");
  expect_status(slip_pack(NULL, 4, 4, 3, 12, dst, SLIP_DTYPE_FLOAT32, 64, 16, 4, NULL, NULL), SLIP_EINVAL,
                "NULL src");
  expect_status(slip_pack(src, 4, 4, 3, 12, NULL, SLIP_DTYPE_FLOAT32, 64, 16, 4, NULL, NULL), SLIP_EINVAL,
                "NULL dst");
  expect_status(slip_pack(src, 0, 4, 3, 12, dst, SLIP_DTYPE_FLOAT32, 64, 16, 4, NULL, NULL), SLIP_EINVAL,
                "height 0");
  expect_status(slip_pack(src, 4, -4, 3, 12, dst, SLIP_DTYPE_FLOAT32, 64, 16, 4, NULL, NULL), SLIP_EINVAL,
                "width -4");
  expect_status(slip_pack(src, 4, 4, 0, 12, dst, SLIP_DTYPE_FLOAT32, 64, 16, 4, NULL, NULL), SLIP_EINVAL,
                "channels 0");
  expect_status(slip_pack(src, 4, 4, 5, 20, dst, SLIP_DTYPE_FLOAT32, 64, 16, 4, NULL, NULL), SLIP_EINVAL,
                "channels 5");
  expect_status(slip_pack(src, 4, 4, 3, 11, dst, SLIP_DTYPE_FLOAT32, 64, 16, 4, NULL, NULL), SLIP_EINVAL,
                "src_stride 11");
  case_end();
}

/* ----------------------------------------------------- 6: hostile input */

/* Every call on data that cannot hold the image must fail with a detail,
 * and never write outside its output. */
/* slip_jpeg_check gives the verdict of slip_jpeg_decode of the whole image
 * at 1/8 scale, and slip_jpeg_scan calls good no image that decode refuses. */
static void expect_check_agrees(const uint8_t *data, size_t size, const char *what) {
  slip_jpeg_info_t info;
  int32_t eighth = slip_jpeg_info(data, size, &info);
  if (eighth == SLIP_OK) {
    image out = {0};
    eighth = guarded_decode(data, size, (region){0, 0, info.height, info.width}, 8, 0, &out);
    image_free(&out);
  }
  int32_t scanned = slip_jpeg_scan(data, size);
  int32_t checked = slip_jpeg_check(data, size);
  expect(checked == eighth, "%s: slip_jpeg_check returned %d, the 1/8-scale decode %d", what, checked, eighth);
  expect(scanned != 1 || eighth == SLIP_OK, "%s: slip_jpeg_scan passed an image the decode refuses (%d)", what,
         eighth);
}

static void run_all_decoders(const uint8_t *data, size_t size, region r, int32_t *info_status,
                             int32_t *decode_status, int32_t *crop_status, image *decoded) {
  slip_jpeg_info_t info, before;
  memset(&info, 0x77, sizeof info);
  before = info;
  *info_status = slip_jpeg_info(data, size, &info);
  if (*info_status != SLIP_OK)
    expect(!memcmp(&info, &before, sizeof info), "slip_jpeg_info changed *info on failure (status %d)", *info_status);
  image tmp = {0};
  *decode_status = guarded_decode(data, size, r, 1, 0, decoded ? decoded : &tmp);
  image_free(&tmp);
  *crop_status = guarded_crop_resize(data, size, r, 5, 7, 0, SLIP_INTERP_BILINEAR, &tmp);
  image_free(&tmp);
  expect_check_agrees(data, size, "the same input");
}

static void test_prefixes(const jpeg_case *jc) {
  case_begin("truncated prefixes of %s", jc->name);
  size_t hdr = header_end(jc->data, jc->size);
  expect(hdr > 0 && hdr < jc->size, "no SOS marker found");
  region all = {0, 0, jc->h, jc->w};
  for (size_t n = 0; n + 2 <= jc->size; n++) {
    uint8_t *prefix = exact_copy(jc->data, n);
    int32_t si, sd, sc;
    image decoded = {0};
    run_all_decoders(prefix, n, all, &si, &sd, &sc, &decoded);
    char what[96];
    snprintf(what, sizeof what, "slip_jpeg_info of a %zu-byte prefix", n);
    if (n < 2) expect_status(si, SLIP_ENOTJPEG, what);
    else if (n < hdr) expect_status(si, SLIP_ETRUNCATED, what);
    else expect_status(si, SLIP_OK, what);
    /* Without its EOI marker the data may still hold the whole image: then
     * the pixels must be right.  Anything shorter cuts the entropy data. */
    snprintf(what, sizeof what, "slip_jpeg_decode of a %zu-byte prefix", n);
    if (n + 2 == jc->size && sd == SLIP_OK)
      expect(image_mismatch(&decoded, &jc->full[0]) < 0, "%s: wrong pixels", what);
    else if (expect_failure(sd, what) && n >= hdr)
      expect(sd == SLIP_ETRUNCATED || sd == SLIP_ECORRUPT, "%s returned %d", what, sd);
    snprintf(what, sizeof what, "slip_jpeg_decode_crop_resize of a %zu-byte prefix", n);
    if (!(n + 2 == jc->size && sc == SLIP_OK)) expect_failure(sc, what);
    int64_t plane_bytes = slip_planes_bytes(jc->h, jc->w);
    uint8_t *planes = xmalloc((size_t)plane_bytes);
    int32_t sp = slip_jpeg_decode_planes(prefix, n, planes, (size_t)plane_bytes);
    snprintf(what, sizeof what, "slip_jpeg_decode_planes of a %zu-byte prefix", n);
    if (!(n + 2 == jc->size && sp == SLIP_OK)) expect_failure(sp, what);
    free(planes);
    image_free(&decoded);
    free(prefix);
  }
  case_end();
}

static void test_garbage(void) {
  case_begin("random bytes, PNG, empty input");
  region one = {0, 0, 1, 1};
  int32_t si, sd, sc;
  for (int k = 0; k < 300; k++) {
    size_t n = (size_t)rng_below(1500);
    uint8_t *data = make_noise(n);
    if (k % 2 && n >= 2) data[0] = 0xFF, data[1] = 0xD8; /* random bytes after a valid SOI */
    if (k % 4 == 3) /* a sprinkling of 0xFF bytes makes more of it look like markers */
      for (size_t i = 2; i < n; i++)
        if (rng_below(8) == 0) data[i] = 0xFF;
    run_all_decoders(data, n, one, &si, &sd, &sc, NULL);
    expect_failure(si, "slip_jpeg_info of random bytes");
    expect_failure(sd, "slip_jpeg_decode of random bytes");
    expect_failure(sc, "slip_jpeg_decode_crop_resize of random bytes");
    free(data);
  }
  static const uint8_t png[] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, 'I', 'H', 'D', 'R',
                                0,    0,   0,   16,  0,    0,    0,    16,   8, 2, 0, 0,  0,   0x90, 0x91, 0x68};
  uint8_t *data = exact_copy(png, sizeof png);
  run_all_decoders(data, sizeof png, one, &si, &sd, &sc, NULL);
  expect_status(si, SLIP_ENOTJPEG, "slip_jpeg_info of a PNG");
  expect_status(sd, SLIP_ENOTJPEG, "slip_jpeg_decode of a PNG");
  expect_status(sc, SLIP_ENOTJPEG, "slip_jpeg_decode_crop_resize of a PNG");
  run_all_decoders(data, 0, one, &si, &sd, &sc, NULL);
  expect_status(si, SLIP_ENOTJPEG, "slip_jpeg_info of 0 bytes");
  expect_status(sd, SLIP_ENOTJPEG, "slip_jpeg_decode of 0 bytes");
  expect_status(sc, SLIP_ENOTJPEG, "slip_jpeg_decode_crop_resize of 0 bytes");
  free(data);
  static const uint8_t soi_eoi[] = {0xFF, 0xD8, 0xFF, 0xD9};
  data = exact_copy(soi_eoi, sizeof soi_eoi);
  run_all_decoders(data, sizeof soi_eoi, one, &si, &sd, &sc, NULL);
  expect_failure(si, "slip_jpeg_info of SOI EOI");
  expect_failure(sd, "slip_jpeg_decode of SOI EOI");
  expect_failure(sc, "slip_jpeg_decode_crop_resize of SOI EOI");
  free(data);
  case_end();
}

/* Bit flips and byte overwrites in [lo, hi): any status will do, as long as
 * nothing crashes, trips a sanitizer or writes outside its output. */
static void test_mutations(const jpeg_case *jc, size_t lo, size_t hi, int count, const char *where) {
  case_begin("%d mutations of %s in its %s", count, jc->name, where);
  uint8_t *data = xmalloc(jc->size);
  for (int k = 0; k < count; k++) {
    memcpy(data, jc->data, jc->size);
    int edits = rng_range(1, 3);
    for (int e = 0; e < edits; e++) {
      size_t at = lo + (size_t)rng_below((int32_t)(hi - lo));
      switch (rng_below(4)) {
      case 0: data[at] = (uint8_t)rng_next(); break;
      case 1: data[at] = rng_below(2) ? 0xFF : 0x00; break;
      default: data[at] ^= (uint8_t)(1u << rng_below(8));
      }
    }
    region r;
    random_interval(jc->h, &r.y, &r.h);
    random_interval(jc->w, &r.x, &r.w);
    image out = {0};
    int32_t d = 1 << rng_below(4);
    int32_t status = guarded_decode(data, jc->size, (region){0, 0, jc->h, jc->w}, 1, 0, &out);
    if (status != SLIP_OK) expect_failure(status, "slip_jpeg_decode of mutated data");
    image_free(&out);
    status = guarded_decode(data, jc->size, r, d, k & 1, &out);
    if (status != SLIP_OK) expect_failure(status, "slip_jpeg_decode of a region of mutated data");
    image_free(&out);
    status = guarded_crop_resize(data, jc->size, r, rng_range(1, 40), rng_range(1, 40), k & 1, k & 2 ? 1 : 0, &out);
    if (status != SLIP_OK) expect_failure(status, "slip_jpeg_decode_crop_resize of mutated data");
    image_free(&out);
    expect_check_agrees(data, jc->size, "mutated data");
    int64_t plane_bytes = slip_planes_bytes(jc->h, jc->w);
    uint8_t *planes = xmalloc((size_t)plane_bytes);
    status = slip_jpeg_decode_planes(data, jc->size, planes, (size_t)plane_bytes);
    if (status != SLIP_OK) expect_failure(status, "slip_jpeg_decode_planes of mutated data");
    free(planes);
  }
  free(data);
  case_end();
}

/* A small JPEG whose header claims 60000 x 60000 pixels must fail quickly,
 * without decoding (or allocating for) the pretended image. */
static void test_huge_header(const jpeg_case *jc) {
  case_begin("%s patched to 60000x60000", jc->name);
  size_t sof = find_sof(jc->data, jc->size);
  if (expect(sof > 0, "no SOF0/SOF2 marker found")) {
    uint8_t *data = exact_copy(jc->data, jc->size);
    data[sof + 5] = 60000 >> 8, data[sof + 6] = 60000 & 0xFF; /* height */
    data[sof + 7] = 60000 >> 8, data[sof + 8] = 60000 & 0xFF; /* width */
    slip_jpeg_info_t info;
    if (expect_status(slip_jpeg_info(data, jc->size, &info), SLIP_OK, "slip_jpeg_info of the patched header"))
      expect(info.height == 60000 && info.width == 60000, "info reports %dx%d", info.width, info.height);
    static const region regions[] = {{0, 0, 16, 16}, {30000, 30000, 8, 8}, {59990, 59990, 10, 10}};
    for (int k = 0; k < 3; k++)
      for (int32_t d = 1; d <= 8; d *= 8) {
        image out = {0};
        double t0 = now_seconds();
        int32_t status = guarded_decode(data, jc->size, regions[k], d, 0, &out);
        double t = now_seconds() - t0;
        expect_failure(status, "slip_jpeg_decode of a region of the forged image");
        expect(t < 3.0, "slip_jpeg_decode of region %d at 1/%d took %.1f s", k, d, t);
        image_free(&out);
      }
    static const region crops[] = {{0, 0, 60000, 60000}, {100, 100, 50, 50}, {0, 0, 60000, 1}};
    for (int k = 0; k < 3; k++) {
      image out = {0};
      double t0 = now_seconds();
      int32_t status = guarded_crop_resize(data, jc->size, crops[k], 224 >> k, 224 >> k, 0, SLIP_INTERP_AREA, &out);
      double t = now_seconds() - t0;
      expect_failure(status, "slip_jpeg_decode_crop_resize of the forged image");
      expect(t < 3.0, "slip_jpeg_decode_crop_resize of crop %d took %.1f s", k, t);
      image_free(&out);
    }
    free(data);
  }
  case_end();
}

static void test_invalid_arguments(const jpeg_case *jc) {
  case_begin("invalid arguments");
  const uint8_t *d = jc->data;
  size_t n = jc->size;
  int32_t H = jc->h, W = jc->w;
  int64_t stride = (int64_t)W * 3;
  size_t size = (size_t)H * (size_t)stride;
  uint8_t *out = xmalloc(size);
  slip_jpeg_info_t info;
  expect_status(slip_jpeg_info(NULL, n, &info), SLIP_EINVAL, "info(NULL data)");
  expect_status(slip_jpeg_info(d, n, NULL), SLIP_EINVAL, "info(NULL info)");

  expect_status(slip_jpeg_decode(d, n, 0, 0, H, W, 1, 0, out, size, stride), SLIP_OK, "valid decode");
  expect_status(slip_jpeg_decode(NULL, n, 0, 0, H, W, 1, 0, out, size, stride), SLIP_EINVAL, "decode(NULL data)");
  expect_status(slip_jpeg_decode(d, n, 0, 0, H, W, 1, 0, NULL, size, stride), SLIP_EINVAL, "decode(NULL out)");
  static const int32_t bad_scales[] = {0, 3, 5, 6, 16, -1, -8, INT32_MIN};
  for (int k = 0; k < 8; k++)
    expect_status(slip_jpeg_decode(d, n, 0, 0, H, W, bad_scales[k], 0, out, size, stride), SLIP_EINVAL,
                  "decode with a bad scale");
  const region bad[] = {{-1, 0, 1, 1}, {0, -1, 1, 1}, {0, 0, 0, 1},       {0, 0, 1, 0},          {0, 0, -5, 1},
                        {0, 0, 1, -5}, {H, 0, 1, 1},  {0, W, 1, 1},       {H - 1, 0, 2, 1},      {0, W - 1, 1, 2},
                        {0, 0, H + 1, W}, {0, 0, H, W + 1}, {INT32_MAX, 0, 1, 1}, {1, 1, INT32_MAX, 1},
                        {0, 1, 1, INT32_MAX}, {INT32_MIN, 0, 1, 1}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    char what[96];
    snprintf(what, sizeof what, "decode of region (%d, %d, %d, %d)", bad[k].y, bad[k].x, bad[k].h, bad[k].w);
    expect_status(slip_jpeg_decode(d, n, bad[k].y, bad[k].x, bad[k].h, bad[k].w, 1, 0, out, size, stride),
                  SLIP_EINVAL, what);
    snprintf(what, sizeof what, "crop_resize of crop (%d, %d, %d, %d)", bad[k].y, bad[k].x, bad[k].h, bad[k].w);
    expect_status(slip_jpeg_decode_crop_resize(d, n, bad[k].y, bad[k].x, bad[k].h, bad[k].w, 4, 4, 0, 0, out, size,
                                               stride),
                  SLIP_EINVAL, what);
  }
  expect_status(slip_jpeg_decode(d, n, 0, 0, H, W, 1, 0, out, size - 1, stride), SLIP_EBUFFER,
                "decode with out_size one byte short");
  expect_status(slip_jpeg_decode(d, n, 0, 0, H, W, 1, 0, out, 0, stride), SLIP_EBUFFER, "decode with out_size 0");
  size_t half = output_size(ceil_div(H, 2), stride, (size_t)ceil_div(W, 2) * 3);
  expect_status(slip_jpeg_decode(d, n, 0, 0, H, W, 2, 0, out, half - 1, stride),
                SLIP_EBUFFER, "decode at 1/2 with out_size one byte short");
  expect_status(slip_jpeg_decode(d, n, 0, 0, H, W, 1, 0, out, size, stride - 1), SLIP_EINVAL,
                "decode with a short stride");
  expect_status(slip_jpeg_decode(d, n, 0, 0, H, W, 1, 0, out, size, -stride), SLIP_EINVAL,
                "decode with a negative stride");
  static const int32_t bad_flags[] = {8, 16, 0x100, -1, INT32_MIN};
  for (int k = 0; k < 5; k++) {
    expect_status(slip_jpeg_decode(d, n, 0, 0, H, W, 1, bad_flags[k], out, size, stride), SLIP_EINVAL,
                  "decode with unknown flags");
    expect_status(slip_jpeg_decode_crop_resize(d, n, 0, 0, H, W, 4, 4, bad_flags[k], 0, out, size, stride),
                  SLIP_EINVAL, "crop_resize with unknown flags");
  }

  expect_status(slip_jpeg_decode_crop_resize(d, n, 0, 0, H, W, 4, 4, 0, 0, out, size, 12), SLIP_OK,
                "valid crop_resize");
  expect_status(slip_jpeg_decode_crop_resize(NULL, n, 0, 0, H, W, 4, 4, 0, 0, out, size, 12), SLIP_EINVAL,
                "crop_resize(NULL data)");
  expect_status(slip_jpeg_decode_crop_resize(d, n, 0, 0, H, W, 4, 4, 0, 0, NULL, size, 12), SLIP_EINVAL,
                "crop_resize(NULL out)");
  expect_status(slip_jpeg_decode_crop_resize(d, n, 0, 0, H, W, 0, 4, 0, 0, out, size, 12), SLIP_EINVAL,
                "crop_resize(out_h 0)");
  expect_status(slip_jpeg_decode_crop_resize(d, n, 0, 0, H, W, 4, -4, 0, 0, out, size, 12), SLIP_EINVAL,
                "crop_resize(out_w -4)");
  expect_status(slip_jpeg_decode_crop_resize(d, n, 0, 0, H, W, 4, 4, 0, 3, out, size, 12), SLIP_EINVAL,
                "crop_resize(interp 3)");
  expect_status(slip_jpeg_decode_crop_resize(d, n, 0, 0, H, W, 4, 4, 0, -1, out, size, 12), SLIP_EINVAL,
                "crop_resize(interp -1)");
  expect_status(slip_jpeg_decode_crop_resize(d, n, 0, 0, H, W, 4, 4, 0, 0, out, 47, 12), SLIP_EBUFFER,
                "crop_resize with out_size one byte short");
  expect_status(slip_jpeg_decode_crop_resize(d, n, 0, 0, H, W, 4, 4, 0, 0, out, size, 11), SLIP_EINVAL,
                "crop_resize with a short stride");

  uint8_t src[8 * 8 * 4] = {0};
  expect_status(slip_resize(src, 8, 8, 3, 24, 0, 0, 8, 8, out, 4, 4, 12, 0, 0), SLIP_OK, "valid resize");
  expect_status(slip_resize(NULL, 8, 8, 3, 24, 0, 0, 8, 8, out, 4, 4, 12, 0, 0), SLIP_EINVAL, "resize(NULL src)");
  expect_status(slip_resize(src, 8, 8, 3, 24, 0, 0, 8, 8, NULL, 4, 4, 12, 0, 0), SLIP_EINVAL, "resize(NULL dst)");
  static const int32_t bad_channels[] = {0, 2, 5, -3};
  for (int k = 0; k < 4; k++)
    expect_status(slip_resize(src, 8, 8, bad_channels[k], 32, 0, 0, 8, 8, out, 4, 4, 16, 0, 0), SLIP_EINVAL,
                  "resize with bad channels");
  expect_status(slip_resize(src, 0, 8, 3, 24, 0, 0, 8, 8, out, 4, 4, 12, 0, 0), SLIP_EINVAL, "resize(src_h 0)");
  expect_status(slip_resize(src, 8, 8, 3, 24, 0, 0, 8, 8, out, 4, 0, 12, 0, 0), SLIP_EINVAL, "resize(dst_w 0)");
  expect_status(slip_resize(src, 8, 8, 3, 23, 0, 0, 8, 8, out, 4, 4, 12, 0, 0), SLIP_EINVAL, "resize(src_stride 23)");
  expect_status(slip_resize(src, 8, 8, 3, 24, 0, 0, 8, 8, out, 4, 4, 11, 0, 0), SLIP_EINVAL, "resize(dst_stride 11)");
  expect_status(slip_resize(src, 8, 8, 3, 24, 1, 0, 8, 8, out, 4, 4, 12, 0, 0), SLIP_EINVAL, "resize(crop outside)");
  expect_status(slip_resize(src, 8, 8, 3, 24, 0, -1, 1, 1, out, 4, 4, 12, 0, 0), SLIP_EINVAL, "resize(x -1)");
  expect_status(slip_resize(src, 8, 8, 3, 24, 0, 0, 0, 8, out, 4, 4, 12, 0, 0), SLIP_EINVAL, "resize(h 0)");
  expect_status(slip_resize(src, 8, 8, 3, 24, 0, 0, 8, 8, out, 4, 4, 12, 7, 0), SLIP_EINVAL, "resize(interp 7)");

  expect_status(slip_resize_region(src, 8, 8, 3, 24, 0.5, 1.25, 6.5, 6.75, out, 4, 4, 12, 1, 0), SLIP_OK,
                "valid resize_region");
  expect_status(slip_resize_region(src, 8, 8, 3, 24, 0, 0, 8, 8.01, out, 4, 4, 12, 1, 0), SLIP_EINVAL,
                "resize_region(past the right edge)");
  expect_status(slip_resize_region(src, 8, 8, 3, 24, -0.1, 0, 1, 1, out, 4, 4, 12, 1, 0), SLIP_EINVAL,
                "resize_region(y -0.1)");
  expect_status(slip_resize_region(src, 8, 8, 3, 24, 0, 0, 0, 1, out, 4, 4, 12, 1, 0), SLIP_EINVAL,
                "resize_region(h 0)");
  expect_status(slip_resize_region(src, 8, 8, 3, 24, 0, 0, NAN, 1, out, 4, 4, 12, 1, 0), SLIP_EINVAL,
                "resize_region(h NaN)");
  expect_status(slip_resize_region(NULL, 8, 8, 3, 24, 0, 0, 1, 1, out, 4, 4, 12, 1, 0), SLIP_EINVAL,
                "resize_region(NULL src)");

  size_t written = 0;
  size_t cap = slip_jpeg_encode_bound(8, 8, 3);
  uint8_t *enc = xmalloc(cap);
  expect_status(slip_jpeg_encode(src, 8, 8, 3, 24, 90, 0, 0, enc, cap, &written), SLIP_OK, "valid encode");
  expect_status(slip_jpeg_encode(NULL, 8, 8, 3, 24, 90, 0, 0, enc, cap, &written), SLIP_EINVAL, "encode(NULL src)");
  expect_status(slip_jpeg_encode(src, 8, 8, 3, 24, 90, 0, 0, NULL, cap, &written), SLIP_EINVAL, "encode(NULL out)");
  expect_status(slip_jpeg_encode(src, 8, 8, 3, 24, 90, 0, 0, enc, cap, NULL), SLIP_EINVAL, "encode(NULL out_size)");
  expect_status(slip_jpeg_encode(src, 0, 8, 3, 24, 90, 0, 0, enc, cap, &written), SLIP_EINVAL, "encode(height 0)");
  expect_status(slip_jpeg_encode(src, 8, -8, 3, 24, 90, 0, 0, enc, cap, &written), SLIP_EINVAL, "encode(width -8)");
  expect_status(slip_jpeg_encode(src, 65501, 8, 3, 24, 90, 0, 0, enc, cap, &written), SLIP_EINVAL,
                "encode(height 65501)");
  expect_status(slip_jpeg_encode(src, 8, 8, 2, 24, 90, 0, 0, enc, cap, &written), SLIP_EINVAL, "encode(channels 2)");
  expect_status(slip_jpeg_encode(src, 8, 8, 4, 32, 90, 0, 0, enc, cap, &written), SLIP_EINVAL, "encode(channels 4)");
  expect_status(slip_jpeg_encode(src, 8, 8, 3, 23, 90, 0, 0, enc, cap, &written), SLIP_EINVAL, "encode(stride 23)");
  expect_status(slip_jpeg_encode(src, 8, 8, 3, 24, 0, 0, 0, enc, cap, &written), SLIP_EINVAL, "encode(quality 0)");
  expect_status(slip_jpeg_encode(src, 8, 8, 3, 24, 101, 0, 0, enc, cap, &written), SLIP_EINVAL,
                "encode(quality 101)");
  expect_status(slip_jpeg_encode(src, 8, 8, 3, 24, 90, 0, 8, enc, cap, &written), SLIP_EINVAL, "encode(flags 8)");
  expect_status(slip_jpeg_encode(src, 8, 8, 3, 24, 90, 0, SLIP_ENCODE_ARITHMETIC | SLIP_ENCODE_PROGRESSIVE, enc, cap,
                                 &written), SLIP_OK, "encode(arithmetic, progressive)");
  static const int32_t bad_sub[] = {SLIP_SUBSAMPLING_411, SLIP_SUBSAMPLING_441, SLIP_SUBSAMPLING_GRAY,
                                    SLIP_SUBSAMPLING_OTHER, -1, 99};
  for (int k = 0; k < 6; k++)
    expect_status(slip_jpeg_encode(src, 8, 8, 3, 24, 90, bad_sub[k], 0, enc, cap, &written), SLIP_EINVAL,
                  "encode of RGB with unsupported subsampling");
  /* One component takes any of the supported subsamplings, and stays gray. */
  if (expect_status(slip_jpeg_encode(src, 8, 8, 1, 8, 90, SLIP_SUBSAMPLING_420, 0, enc, cap, &written), SLIP_OK,
                    "encode of gray with 420")) {
    expect_status(slip_jpeg_info(enc, written, &info), SLIP_OK, "info of gray encoded with 420");
    expect(info.components == 1 && info.subsampling == SLIP_SUBSAMPLING_GRAY, "gray with 420 is not a gray JPEG");
  }
  free(enc);

  uint8_t byte;
  expect_status(slip_pread(0, NULL, 1, 0), SLIP_EINVAL, "pread(NULL buf)");
  expect_status(slip_pread(0, &byte, 1, -1), SLIP_EINVAL, "pread(offset -1)");
  free(out);
  case_end();
}

/* Outcome of run_in_child: the child's own verdict, or how it died. */
enum { CHILD_PASSED = 0, CHILD_FAILED = 3 };

/* Runs fn in a forked child, so that a crash (a wild write through an
 * overflowed size check) fails one case instead of ending the whole run. */
static void run_in_child(int (*fn)(const jpeg_case *), const jpeg_case *jc, const char *what) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) _exit(fn(jc) ? CHILD_PASSED : CHILD_FAILED);
  int wstatus = 0;
  if (!expect(pid > 0 && waitpid(pid, &wstatus, 0) == pid, "could not fork or wait for the child")) return;
  if (WIFSIGNALED(wstatus)) expect(0, "%s: the child was killed by signal %d", what, WTERMSIG(wstatus));
  else if (WEXITSTATUS(wstatus) == CHILD_FAILED) expect(0, "%s: wrong status (the child printed it above)", what);
  else expect(WEXITSTATUS(wstatus) == CHILD_PASSED, "%s: the child crashed (exit status %d; see the sanitizer "
              "report above)", what, WEXITSTATUS(wstatus));
}

/* Row strides so large that (out_h - 1) * out_stride + row wraps around
 * 2^64: the output cannot fit in any buffer, so the result must be
 * SLIP_EBUFFER, and nothing may be written. */
static int huge_strides_rejected(const jpeg_case *jc) {
  uint8_t *out = xmalloc(4096);
  static const struct { int64_t stride; int32_t rows; } cases[] = {
      {INT64_MAX, 3}, {(int64_t)1 << 62, 5}, {(int64_t)1 << 61, 9}, {INT64_MAX / 2 + 1, 3}};
  int ok = 1;
  for (int k = 0; k < 4; k++) {
    int64_t stride = cases[k].stride;
    int32_t rows = cases[k].rows;
    int32_t s1 = slip_jpeg_decode(jc->data, jc->size, 0, 0, rows, 64, 1, 0, out, 4096, stride);
    int32_t s2 = slip_jpeg_decode_crop_resize(jc->data, jc->size, 0, 0, jc->h, jc->w, rows, 64, 0, 0, out, 4096,
                                              stride);
    if (s1 != SLIP_EBUFFER || s2 != SLIP_EBUFFER) {
      printf("  stride %lld with %d rows: slip_jpeg_decode returned %d, crop_resize %d, expected %d\n",
             (long long)stride, rows, s1, s2, SLIP_EBUFFER);
      ok = 0;
    }
  }
  free(out);
  return ok;
}

static void test_huge_strides(const jpeg_case *jc) {
  case_begin("out_stride overflowing the size check (in a child process)");
  run_in_child(huge_strides_rejected, jc, "decode with a huge out_stride and a 4096-byte buffer");
  case_end();
}

/* ---------------------------------------------------------- 7: encode */

/* An encode must give the same bytes whatever the same thread encoded
 * before: each thread reuses one libjpeg compressor, which keeps state (such
 * as Huffman tables) from call to call. */
static void test_encode_reuse(void) {
  case_begin("encode independent of earlier encodes on the thread");
  static const int32_t all_flags[] = {SLIP_ENCODE_DEFAULT, SLIP_ENCODE_OPTIMIZE, SLIP_ENCODE_PROGRESSIVE,
                                      SLIP_ENCODE_PROGRESSIVE | SLIP_ENCODE_OPTIMIZE};
  int32_t h = 48, w = 64;
  uint8_t *a = make_picture(h, w, 3, 10), *b = make_noise((size_t)h * (size_t)w * 3);
  size_t bound = slip_jpeg_encode_bound(h, w, 3);
  uint8_t *want = xmalloc(bound), *got = xmalloc(bound), *other = xmalloc(bound);
  for (int fa = 0; fa < 4; fa++)
    for (int fb = 0; fb < 4; fb++)
      for (int32_t cb = 1; cb <= 3; cb += 2) {
        encode_call ref = encode_args(a, h, w, 3, 0, 90, SLIP_SUBSAMPLING_420, all_flags[fa], want, bound);
        encode_call seq[2] = {encode_args(b, h, w, cb, 0, 75, SLIP_SUBSAMPLING_444, all_flags[fb], other, bound),
                              encode_args(a, h, w, 3, 0, 90, SLIP_SUBSAMPLING_420, all_flags[fa], got, bound)};
        encode_on_fresh_thread(&ref, 1);
        encode_on_fresh_thread(seq, 2);
        if (!expect_encode_status(&ref, SLIP_OK, "encode on a fresh thread") ||
            !expect_encode_status(&seq[0], SLIP_OK, "first encode") ||
            !expect_encode_status(&seq[1], SLIP_OK, "second encode"))
          continue;
        expect(seq[1].size == ref.size && !memcmp(got, want, ref.size),
               "encode with flags %d after an encode of %d-channel noise with flags %d gives %zu bytes, %zu bytes on a "
               "fresh thread",
               all_flags[fa], cb, all_flags[fb], seq[1].size, ref.size);
      }
  free(a);
  free(b);
  free(want);
  free(got);
  free(other);
  case_end();
}

static void test_encode_buffers(void) {
  case_begin("encode into small buffers");
  int32_t h = 48, w = 64;
  uint8_t *src = make_picture(h, w, 3, 10);
  size_t bound = slip_jpeg_encode_bound(h, w, 3);
  uint8_t *full = xmalloc(bound);
  encode_call e = encode_args(src, h, w, 3, 0, 90, SLIP_SUBSAMPLING_420, 0, full, bound);
  encode_on_fresh_thread(&e, 1);
  if (expect_encode_status(&e, SLIP_OK, "slip_jpeg_encode")) {
    size_t full_size = e.size;
    size_t caps[] = {0, 1, 2, 100, full_size / 2, full_size - 1, full_size, full_size + 1};
    for (int k = 0; k < 8; k++) {
      /* The output sits at the start of a buffer big enough for the whole
       * JPEG, so that a write past out_capacity lands in bytes this test
       * checks rather than in the heap: libjpeg, which does the writing, is
       * not instrumented by AddressSanitizer. */
      guarded g;
      guarded_alloc(&g, bound);
      e.out = g.p, e.capacity = caps[k], e.size = 12345;
      encode_on_fresh_thread(&e, 1);
      char what[80];
      snprintf(what, sizeof what, "encode of a %zu-byte JPEG into %zu bytes", full_size, caps[k]);
      size_t kept = caps[k] < full_size ? caps[k] : full_size;
      if (caps[k] < full_size) expect_encode_status(&e, SLIP_EBUFFER, what);
      else if (expect_encode_status(&e, SLIP_OK, what))
        expect(e.size == full_size, "%s: reported size %zu", what, e.size);
      expect(!memcmp(g.p, full, kept), "%s: the buffer does not hold (a prefix of) the JPEG", what);
      int intact = 1;
      for (size_t i = kept; i < bound; i++) intact &= g.p[i] == fill_byte(GUARD + i);
      expect(intact && guarded_intact(&g, 1, 0, 0), "%s: wrote past out_capacity (status %d)", what, e.status);
      free(g.mem);
    }
    /* A padded source stride gives the same JPEG. */
    int64_t stride = w * 3 + 5;
    uint8_t *padded = xmalloc(output_size(h, stride, (size_t)w * 3)), *again = xmalloc(bound);
    for (int32_t i = 0; i < h; i++) memcpy(padded + i * stride, src + (size_t)i * (size_t)w * 3, (size_t)w * 3);
    e = encode_args(padded, h, w, 3, stride, 90, SLIP_SUBSAMPLING_420, 0, again, bound);
    encode_on_fresh_thread(&e, 1);
    if (expect_encode_status(&e, SLIP_OK, "encode from a padded stride"))
      expect(e.size == full_size && !memcmp(again, full, full_size), "a padded source stride changed the JPEG");
    free(padded);
    free(again);
  }
  free(full);
  free(src);
  case_end();
}

static void test_encode_bound(void) {
  case_begin("slip_jpeg_encode_bound suffices for noise at quality 100");
  static const int32_t sizes[][2] = {{1, 1}, {13, 17}, {16, 16}, {48, 64}, {33, 250}, {251, 333}};
  for (int k = 0; k < 6; k++)
    for (int32_t channels = 1; channels <= 3; channels += 2)
      for (int32_t flags = 0; flags <= 3; flags++) {
        int32_t h = sizes[k][0], w = sizes[k][1];
        uint8_t *src = make_noise((size_t)h * (size_t)w * (size_t)channels);
        size_t cap = slip_jpeg_encode_bound(h, w, channels), got = 0;
        uint8_t *out = xmalloc(cap);
        int32_t sub = channels == 1 ? SLIP_SUBSAMPLING_GRAY : SLIP_SUBSAMPLING_444;
        char what[96];
        snprintf(what, sizeof what, "encode of %dx%dx%d noise, flags %d, into its bound %zu", w, h, channels, flags,
                 cap);
        if (expect_status(slip_jpeg_encode(src, h, w, channels, (int64_t)w * channels, 100, sub, flags, out, cap,
                                           &got),
                          SLIP_OK, what))
          expect(got > 0 && got <= cap, "%s: reported size %zu", what, got);
        free(out);
        free(src);
      }
  expect(slip_jpeg_encode_bound(0, 0, 3) > 0, "bound of an empty image");
  expect(slip_jpeg_encode_bound(-5, 10, 3) == slip_jpeg_encode_bound(0, 10, 3), "bound of a negative height");
  expect(slip_jpeg_encode_bound(100, 100, 7) == slip_jpeg_encode_bound(100, 100, 3), "bound of channels 7");
  case_end();
}

/* ------------------------------------------------------------ 8: pread */

/* A new temporary file (under $TMPDIR) holding the n bytes at data, its
 * name in path; the open descriptor, or -1 when it cannot be made. */
static int temp_file_of(const uint8_t *data, size_t n, char *path, size_t path_size) {
  const char *dir = getenv("TMPDIR");
  snprintf(path, path_size, "%s/slip_test_native_XXXXXX", dir && dir[0] ? dir : "/tmp");
  int fd = mkstemp(path);
  size_t done = 0;
  while (fd >= 0 && done < n) {
    ssize_t w = write(fd, data + done, n - done);
    if (w <= 0) break;
    done += (size_t)w;
  }
  if (fd >= 0 && done < n) {
    close(fd);
    unlink(path);
    return -1;
  }
  return fd;
}

static void test_pread(void) {
  case_begin("slip_pread");
  char path[512];
  const size_t n = 100000;
  uint8_t *data = make_noise(n), *buf = xmalloc(n);
  int fd = temp_file_of(data, n, path, sizeof path);
  if (expect(fd >= 0, "could not write the temporary file")) {
    for (int k = 0; k < 200; k++) {
      int64_t off = rng_below((int32_t)n);
      size_t count = (size_t)rng_below((int32_t)(n - (size_t)off) + 1);
      if (k % 10 == 0) count = n - (size_t)off; /* up to the very end */
      memset(buf, 0, n);
      if (expect_status(slip_pread(fd, buf, count, off), SLIP_OK, "pread inside the file"))
        expect(!memcmp(buf, data + off, count), "pread of %zu bytes at %lld read wrong bytes", count, (long long)off);
    }
    expect_status(slip_pread(fd, buf, 0, (int64_t)n), SLIP_OK, "pread of 0 bytes at the end");
    expect_status(slip_pread(fd, NULL, 0, 0), SLIP_OK, "pread of 0 bytes into NULL");
    expect_status(slip_pread(fd, buf, 20, (int64_t)n - 10), SLIP_EEOF, "pread across the end");
    expect_status(slip_pread(fd, buf, 1, (int64_t)n), SLIP_EEOF, "pread at the end");
    expect_status(slip_pread(fd, buf, 1, (int64_t)n + 1000), SLIP_EEOF, "pread past the end");
    expect_status(slip_pread(fd, buf, 1, -1), SLIP_EINVAL, "pread at a negative offset");
    expect_status(slip_pread(fd, buf, 1, INT64_MIN), SLIP_EINVAL, "pread at INT64_MIN");
    expect_status(slip_pread(-1, buf, 1, 0), SLIP_EIO, "pread from fd -1");
    int closed = dup(fd);
    close(closed);
    expect_status(slip_pread(closed, buf, 1, 0), SLIP_EIO, "pread from a closed fd");
    int pipes[2];
    if (pipe(pipes) == 0) {
      expect_status(slip_pread(pipes[0], buf, 1, 0), SLIP_EIO, "pread from a pipe");
      close(pipes[0]);
      close(pipes[1]);
    }
    int dirfd = open("/", O_RDONLY);
    if (dirfd >= 0) {
      expect_status(slip_pread(dirfd, buf, 1, 0), SLIP_EIO, "pread from a directory");
      close(dirfd);
    }
    close(fd);
    unlink(path);
  }
  free(data);
  free(buf);
  case_end();
}

/* ------------------------------------------------- 8b: checksums, limits */

/* Bit by bit, as the CRC-32 is defined (reflected, polynomial 0xEDB88320). */
static uint32_t reference_crc32(const uint8_t *p, size_t n, uint32_t crc) {
  crc = ~crc;
  while (n--) {
    crc ^= *p++;
    for (int k = 0; k < 8; k++) crc = crc & 1 ? 0xEDB88320u ^ (crc >> 1) : crc >> 1;
  }
  return ~crc;
}

static void test_crc32(void) {
  case_begin("slip_crc32");
  const size_t n = (1 << 20) + 77;
  uint8_t *data = make_noise(n);
  for (size_t offset = 0; offset < 9; offset++)
    for (size_t len = 0; len < 300; len++) {
      uint32_t start = (uint32_t)rng_next();
      expect(slip_crc32(data + offset, len, start) == reference_crc32(data + offset, len, start),
             "crc32 of %zu bytes at offset %zu", len, offset);
    }
  uint32_t whole = reference_crc32(data, n, 0), pieces = 0;
  expect(slip_crc32(data, n, 0) == whole, "crc32 of 1 MiB");
  for (size_t at = 0; at < n;) {
    size_t len = (size_t)rng_below(70000) + 1;
    if (len > n - at) len = n - at;
    pieces = slip_crc32(data + at, len, pieces);
    at += len;
  }
  expect(pieces == whole, "crc32 continued over uneven pieces");
  expect(slip_crc32(NULL, 0, 1234) == 1234 && slip_crc32(data, 0, 99) == 99, "crc32 of nothing");
  free(data);
  case_end();
}

static void test_limits(const jpeg_case *progressive) {
  case_begin("slip_set_limit, slip_get_limit");
  expect(slip_get_limit(SLIP_LIMIT_SCANS) == SLIP_DEFAULT_MAX_SCANS, "default scan limit");
  expect(slip_get_limit(SLIP_LIMIT_PIXELS) == SLIP_DEFAULT_MAX_PIXELS, "default pixel limit");
  expect_status(slip_set_limit(SLIP_LIMIT_SCANS, 0), SLIP_EINVAL, "a scan limit of 0");
  expect_status(slip_set_limit(7, 10), SLIP_EINVAL, "an unknown limit");
  expect(slip_get_limit(-1) == SLIP_EINVAL, "get an unknown limit");
  int32_t h = progressive->h, w = progressive->w;
  uint8_t *out = xmalloc((size_t)h * (size_t)w * 3);
  slip_jpeg_info_t info;
  expect_status(slip_jpeg_decode(progressive->data, progressive->size, 0, 0, h, w, 1, 0, out, (size_t)h * w * 3,
                                 (int64_t)w * 3),
                SLIP_OK, "a progressive JPEG under the default limits");
  slip_set_limit(SLIP_LIMIT_SCANS, 2);
  expect_status(slip_jpeg_decode(progressive->data, progressive->size, 0, 0, h, w, 1, 0, out, (size_t)h * w * 3,
                                 (int64_t)w * 3),
                SLIP_ETOOBIG, "a progressive JPEG of more scans than the limit");
  expect(strstr(slip_last_error(), "more than 2 scans") != NULL, "the detail names the scan limit: %s",
         slip_last_error());
  slip_set_limit(SLIP_LIMIT_SCANS, SLIP_DEFAULT_MAX_SCANS);
  slip_set_limit(SLIP_LIMIT_PIXELS, (int64_t)h * w - 1);
  expect_status(slip_jpeg_decode_crop_resize(progressive->data, progressive->size, 0, 0, h, w, 8, 8, 0,
                                             SLIP_INTERP_AREA, out, 8 * 8 * 3, 8 * 3),
                SLIP_ETOOBIG, "an image of more pixels than the limit");
  expect(strstr(slip_last_error(), "SLIP_LIMIT_PIXELS") != NULL, "the detail names the pixel limit");
  expect_status(slip_jpeg_info(progressive->data, progressive->size, &info), SLIP_OK,
                "jpeg_info reads the header of an image over the limit");
  slip_set_limit(SLIP_LIMIT_PIXELS, SLIP_DEFAULT_MAX_PIXELS);
  free(out);
  case_end();
}

static void test_guard(void) {
  case_begin("slip_guard_mapping");
  char path[512];
  const size_t n = 1 << 20;
  uint8_t *data = make_noise(n);
  int fd = temp_file_of(data, n, path, sizeof path);
  if (!expect(fd >= 0, "could not write the temporary file")) {
    free(data);
    case_end();
    return;
  }
  const volatile uint8_t *map = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
  int32_t guard = -1;
  if (expect(map != MAP_FAILED, "mmap failed") &&
      expect_status(slip_guard_mapping((const void *)map, n, &guard), SLIP_OK, "guard a mapping")) {
    expect(slip_guard_faults(guard) == 0, "no faults yet");
    expect(ftruncate(fd, 4096) == 0, "ftruncate failed");
    expect(map[100] == data[100], "a page still in the file reads as before");
    unsigned sum = 0;
    for (size_t at = 8192; at < n; at += 4096) sum += map[at];
    expect(sum == 0, "pages past the end read as zeros");
    expect(slip_guard_faults(guard) == (int64_t)((n - 8192) / 4096), "one fault per lost page, got %lld",
           (long long)slip_guard_faults(guard));
    expect_status(slip_unguard_mapping(guard), SLIP_OK, "unguard");
    expect_status(slip_unguard_mapping(guard), SLIP_EINVAL, "unguard twice");
    expect(slip_guard_faults(guard) == SLIP_EINVAL, "faults of an unguarded mapping");
    munmap((void *)map, n);
  }
  expect_status(slip_guard_mapping(NULL, 10, &guard), SLIP_EINVAL, "guard NULL");
  expect_status(slip_guard_mapping(data, 0, &guard), SLIP_EINVAL, "guard 0 bytes");
  expect_status(slip_unguard_mapping(-3), SLIP_EINVAL, "unguard -3");
  close(fd);
  unlink(path);
  free(data);
  case_end();
}

/* A reserved range: a file mapped at a place in it, memory filled by
 * slip_pread, zeros, release, and a guarded truncation inside it. */
static void test_address_range(void) {
  case_begin("slip_range_*");
  const size_t page = (size_t)sysconf(_SC_PAGESIZE), n = 4 * page, length = 16 * page;
  char path[512];
  uint8_t *data = make_noise(n);
  int fd = temp_file_of(data, n, path, sizeof path);
  uint64_t base = 1;
  if (!expect(fd >= 0, "could not write the temporary file") ||
      !expect_status(slip_range_reserve(length, &base), SLIP_OK, "reserve") || !expect(base != 0, "a base address")) {
    free(data);
    case_end();
    return;
  }
  volatile uint8_t *range = (volatile uint8_t *)(uintptr_t)base;
  int32_t guard = -1;
  expect_status(slip_guard_mapping((const void *)range, length, &guard), SLIP_OK, "guard the range");
  expect_status(slip_range_map_file((void *)(range + 2 * page), 2 * page, fd, (int64_t)page, 1), SLIP_OK, "map");
  expect(range[2 * page] == data[page] && range[4 * page - 1] == data[3 * page - 1], "file bytes at their place");
  expect_status(slip_range_map_memory((void *)(range + 8 * page), page, 1), SLIP_OK, "a writable slot");
  expect_status(slip_pread(fd, (void *)(range + 8 * page), 100, 7), SLIP_OK, "pread into the slot");
  expect(range[8 * page] == data[7] && range[8 * page + 99] == data[106] && range[8 * page + 100] == 0,
         "read bytes, then zeros");
  expect_status(slip_range_map_memory((void *)(range + 2 * page), page, 0), SLIP_OK, "zeros over a file page");
  expect(range[2 * page + 5] == 0 && range[3 * page] == data[2 * page], "zeros there, the file next to them");
  expect(ftruncate(fd, (off_t)page) == 0, "ftruncate failed");
  expect(range[3 * page + 1] == 0, "a page lost to truncation reads zeros");
  expect(slip_guard_faults(guard) == 1, "one fault, got %lld", (long long)slip_guard_faults(guard));
  expect_status(slip_range_release((void *)(range + 2 * page), 2 * page), SLIP_OK, "release");
  expect_status(slip_range_map_file((void *)(range + 1), page, fd, 0, 0), SLIP_EINVAL, "a misaligned place");
  expect_status(slip_range_map_file((void *)range, page, fd, 3, 0), SLIP_EINVAL, "a misaligned offset");
  expect_status(slip_range_map_memory((void *)range, page + 1, 0), SLIP_EINVAL, "a length of part of a page");
  expect_status(slip_range_map_file((void *)range, page, -1, 0, 0), SLIP_EIO, "no file");
  expect_status(slip_range_reserve(page + 1, &base), SLIP_EINVAL, "reserve part of a page");
  expect_status(slip_range_reserve(page, NULL), SLIP_EINVAL, "reserve without a base");
  expect_status(slip_unguard_mapping(guard), SLIP_OK, "unguard");
  expect_status(slip_range_free((void *)range, length), SLIP_OK, "free");
  close(fd);
  unlink(path);
  free(data);
  case_end();
}

/* ---------------------------------------------------------- 9: threads */

typedef struct thread_job {
  const jpeg_case *jc;
  region r;
  int32_t d, flags, oh, ow, interp, fused; /* fused: crop_resize, else slip_jpeg_decode */
  image want;
} thread_job;

typedef struct thread_arg {
  const thread_job *jobs;
  int n_jobs, first, iterations;
  int mismatches, failures;
} thread_arg;

static int32_t run_job(const thread_job *j, image *out) {
  int32_t oh = j->oh, ow = j->ow;
  if (!j->fused) {
    int32_t sy = j->r.y / j->d, sx = j->r.x / j->d;
    oh = ceil_div(j->r.y + j->r.h, j->d) - sy, ow = ceil_div(j->r.x + j->r.w, j->d) - sx;
  }
  image_alloc(out, oh, ow, 3);
  size_t size = (size_t)oh * row_bytes(out);
  if (j->fused)
    return slip_jpeg_decode_crop_resize(j->jc->data, j->jc->size, j->r.y, j->r.x, j->r.h, j->r.w, oh, ow, j->flags,
                                        j->interp, out->px, size, (int64_t)row_bytes(out));
  return slip_jpeg_decode(j->jc->data, j->jc->size, j->r.y, j->r.x, j->r.h, j->r.w, j->d, j->flags, out->px, size,
                          (int64_t)row_bytes(out));
}

static void *thread_main(void *p) {
  thread_arg *a = p;
  for (int it = 0; it < a->iterations; it++)
    for (int k = 0; k < a->n_jobs; k++) {
      const thread_job *j = &a->jobs[(a->first + k) % a->n_jobs];
      image out;
      if (run_job(j, &out) != SLIP_OK) a->failures++;
      else if (image_mismatch(&out, &j->want) >= 0) a->mismatches++;
      image_free(&out);
    }
  return NULL;
}

static void test_threads(jpeg_case *const *cases, int n_cases) {
  case_begin("4 threads decoding concurrently");
  enum { MAX_JOBS = 32, THREADS = 4, ITERATIONS = 50 };
  thread_job jobs[MAX_JOBS];
  int n = 0;
  for (int c = 0; c < n_cases; c++)
    for (int fused = 0; fused <= 1; fused++) {
      thread_job *j = &jobs[n];
      memset(j, 0, sizeof *j);
      j->jc = cases[c];
      random_interval(j->jc->h, &j->r.y, &j->r.h);
      random_interval(j->jc->w, &j->r.x, &j->r.w);
      j->fused = fused;
      j->d = 1 << rng_below(4);
      j->flags = rng_below(4); /* FLIP_X | FAST_IDCT */
      j->oh = random_out_size(j->r.h, rng_below(4)), j->ow = random_out_size(j->r.w, rng_below(4));
      j->interp = rng_below(2);
      if (expect_status(run_job(j, &j->want), SLIP_OK, "single-threaded reference decode")) n++;
      else image_free(&j->want);
    }
  pthread_t threads[THREADS];
  thread_arg args[THREADS];
  int started = 0;
  for (int t = 0; t < THREADS; t++) {
    args[t] = (thread_arg){jobs, n, t * n / THREADS, ITERATIONS, 0, 0};
    if (expect(pthread_create(&threads[t], NULL, thread_main, &args[t]) == 0, "pthread_create failed")) started++;
  }
  for (int t = 0; t < started; t++) {
    pthread_join(threads[t], NULL);
    expect(args[t].failures == 0, "thread %d: %d calls failed", t, args[t].failures);
    expect(args[t].mismatches == 0, "thread %d: %d results differ from the single-threaded ones", t,
           args[t].mismatches);
  }
  for (int k = 0; k < n; k++) image_free(&jobs[k].want);
  case_end();
}

/* -------------------------------------------------- 10: identity, status */

static void test_status_strings(void) {
  case_begin("slip_strerror, slip_version, slip_abi_version");
  const char *names[12];
  for (int32_t s = 0; s >= SLIP_ESHORT; s--) {
    names[-s] = slip_strerror(s);
    expect(names[-s] && names[-s][0] && strcmp(names[-s], "unknown status") != 0, "slip_strerror(%d) is not a name",
           s);
    for (int32_t t = 0; t > s; t--)
      expect(!names[-t] || !names[-s] || strcmp(names[-t], names[-s]) != 0, "slip_strerror(%d) == slip_strerror(%d)",
             s, t);
  }
  static const int32_t unknown[] = {1, 2, SLIP_ESHORT - 1, -100, 1000, INT32_MIN, INT32_MAX};
  for (int k = 0; k < 7; k++)
    expect(!strcmp(slip_strerror(unknown[k]), "unknown status"), "slip_strerror(%d) = \"%s\"", unknown[k],
           slip_strerror(unknown[k]));
  expect(slip_abi_version() == SLIP_ABI_VERSION, "slip_abi_version() = %d, header says %d", slip_abi_version(),
         SLIP_ABI_VERSION);
  const char *v = slip_version();
  unsigned a, b, c;
  char tail;
  /* This program is built from the sources alone, without the package's version. */
  expect(v && (!strcmp(v, "0+unknown") || sscanf(v, "%u.%u.%u%c", &a, &b, &c, &tail) == 3),
         "slip_version() = \"%s\" is neither MAJOR.MINOR.PATCH nor 0+unknown", v ? v : "(null)");
  case_end();
}

/* The corpus file of that size and kind, or NULL when it could not be made
 * or decoded (its own cases have failed then). */
static jpeg_case *corpus_case(jpeg_case *cases, int n, int32_t w, int32_t h, int32_t subsampling, int progressive) {
  for (int k = 0; k < n; k++) {
    jpeg_case *jc = &cases[k];
    if (jc->w == w && jc->h == h && jc->subsampling == subsampling && jc->progressive == progressive)
      return jc->data && jc->full[0].px ? jc : NULL;
  }
  return NULL;
}

/* ------------------------------------------------- four-component JPEGs */

/* slip_jpeg_encode writes only gray and YCbCr, so CMYK, YCCK and RGB files
 * are made with libjpeg itself, which also writes the Adobe marker they
 * carry: pixels of `components` samples in colour space `given`, stored as
 * `stored`, at quality 90, with optimized Huffman tables or not, and a
 * restart marker every restart_interval MCUs (0: none). */
static unsigned char *libjpeg_encode(const uint8_t *pixels, int32_t h, int32_t w, int components, J_COLOR_SPACE given,
                                     J_COLOR_SPACE stored, int optimize, unsigned int restart_interval,
                                     unsigned long *size) {
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr err;
  unsigned char *buf = NULL;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  *size = 0;
  jpeg_mem_dest(&c, &buf, size);
  c.image_width = (JDIMENSION)w;
  c.image_height = (JDIMENSION)h;
  c.input_components = components;
  c.in_color_space = given;
  jpeg_set_defaults(&c);
  jpeg_set_colorspace(&c, stored);
  jpeg_set_quality(&c, 90, TRUE);
  c.optimize_coding = optimize ? TRUE : FALSE;
  c.restart_interval = restart_interval;
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = (JSAMPROW)(uintptr_t)(pixels + (size_t)c.next_scanline * (size_t)w * components);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  return buf;
}

/* libjpeg's own decode of a four-component JPEG to its stored CMYK values. */
static void decode_four_components(const unsigned char *data, unsigned long size, uint8_t *cmyk, int32_t w) {
  struct jpeg_decompress_struct d;
  struct jpeg_error_mgr err;
  d.err = jpeg_std_error(&err);
  jpeg_create_decompress(&d);
  jpeg_mem_src(&d, data, size);
  jpeg_read_header(&d, TRUE);
  d.out_color_space = JCS_CMYK;
  jpeg_start_decompress(&d);
  while (d.output_scanline < d.output_height) {
    JSAMPROW row = cmyk + (size_t)d.output_scanline * (size_t)w * 4;
    jpeg_read_scanlines(&d, &row, 1);
  }
  jpeg_finish_decompress(&d);
  jpeg_destroy_decompress(&d);
}

/* RGB of Adobe (inverted) CMYK, the documented conversion: with nk = K' (the
 * stored, inverted K) and C = 255 - C', R = nk - round(C * nk / 255). */
static uint8_t rgb_of_inverted_cmyk(uint8_t stored_c, uint8_t stored_k) {
  int nk = stored_k, t = (255 - stored_c) * nk + 128;
  return (uint8_t)(nk - ((t + (t >> 8)) >> 8));
}

/* libjpeg's own lossless re-coding of data with optimized Huffman tables and
 * restart_interval MCUs between restart markers: the reference for the
 * size of slip_jpeg_add_restart_markers' output.  The caller frees *out. */
static unsigned long libjpeg_recode(const uint8_t *data, size_t size, unsigned int restart_interval,
                                    unsigned char **out) {
  struct jpeg_decompress_struct d;
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr derr, cerr;
  d.err = jpeg_std_error(&derr);
  jpeg_create_decompress(&d);
  jpeg_mem_src(&d, data, (unsigned long)size);
  jpeg_read_header(&d, TRUE);
  jvirt_barray_ptr *coefficients = jpeg_read_coefficients(&d);
  c.err = jpeg_std_error(&cerr);
  jpeg_create_compress(&c);
  unsigned long n = 0;
  *out = NULL;
  jpeg_mem_dest(&c, out, &n);
  jpeg_copy_critical_parameters(&d, &c);
  c.optimize_coding = TRUE;
  c.restart_interval = restart_interval;
  jpeg_write_coefficients(&c, coefficients);
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  jpeg_destroy_decompress(&d);
  return n;
}

/* The MCU count of a JPEG's DRI segment (0 without one). */
static unsigned int restart_interval_of(const uint8_t *data, size_t size) {
  for (size_t i = 0; i + 6 <= size; i++)
    if (data[i] == 0xFF && data[i + 1] == 0xDD && data[i + 2] == 0 && data[i + 3] == 4)
      return (unsigned int)(data[i + 4] << 8 | data[i + 5]);
  return 0;
}

/* Re-coded into tiles, a JPEG decodes to the same pixels, and its Huffman
 * tables (counted from the coefficients, not by libjpeg's optimizer) code
 * it in as few bytes as libjpeg's optimized tables do, give or take the
 * ties of Annex K's construction. */
static void test_tiles(const uint8_t *data, size_t size, const char *name) {
  static const int32_t widths[] = {8, 32, 4096};
  slip_jpeg_info_t info;
  if (slip_jpeg_info(data, size, &info) != SLIP_OK) return;
  size_t n = (size_t)info.height * (size_t)info.width * 3;
  uint8_t *want = xmalloc(n), *got = xmalloc(n);
  int decoded = slip_jpeg_decode(data, size, 0, 0, info.height, info.width, 1, 0, want, n, info.width * 3) == SLIP_OK;
  for (int k = 0; k < 3 && decoded; k++) {
    case_begin("tiles %s %dpx", name, widths[k]);
    size_t capacity = size * 2 + 65536, tiled_size = 0;
    uint8_t *tiled = xmalloc(capacity);
    if (expect_status(slip_jpeg_add_restart_markers(data, size, widths[k], tiled, capacity, &tiled_size), SLIP_OK,
                      "slip_jpeg_add_restart_markers") &&
        expect_status(slip_jpeg_decode(tiled, tiled_size, 0, 0, info.height, info.width, 1, 0, got, n,
                                       info.width * 3), SLIP_OK, "decode of the tiles")) {
      expect(memcmp(want, got, n) == 0, "the tiles decode to other pixels than the original");
      unsigned int interval = restart_interval_of(tiled, tiled_size);
      unsigned char *reference = NULL;
      unsigned long reference_size = libjpeg_recode(data, size, interval, &reference);
      expect(interval > 0 && tiled_size <= reference_size + 16 && reference_size <= tiled_size + 16,
             "restart interval %u: %zu bytes, libjpeg's optimized tables %lu", interval, tiled_size, reference_size);
      free(reference);
      /* The tiles' tables are their own: coded again, they are spliced, from
       * input with restart markers, into exactly the same bytes. */
      size_t again_size = 0;
      uint8_t *again = xmalloc(capacity);
      if (expect_status(slip_jpeg_add_restart_markers(tiled, tiled_size, widths[k], again, capacity, &again_size),
                        SLIP_OK, "slip_jpeg_add_restart_markers of the tiles"))
        expect(again_size == tiled_size && memcmp(again, tiled, tiled_size) == 0,
               "the tiles coded again differ from the tiles (%zu bytes against %zu)", again_size, tiled_size);
      free(again);
    }
    free(tiled);
    case_end();
  }
  free(want);
  free(got);
}

/* A gradient of its own in each channel, with a little noise. */
static void fill_gradients(uint8_t *pixels, int32_t h, int32_t w, int components) {
  for (int32_t i = 0; i < h; i++)
    for (int32_t j = 0; j < w; j++)
      for (int c = 0; c < components; c++)
        pixels[((size_t)i * w + j) * components + c] = (uint8_t)((i * (c + 3) + j * (5 - c)) * 2 + rng_below(9));
}

static void test_four_components(J_COLOR_SPACE stored, const char *name) {
  case_begin("decode %s", name);
  const int32_t h = 37, w = 53;
  uint8_t *src = malloc((size_t)h * w * 4), *cmyk = malloc((size_t)h * w * 4);
  uint8_t *rgb = malloc((size_t)h * w * 3), *block = malloc((size_t)h * w * 3);
  fill_gradients(src, h, w, 4);
  unsigned long size;
  unsigned char *data = libjpeg_encode(src, h, w, 4, JCS_CMYK, stored, 0, 0, &size);
  slip_jpeg_info_t info;
  if (expect_status(slip_jpeg_info(data, size, &info), SLIP_OK, "info")) {
    int32_t want = stored == JCS_YCCK ? SLIP_COLORSPACE_YCCK : SLIP_COLORSPACE_CMYK;
    expect(info.colorspace == want && info.components == 4, "colorspace %d components %d, expected %d and 4",
           info.colorspace, info.components, want);
  }
  decode_four_components(data, size, cmyk, w);
  if (expect_status(slip_jpeg_decode(data, size, 0, 0, h, w, 1, 0, rgb, (size_t)h * w * 3, w * 3), SLIP_OK,
                    "full decode")) {
    int wrong = 0;
    for (size_t p = 0; p < (size_t)h * w; p++)
      for (int c = 0; c < 3; c++) wrong += rgb[p * 3 + c] != rgb_of_inverted_cmyk(cmyk[p * 4 + c], cmyk[p * 4 + 3]);
    expect(wrong == 0, "%d samples differ from libjpeg's CMYK converted to RGB", wrong);
    /* A flipped region is the mirrored block of the full decode. */
    const int32_t y = 5, x = 7, bh = 20, bw = 30;
    if (expect_status(slip_jpeg_decode(data, size, y, x, bh, bw, 1, SLIP_DECODE_FLIP_X, block, (size_t)bh * bw * 3,
                                       bw * 3), SLIP_OK, "flipped region")) {
      int differ = 0;
      for (int32_t i = 0; i < bh; i++)
        for (int32_t j = 0; j < bw; j++)
          differ +=
              memcmp(block + ((size_t)i * bw + j) * 3, rgb + ((size_t)(y + i) * w + (x + bw - 1 - j)) * 3, 3) != 0;
      expect(differ == 0, "%d pixels of the flipped region differ from the full decode", differ);
    }
  }
  free(src);
  free(cmyk);
  free(rgb);
  free(block);
  case_end();
  test_tiles(data, size, name);
  free(data);
}

/* A JPEG stored as RGB (an Adobe marker, no colour transform) with Huffman
 * tables optimized for it and a restart marker every 3 MCUs, an interval
 * that divides no row: re-coded into tiles by splicing, its own restart
 * markers skipped, its Adobe marker written again. */
static void test_tiles_of_stored_rgb(void) {
  const int32_t h = 45, w = 77;
  uint8_t *rgb = xmalloc((size_t)h * w * 3);
  fill_gradients(rgb, h, w, 3);
  unsigned long size;
  unsigned char *data = libjpeg_encode(rgb, h, w, 3, JCS_RGB, JCS_RGB, 1, 3, &size);
  slip_jpeg_info_t info;
  case_begin("tiles of a JPEG stored as RGB");
  if (expect_status(slip_jpeg_info(data, size, &info), SLIP_OK, "info"))
    expect(info.colorspace == SLIP_COLORSPACE_RGB, "stored colour space %d, not RGB", info.colorspace);
  case_end();
  test_tiles(data, size, "stored RGB");
  free(data);
  free(rgb);
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
  if (argc > 1) rng_state = strtoull(argv[1], NULL, 0) | 1;
  verbose = getenv("SLIP_TEST_VERBOSE") != NULL;
  double t0 = now_seconds();
  setvbuf(stdout, NULL, _IOLBF, 0);

  test_status_strings();

  /* Sizes are width x height. */
  static const int32_t sizes[][2] = {{1, 1}, {1, 7}, {7, 1}, {17, 13}, {64, 48}, {333, 251}, {500, 375}};
  static const int32_t subsamplings[] = {SLIP_SUBSAMPLING_444, SLIP_SUBSAMPLING_422, SLIP_SUBSAMPLING_420,
                                         SLIP_SUBSAMPLING_440, SLIP_SUBSAMPLING_GRAY};
  enum { N_SIZES = 7, N_SUBS = 5, N_CASES = N_SIZES * N_SUBS * 2 };
  static jpeg_case cases[N_CASES];
  int n = 0;
  for (int s = 0; s < N_SIZES; s++)
    for (int k = 0; k < N_SUBS; k++)
      for (int prog = 0; prog <= 1; prog++) {
        /* Some baseline files get optimized Huffman tables, for variety. */
        int32_t flags = prog ? SLIP_ENCODE_PROGRESSIVE : (s + k) % 2 ? SLIP_ENCODE_OPTIMIZE : 0;
        jpeg_case *jc = &cases[n++];
        encode_call e;
        make_jpeg(jc, sizes[s][1], sizes[s][0], subsamplings[k], flags, &e);
        test_encode_info(jc, &e);
        if (!jc->data) continue;
        for (int32_t d = 1; d <= 8; d *= 2) test_full_decode(jc, d);
        for (int32_t d = 1; d <= 8; d *= 2) test_regions(jc, d);
        test_regions_fast(jc);
        test_crop_resize(jc, SLIP_INTERP_AREA);
        test_crop_resize(jc, SLIP_INTERP_BILINEAR);
        test_crop_resize(jc, SLIP_INTERP_BICUBIC);
        test_planes(jc);
        test_tiles(jc->data, jc->size, jc->name);
      }
  test_scale_for();
  test_four_components(JCS_CMYK, "CMYK");
  test_four_components(JCS_YCCK, "YCCK");
  test_tiles_of_stored_rgb();

  for (int32_t c = 1; c <= 4; c++)
    if (c != 2) {
      test_resize(c, SLIP_INTERP_AREA);
      test_resize(c, SLIP_INTERP_BILINEAR);
      test_resize(c, SLIP_INTERP_BICUBIC);
    }

  for (int32_t dtype = SLIP_DTYPE_UINT8; dtype <= SLIP_DTYPE_FLOAT32; dtype++)
    for (int hwc = 0; hwc <= 1; hwc++)
      for (int normalize = 0; normalize <= (dtype != SLIP_DTYPE_UINT8); normalize++) test_pack(dtype, hwc, normalize);
  test_pack_rejects();
  test_tones();
  test_warps();
  test_policy_steps();
  test_mixing();

  /* Hostile input, made from corpus files whose own cases passed. */
  jpeg_case *small_420 = corpus_case(cases, n, 17, 13, SLIP_SUBSAMPLING_420, 0),
            *small_444p = corpus_case(cases, n, 17, 13, SLIP_SUBSAMPLING_444, 1),
            *small_gray = corpus_case(cases, n, 17, 13, SLIP_SUBSAMPLING_GRAY, 0),
            *mid_420 = corpus_case(cases, n, 64, 48, SLIP_SUBSAMPLING_420, 0),
            *mid_422p = corpus_case(cases, n, 64, 48, SLIP_SUBSAMPLING_422, 1),
            *mid_grayp = corpus_case(cases, n, 64, 48, SLIP_SUBSAMPLING_GRAY, 1);
  jpeg_case *truncated[] = {small_420, small_444p, small_gray};
  for (int k = 0; k < 3; k++)
    if (truncated[k]) test_prefixes(truncated[k]);
  test_garbage();
  jpeg_case *mutated[] = {mid_420, mid_422p, mid_grayp, small_444p};
  for (int k = 0; k < 4; k++) {
    jpeg_case *jc = mutated[k];
    size_t hdr = jc ? header_end(jc->data, jc->size) : 0;
    if (hdr == 0) continue;
    test_mutations(jc, hdr, jc->size - 2, 700, "entropy-coded data");
    test_mutations(jc, 2, hdr, 200, "header");
  }
  jpeg_case *forged[] = {small_420, small_444p, small_gray, mid_422p};
  for (int k = 0; k < 4; k++)
    if (forged[k]) test_huge_header(forged[k]);
  if (mid_420) {
    test_invalid_arguments(mid_420);
    test_huge_strides(mid_420);
  }

  test_encode_reuse();
  test_encode_buffers();
  test_encode_bound();
  test_pread();
  test_crc32();
  if (mid_422p) test_limits(mid_422p);
  test_guard();
  test_address_range();

  jpeg_case *threaded[] = {mid_420,
                           corpus_case(cases, n, 333, 251, SLIP_SUBSAMPLING_422, 1),
                           corpus_case(cases, n, 333, 251, SLIP_SUBSAMPLING_444, 0),
                           corpus_case(cases, n, 333, 251, SLIP_SUBSAMPLING_GRAY, 1),
                           corpus_case(cases, n, 17, 13, SLIP_SUBSAMPLING_440, 0),
                           corpus_case(cases, n, 500, 375, SLIP_SUBSAMPLING_420, 0)};
  int usable = 1;
  for (int k = 0; k < 6; k++) usable &= threaded[k] != NULL;
  if (usable) test_threads(threaded, 6);

  for (int k = 0; k < n; k++) free_jpeg(&cases[k]);
  fprintf(stderr, "test_native: %.1f s\n", now_seconds() - t0);
  printf("%d passed, %d failed\n", n_passed, n_failed);
  return n_failed == 0 ? 0 : 1;
}
