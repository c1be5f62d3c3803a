/*
 * internal.h - declarations shared by the translation units of libslipstream.
 * Nothing here is part of the ABI.
 */
#ifndef SLIPSTREAM_INTERNAL_H
#define SLIPSTREAM_INTERNAL_H

#include <setjmp.h>
#include <stdio.h> /* jpeglib.h needs FILE */

#include <jpeglib.h>

#include "slipstream.h"

/* A growable buffer owned by one thread. */
typedef struct slip_scratch {
  void *data;
  size_t capacity;
} slip_scratch;

/* libjpeg error manager that turns errors (and data-corrupting warnings) into
 * a longjmp back to the calling slipstream function, carrying a status.  Its
 * progress monitor enforces the scan limit while a decompressor reads. */
typedef struct slip_jpeg_error {
  struct jpeg_error_mgr pub;
  struct jpeg_progress_mgr progress;
  jmp_buf jump;
  int32_t status;
  int in_data; /* the header has been read: stray bytes between markers now mean corrupt entropy data */
  int last_scan;       /* the scan whose blocks are counted in scan_blocks already */
  int64_t scan_blocks; /* blocks of the components of every scan begun so far */
} slip_jpeg_error;

/* slip_pack's lookup tables for the last normalization a thread used:
 * pipelines call it with the same mean and std for every sample. */
typedef struct slip_pack_tables {
  int valid;
  int32_t dtype, channels;
  double mean[4], std[4];
  /* The vector path of float16 RGB output computes ((float)v - fmean[c]) *
   * finv[c] and converts that to binary16; it runs only when `vector` says
   * that this gives every table entry exactly (checked when the tables are
   * built) and the CPU has the instructions. */
  int vector;
  float fmean[4], finv[4];
  union {
    float f32[4][256];
    uint16_t f16[4][256];
  } table;
} slip_pack_tables;

/* Instruction-set extensions that vector kernels may use (bits of
 * slip_thread_state.isa). */
enum { SLIP__ISA_AVX2 = 1, SLIP__ISA_F16C = 2 };

/* Everything a thread reuses from call to call. */
typedef struct slip_thread_state {
  int32_t isa; /* SLIP__ISA_* bits this thread's kernels use: the CPU's, none with SLIPSTREAM_PORTABLE_KERNELS */
  struct jpeg_decompress_struct dec;
  slip_jpeg_error dec_err;
  int dec_ready;
  slip_scratch block;   /* decoded block of the fused kernel */
  slip_scratch rows;    /* scanlines as libjpeg returns them */
  slip_scratch weights; /* resampling taps */
  slip_scratch accum;   /* one row of vertically filtered samples */
  slip_scratch sub;     /* a JPEG of the restart intervals a region needs */
  slip_scratch planes;  /* the resized Y, Cb and Cr planes of slip_planes_crop_resize */
  slip_scratch chroma;  /* slip_planes_crop_resize's full-size chroma of images at most 4 pixels wide */
  slip_scratch splice_blocks; /* slip__scanned_block records of a JPEG re-coded into tiles */
  slip_scratch splice_out;    /* the re-coded JPEG, when the caller's buffer may be too small */
  slip_pack_tables pack;
} slip_thread_state;

/* The calling thread's state, created on first use; NULL when out of memory
 * (the last error is then set). */
slip_thread_state *slip__thread_state(void);

/* Ensure s holds at least n bytes; returns s->data or NULL (last error set). */
void *slip__scratch_reserve(slip_scratch *s, size_t n);

/* Pixel size of one MCU of the first scan of a single-scan JPEG whose
 * header dec has read: a lone component is coded block by block, several
 * interleaved ones by their largest sampling factors. */
void slip__mcu_size(const struct jpeg_decompress_struct *dec, int32_t *mcu_h, int32_t *mcu_w);

/* Symbol counts of each Huffman table slot (256 symbols and Annex K's
 * reserved one), scratch for slip__optimal_huffman_tables. */
typedef struct slip__huffman_counts {
  long dc[NUM_HUFF_TBLS][257];
  long ac[NUM_HUFF_TBLS][257];
} slip__huffman_counts;

/* Give cout, about to write the coefficients din read (one interleaved
 * baseline scan, restart interval already set), the optimal Huffman tables
 * for exactly the symbols that scan codes, and turn libjpeg's own slower
 * optimization pass off.  counts is scratch.  A coefficient out of the range
 * baseline JPEG codes fails with SLIP_ECORRUPT through din's error manager,
 * as libjpeg's optimization pass would. */
void slip__optimal_huffman_tables(j_decompress_ptr din, jvirt_barray_ptr *coefficients, j_compress_ptr cout,
                                  slip__huffman_counts *counts);

/* Record the detail of a failure on the calling thread and return status. */
int32_t slip__fail(int32_t status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Check an interleaved 8-bit image argument of the whole-image kernels
 * (tones.c, warps.c): data not NULL, height and width 1 .. SLIP_MAX_DIMENSION,
 * channels 1 .. 4, stride at least a row, and size covering the
 * (height - 1) * stride + width * channels bytes the image spans, which
 * *extent receives.  `name` names the argument in the detail of a failure:
 * SLIP_EINVAL, or SLIP_EBUFFER when size is too small. */
int32_t slip__check_image(const char *name, const void *data, size_t size, int32_t height, int32_t width,
                          int32_t channels, int64_t stride, size_t *extent);

/* Whether the byte ranges [a, a + a_size) and [b, b + b_size) share a byte. */
int slip__overlap(const void *a, size_t a_size, const void *b, size_t b_size);

/* Attach the slipstream error manager to a libjpeg object's error field. */
struct jpeg_error_mgr *slip__jpeg_error_init(slip_jpeg_error *err);

/* Point dec, whose error manager is err, at data and read its header, under
 * SLIP_MAX_DECODE_MEMORY and the scan limit; with check_pixels, an image of
 * more pixels than SLIP_LIMIT_PIXELS fails with SLIP_ETOOBIG.  An image
 * slipstream does not decode (a colour space other than gray, RGB, YCbCr,
 * CMYK or YCCK, or a component sampled a fraction of the largest sampling
 * that is not whole) fails first, with SLIP_EUNSUPPORTED.  Errors longjmp to
 * err->jump as every libjpeg error does. */
void slip__jpeg_read_header(j_decompress_ptr dec, slip_jpeg_error *err, const uint8_t *data, size_t size,
                            int check_pixels);

/* What slip__jpeg_scan_blocks records of each block of a scan. */
typedef struct slip__scanned_block {
  int16_t dc;       /* its DC coefficient, as libjpeg stores it: the prediction's low 16 bits */
  uint16_t ac_bits; /* bits of its AC symbols (codes and values), which follow the DC's */
  uint8_t dc_bits;  /* bits of its DC difference (code and value) */
} slip__scanned_block;

/* Whether the single sequential Huffman scan of the JPEG whose header dec
 * has read (dec->src at its first entropy-coded byte) reads whole and clean
 * to EOI, by the rules that make libjpeg-turbo's 1/8-scale decode report no
 * error: 1 when it surely does, 0 when unsure (the caller then decodes).
 * Reads the data only; dec is left as it was.  See jpeg_scan.c. */
int slip__jpeg_scan_is_good(const struct jpeg_decompress_struct *dec);

/* slip__jpeg_scan_is_good, recording each block of the scan, in the order it
 * codes them (MCU by MCU, each component's blocks row by row), into
 * records[count]; count must be the scan's blocks (MCUs times blocks per
 * MCU), else the answer is 0.  The records are whole only when it answers 1. */
int slip__jpeg_scan_blocks(const struct jpeg_decompress_struct *dec, slip__scanned_block *records,
                           int64_t count);

/* Re-code the JPEG whose header dec has read from data (dec->src at its
 * first entropy-coded byte) with a restart marker every `interval` MCUs by
 * copying the bits of each block's AC coefficients as they are and coding
 * its DC difference anew (see jpeg_splice.c).  On success returns 1 and
 * sets *result to the JPEG, in out when it fits out_capacity and in
 * ts->splice_out otherwise, and *result_size to its size.  Returns 0 when
 * the scan is not one this splices (the caller re-codes through libjpeg,
 * which says what is wrong with it, if anything), or SLIP_ENOMEM. */
int32_t slip__jpeg_splice_restarts(slip_thread_state *ts, const struct jpeg_decompress_struct *dec,
                                   int32_t interval, uint8_t *out, size_t out_capacity, const uint8_t **result,
                                   size_t *result_size);

/* Position in natural (row-major) order of the k-th coefficient of a block
 * in zig-zag order. */
extern const uint8_t slip__zigzag[DCTSIZE2];

/* The widest values 8-bit baseline JPEG codes (T.81 F.1.2): the size
 * category of a DC difference, and of an AC coefficient. */
#define SLIP__MAX_DC_CATEGORY 11
#define SLIP__MAX_AC_CATEGORY 10

/* Bits needed for the magnitude of v: its JPEG size category (0 for 0). */
static inline int slip__category(int v) {
  unsigned int m = (unsigned int)(v < 0 ? -v : v);
  return m ? 32 - __builtin_clz(m) : 0;
}

/* Fill tbl with the optimal Huffman code for the symbol frequencies freq
 * (ITU-T T.81 K.2: code lengths of at most 16 bits, no all-ones code word);
 * freq[256] is scratch for the reserved symbol, and freq is modified. */
void slip__optimal_huffman_table(long freq[257], JHUFF_TBL *tbl);

/* Abort the current libjpeg operation from inside a libjpeg callback:
 * records the detail and longjmps to the active setjmp with `status`. */
void slip__jpeg_fail(j_common_ptr cinfo, int32_t status, const char *what);

/* Taps of one output pixel along one axis: `count` weights starting at
 * source index `first`. */
typedef struct slip_axis_taps {
  int32_t first;
  int32_t count;
} slip_axis_taps;

/* The most taps an output pixel of a filter has along one axis, when n
 * output pixels cover `length` source pixels. */
int32_t slip__max_taps(double length, int32_t n, int32_t interp);

/* Filter taps of n output pixels along one axis, for the source interval
 * [start, start + length) with taps limited to pixels lo .. hi - 1: into
 * taps[n] and weights[n * max_taps] (each pixel's weights normalized to
 * sum to one). */
void slip__compute_taps(double start, double length, int32_t n, int32_t lo, int32_t hi, int32_t interp,
                        int32_t max_taps, slip_axis_taps *taps, float *weights);

/* Pad the taps of n output pixels (their weights `stride` apart) to one
 * count with zero weights, mirror them when flip (pixel j takes pixel
 * n - 1 - j's taps), and return that count; *lo and *hi receive the first
 * source sample any tap reads and one past the last. */
int32_t slip__pad_taps(slip_axis_taps *taps, float *weights, int32_t stride, int32_t n, int flip, int32_t *lo,
                       int32_t *hi);

/*
 * Resample the rectangle (cy, cx, ch, cw) of src - given in pixels of src,
 * possibly fractional - into dst_h x dst_w pixels.  Filter taps are limited to
 * the whole pixels the rectangle touches.  The rectangle must lie inside
 * [0, src_h] x [0, src_w] and have positive size; callers check this.
 */
int32_t slip__resample(slip_thread_state *ts, const uint8_t *src, int32_t src_h, int32_t src_w, int32_t channels,
                       int64_t src_stride, double cy, double cx, double ch, double cw, uint8_t *dst, int32_t dst_h,
                       int32_t dst_w, int64_t dst_stride, int32_t interp, int flip_x);

/* YCbCr 4:2:0 planes that need not follow one another: luma rows y_stride
 * bytes apart, chroma rows c_stride bytes apart (a video frame's planes). */
typedef struct slip__planes_view {
  const uint8_t *y, *cb, *cr;
  int64_t y_stride, c_stride;
  int32_t height, width;
} slip__planes_view;

/* A YCbCr -> RGB conversion: R = (Y - y_offset) * y_scale + cr_r * (Cr - 128),
 * G = ... - cb_g * (Cb - 128) - cr_g * (Cr - 128), B = ... + cb_b * (Cb - 128). */
typedef struct slip__ycbcr_matrix {
  float y_offset, y_scale, cr_r, cb_g, cr_g, cb_b;
} slip__ycbcr_matrix;

/* JFIF's conversion (BT.601, full range): the one of images stored as planes. */
extern const slip__ycbcr_matrix slip__jfif;

/* SLIP_EINVAL (with the detail) unless (y, x, h, w) lies inside a height x width image, the output size is
 * 1 .. SLIP_MAX_DIMENSION a side and flags and interp are known: the crop arguments of the planes kernel. */
int32_t slip__check_planes_crop(int32_t height, int32_t width, int32_t y, int32_t x, int32_t h, int32_t w,
                                int32_t out_h, int32_t out_w, int32_t flags, int32_t interp);

/* slip_planes_crop_resize of planes p, converted with m (out must not be NULL
 * and the planes must hold p->height x p->width pixels; the rest is checked). */
int32_t slip__planes_view_crop_resize(const slip__planes_view *p, const slip__ycbcr_matrix *m, int32_t y, int32_t x,
                                      int32_t h, int32_t w, int32_t out_h, int32_t out_w, int32_t flags,
                                      int32_t interp, uint8_t *out, size_t out_size, int64_t out_stride);

#endif
