/*
 * jpeg_decode.c - JPEG header parsing, region-of-interest decoding at DCT
 * scales, and the fused decode+crop+resize kernel.
 *
 * Each thread owns one libjpeg decompressor, created on first use and reused
 * for every image (jpeg_abort_decompress resets it between images).
 */
#include <string.h>

#include "internal.h"

/* ---------------------------------------------------------------- helpers */

static int valid_scale(int32_t d) { return d == 1 || d == 2 || d == 4 || d == 8; }

/* Scaled extent of the source interval [start, start + length) at scale 1/d:
 * the scaled pixels floor(start/d) .. ceil((start+length)/d) - 1. */
static void scaled_extent(int32_t start, int32_t length, int32_t d, int32_t *s_start, int32_t *s_length) {
  int32_t first = start / d;
  int32_t end = (int32_t)(((int64_t)start + length + d - 1) / d);
  *s_start = first;
  *s_length = end - first;
}

static int32_t check_output(size_t out_size, int64_t out_stride, int32_t out_h, int32_t out_w, int32_t channels) {
  int64_t row = (int64_t)out_w * channels;
  if (out_stride < row)
    return slip__fail(SLIP_EINVAL, "out_stride %lld is smaller than a row of %d pixels (%lld bytes)",
                      (long long)out_stride, out_w, (long long)row);
  uint64_t need;
  if (__builtin_mul_overflow((uint64_t)(out_h - 1), (uint64_t)out_stride, &need) ||
      __builtin_add_overflow(need, (uint64_t)row, &need) || out_size < need)
    return slip__fail(SLIP_EBUFFER, "output of %d x %d pixels with stride %lld does not fit in %zu bytes", out_h,
                      out_w, (long long)out_stride, out_size);
  return SLIP_OK;
}

static int32_t check_region(const struct jpeg_decompress_struct *dec, int32_t y, int32_t x, int32_t h, int32_t w) {
  int32_t H = (int32_t)dec->image_height, W = (int32_t)dec->image_width;
  if (y < 0 || x < 0 || h <= 0 || w <= 0 || (int64_t)y + h > H || (int64_t)x + w > W)
    return slip__fail(SLIP_EINVAL, "region (y=%d, x=%d, h=%d, w=%d) does not lie inside the %d x %d image", y, x, h,
                      w, H, W);
  return SLIP_OK;
}

static slip_thread_state *decoder_state(void) {
  slip_thread_state *ts = slip__thread_state();
  if (!ts || ts->dec_ready) return ts;
  ts->dec.err = slip__jpeg_error_init(&ts->dec_err);
  if (setjmp(ts->dec_err.jump)) return NULL; /* jpeg_create_decompress ran out of memory */
  jpeg_create_decompress(&ts->dec);
  ts->dec_ready = 1;
  return ts;
}

/*
 * Read the header of data into the thread's decompressor and set it up to
 * decode at scale 1/d with the given flags; with check_pixels, an image over
 * SLIP_LIMIT_PIXELS fails.  On success the decompressor is left with its
 * header read and output dimensions computed; the caller must finish with
 * read_block() or jpeg_abort_decompress().
 */
static int32_t open_jpeg(slip_thread_state *ts, const uint8_t *data, size_t size, int32_t d, int32_t flags,
                         int check_pixels) {
  struct jpeg_decompress_struct *dec = &ts->dec;
  if (size < 2 || data[0] != 0xFF || data[1] != 0xD8) {
    if (size < 2) return slip__fail(SLIP_ENOTJPEG, "%zu bytes are too few for a JPEG image", size);
    return slip__fail(SLIP_ENOTJPEG, "data starts with 0x%02X 0x%02X, not with a JPEG SOI marker (0xFF 0xD8)",
                      data[0], data[1]);
  }
  if (setjmp(ts->dec_err.jump)) {
    jpeg_abort_decompress(dec);
    return ts->dec_err.status;
  }
  slip__jpeg_read_header(dec, &ts->dec_err, data, size, check_pixels);
  int four = dec->jpeg_color_space == JCS_CMYK || dec->jpeg_color_space == JCS_YCCK;
  dec->out_color_space = four ? JCS_CMYK : JCS_RGB;
  dec->scale_num = 1;
  dec->scale_denom = (unsigned int)d;
  dec->dct_method = (flags & SLIP_DECODE_FAST_IDCT) ? JDCT_IFAST : JDCT_ISLOW;
  /* Smooth upsampling always: libjpeg-turbo's merged upsampler (its "fast"
   * alternative) is unsafe with jpeg_skip_scanlines on a reused decompressor
   * (libjpeg-turbo 2.1 reads memory freed with the previous image). */
  dec->do_fancy_upsampling = TRUE;
  jpeg_calc_output_dimensions(dec);
  return SLIP_OK;
}

/* out = RGB of n pixels in `src` (3 or 4 components), mirrored if flip. */
static void convert_row(const uint8_t *src, int components, int32_t n, int flip, uint8_t *out) {
  int32_t step = flip ? -3 : 3;
  uint8_t *o = flip ? out + (size_t)(n - 1) * 3 : out;
  if (components == 3) {
    if (!flip) {
      memcpy(out, src, (size_t)n * 3);
      return;
    }
    for (int32_t i = 0; i < n; i++, src += 3, o += step) {
      o[0] = src[0];
      o[1] = src[1];
      o[2] = src[2];
    }
    return;
  }
  /* Adobe inverted CMYK, as written by Photoshop and assumed by Pillow:
   * the stored values are 255 - C and so on, and with nk = 255 - K,
   * R = nk - C * nk / 255 rounded, the same for G and B. */
  for (int32_t i = 0; i < n; i++, src += 4, o += step) {
    int nk = src[3];
    for (int c = 0; c < 3; c++) {
      int t = (255 - src[c]) * nk + 128;
      o[c] = (uint8_t)(nk - ((t + (t >> 8)) >> 8));
    }
  }
}

/*
 * Start decompressing the image opened by open_jpeg() for the scaled block
 * of rows [sy, ...) and columns [sx, sx + sw): crop the scanlines to the
 * block's MCU columns and skip the rows above it.  Returns the block's first
 * column within the cropped scanlines.  Errors longjmp to the caller's
 * setjmp, which must reset the decompressor.
 */
static int32_t start_block(struct jpeg_decompress_struct *dec, int32_t sy, int32_t sx, int32_t sw) {
  jpeg_start_decompress(dec);

  /* Crop MCU columns.  One extra pixel on each side keeps the block's edge
   * pixels away from the crop boundary, where libjpeg's smooth chroma
   * upsampling would replicate the edge instead of using the true neighbour,
   * and a minimum width keeps libjpeg from switching to plain upsampling for
   * very narrow crops; the block then matches a full decode exactly. */
  const JDIMENSION min_crop = 32;
  JDIMENSION full_w = dec->output_width;
  JDIMENSION xoff = sx > 0 ? (JDIMENSION)sx - 1 : 0;
  JDIMENSION xend = (JDIMENSION)sx + (JDIMENSION)sw + 1 < full_w ? (JDIMENSION)sx + (JDIMENSION)sw + 1 : full_w;
  if (xend - xoff < min_crop) {
    xend = xoff + min_crop < full_w ? xoff + min_crop : full_w;
    xoff = xend > min_crop ? xend - min_crop : 0;
  }
  JDIMENSION cw = xend - xoff;
  if (xoff > 0 || cw < full_w) jpeg_crop_scanline(dec, &xoff, &cw);

  if (sy > 0) {
    JDIMENSION skipped = jpeg_skip_scanlines(dec, (JDIMENSION)sy);
    if (skipped != (JDIMENSION)sy) slip__jpeg_fail((j_common_ptr)dec, SLIP_ECORRUPT, "could not skip to the region");
  }
  return sx - (int32_t)xoff;
}

/* Read the next `want` scanlines into rows, failing if the data ends first;
 * returns how many libjpeg produced (at least one). */
static JDIMENSION next_scanlines(struct jpeg_decompress_struct *dec, JSAMPROW *rows, JDIMENSION want) {
  JDIMENSION got = jpeg_read_scanlines(dec, rows, want);
  if (got == 0) slip__jpeg_fail((j_common_ptr)dec, SLIP_ETRUNCATED, "no more scanlines in the JPEG data");
  return got;
}

/* Reset the decompressor after a block.  A block down to the last row has
 * read the whole scan: reading on to the end of the image checks that no
 * entropy data is left over, which is how damage that shortens a scan shows
 * (a corrupt-data warning, an error here).  Blocks that end higher stop
 * without reading the rest. */
static void end_block(struct jpeg_decompress_struct *dec) {
  if (dec->output_scanline == dec->output_height)
    jpeg_finish_decompress(dec);
  else
    jpeg_abort_decompress(dec);
}

/*
 * Decode the scaled block of rows [sy, sy + sh) and columns [sx, sx + sw) of
 * the image opened by open_jpeg() into out (RGB, out_stride bytes per row),
 * and reset the decompressor.
 */
static int32_t read_block(slip_thread_state *ts, int32_t sy, int32_t sx, int32_t sh, int32_t sw, int flip,
                          uint8_t *out, int64_t out_stride) {
  struct jpeg_decompress_struct *dec = &ts->dec;
  if (setjmp(ts->dec_err.jump)) {
    jpeg_abort_decompress(dec);
    return ts->dec_err.status;
  }
  int32_t col0 = start_block(dec, sy, sx, sw);

  int components = dec->out_color_components;
  int group = dec->rec_outbuf_height > 0 ? dec->rec_outbuf_height : 1;
  size_t row_bytes = (size_t)dec->output_width * (size_t)components;
  uint8_t *rows = slip__scratch_reserve(&ts->rows, row_bytes * (size_t)group);
  if (!rows) slip__jpeg_fail((j_common_ptr)dec, SLIP_ENOMEM, slip_last_error());
  JSAMPROW pointers[16];
  if (group > 16) group = 16;
  for (int i = 0; i < group; i++) pointers[i] = rows + (size_t)i * row_bytes;

  /* Whole RGB rows, unmirrored, go straight into out; anything else through
   * the row buffer. */
  int direct = components == 3 && !flip && col0 == 0 && (JDIMENSION)sw == dec->output_width;
  int32_t done = 0;
  while (done < sh) {
    JDIMENSION want = (JDIMENSION)(sh - done < group ? sh - done : group);
    if (direct) {
      for (JDIMENSION i = 0; i < want; i++) pointers[i] = out + (int64_t)(done + (int32_t)i) * out_stride;
    }
    JDIMENSION got = next_scanlines(dec, pointers, want);
    for (JDIMENSION i = 0; i < got && !direct; i++)
      convert_row(pointers[i] + (size_t)col0 * (size_t)components, components, sw, flip,
                  out + (int64_t)(done + (int32_t)i) * out_stride);
    done += (int32_t)got;
  }
  end_block(dec);
  return SLIP_OK;
}

/*
 * Decode the scaled block of rows [sy, sy + sh) and columns [sx, sx + sw) of
 * the image opened by open_jpeg() into the thread's block buffer, and reset
 * the decompressor; *pixels then points at the block's first pixel (RGB),
 * *stride bytes per row.  RGB scanlines are read straight into the buffer,
 * cropped to MCU columns and so a little wider than the block, which saves
 * copying every row once; CMYK ones are converted row by row.
 */
static int32_t read_block_view(slip_thread_state *ts, int32_t sy, int32_t sx, int32_t sh, int32_t sw,
                               const uint8_t **pixels, int64_t *stride) {
  struct jpeg_decompress_struct *dec = &ts->dec;
  if (dec->out_color_components != 3) {
    size_t bytes = (size_t)sh * (size_t)sw * 3;
    uint8_t *out = NULL;
    int32_t status = SLIP_OK;
    if (bytes > SLIP_MAX_DECODE_MEMORY)
      status = slip__fail(SLIP_ETOOBIG, "a %d x %d block exceeds SLIP_MAX_DECODE_MEMORY", sh, sw);
    else if (!(out = slip__scratch_reserve(&ts->block, bytes)))
      status = SLIP_ENOMEM;
    if (status != SLIP_OK) {
      jpeg_abort_decompress(dec);
      return status;
    }
    *pixels = out;
    *stride = (int64_t)sw * 3;
    return read_block(ts, sy, sx, sh, sw, 0, out, *stride);
  }
  if (setjmp(ts->dec_err.jump)) {
    jpeg_abort_decompress(dec);
    return ts->dec_err.status;
  }
  int32_t col0 = start_block(dec, sy, sx, sw);
  size_t row_bytes = (size_t)dec->output_width * 3;
  if ((size_t)sh * row_bytes > SLIP_MAX_DECODE_MEMORY) {
    char what[96];
    snprintf(what, sizeof what, "a %d x %u block exceeds SLIP_MAX_DECODE_MEMORY", sh, (unsigned)dec->output_width);
    slip__jpeg_fail((j_common_ptr)dec, SLIP_ETOOBIG, what);
  }
  uint8_t *block = slip__scratch_reserve(&ts->block, (size_t)sh * row_bytes);
  if (!block) slip__jpeg_fail((j_common_ptr)dec, SLIP_ENOMEM, slip_last_error());
  JSAMPROW pointers[16];
  int group = dec->rec_outbuf_height > 0 ? dec->rec_outbuf_height : 1;
  if (group > 16) group = 16;
  int32_t done = 0;
  while (done < sh) {
    JDIMENSION want = (JDIMENSION)(sh - done < group ? sh - done : group);
    for (JDIMENSION i = 0; i < want; i++) pointers[i] = block + (size_t)(done + (int32_t)i) * row_bytes;
    done += (int32_t)next_scanlines(dec, pointers, want);
  }
  end_block(dec);
  *pixels = block + (size_t)col0 * 3;
  *stride = (int64_t)row_bytes;
  return SLIP_OK;
}

/* ------------------------------------------------------------------ ABI */

SLIP_API int32_t slip_jpeg_info(const uint8_t *data, size_t size, slip_jpeg_info_t *info) {
  if (!data || !info) return slip__fail(SLIP_EINVAL, "data and info must not be NULL");
  slip_thread_state *ts = decoder_state();
  if (!ts) return SLIP_ENOMEM;
  int32_t status = open_jpeg(ts, data, size, 1, 0, 0);
  if (status != SLIP_OK) return status;
  struct jpeg_decompress_struct *dec = &ts->dec;
  slip_jpeg_info_t r;
  r.height = (int32_t)dec->image_height;
  r.width = (int32_t)dec->image_width;
  r.components = dec->num_components;
  switch (dec->jpeg_color_space) {
  case JCS_GRAYSCALE: r.colorspace = SLIP_COLORSPACE_GRAY; break;
  case JCS_RGB: r.colorspace = SLIP_COLORSPACE_RGB; break;
  case JCS_YCbCr: r.colorspace = SLIP_COLORSPACE_YCBCR; break;
  case JCS_CMYK: r.colorspace = SLIP_COLORSPACE_CMYK; break;
  case JCS_YCCK: r.colorspace = SLIP_COLORSPACE_YCCK; break;
  default: r.colorspace = SLIP_COLORSPACE_UNKNOWN;
  }
  r.subsampling = SLIP_SUBSAMPLING_OTHER;
  if (dec->num_components == 1) {
    r.subsampling = SLIP_SUBSAMPLING_GRAY;
  } else {
    int h = dec->comp_info[0].h_samp_factor, v = dec->comp_info[0].v_samp_factor;
    int same = 1;
    for (int c = 1; c < dec->num_components; c++) {
      if (dec->comp_info[c].h_samp_factor != 1 || dec->comp_info[c].v_samp_factor != 1) same = 0;
    }
    if (same) {
      if (h == 1 && v == 1) r.subsampling = SLIP_SUBSAMPLING_444;
      else if (h == 2 && v == 1) r.subsampling = SLIP_SUBSAMPLING_422;
      else if (h == 2 && v == 2) r.subsampling = SLIP_SUBSAMPLING_420;
      else if (h == 1 && v == 2) r.subsampling = SLIP_SUBSAMPLING_440;
      else if (h == 4 && v == 1) r.subsampling = SLIP_SUBSAMPLING_411;
      else if (h == 1 && v == 4) r.subsampling = SLIP_SUBSAMPLING_441;
    }
  }
  r.progressive = dec->progressive_mode ? 1 : 0;
  r.mcu_height = dec->max_v_samp_factor * DCTSIZE;
  r.mcu_width = dec->max_h_samp_factor * DCTSIZE;
  jpeg_abort_decompress(dec);
  *info = r;
  return SLIP_OK;
}

SLIP_API int32_t slip_jpeg_scale_for(int32_t crop_h, int32_t crop_w, int32_t out_h, int32_t out_w) {
  if (crop_h <= 0 || crop_w <= 0 || out_h <= 0 || out_w <= 0)
    return slip__fail(SLIP_EINVAL, "crop (%d x %d) and output (%d x %d) sizes must be positive", crop_h, crop_w,
                      out_h, out_w);
  for (int32_t d = 8; d > 1; d /= 2) {
    if ((int64_t)crop_h >= (int64_t)out_h * d && (int64_t)crop_w >= (int64_t)out_w * d) return d;
  }
  return 1;
}

static int32_t check_flags(int32_t flags) {
  const int32_t known = SLIP_DECODE_FLIP_X | SLIP_DECODE_FAST_IDCT;
  if (flags & ~known) return slip__fail(SLIP_EINVAL, "unknown decode flags 0x%x", (unsigned)(flags & ~known));
  return SLIP_OK;
}

/* ------------------------------------------------ restart-interval tiles */

/*
 * A JPEG whose single baseline scan has a restart marker every R MCUs, with R
 * dividing the MCUs of a row (as slip_jpeg_add_restart_markers writes them),
 * is a grid of tiles: each restart interval starts on a byte boundary with
 * fresh DC predictions, so it decodes without the data before it.  For a
 * region of such an image, sub_jpeg() copies the tiles the region touches
 * into a smaller JPEG - the same tables, renumbered markers, reduced
 * dimensions - and libjpeg then entropy-decodes only those tiles, instead of
 * every row above the region and the whole width of the region's rows.
 */

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

/* Offset in data[0, end) of the frame header's height field (the width
 * follows it), or 0 when the markers before the scan do not parse. */
static size_t frame_size_offset(const uint8_t *data, size_t end) {
  size_t pos = 2;
  while (pos + 4 <= end) {
    if (data[pos] != 0xFF) return 0;
    uint8_t m = data[pos + 1];
    if (m == 0xFF) {
      pos++; /* fill byte before a marker */
      continue;
    }
    /* SOF0..SOF15, less DHT (C4), JPG (C8) and DAC (CC) */
    if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) return pos + 9 <= end ? pos + 5 : 0;
    pos += 2 + be16(data + pos + 2);
  }
  return 0;
}

void slip__mcu_size(const struct jpeg_decompress_struct *dec, int32_t *mcu_h, int32_t *mcu_w) {
  int single = dec->num_components == 1;
  *mcu_h = single ? DCTSIZE : dec->max_v_samp_factor * DCTSIZE;
  *mcu_w = single ? DCTSIZE : dec->max_h_samp_factor * DCTSIZE;
}

static int32_t min32(int64_t a, int64_t b) { return (int32_t)(a < b ? a : b); }
static int32_t max32(int64_t a, int64_t b) { return (int32_t)(a > b ? a : b); }

/*
 * If the image whose header dec has read from data is tiled by restart
 * intervals, and the source region (y, x, h, w) to decode at scale 1/d,
 * widened by d pixels (one scaled pixel) on each side, leaves tiles out,
 * write the JPEG of the tiles it needs into ts->sub and return its size,
 * with the source position of its first pixel in *oy, *ox.
 * Return 0 when the image is not tiled, when no tile would be left out, or
 * when the entropy data lack the expected markers: the caller then decodes
 * data as it is, which reports any corruption.
 */
static size_t sub_jpeg(slip_thread_state *ts, const uint8_t *data, size_t size, int32_t y, int32_t x, int32_t h,
                       int32_t w, int32_t d, int32_t *oy, int32_t *ox) {
  const struct jpeg_decompress_struct *dec = &ts->dec;
  int64_t interval = dec->restart_interval;
  if (interval == 0 || dec->progressive_mode || dec->arith_code || dec->comps_in_scan != dec->num_components)
    return 0;
  int32_t mcu_h, mcu_w;
  slip__mcu_size(dec, &mcu_h, &mcu_w);
  int64_t H = dec->image_height, W = dec->image_width;
  int64_t columns = (W + mcu_w - 1) / mcu_w, rows = (H + mcu_h - 1) / mcu_h;
  if (columns % interval) return 0;
  int64_t tiles = columns / interval, tile_w = interval * mcu_w;

  int64_t r0 = max32(0, (int64_t)y - d) / mcu_h;
  int64_t r1 = (min32(H, (int64_t)y + h + d) + mcu_h - 1) / mcu_h;
  int64_t c0 = max32(0, (int64_t)x - d) / tile_w;
  int64_t c1 = (min32(W, (int64_t)x + w + d) + tile_w - 1) / tile_w;
  /* At least 32 scaled pixels wide, as read_block() crops: narrower, libjpeg
   * would upsample chroma differently from a full decode. */
  int64_t min_tiles = (32 * (int64_t)d + tile_w - 1) / tile_w;
  while (c1 - c0 < min_tiles && (c0 > 0 || c1 < tiles)) {
    if (c1 < tiles) c1++;
    else c0--;
  }
  /* Rows below the region cost nothing already: libjpeg stops before them. */
  if (r0 == 0 && c0 == 0 && c1 == tiles) return 0;

  size_t start = (size_t)(dec->src->next_input_byte - data); /* the entropy data, after SOS */
  size_t frame = frame_size_offset(data, start);
  if (!frame) return 0;
  int64_t first = r0 * tiles + c0, last = (r1 - 1) * tiles + c1 - 1, total = rows * tiles;
  /* Every tile but the last ends with a 2-byte marker: a header claiming more
   * tiles than the data can hold is left to libjpeg to reject. */
  int64_t needed = (r1 - r0) * (c1 - c0);
  if ((uint64_t)last >= size / 2) return 0;
  uint8_t *out = slip__scratch_reserve(&ts->sub, size + 2 * (size_t)needed + 2);
  if (!out) return 0;
  memcpy(out, data, start);
  int64_t sub_h = r1 < rows ? (r1 - r0) * mcu_h : H - r0 * mcu_h;
  int64_t sub_w = c1 < tiles ? (c1 - c0) * tile_w : W - c0 * tile_w;
  out[frame] = (uint8_t)(sub_h >> 8), out[frame + 1] = (uint8_t)sub_h;
  out[frame + 2] = (uint8_t)(sub_w >> 8), out[frame + 3] = (uint8_t)sub_w;

  size_t n = start;
  int64_t copied = 0;
  const uint8_t *p = data + start, *tile = p, *end = data + size;
  for (int64_t index = 0; index <= last;) {
    const uint8_t *m = memchr(p, 0xFF, (size_t)(end - p));
    if (!m || m + 1 >= end) return 0; /* truncated */
    if (m[1] == 0x00) {               /* a stuffed 0xFF data byte */
      p = m + 2;
      continue;
    }
    if (m[1] == 0xFF) { /* a fill byte before a marker */
      p = m + 1;
      continue;
    }
    int restart = m[1] >= 0xD0 && m[1] <= 0xD7;
    if (restart ? m[1] - 0xD0 != index % 8 : index != total - 1) return 0;
    int64_t c = index % tiles;
    if (index >= first && c >= c0 && c < c1) {
      if (copied) {
        out[n++] = 0xFF;
        out[n++] = (uint8_t)(0xD0 + (copied - 1) % 8);
      }
      memcpy(out + n, tile, (size_t)(m - tile));
      n += (size_t)(m - tile);
      copied++;
    }
    index++;
    tile = p = m + 2;
  }
  out[n++] = 0xFF;
  out[n++] = 0xD9; /* EOI */
  *oy = (int32_t)(r0 * mcu_h);
  *ox = (int32_t)(c0 * tile_w);
  return n;
}

/* A region's block of the scaled image: rows [y, y + h), columns [x, x + w)
 * of the decoded image, whose first pixel is source pixel (oy, ox). */
typedef struct block_rect {
  int32_t y, x, h, w;
  int32_t oy, ox;
} block_rect;

/*
 * Open data at scale 1/d with the given flags and map the source region
 * (y, x, h, w) to its scaled block.  On success the thread's decompressor is
 * ready for read_block(); on failure it has been reset.
 */
static int32_t open_region(const uint8_t *data, size_t size, int32_t d, int32_t flags, int32_t y, int32_t x,
                           int32_t h, int32_t w, slip_thread_state **ts_out, block_rect *block) {
  int32_t status = check_flags(flags);
  if (status != SLIP_OK) return status;
  slip_thread_state *ts = decoder_state();
  if (!ts) return SLIP_ENOMEM;
  status = open_jpeg(ts, data, size, d, flags, 1);
  if (status != SLIP_OK) return status;
  status = check_region(&ts->dec, y, x, h, w);
  if (status != SLIP_OK) {
    jpeg_abort_decompress(&ts->dec);
    return status;
  }
  /* A margin of one scaled pixel keeps the block's edges away from the tiles'
   * edges, where smooth chroma upsampling would differ from a full decode. */
  block->oy = block->ox = 0;
  size_t sub_size = sub_jpeg(ts, data, size, y, x, h, w, d, &block->oy, &block->ox);
  if (sub_size) {
    jpeg_abort_decompress(&ts->dec);
    status = open_jpeg(ts, ts->sub.data, sub_size, d, flags, 1);
    if (status != SLIP_OK) return status;
    y -= block->oy;
    x -= block->ox;
  }
  scaled_extent(y, h, d, &block->y, &block->h);
  scaled_extent(x, w, d, &block->x, &block->w);
  *ts_out = ts;
  return SLIP_OK;
}

SLIP_API int32_t slip_jpeg_decode(const uint8_t *data, size_t size, int32_t y, int32_t x, int32_t h, int32_t w,
                                  int32_t scale_denom, int32_t flags, uint8_t *out, size_t out_size,
                                  int64_t out_stride) {
  if (!data || !out) return slip__fail(SLIP_EINVAL, "data and out must not be NULL");
  if (!valid_scale(scale_denom)) return slip__fail(SLIP_EINVAL, "scale_denom %d is not 1, 2, 4 or 8", scale_denom);
  slip_thread_state *ts;
  block_rect b;
  int32_t status = open_region(data, size, scale_denom, flags, y, x, h, w, &ts, &b);
  if (status != SLIP_OK) return status;
  status = check_output(out_size, out_stride, b.h, b.w, 3);
  if (status != SLIP_OK) {
    jpeg_abort_decompress(&ts->dec);
    return status;
  }
  return read_block(ts, b.y, b.x, b.h, b.w, flags & SLIP_DECODE_FLIP_X, out, out_stride);
}

/* Open data for a check at 1/8 scale and run the scanner on it: 1 when it
 * shows the image decodes (the decompressor then reset), 0 when unsure (the
 * decompressor left open at the header, for a decode), or a failure status. */
static int32_t open_and_scan(const uint8_t *data, size_t size, slip_thread_state **ts) {
  if (!data) return slip__fail(SLIP_EINVAL, "data must not be NULL");
  *ts = decoder_state();
  if (!*ts) return SLIP_ENOMEM;
  int32_t status = open_jpeg(*ts, data, size, 8, 0, 1);
  if (status != SLIP_OK) return status;
  if (!slip__jpeg_scan_is_good(&(*ts)->dec)) return 0;
  jpeg_abort_decompress(&(*ts)->dec);
  return 1;
}

SLIP_API int32_t slip_jpeg_scan(const uint8_t *data, size_t size) {
  slip_thread_state *ts;
  int32_t scanned = open_and_scan(data, size, &ts);
  if (scanned == 0) jpeg_abort_decompress(&ts->dec);
  return scanned;
}

SLIP_API int32_t slip_jpeg_check(const uint8_t *data, size_t size) {
  slip_thread_state *ts;
  int32_t scanned = open_and_scan(data, size, &ts);
  if (scanned != 0) return scanned < 0 ? scanned : SLIP_OK;
  /* Unsure: libjpeg decodes the image at 1/8 scale and says what is wrong, if anything. */
  const uint8_t *pixels;
  int64_t stride;
  return read_block_view(ts, 0, 0, (int32_t)ts->dec.output_height, (int32_t)ts->dec.output_width, &pixels,
                         &stride);
}

SLIP_API int32_t slip_jpeg_decode_crop_resize(const uint8_t *data, size_t size, int32_t y, int32_t x, int32_t h,
                                              int32_t w, int32_t out_h, int32_t out_w, int32_t flags,
                                              int32_t interp, uint8_t *out, size_t out_size, int64_t out_stride) {
  if (!data || !out) return slip__fail(SLIP_EINVAL, "data and out must not be NULL");
  if (interp != SLIP_INTERP_AREA && interp != SLIP_INTERP_BILINEAR && interp != SLIP_INTERP_BICUBIC)
    return slip__fail(SLIP_EINVAL, "unknown interpolation %d", interp);
  int32_t d = slip_jpeg_scale_for(h, w, out_h, out_w);
  if (d < 0) return d;
  int32_t status = check_output(out_size, out_stride, out_h, out_w, 3);
  if (status != SLIP_OK) return status;
  slip_thread_state *ts;
  block_rect b;
  status = open_region(data, size, d, flags, y, x, h, w, &ts, &b);
  if (status != SLIP_OK) return status;
  const uint8_t *pixels;
  int64_t stride;
  status = read_block_view(ts, b.y, b.x, b.h, b.w, &pixels, &stride);
  if (status != SLIP_OK) return status;
  /* The crop in block coordinates, with the fractional edges the scale leaves. */
  double inv = 1.0 / d;
  return slip__resample(ts, pixels, b.h, b.w, 3, stride, (y - b.oy) * inv - b.y, (x - b.ox) * inv - b.x, h * inv,
                        w * inv, out, out_h, out_w, out_stride, interp, flags & SLIP_DECODE_FLIP_X);
}

/* ------------------------------------------------------------ YCbCr planes */

/* Whether the JPEG whose header dec has read is YCbCr 4:2:0: three
 * components, luma sampled 2x2 and both chroma components 1x1. */
static int is_ycbcr_420(const struct jpeg_decompress_struct *dec) {
  const jpeg_component_info *c = dec->comp_info;
  return dec->jpeg_color_space == JCS_YCbCr && dec->num_components == 3 && c[0].h_samp_factor == 2 &&
         c[0].v_samp_factor == 2 && c[1].h_samp_factor == 1 && c[1].v_samp_factor == 1 &&
         c[2].h_samp_factor == 1 && c[2].v_samp_factor == 1;
}

/*
 * Decode the 4:2:0 JPEG opened by open_jpeg() without upsampling or colour
 * conversion: libjpeg's raw-data output, 16 luma and 8 chroma rows at a
 * time, padded to whole blocks, copied into the compact planes at out.
 */
static int32_t read_raw_planes(slip_thread_state *ts, uint8_t *out) {
  struct jpeg_decompress_struct *dec = &ts->dec;
  if (setjmp(ts->dec_err.jump)) {
    jpeg_abort_decompress(dec);
    return ts->dec_err.status;
  }
  dec->raw_data_out = TRUE;
  dec->out_color_space = JCS_YCbCr;
  dec->scale_num = dec->scale_denom = 1;
  jpeg_start_decompress(dec);
  int32_t height = (int32_t)dec->image_height, width = (int32_t)dec->image_width;
  int32_t c_height = (height + 1) / 2, c_width = (width + 1) / 2;
  size_t y_pitch = (size_t)dec->comp_info[0].width_in_blocks * DCTSIZE;
  size_t c_pitch = (size_t)dec->comp_info[1].width_in_blocks * DCTSIZE;
  if ((size_t)dec->comp_info[2].width_in_blocks * DCTSIZE > c_pitch)
    c_pitch = (size_t)dec->comp_info[2].width_in_blocks * DCTSIZE;
  uint8_t *band = slip__scratch_reserve(&ts->rows, 2 * DCTSIZE * y_pitch + 2 * DCTSIZE * c_pitch);
  if (!band) slip__jpeg_fail((j_common_ptr)dec, SLIP_ENOMEM, slip_last_error());
  JSAMPROW y_rows[2 * DCTSIZE], cb_rows[DCTSIZE], cr_rows[DCTSIZE];
  for (int i = 0; i < 2 * DCTSIZE; i++) y_rows[i] = band + (size_t)i * y_pitch;
  uint8_t *chroma = band + 2 * DCTSIZE * y_pitch;
  for (int i = 0; i < DCTSIZE; i++) {
    cb_rows[i] = chroma + (size_t)i * c_pitch;
    cr_rows[i] = chroma + (size_t)(DCTSIZE + i) * c_pitch;
  }
  JSAMPARRAY planes[3] = {y_rows, cb_rows, cr_rows};
  uint8_t *y_out = out, *cb_out = out + (size_t)height * width;
  uint8_t *cr_out = cb_out + (size_t)c_height * c_width;
  for (int32_t row = 0; row < height; row += 2 * DCTSIZE) {
    if (jpeg_read_raw_data(dec, planes, 2 * DCTSIZE) != 2 * DCTSIZE)
      slip__jpeg_fail((j_common_ptr)dec, SLIP_ETRUNCATED, "the JPEG data ends before its last row of blocks");
    int32_t y_rows_here = height - row < 2 * DCTSIZE ? height - row : 2 * DCTSIZE;
    for (int32_t i = 0; i < y_rows_here; i++)
      memcpy(y_out + (size_t)(row + i) * width, y_rows[i], (size_t)width);
    int32_t c_row = row / 2, c_rows_here = c_height - c_row < DCTSIZE ? c_height - c_row : DCTSIZE;
    for (int32_t i = 0; i < c_rows_here; i++) {
      memcpy(cb_out + (size_t)(c_row + i) * c_width, cb_rows[i], (size_t)c_width);
      memcpy(cr_out + (size_t)(c_row + i) * c_width, cr_rows[i], (size_t)c_width);
    }
  }
  /* Every row is read; reading on to EOI, as end_block does, is what shows
   * damage that leaves entropy data over (a corrupt-data warning, an error
   * here), so the planes get the verdict slip_jpeg_decode gives. */
  jpeg_finish_decompress(dec);
  return SLIP_OK;
}

SLIP_API int32_t slip_jpeg_decode_planes(const uint8_t *data, size_t size, uint8_t *out, size_t out_size) {
  if (!data || !out) return slip__fail(SLIP_EINVAL, "data and out must not be NULL");
  slip_thread_state *ts = decoder_state();
  if (!ts) return SLIP_ENOMEM;
  int32_t status = open_jpeg(ts, data, size, 1, 0, 1);
  if (status != SLIP_OK) return status;
  int32_t height = (int32_t)ts->dec.image_height, width = (int32_t)ts->dec.image_width;
  int64_t need = slip_planes_bytes(height, width);
  if (need < 0 || out_size < (uint64_t)need) {
    jpeg_abort_decompress(&ts->dec);
    return need < 0 ? (int32_t)need
                    : slip__fail(SLIP_EBUFFER, "the planes of a %d x %d image need %lld bytes, out has %zu", height,
                                 width, (long long)need, out_size);
  }
  if (is_ycbcr_420(&ts->dec)) return read_raw_planes(ts, out);
  /* Any other JPEG: decoded to RGB, then converted and its chroma averaged. */
  jpeg_abort_decompress(&ts->dec);
  size_t rgb_bytes = (size_t)height * (size_t)width * 3;
  uint8_t *rgb = slip__scratch_reserve(&ts->block, rgb_bytes);
  if (!rgb) return SLIP_ENOMEM;
  status = slip_jpeg_decode(data, size, 0, 0, height, width, 1, 0, rgb, rgb_bytes, (int64_t)width * 3);
  if (status != SLIP_OK) return status;
  return slip_rgb_to_planes(rgb, height, width, (int64_t)width * 3, out, out_size);
}
