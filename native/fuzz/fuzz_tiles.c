/*
 * fuzz_tiles.c - differential libFuzzer harness for
 * slip_jpeg_add_restart_markers, the lossless re-coding into tiles.
 *
 * For every input it re-codes and decodes: the tiles must decode too, and
 * a sequential input to exactly its pixels (a progressive one whose scans
 * leave coefficients out is smoothed by libjpeg where they are missing,
 * which its complete baseline re-coding is not).  A Huffman table that
 * missed a symbol the scan codes, or a restart interval that broke the DC
 * prediction, shows up as a failed or different decode; AddressSanitizer
 * watches the counting of the coefficients and the splicing of bits.
 *
 * The tiles, re-coded again at the same width, must come back byte for
 * byte: their tables are their own, so that second re-coding is always a
 * splice (jpeg_splice.c), from input that has restart markers, and it must
 * write exactly the headers, tables and bits libjpeg's transcoding or the
 * first splice wrote.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slipstream.h"

static uint8_t *decode(const uint8_t *data, size_t size, int32_t h, int32_t w, int32_t *status) {
  size_t bytes = (size_t)h * (size_t)w * 3;
  uint8_t *out = malloc(bytes);
  if (out == NULL) abort();
  *status = slip_jpeg_decode(data, size, 0, 0, h, w, 1, 0, out, bytes, (int64_t)w * 3);
  return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  slip_jpeg_info_t info;
  if (slip_jpeg_info(data, size, &info) != SLIP_OK) return 0;
  /* Bound the work per input; huge claimed sizes are the header checks' business. */
  if ((int64_t)info.height * info.width > 1024 * 1024) return 0;
  size_t capacity = size * 2 + 65536, tiled_size = 0;
  uint8_t *tiled = malloc(capacity);
  if (tiled == NULL) abort();
  int32_t width = 8 + (int32_t)(size % 5) * 8;
  if (slip_jpeg_add_restart_markers(data, size, width, tiled, capacity, &tiled_size) == SLIP_OK) {
    int32_t original_status, tiled_status;
    uint8_t *original = decode(data, size, info.height, info.width, &original_status);
    uint8_t *recoded = decode(tiled, tiled_size, info.height, info.width, &tiled_status);
    if (original_status == SLIP_OK) {
      if (tiled_status != SLIP_OK) abort();
      if (!info.progressive && memcmp(original, recoded, (size_t)info.height * info.width * 3) != 0) abort();
      size_t again_size = 0;
      uint8_t *again = malloc(capacity);
      if (again == NULL) abort();
      if (slip_jpeg_add_restart_markers(tiled, tiled_size, width, again, capacity, &again_size) != SLIP_OK ||
          again_size != tiled_size || memcmp(again, tiled, tiled_size) != 0)
        abort();
      free(again);
    }
    free(original);
    free(recoded);
  }
  free(tiled);
  return 0;
}
