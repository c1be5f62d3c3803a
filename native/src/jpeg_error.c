/*
 * jpeg_error.c - libjpeg error handling without exit() and without stderr,
 * and the decoding limits.
 *
 * libjpeg's default error_exit() prints and calls exit(); its warnings go to
 * stderr and decoding goes on, filling the rest of the image with grey.  Here
 * every error, and every warning that means the pixels are wrong, becomes a
 * longjmp back into the slipstream function that called libjpeg, carrying a
 * slip_status and libjpeg's message.  A progress monitor stops images with
 * more scans than SLIP_LIMIT_SCANS allows, or whose scans together pass over
 * the image's blocks more often than SLIP_LIMIT_PASSES allows.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <jerror.h>

#include "internal.h"

/* Status for a libjpeg error code. */
static int32_t status_for_error(int code) {
  switch (code) {
  case JERR_NO_SOI: return SLIP_ENOTJPEG;
  case JERR_INPUT_EOF:
  case JERR_INPUT_EMPTY: return SLIP_ETRUNCATED;
  case JERR_BAD_PRECISION:
  case JERR_NOT_COMPILED:
  case JERR_ARITH_NOTIMPL:
  case JERR_SOF_UNSUPPORTED:
  case JERR_CONVERSION_NOTIMPL:
  case JERR_EMPTY_IMAGE: return SLIP_EUNSUPPORTED; /* a height of 0 in the SOF: the height is in a DNL marker */
  case JERR_IMAGE_TOO_BIG:
  case JERR_WIDTH_OVERFLOW:
  case JERR_NO_BACKING_STORE: return SLIP_ETOOBIG;
  case JERR_OUT_OF_MEMORY: return SLIP_ENOMEM;
  default: return SLIP_ECORRUPT;
  }
}

/* Warnings that leave the decoded pixels intact. Any other warning means
 * libjpeg is about to invent data, or has decoded data that did not add up,
 * and is reported as an error. */
static int warning_is_harmless(const slip_jpeg_error *err, int code) {
  switch (code) {
  /* Junk between the markers of the header is common in camera files; after
   * the header it sits between a scan's entropy data and the next marker,
   * where a valid file has none: the entropy data ended early, which is what
   * a flipped bit inside it most often looks like. */
  case JWRN_EXTRANEOUS_DATA: return !err->in_data;
  case JWRN_ADOBE_XFORM:
  case JWRN_JFIF_MAJOR:
  case JWRN_BOGUS_ICC: return 1;
  default: return 0;
  }
}

void slip__jpeg_fail(j_common_ptr cinfo, int32_t status, const char *what) {
  slip_jpeg_error *err = (slip_jpeg_error *)cinfo->err;
  err->status = status;
  slip__fail(status, "%s", what);
  longjmp(err->jump, 1);
}

static void fail_with_message(j_common_ptr cinfo, int32_t status) {
  char message[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, message);
  slip__jpeg_fail(cinfo, status, message);
}

static void on_error_exit(j_common_ptr cinfo) {
  fail_with_message(cinfo, status_for_error(cinfo->err->msg_code));
}

static void on_emit_message(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0) return; /* trace messages */
  int code = cinfo->err->msg_code;
  if (warning_is_harmless((slip_jpeg_error *)cinfo->err, code)) return;
  fail_with_message(cinfo, code == JWRN_JPEG_EOF ? SLIP_ETRUNCATED : SLIP_ECORRUPT);
}

static void on_output_message(j_common_ptr cinfo) { (void)cinfo; }

/* Blocks of the image's components (all, or those of the current scan). */
static int64_t component_blocks(jpeg_component_info *const *info, int count) {
  int64_t blocks = 0;
  for (int c = 0; c < count; c++) blocks += (int64_t)info[c]->width_in_blocks * info[c]->height_in_blocks;
  return blocks;
}

/* Count the blocks of a scan that has just begun into the image's passes,
 * and fail once they exceed SLIP_LIMIT_PASSES passes over all its blocks. */
static void count_scan_blocks(j_decompress_ptr dec, slip_jpeg_error *err) {
  if (dec->input_scan_number == err->last_scan || dec->comps_in_scan < 1) return;
  err->last_scan = dec->input_scan_number;
  err->scan_blocks += component_blocks(dec->cur_comp_info, dec->comps_in_scan);
  jpeg_component_info *all[MAX_COMPONENTS];
  for (int c = 0; c < dec->num_components && c < MAX_COMPONENTS; c++) all[c] = &dec->comp_info[c];
  int64_t image = component_blocks(all, dec->num_components < MAX_COMPONENTS ? dec->num_components : MAX_COMPONENTS);
  int64_t limit = slip_get_limit(SLIP_LIMIT_PASSES);
  if (image > 0 && err->scan_blocks > limit * image) {
    char what[200];
    snprintf(what, sizeof what,
             "the JPEG's scans pass over its %lld blocks more than %lld times, the limit SLIP_LIMIT_PASSES (scan %d "
             "brings them to %.1f): a scan bomb, or a file that needs a higher limit",
             (long long)image, (long long)limit, dec->input_scan_number, (double)err->scan_blocks / (double)image);
    slip__jpeg_fail((j_common_ptr)dec, SLIP_ETOOBIG, what);
  }
}

/* libjpeg calls this between the rows and the scans it reads; the scan
 * counter grows as each scan's header is read, so an image fails as soon as
 * its first scan beyond a limit begins, having cost at most the limit's
 * worth of scans or passes. */
static void on_progress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  j_decompress_ptr dec = (j_decompress_ptr)cinfo;
  int scans = dec->input_scan_number;
  int64_t limit = slip_get_limit(SLIP_LIMIT_SCANS);
  if (scans > limit) {
    char what[160];
    snprintf(what, sizeof what,
             "the JPEG has more than %lld scans, the limit SLIP_LIMIT_SCANS: a scan bomb, or a file that needs a "
             "higher limit",
             (long long)limit);
    slip__jpeg_fail(cinfo, SLIP_ETOOBIG, what);
  }
  count_scan_blocks(dec, (slip_jpeg_error *)cinfo->err);
}

struct jpeg_error_mgr *slip__jpeg_error_init(slip_jpeg_error *err) {
  struct jpeg_error_mgr *pub = jpeg_std_error(&err->pub);
  pub->error_exit = on_error_exit;
  pub->emit_message = on_emit_message;
  pub->output_message = on_output_message;
  err->progress.progress_monitor = on_progress;
  err->status = SLIP_OK;
  err->in_data = 0;
  err->last_scan = 0;
  err->scan_blocks = 0;
  return pub;
}

/* ------------------------------------------------- tables of a reused decompressor */

/* libjpeg keeps the Huffman and quantization tables of one image for the
 * next (abbreviated datastreams rely on it), so on a reused decompressor an
 * image that lacks a table would decode with the one an earlier image left:
 * the same bytes would give other pixels, or fail, depending on what the
 * thread decoded before.  Before each header, every table slot an earlier
 * image filled goes back to what a fresh decompressor has there: the
 * standard Huffman tables of T.81 K.3 in slots 0 and 1 (libjpeg-turbo
 * supplies them to a fresh decompressor for streams without their own, as
 * Motion-JPEG frames are), nothing elsewhere. */
static JHUFF_TBL standard_dc[2], standard_ac[2];
static int have_standard;
static pthread_once_t standard_once = PTHREAD_ONCE_INIT;

/* The standard tables, from libjpeg's own defaults for compression. */
static void read_standard_tables(void) {
  struct jpeg_compress_struct c;
  slip_jpeg_error err;
  c.err = slip__jpeg_error_init(&err);
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&c);
    return;
  }
  jpeg_create_compress(&c);
  c.in_color_space = JCS_RGB;
  c.input_components = 3;
  jpeg_set_defaults(&c);
  for (int i = 0; i < 2; i++) {
    standard_dc[i] = *c.dc_huff_tbl_ptrs[i];
    standard_ac[i] = *c.ac_huff_tbl_ptrs[i];
  }
  have_standard = 1;
  jpeg_destroy_compress(&c);
}

/* An undefined table: no codes, so any use of it fails as corrupt data. */
static void reset_huffman(JHUFF_TBL *table, const JHUFF_TBL *standard) {
  if (!table) return;
  if (standard) {
    memcpy(table->bits, standard->bits, sizeof table->bits);
    memcpy(table->huffval, standard->huffval, sizeof table->huffval);
  } else {
    memset(table->bits, 0, sizeof table->bits);
  }
}

static void forget_tables(j_decompress_ptr dec) {
  pthread_once(&standard_once, read_standard_tables);
  for (int i = 0; i < NUM_HUFF_TBLS; i++) {
    reset_huffman(dec->dc_huff_tbl_ptrs[i], i < 2 && have_standard ? &standard_dc[i] : NULL);
    reset_huffman(dec->ac_huff_tbl_ptrs[i], i < 2 && have_standard ? &standard_ac[i] : NULL);
  }
  /* A quantization value is never 0 (T.81 B.2.4.1): 0 marks a table this image has not defined. */
  for (int i = 0; i < NUM_QUANT_TBLS; i++)
    if (dec->quant_tbl_ptrs[i]) memset(dec->quant_tbl_ptrs[i]->quantval, 0, sizeof dec->quant_tbl_ptrs[i]->quantval);
}

/* Fail unless every component of the first scan has a quantization table of its own image. */
static void check_quantization_tables(j_decompress_ptr dec) {
  for (int i = 0; i < dec->comps_in_scan; i++) {
    int n = dec->cur_comp_info[i]->quant_tbl_no;
    const JQUANT_TBL *table = n >= 0 && n < NUM_QUANT_TBLS ? dec->quant_tbl_ptrs[n] : NULL;
    if (table && table->quantval[0] == 0) {
      char what[120];
      snprintf(what, sizeof what, "component %d uses quantization table %d, which the JPEG does not define "
               "(or defines with a quantizer of 0)", dec->cur_comp_info[i]->component_id, n);
      slip__jpeg_fail((j_common_ptr)dec, SLIP_ECORRUPT, what);
    }
  }
}

/* Fail with SLIP_EUNSUPPORTED unless slipstream decodes images like the one
 * whose header dec has read: gray, RGB, YCbCr, CMYK or YCCK, every component
 * sampled a whole fraction of the largest sampling (libjpeg refuses other
 * ratios when it upsamples). */
static void require_decodable(j_decompress_ptr dec) {
  switch (dec->jpeg_color_space) {
  case JCS_GRAYSCALE:
  case JCS_RGB:
  case JCS_YCbCr:
  case JCS_CMYK:
  case JCS_YCCK: break;
  default:
    slip__jpeg_fail((j_common_ptr)dec, SLIP_EUNSUPPORTED,
                    "JPEG colour space is neither gray, RGB, YCbCr, CMYK nor YCCK");
  }
  if (dec->num_components == 1) return; /* a lone component is never upsampled */
  for (int i = 0; i < dec->num_components; i++) {
    const jpeg_component_info *c = &dec->comp_info[i];
    if (dec->max_h_samp_factor % c->h_samp_factor || dec->max_v_samp_factor % c->v_samp_factor) {
      char what[160];
      snprintf(what, sizeof what, "component %d is sampled %dx%d against the largest %dx%d: libjpeg upsamples "
               "whole multiples only", c->component_id, c->h_samp_factor, c->v_samp_factor,
               dec->max_h_samp_factor, dec->max_v_samp_factor);
      slip__jpeg_fail((j_common_ptr)dec, SLIP_EUNSUPPORTED, what);
    }
  }
}

void slip__jpeg_read_header(j_decompress_ptr dec, slip_jpeg_error *err, const uint8_t *data, size_t size,
                            int check_pixels) {
  forget_tables(dec);
  /* Caps the whole-image coefficient buffers of progressive and multi-scan
   * images; a forged header cannot make libjpeg allocate gigabytes. */
  dec->mem->max_memory_to_use = SLIP_MAX_DECODE_MEMORY;
  dec->progress = &err->progress;
  err->in_data = 0;
  err->last_scan = 0; /* a decompressor is reused: each image counts its own scans */
  err->scan_blocks = 0;
  /* jpeg_mem_src takes a non-const pointer but only reads. */
  jpeg_mem_src(dec, (unsigned char *)(uintptr_t)data, (unsigned long)size);
  jpeg_read_header(dec, TRUE);
  check_quantization_tables(dec);
  /* Before the pixel limit, so that every entry point (slip_jpeg_info, which
   * counts no pixels, included) names the same first fault of an image. */
  require_decodable(dec);
  err->in_data = 1;
  int64_t pixels = (int64_t)dec->image_height * dec->image_width, limit = slip_get_limit(SLIP_LIMIT_PIXELS);
  if (check_pixels && pixels > limit) {
    char what[160];
    snprintf(what, sizeof what, "the %u x %u JPEG has %lld pixels, more than the limit SLIP_LIMIT_PIXELS (%lld)",
             dec->image_height, dec->image_width, (long long)pixels, (long long)limit);
    slip__jpeg_fail((j_common_ptr)dec, SLIP_ETOOBIG, what);
  }
}

/* ---------------------------------------------------------------- limits */

static _Atomic int64_t limits[4] = {SLIP_DEFAULT_MAX_SCANS, SLIP_DEFAULT_MAX_PIXELS, SLIP_DEFAULT_MAX_PASSES,
                                    SLIP_DEFAULT_MAX_VIDEO_DECODES};

static int known_limit(int32_t limit) {
  return limit == SLIP_LIMIT_SCANS || limit == SLIP_LIMIT_PIXELS || limit == SLIP_LIMIT_PASSES ||
         limit == SLIP_LIMIT_VIDEO_DECODES;
}

SLIP_API int32_t slip_set_limit(int32_t limit, int64_t value) {
  if (!known_limit(limit))
    return slip__fail(SLIP_EINVAL, "unknown limit %d", limit);
  if (value < 1) return slip__fail(SLIP_EINVAL, "limit %d must be at least 1, got %lld", limit, (long long)value);
  atomic_store_explicit(&limits[limit], value, memory_order_relaxed);
  return SLIP_OK;
}

SLIP_API int64_t slip_get_limit(int32_t limit) {
  if (!known_limit(limit))
    return slip__fail(SLIP_EINVAL, "unknown limit %d", limit);
  return atomic_load_explicit(&limits[limit], memory_order_relaxed);
}
