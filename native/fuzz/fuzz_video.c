/*
 * fuzz_video.c - libFuzzer harness for the video functions: the container
 * demuxers and decoders behind slip_video_index, and the windows of
 * slip_video_decode_crop_resize and slip_video_decode_planes over the
 * index it gives and over timestamps that disagree with the stream.
 *
 * The input is a video file (the seeds: tiny clips of every codec the tests
 * generate).  Its last byte chooses the frames of the window, the crop
 * and whether the timestamps are moved off the stream's; output buffers are
 * exactly as large as the header documents, inside canaries.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

enum { MOST_FRAMES = 256, WINDOW = 4, OUT = 16 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t choice = data[size - 1];
  slip_video_info_t info;
  int32_t status = slip_video_index(data, size, &info, NULL, NULL, 0);
  check_status(status);
  if (status != SLIP_OK || info.frames < 1 || info.frames > MOST_FRAMES) return 0;
  int64_t pts[MOST_FRAMES], seek[MOST_FRAMES];
  status = slip_video_index(data, size, &info, pts, seek, MOST_FRAMES);
  check_status(status);
  if (status != SLIP_OK) return 0;
  /* A window of up to WINDOW frames, every (choice % 3 + 1)-th from a chosen start. */
  int64_t want_pts[WINDOW], want_seek[WINDOW];
  int32_t count = 0, stride = choice % 3 + 1;
  for (int32_t f = (choice >> 2) % info.frames; f < info.frames && count < WINDOW; f += stride, count++) {
    want_pts[count] = pts[f] + ((choice & 0x80) ? 1 : 0); /* off the stream's timestamps: the index lies */
    want_seek[count] = seek[f];
  }
  int32_t y = info.height / 4, x = info.width / 4, h = info.height - y, w = info.width - x;
  int64_t frame = (int64_t)OUT * OUT * 3;
  size_t out_size = (size_t)(count * frame);
  uint8_t *block = guarded(out_size);
  status = slip_video_decode_crop_resize(data, size, want_pts, want_seek, count, info.height, info.width, y, x, h, w,
                                         OUT, OUT, choice & 1, (choice >> 1) % 3, block + CANARY, out_size, frame,
                                         OUT * 3);
  check_status(status);
  check_guards(block, out_size);
  free(block);
  int64_t planes = slip_planes_bytes(info.height, info.width);
  if (planes > 0 && planes * count <= (1 << 24)) {
    size_t planes_size = (size_t)(planes * count);
    block = guarded(planes_size);
    status = slip_video_decode_planes(data, size, want_pts, want_seek, count, info.height, info.width,
                                      block + CANARY, planes_size);
    check_status(status);
    check_guards(block, planes_size);
    free(block);
  }
  return 0;
}
