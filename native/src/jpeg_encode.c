/*
 * jpeg_encode.c - JPEG compression into a caller-owned buffer, for the
 * dataset writer.  Each thread owns one libjpeg compressor, reused.
 */
#include "internal.h"

static void dest_init(j_compress_ptr cinfo) {
  slip_jpeg_dest *dest = (slip_jpeg_dest *)cinfo->dest;
  dest->pub.next_output_byte = dest->buffer;
  dest->pub.free_in_buffer = dest->capacity;
}

static boolean dest_full(j_compress_ptr cinfo) {
  slip__jpeg_fail((j_common_ptr)cinfo, SLIP_EBUFFER, "the JPEG does not fit in the output buffer");
  return FALSE; /* not reached */
}

static void dest_term(j_compress_ptr cinfo) { (void)cinfo; }

/* What slip_jpeg_encode was asked, validated. */
typedef struct encode_job {
  const uint8_t *src;
  int32_t height, width, channels;
  int64_t src_stride;
  int32_t quality, h_samp, v_samp, flags;
  uint8_t *out;
  size_t out_capacity;
} encode_job;

static int32_t compress(slip_thread_state *ts, const encode_job *job, size_t *out_size) {
  struct jpeg_compress_struct *enc = &ts->enc;
  if (!ts->enc_ready) {
    enc->err = slip__jpeg_error_init(&ts->enc_err);
    if (setjmp(ts->enc_err.jump)) return ts->enc_err.status;
    jpeg_create_compress(enc);
    ts->enc_dest.pub.init_destination = dest_init;
    ts->enc_dest.pub.empty_output_buffer = dest_full;
    ts->enc_dest.pub.term_destination = dest_term;
    ts->enc_ready = 1;
  }
  if (setjmp(ts->enc_err.jump)) {
    jpeg_abort_compress(enc);
    return ts->enc_err.status;
  }
  ts->enc_dest.buffer = job->out;
  ts->enc_dest.capacity = job->out_capacity;
  enc->dest = &ts->enc_dest.pub;
  enc->image_width = (JDIMENSION)job->width;
  enc->image_height = (JDIMENSION)job->height;
  enc->input_components = job->channels;
  enc->in_color_space = job->channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(enc);
  jpeg_set_quality(enc, job->quality, TRUE);
  enc->comp_info[0].h_samp_factor = job->h_samp;
  enc->comp_info[0].v_samp_factor = job->v_samp;
  enc->dct_method = JDCT_ISLOW;
  enc->optimize_coding = (job->flags & SLIP_ENCODE_OPTIMIZE) ? TRUE : FALSE;
  if (job->flags & SLIP_ENCODE_PROGRESSIVE) jpeg_simple_progression(enc);
  jpeg_start_compress(enc, TRUE);
  while (enc->next_scanline < enc->image_height) {
    /* libjpeg takes non-const rows but only reads them. */
    JSAMPROW row = (JSAMPROW)(uintptr_t)(job->src + (int64_t)enc->next_scanline * job->src_stride);
    jpeg_write_scanlines(enc, &row, 1);
  }
  jpeg_finish_compress(enc);
  *out_size = job->out_capacity - ts->enc_dest.pub.free_in_buffer;
  return SLIP_OK;
}

SLIP_API size_t slip_jpeg_encode_bound(int32_t height, int32_t width, int32_t channels) {
  /* Worst case of baseline and progressive Huffman coding: at most 2 bytes per
   * sample after padding to whole 16 x 16 MCUs (the same bound TurboJPEG
   * documents, 6 bytes per pixel for 4:4:4), plus room for the headers. */
  size_t h = (size_t)(height > 0 ? height : 0), w = (size_t)(width > 0 ? width : 0);
  size_t padded = ((h + 15) / 16 * 16) * ((w + 15) / 16 * 16);
  return padded * (channels == 1 ? 2u : 6u) + 4096u;
}

SLIP_API int32_t slip_jpeg_encode(const uint8_t *src, int32_t height, int32_t width, int32_t channels,
                                  int64_t src_stride, int32_t quality, int32_t subsampling, int32_t flags,
                                  uint8_t *out, size_t out_capacity, size_t *out_size) {
  if (!src || !out || !out_size) return slip__fail(SLIP_EINVAL, "src, out and out_size must not be NULL");
  if (height <= 0 || width <= 0 || height > SLIP_MAX_DIMENSION || width > SLIP_MAX_DIMENSION)
    return slip__fail(SLIP_EINVAL, "image size %d x %d is outside 1 .. %d", height, width, SLIP_MAX_DIMENSION);
  if (channels != 1 && channels != 3) return slip__fail(SLIP_EINVAL, "channels is %d; it must be 1 or 3", channels);
  if (src_stride < (int64_t)width * channels)
    return slip__fail(SLIP_EINVAL, "src_stride %lld is smaller than a row", (long long)src_stride);
  if (quality < 1 || quality > 100) return slip__fail(SLIP_EINVAL, "quality %d is outside 1 .. 100", quality);
  if (flags & ~(SLIP_ENCODE_PROGRESSIVE | SLIP_ENCODE_OPTIMIZE))
    return slip__fail(SLIP_EINVAL, "unknown encode flags 0x%x", (unsigned)flags);
  int h_samp, v_samp;
  switch (subsampling) {
  case SLIP_SUBSAMPLING_444: h_samp = 1, v_samp = 1; break;
  case SLIP_SUBSAMPLING_422: h_samp = 2, v_samp = 1; break;
  case SLIP_SUBSAMPLING_420: h_samp = 2, v_samp = 2; break;
  case SLIP_SUBSAMPLING_440: h_samp = 1, v_samp = 2; break;
  case SLIP_SUBSAMPLING_GRAY:
    if (channels == 1) {
      h_samp = 1, v_samp = 1;
      break;
    }
    /* fall through */
  default: return slip__fail(SLIP_EINVAL, "subsampling %d is not supported for %d channels", subsampling, channels);
  }
  if (channels == 1) h_samp = 1, v_samp = 1; /* one component needs no subsampling */

  slip_thread_state *ts = slip__thread_state();
  if (!ts) return SLIP_ENOMEM;
  const encode_job job = {src, height, width, channels, src_stride, quality, h_samp, v_samp, flags, out, out_capacity};
  return compress(ts, &job, out_size);
}
