/*
 * jpeg_encode.c - JPEG compression into a caller-owned buffer, for the
 * dataset writer.
 *
 * Each call uses a fresh libjpeg compressor: a reused one keeps the Huffman
 * tables of the previous image after an optimized or progressive encode, and
 * compression is not on the loader's hot path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Destination writing into the caller's buffer; what does not fit goes to a
 * small spill area that is overwritten again and again, only to be counted,
 * so that the caller learns the size the JPEG needs. */
typedef struct buffer_dest {
  struct jpeg_destination_mgr pub;
  uint8_t *buffer;
  size_t capacity;
  size_t spilled;  /* bytes written to the spill area before its current fill */
  int in_spill;
  uint8_t spill[512];
} buffer_dest;

static void dest_init(j_compress_ptr cinfo) {
  buffer_dest *dest = (buffer_dest *)cinfo->dest;
  /* libjpeg stores a byte before it checks for room, so an empty buffer
   * must start in the spill area. */
  dest->in_spill = dest->capacity == 0;
  dest->pub.next_output_byte = dest->in_spill ? dest->spill : dest->buffer;
  dest->pub.free_in_buffer = dest->in_spill ? sizeof dest->spill : dest->capacity;
}

static boolean dest_full(j_compress_ptr cinfo) {
  buffer_dest *dest = (buffer_dest *)cinfo->dest;
  if (dest->in_spill) dest->spilled += sizeof dest->spill;
  dest->in_spill = 1;
  dest->pub.next_output_byte = dest->spill;
  dest->pub.free_in_buffer = sizeof dest->spill;
  return TRUE;
}

static void dest_term(j_compress_ptr cinfo) { (void)cinfo; }

/* Total bytes of JPEG produced, including those that did not fit. */
static size_t dest_total(const buffer_dest *dest) {
  if (!dest->in_spill) return dest->capacity - dest->pub.free_in_buffer;
  return dest->capacity + dest->spilled + (sizeof dest->spill - dest->pub.free_in_buffer);
}

/* What slip_jpeg_encode was asked, validated. */
typedef struct encode_job {
  const uint8_t *src;
  int32_t height, width, channels;
  int64_t src_stride;
  int32_t quality, h_samp, v_samp, flags;
} encode_job;

typedef struct encoder {
  struct jpeg_compress_struct cinfo;
  slip_jpeg_error err;
  buffer_dest dest;
} encoder;

static int32_t compress(encoder *e, const encode_job *job) {
  struct jpeg_compress_struct *cinfo = &e->cinfo;
  cinfo->err = slip__jpeg_error_init(&e->err);
  if (setjmp(e->err.jump)) {
    jpeg_destroy_compress(cinfo);
    return e->err.status;
  }
  jpeg_create_compress(cinfo);
  e->dest.pub.init_destination = dest_init;
  e->dest.pub.empty_output_buffer = dest_full;
  e->dest.pub.term_destination = dest_term;
  cinfo->dest = &e->dest.pub;
  cinfo->image_width = (JDIMENSION)job->width;
  cinfo->image_height = (JDIMENSION)job->height;
  cinfo->input_components = job->channels;
  cinfo->in_color_space = job->channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(cinfo);
  jpeg_set_quality(cinfo, job->quality, TRUE);
  cinfo->comp_info[0].h_samp_factor = job->h_samp;
  cinfo->comp_info[0].v_samp_factor = job->v_samp;
  cinfo->dct_method = JDCT_ISLOW;
  cinfo->optimize_coding = (job->flags & SLIP_ENCODE_OPTIMIZE) ? TRUE : FALSE;
  if (job->flags & SLIP_ENCODE_PROGRESSIVE) jpeg_simple_progression(cinfo);
  if (job->flags & SLIP_ENCODE_ARITHMETIC) cinfo->arith_code = TRUE;
  jpeg_start_compress(cinfo, TRUE);
  while (cinfo->next_scanline < cinfo->image_height) {
    /* libjpeg takes non-const rows but only reads them. */
    JSAMPROW row = (JSAMPROW)(uintptr_t)(job->src + (int64_t)cinfo->next_scanline * job->src_stride);
    jpeg_write_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_compress(cinfo);
  jpeg_destroy_compress(cinfo);
  return SLIP_OK;
}

SLIP_API size_t slip_jpeg_encode_bound(int32_t height, int32_t width, int32_t channels) {
  /* Worst case of baseline and progressive Huffman coding: at most 2 bytes per
   * sample after padding to whole 16 x 16 MCUs (the same bound TurboJPEG
   * documents, 6 bytes per pixel for 4:4:4), plus room for the headers.
   * Arithmetic-coded output of real images is far smaller; should one ever
   * exceed the bound, the encode fails with SLIP_EBUFFER and never overruns. */
  size_t h = (size_t)(height > 0 ? height : 0), w = (size_t)(width > 0 ? width : 0);
  size_t padded = ((h + 15) / 16 * 16) * ((w + 15) / 16 * 16);
  return padded * (channels == 1 ? 2u : 6u) + 4096u;
}

SLIP_API int32_t slip_jpeg_encode(const uint8_t *src, int32_t height, int32_t width, int32_t channels,
                                  int64_t src_stride, int32_t quality, int32_t subsampling, int32_t flags,
                                  uint8_t *out, size_t out_capacity, size_t *out_size) {
  if (!src || !out_size || (!out && out_capacity))
    return slip__fail(SLIP_EINVAL, "src, out_size and a non-empty out must not be NULL");
  if (height <= 0 || width <= 0 || height > SLIP_MAX_DIMENSION || width > SLIP_MAX_DIMENSION)
    return slip__fail(SLIP_EINVAL, "image size %d x %d is outside 1 .. %d", height, width, SLIP_MAX_DIMENSION);
  if (channels != 1 && channels != 3) return slip__fail(SLIP_EINVAL, "channels is %d; it must be 1 or 3", channels);
  if (src_stride < (int64_t)width * channels)
    return slip__fail(SLIP_EINVAL, "src_stride %lld is smaller than a row", (long long)src_stride);
  if (quality < 1 || quality > 100) return slip__fail(SLIP_EINVAL, "quality %d is outside 1 .. 100", quality);
  if (flags & ~(SLIP_ENCODE_PROGRESSIVE | SLIP_ENCODE_OPTIMIZE | SLIP_ENCODE_ARITHMETIC))
    return slip__fail(SLIP_EINVAL, "unknown encode flags 0x%x", (unsigned)flags);
  encode_job job = {src, height, width, channels, src_stride, quality, 1, 1, flags};
  switch (subsampling) {
  case SLIP_SUBSAMPLING_444: break;
  case SLIP_SUBSAMPLING_422: job.h_samp = 2; break;
  case SLIP_SUBSAMPLING_420: job.h_samp = 2, job.v_samp = 2; break;
  case SLIP_SUBSAMPLING_440: job.v_samp = 2; break;
  case SLIP_SUBSAMPLING_GRAY:
    if (channels == 1) break;
    /* fall through */
  default: return slip__fail(SLIP_EINVAL, "subsampling %d is not supported for %d channels", subsampling, channels);
  }
  if (channels == 1) job.h_samp = job.v_samp = 1; /* one component needs no subsampling */

  encoder e;
  memset(&e, 0, sizeof e);
  e.dest.buffer = out;
  e.dest.capacity = out_capacity;
  int32_t status = compress(&e, &job);
  if (status != SLIP_OK) return status;
  *out_size = dest_total(&e.dest);
  if (*out_size > out_capacity)
    return slip__fail(SLIP_EBUFFER, "the JPEG needs %zu bytes; the output buffer has %zu", *out_size, out_capacity);
  return SLIP_OK;
}

/* ------------------------------------------------------ restart markers */

/* The largest divisor of columns that is at most max_mcus (at least 1). */
static int32_t interval_for(int32_t columns, int32_t max_mcus) {
  for (int32_t r = max_mcus < columns ? max_mcus : columns; r > 1; r--)
    if (columns % r == 0) return r;
  return 1;
}

typedef struct transcoder {
  struct jpeg_decompress_struct din;
  struct jpeg_compress_struct cout;
  slip_jpeg_error err; /* shared by both objects: one longjmp target */
  buffer_dest dest;
  slip__huffman_counts counts;
  const uint8_t *spliced; /* the tiles, when jpeg_splice.c wrote them, */
  size_t spliced_size;    /* and their size */
} transcoder;

/* Fail (SLIP_EUNSUPPORTED) when a progressive JPEG's scans, all read, left
 * some coefficient unsent or unrefined.  libjpeg-turbo decodes such an image
 * with inter-block smoothing, which it never applies to the complete
 * baseline scan the re-coding writes, so the tiles would decode to other
 * pixels.  Every incomplete coefficient is refused, not only those the
 * smoothing reads, because how many it reads depends on the library's
 * version. */
static void refuse_incomplete_scans(struct jpeg_decompress_struct *din) {
  if (!din->progressive_mode || !din->coef_bits) return;
  for (int c = 0; c < din->num_components; c++)
    for (int k = 0; k < DCTSIZE2; k++) {
      int bits = din->coef_bits[c][k];
      if (bits == 0) continue;
      char gap[48], what[320];
      if (bits < 0)
        snprintf(gap, sizeof gap, "never sent");
      else
        snprintf(gap, sizeof gap, "lacking its %d lowest bits", bits);
      snprintf(what, sizeof what,
               "a progressive JPEG whose scans leave coefficients incomplete (component %d, coefficient %d %s): "
               "libjpeg-turbo decodes it with block smoothing, which re-coded baseline tiles would not get, so "
               "re-coding would change its pixels",
               c, k, gap);
      slip__jpeg_fail((j_common_ptr)din, SLIP_EUNSUPPORTED, what);
    }
}

/* Re-code data into tiles: spliced (jpeg_splice.c) when its scan allows,
 * else through libjpeg (the coefficients read whole, optimal tables
 * counted, written again), which also reports what is wrong with it. */
static int32_t transcode(transcoder *t, slip_thread_state *ts, const uint8_t *data, size_t size,
                         int32_t interval_width) {
  t->din.err = t->cout.err = slip__jpeg_error_init(&t->err);
  volatile int created = 0; /* 1: din exists, 2: cout too */
  if (setjmp(t->err.jump)) {
    if (created >= 2) jpeg_destroy_compress(&t->cout);
    if (created >= 1) jpeg_destroy_decompress(&t->din);
    return t->err.status;
  }
  jpeg_create_decompress(&t->din);
  created = 1;
  slip__jpeg_read_header(&t->din, &t->err, data, size, 1);
  int32_t mcu_h, mcu_w; /* of the output: one interleaved scan, as din's sampling */
  slip__mcu_size(&t->din, &mcu_h, &mcu_w);
  int32_t columns = (int32_t)(((int64_t)t->din.image_width + mcu_w - 1) / mcu_w);
  int32_t max_mcus = interval_width / mcu_w;
  int32_t interval = interval_for(columns, max_mcus > 1 ? max_mcus : 1);
  int32_t spliced = slip__jpeg_splice_restarts(ts, &t->din, interval, t->dest.buffer, t->dest.capacity,
                                               &t->spliced, &t->spliced_size);
  if (spliced != 0) {
    jpeg_destroy_decompress(&t->din);
    return spliced < 0 ? spliced : SLIP_OK;
  }
  jvirt_barray_ptr *coefficients = jpeg_read_coefficients(&t->din);
  refuse_incomplete_scans(&t->din);

  jpeg_create_compress(&t->cout);
  created = 2;
  t->dest.pub.init_destination = dest_init;
  t->dest.pub.empty_output_buffer = dest_full;
  t->dest.pub.term_destination = dest_term;
  t->cout.dest = &t->dest.pub;
  /* Same components, sampling and quantization; libjpeg's defaults make the
   * output a single interleaved baseline scan with JFIF or Adobe markers. */
  jpeg_copy_critical_parameters(&t->din, &t->cout);
  t->cout.restart_interval = (unsigned int)interval;
  slip__optimal_huffman_tables(&t->din, coefficients, &t->cout, &t->counts);
  jpeg_write_coefficients(&t->cout, coefficients);
  jpeg_finish_compress(&t->cout);
  jpeg_destroy_compress(&t->cout);
  jpeg_destroy_decompress(&t->din);
  return SLIP_OK;
}

SLIP_API int32_t slip_jpeg_add_restart_markers(const uint8_t *data, size_t size, int32_t interval_width,
                                               uint8_t *out, size_t out_capacity, size_t *out_size) {
  if (!data || !out_size || (!out && out_capacity))
    return slip__fail(SLIP_EINVAL, "data, out_size and a non-empty out must not be NULL");
  if (interval_width < 1) return slip__fail(SLIP_EINVAL, "interval_width %d is not positive", interval_width);
  if (size < 2 || data[0] != 0xFF || data[1] != 0xD8)
    return slip__fail(SLIP_ENOTJPEG, "data does not start with a JPEG SOI marker (0xFF 0xD8)");
  slip_thread_state *ts = slip__thread_state();
  if (!ts) return SLIP_ENOMEM;
  transcoder *t = calloc(1, sizeof *t);
  if (!t) return slip__fail(SLIP_ENOMEM, "cannot allocate a transcoder");
  t->dest.buffer = out;
  t->dest.capacity = out_capacity;
  int32_t status = transcode(t, ts, data, size, interval_width);
  if (status == SLIP_OK) {
    *out_size = t->spliced ? t->spliced_size : dest_total(&t->dest);
    if (t->spliced && t->spliced != out && out_capacity) /* written to the thread's scratch */
      memcpy(out, t->spliced, *out_size < out_capacity ? *out_size : out_capacity);
    if (*out_size > out_capacity)
      status = slip__fail(SLIP_EBUFFER, "the JPEG needs %zu bytes; the output buffer has %zu", *out_size,
                          out_capacity);
  }
  free(t);
  return status;
}
