/*
 * video.c - video containers read from memory with FFmpeg's libavformat and
 * decoded with libavcodec: the index of a stream's frames (timestamps and
 * the keyframe each needs), and windows of frames decoded on the calling
 * thread, their 4:2:0 planes cropped, resized and converted by the kernel
 * of planes.c without a full-size RGB frame.
 *
 * Built when SLIP_HAVE_VIDEO is defined (CMake finds FFmpeg); otherwise every
 * function but slip_video_available fails with SLIP_EUNSUPPORTED.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#ifndef SLIP_HAVE_VIDEO

static int32_t no_video(void) {
  return slip__fail(SLIP_EUNSUPPORTED,
                    "this build of slipstream decodes no video: it was built without FFmpeg's libavformat and "
                    "libavcodec (install libavformat-dev and libavcodec-dev, then reinstall slipstream from source)");
}

SLIP_API int32_t slip_video_available(void) { return 0; }

SLIP_API int32_t slip_video_index(const uint8_t *data, size_t size, slip_video_info_t *info, int64_t *pts,
                                  int64_t *seek, int32_t capacity) {
  return no_video();
}

SLIP_API int32_t slip_video_decode_crop_resize(const uint8_t *data, size_t size, const int64_t *pts,
                                               const int64_t *seek, int32_t count, int32_t height, int32_t width,
                                               int32_t y, int32_t x, int32_t h, int32_t w, int32_t out_h,
                                               int32_t out_w, int32_t flags, int32_t interp, uint8_t *out,
                                               size_t out_size, int64_t frame_stride, int64_t out_stride) {
  return no_video();
}

SLIP_API int32_t slip_video_decode_planes(const uint8_t *data, size_t size, const int64_t *pts, const int64_t *seek,
                                          int32_t count, int32_t height, int32_t width, uint8_t *out,
                                          size_t out_size) {
  return no_video();
}

#else

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/error.h>
#include <libavutil/log.h>
#include <libavutil/pixdesc.h>
#include <pthread.h>

/* ---------------------------------------------------------------- reading from memory */

typedef struct memory_input {
  const uint8_t *data;
  size_t size, at;
} memory_input;

static int read_memory(void *opaque, uint8_t *buf, int n) {
  memory_input *m = opaque;
  size_t left = m->size - m->at;
  if (left == 0) return AVERROR_EOF;
  if ((size_t)n > left) n = (int)left;
  memcpy(buf, m->data + m->at, (size_t)n);
  m->at += (size_t)n;
  return n;
}

static int64_t seek_memory(void *opaque, int64_t offset, int whence) {
  memory_input *m = opaque;
  int64_t base;
  switch (whence & ~AVSEEK_FORCE) {
  case AVSEEK_SIZE: return (int64_t)m->size;
  case SEEK_SET: base = 0; break;
  case SEEK_CUR: base = (int64_t)m->at; break;
  case SEEK_END: base = (int64_t)m->size; break;
  default: return AVERROR(EINVAL);
  }
  if (offset > (int64_t)m->size - base || offset < -base) return AVERROR(EINVAL);
  m->at = (size_t)(base + offset);
  return base + offset;
}

/* One opened video: the demuxer over memory, its first video stream and (once opened) a decoder. */
typedef struct video {
  memory_input input;
  AVIOContext *io;
  AVFormatContext *format;
  AVCodecContext *decoder;
  AVPacket *packet;
  AVFrame *frame;
  int stream;
} video;

static void video_close(video *v) {
  if (v->decoder) avcodec_free_context(&v->decoder);
  if (v->format) avformat_close_input(&v->format);
  if (v->io) {
    av_freep(&v->io->buffer);
    avio_context_free(&v->io);
  }
  av_packet_free(&v->packet);
  av_frame_free(&v->frame);
}

/* FFmpeg's error as a status, with `what` and FFmpeg's own words in the detail. */
static int32_t av_fail(int code, const char *what) {
  char words[AV_ERROR_MAX_STRING_SIZE] = {0};
  av_strerror(code, words, sizeof words);
  int32_t status = code == AVERROR(ENOMEM) ? SLIP_ENOMEM
                   : code == AVERROR_DECODER_NOT_FOUND || code == AVERROR_PATCHWELCOME ? SLIP_EUNSUPPORTED
                                                                                        : SLIP_ECORRUPT;
  return slip__fail(status, "%s: %s", what, words);
}

static pthread_once_t quiet_once = PTHREAD_ONCE_INIT;

/* FFmpeg logs damaged streams to stderr; the statuses and their details say it instead. */
static void quiet(void) { av_log_set_level(AV_LOG_QUIET); }

static int32_t check_frame_size(int64_t height, int64_t width) {
  if (height < 1 || width < 1 || height > SLIP_MAX_DIMENSION || width > SLIP_MAX_DIMENSION)
    return slip__fail(height < 1 || width < 1 ? SLIP_ECORRUPT : SLIP_ETOOBIG,
                      "the video's frames are %lld x %lld pixels, outside 1 to %d a side", (long long)height,
                      (long long)width, SLIP_MAX_DIMENSION);
  int64_t limit = slip_get_limit(SLIP_LIMIT_PIXELS);
  if (height * width > limit)
    return slip__fail(SLIP_ETOOBIG, "the video's %lld x %lld frames have %lld pixels, more than the limit "
                      "SLIP_LIMIT_PIXELS (%lld)", (long long)height, (long long)width, (long long)(height * width),
                      (long long)limit);
  return SLIP_OK;
}

/* Open the container in data and find its first video stream. */
static int32_t video_open(video *v, const uint8_t *data, size_t size) {
  pthread_once(&quiet_once, quiet);
  memset(v, 0, sizeof *v);
  v->input = (memory_input){data, size, 0};
  enum { BUFFER = 1 << 15 };
  uint8_t *buffer = av_malloc(BUFFER);
  v->packet = av_packet_alloc();
  v->frame = av_frame_alloc();
  v->format = avformat_alloc_context();
  if (buffer) v->io = avio_alloc_context(buffer, BUFFER, 0, &v->input, read_memory, NULL, seek_memory);
  if (!v->io) av_free(buffer);
  if (!v->io || !v->packet || !v->frame || !v->format) return slip__fail(SLIP_ENOMEM, "out of memory opening a video");
  v->format->pb = v->io;
  v->format->flags |= AVFMT_FLAG_CUSTOM_IO;
  int code = avformat_open_input(&v->format, NULL, NULL, NULL);
  if (code < 0) return av_fail(code, "no container format reads the data");  /* v->format is freed */
  v->stream = av_find_best_stream(v->format, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
  if (v->stream < 0) return slip__fail(SLIP_ECORRUPT, "the container holds no video stream");
  AVCodecParameters *par = v->format->streams[v->stream]->codecpar;
  return check_frame_size(par->height, par->width);
}

/* Open a decoder of the stream, on the calling thread alone. */
static int32_t video_open_decoder(video *v) {
  AVCodecParameters *par = v->format->streams[v->stream]->codecpar;
  const AVCodec *codec = avcodec_find_decoder(par->codec_id);
  if (!codec)
    return slip__fail(SLIP_EUNSUPPORTED, "this build's FFmpeg has no decoder of the video's codec (%s)",
                      avcodec_get_name(par->codec_id));
  v->decoder = avcodec_alloc_context3(codec);
  if (!v->decoder) return slip__fail(SLIP_ENOMEM, "out of memory opening a video decoder");
  int code = avcodec_parameters_to_context(v->decoder, par);
  if (code < 0) return av_fail(code, "the video stream's parameters");
  v->decoder->thread_count = 1;
  /* A damaged stream fails with a status rather than decoding to concealed, silently wrong frames. */
  v->decoder->err_recognition |= AV_EF_EXPLODE | AV_EF_BITSTREAM | AV_EF_BUFFER;
  v->decoder->max_pixels = slip_get_limit(SLIP_LIMIT_PIXELS);
  v->decoder->pkt_timebase = v->format->streams[v->stream]->time_base;
  code = avcodec_open2(v->decoder, codec, NULL);
  if (code < 0) return av_fail(code, "the video decoder does not open");
  return SLIP_OK;
}

/* ---------------------------------------------------------------- the index */

static int32_t codec_of(enum AVCodecID id) {
  switch (id) {
  case AV_CODEC_ID_H264: return SLIP_VIDEO_CODEC_H264;
  case AV_CODEC_ID_HEVC: return SLIP_VIDEO_CODEC_HEVC;
  case AV_CODEC_ID_VP9: return SLIP_VIDEO_CODEC_VP9;
  case AV_CODEC_ID_AV1: return SLIP_VIDEO_CODEC_AV1;
  case AV_CODEC_ID_MPEG4: return SLIP_VIDEO_CODEC_MPEG4;
  default: return SLIP_VIDEO_CODEC_OTHER;
  }
}

static int yuv420_format(int format) { return format == AV_PIX_FMT_YUV420P || format == AV_PIX_FMT_YUVJ420P; }

static int32_t colour_of(int format, enum AVColorRange range, enum AVColorSpace space) {
  int full = range == AVCOL_RANGE_JPEG || format == AV_PIX_FMT_YUVJ420P;
  int bt709 = space == AVCOL_SPC_BT709;
  return full ? (bt709 ? SLIP_VIDEO_COLOUR_BT709_FULL : SLIP_VIDEO_COLOUR_BT601_FULL)
              : (bt709 ? SLIP_VIDEO_COLOUR_BT709_LIMITED : SLIP_VIDEO_COLOUR_BT601_LIMITED);
}

typedef struct frame_entry {
  int64_t pts, seek;
} frame_entry;

static int by_pts(const void *a, const void *b) {
  int64_t x = ((const frame_entry *)a)->pts, y = ((const frame_entry *)b)->pts;
  return (x > y) - (x < y);
}

SLIP_API int32_t slip_video_available(void) { return 1; }

/* Hand the decoder a packet of the stream (NULL: its end) until the first
 * frame comes out: its format and colour go into info, its size must be the
 * stream's.  The header alone does not say them for every container. */
static int32_t index_first_frame(video *v, const AVPacket *packet, slip_video_info_t *info, int *done) {
  int code = avcodec_send_packet(v->decoder, packet);
  if (code < 0 && code != AVERROR_EOF) return av_fail(code, "the first frames of the video stream do not decode");
  code = avcodec_receive_frame(v->decoder, v->frame);
  if (code == AVERROR(EAGAIN) || code == AVERROR_EOF) return SLIP_OK;
  if (code < 0) return av_fail(code, "the first frame of the video stream does not decode");
  *done = 1;
  info->yuv420 = yuv420_format(v->frame->format);
  info->colour = colour_of(v->frame->format, v->frame->color_range, v->frame->colorspace);
  int32_t status = SLIP_OK;
  if (v->frame->height != info->height || v->frame->width != info->width)
    status = slip__fail(SLIP_ECORRUPT, "the video's first frame is %d x %d pixels, its header says %d x %d",
                        v->frame->height, v->frame->width, info->height, info->width);
  av_frame_unref(v->frame);
  return status;
}

SLIP_API int32_t slip_video_index(const uint8_t *data, size_t size, slip_video_info_t *info, int64_t *pts,
                                  int64_t *seek, int32_t capacity) {
  if (!data || !info || (pts == NULL) != (seek == NULL))
    return slip__fail(SLIP_EINVAL, "data and info must not be NULL, and pts and seek must be both NULL or neither");
  memset(info, 0, sizeof *info);
  video v;
  int32_t status = video_open(&v, data, size);
  frame_entry *frames = NULL;
  size_t n = 0, room = 0;
  int first_frame = 0; /* whether the first frame has decoded, telling its format and colour */
  if (status == SLIP_OK) {
    AVStream *stream = v.format->streams[v.stream];
    AVCodecParameters *par = stream->codecpar;
    info->height = par->height;
    info->width = par->width;
    info->codec = codec_of(par->codec_id);
    info->colour = colour_of(par->format, par->color_range, par->color_space);
    info->yuv420 = yuv420_format(par->format);
    info->time_base_num = stream->time_base.num;
    info->time_base_den = stream->time_base.den;
    status = video_open_decoder(&v);
    /* The keyframes decoding can start at: the latest (in decoding order) and the one before it. */
    int64_t key = AV_NOPTS_VALUE, earlier_key = AV_NOPTS_VALUE, first = AV_NOPTS_VALUE;
    while (status == SLIP_OK) {
      int code = av_read_frame(v.format, v.packet);
      if (code == AVERROR_EOF) break;
      if (code < 0) {
        status = av_fail(code, "the container's packets do not read");
        break;
      }
      if (v.packet->stream_index == v.stream) {
        int64_t t = v.packet->pts;
        if (t == AV_NOPTS_VALUE) {
          status = slip__fail(SLIP_ECORRUPT, "packet %zu of the video stream has no timestamp (a raw elementary "
                              "stream: put it in a container, e.g. `ffmpeg -i in.h264 -c copy out.mp4`)", n);
        } else {
          if (first == AV_NOPTS_VALUE) first = t;
          if (v.packet->flags & AV_PKT_FLAG_KEY) {
            earlier_key = key;
            key = t;
            info->keyframes++;
          }
          if (n == room) {
            room = room ? 2 * room : 256;
            frame_entry *grown = realloc(frames, room * sizeof *frames);
            if (!grown) status = slip__fail(SLIP_ENOMEM, "out of memory indexing a video");
            else frames = grown;
          }
          if (status == SLIP_OK && !first_frame) status = index_first_frame(&v, v.packet, info, &first_frame);
          if (status == SLIP_OK) {
            /* An open GOP's leading frames show before their keyframe: they start at the one before.  A
             * frame shown before every keyframe so far starts at its own timestamp, which a backward seek
             * takes to the first keyframe: the decode then finds it or says the stream has no such frame. */
            int64_t start = key != AV_NOPTS_VALUE && key <= t ? key
                            : earlier_key != AV_NOPTS_VALUE && earlier_key <= t ? earlier_key
                            : first <= t ? first : t;
            frames[n++] = (frame_entry){t, start};
          }
        }
      }
      av_packet_unref(v.packet);
      if (n > INT32_MAX - 1) status = slip__fail(SLIP_ETOOBIG, "the video has more than 2^31 frames");
    }
  }
  if (status == SLIP_OK && n == 0) status = slip__fail(SLIP_ECORRUPT, "the video stream has no frames");
  if (status == SLIP_OK && !first_frame) status = index_first_frame(&v, NULL, info, &first_frame);
  if (status == SLIP_OK && !first_frame)
    status = slip__fail(SLIP_ECORRUPT, "no frame of the video stream decodes");
  if (status == SLIP_OK) {
    qsort(frames, n, sizeof *frames, by_pts);
    for (size_t i = 1; i < n && status == SLIP_OK; i++)
      if (frames[i].pts == frames[i - 1].pts)
        status = slip__fail(SLIP_ECORRUPT, "two frames of the video have timestamp %lld", (long long)frames[i].pts);
    info->frames = (int32_t)n;
  }
  if (status == SLIP_OK && pts) {
    if ((size_t)capacity < n)
      status = slip__fail(SLIP_EBUFFER, "the video has %zu frames, the index arrays %d entries", n, capacity);
    for (size_t i = 0; status == SLIP_OK && i < n; i++) {
      pts[i] = frames[i].pts;
      seek[i] = frames[i].seek;
    }
  }
  free(frames);
  video_close(&v);
  return status;
}

/* ---------------------------------------------------------------- decoding windows */

static const slip__ycbcr_matrix matrices[4] = {
    /* BT.601 and BT.709, limited range: luma (Y - 16) * 255 / 219, chroma scaled by 255 / 224. */
    [SLIP_VIDEO_COLOUR_BT601_LIMITED] = {16.0f, 255.0f / 219.0f, 1.402f * 255.0f / 224.0f,
                                         0.344136f * 255.0f / 224.0f, 0.714136f * 255.0f / 224.0f,
                                         1.772f * 255.0f / 224.0f},
    [SLIP_VIDEO_COLOUR_BT709_LIMITED] = {16.0f, 255.0f / 219.0f, 1.5748f * 255.0f / 224.0f,
                                         0.187324f * 255.0f / 224.0f, 0.468124f * 255.0f / 224.0f,
                                         1.8556f * 255.0f / 224.0f},
    [SLIP_VIDEO_COLOUR_BT601_FULL] = {0.0f, 1.0f, 1.402f, 0.344136f, 0.714136f, 1.772f},
    [SLIP_VIDEO_COLOUR_BT709_FULL] = {0.0f, 1.0f, 1.5748f, 0.187324f, 0.468124f, 1.8556f},
};

/* What is done with each wanted frame: crop it into RGB, or copy its planes. */
typedef struct frame_sink {
  int32_t height, width;
  /* crop_resize */
  int32_t y, x, h, w, out_h, out_w, flags, interp;
  int64_t frame_stride, out_stride;
  /* planes (when planes is set) */
  int planes;
  uint8_t *out;
  size_t out_size;
} frame_sink;

static int32_t deliver(const frame_sink *sink, int32_t i, const AVFrame *f) {
  if (!yuv420_format(f->format))
    return slip__fail(SLIP_EUNSUPPORTED, "the video's frames are %s, not 8-bit YCbCr 4:2:0 (yuv420p)",
                      av_get_pix_fmt_name(f->format) ? av_get_pix_fmt_name(f->format) : "of an unknown format");
  if (f->decode_error_flags || (f->flags & AV_FRAME_FLAG_CORRUPT))
    return slip__fail(SLIP_ECORRUPT, "a frame of the video decodes with errors (damaged or missing data)");
  if (f->height != sink->height || f->width != sink->width)
    return slip__fail(SLIP_ECORRUPT, "a frame of the video is %d x %d pixels, its index says %d x %d", f->height,
                      f->width, sink->height, sink->width);
  if (sink->planes) {
    size_t frame = (size_t)slip_planes_bytes(sink->height, sink->width);
    uint8_t *to = sink->out + (size_t)i * frame;
    int32_t c_height = (sink->height + 1) / 2, c_width = (sink->width + 1) / 2;
    for (int32_t r = 0; r < sink->height; r++)
      memcpy(to + (size_t)r * sink->width, f->data[0] + (int64_t)r * f->linesize[0], (size_t)sink->width);
    for (int c = 1; c <= 2; c++) {
      uint8_t *plane = to + (size_t)sink->height * sink->width + (size_t)(c - 1) * c_height * c_width;
      for (int32_t r = 0; r < c_height; r++)
        memcpy(plane + (size_t)r * c_width, f->data[c] + (int64_t)r * f->linesize[c], (size_t)c_width);
    }
    return SLIP_OK;
  }
  if (f->linesize[1] != f->linesize[2])
    return slip__fail(SLIP_EUNSUPPORTED, "the frame's chroma planes have different strides");
  /* The chroma is taken as sited between the luma pixels it covers, as swscale (PyAV's and torchcodec's
   * conversion) takes 4:2:0 video by default. */
  slip__planes_view view = {f->data[0], f->data[1], f->data[2], f->linesize[0], f->linesize[1], f->height, f->width};
  const slip__ycbcr_matrix *m = &matrices[colour_of(f->format, f->color_range, f->colorspace)];
  uint8_t *to = sink->out + (size_t)i * (size_t)sink->frame_stride;
  size_t left = sink->out_size - (size_t)i * (size_t)sink->frame_stride;
  return slip__planes_view_crop_resize(&view, m, sink->y, sink->x, sink->h, sink->w, sink->out_h, sink->out_w,
                                       sink->flags, sink->interp, to, left, sink->out_stride);
}

/* Seek to the keyframe at timestamp `at`, dropping what the decoder holds. */
static int32_t seek_to(video *v, int64_t at) {
  int code = av_seek_frame(v->format, v->stream, at, AVSEEK_FLAG_BACKWARD);
  if (code < 0) return av_fail(code, "the video does not seek to its keyframe");
  avcodec_flush_buffers(v->decoder);
  return SLIP_OK;
}

/* Whether timestamp t is among pts[next .. count), which ascend. */
static int wanted(const int64_t *pts, int32_t next, int32_t count, int64_t t) {
  if (t == AV_NOPTS_VALUE) return 1;
  int32_t lo = next, hi = count;
  while (lo < hi) {
    int32_t mid = lo + (hi - lo) / 2;
    if (pts[mid] < t) lo = mid + 1;
    else hi = mid;
  }
  return lo < count && pts[lo] == t;
}

/* Decode the frames at pts[0 .. count) and hand each to the sink. */
static int32_t walk(const uint8_t *data, size_t size, const int64_t *pts, const int64_t *seek, int32_t count,
                    const frame_sink *sink) {
  video v;
  int32_t status = video_open(&v, data, size);
  if (status == SLIP_OK) status = video_open_decoder(&v);
  if (status == SLIP_OK) status = seek_to(&v, seek[0]);
  int64_t limit = slip_get_limit(SLIP_LIMIT_VIDEO_DECODES), decoded = 0, last = AV_NOPTS_VALUE;
  int32_t next = 0, draining = 0;
  while (status == SLIP_OK && next < count) {
    /* Frames the decoder has ready. */
    int code = avcodec_receive_frame(v.decoder, v.frame);
    if (code == 0) {
      int64_t t = v.frame->best_effort_timestamp != AV_NOPTS_VALUE ? v.frame->best_effort_timestamp : v.frame->pts;
      if (++decoded > limit) {
        status = slip__fail(SLIP_ETOOBIG, "the frames asked for need more than SLIP_LIMIT_VIDEO_DECODES (%lld) "
                            "frames decoded", (long long)limit);
      } else if (t != AV_NOPTS_VALUE && t > pts[next]) {
        status = slip__fail(SLIP_ECORRUPT, "the video has no frame at timestamp %lld (the decoder went from %lld "
                            "to %lld): its index disagrees with the stream", (long long)pts[next], (long long)last,
                            (long long)t);
      } else {
        while (status == SLIP_OK && next < count && t == pts[next]) status = deliver(sink, next++, v.frame);
        last = t;
        /* A wanted frame whose keyframe lies ahead: go there rather than decode what lies between. */
        if (status == SLIP_OK && next < count && t != AV_NOPTS_VALUE && seek[next] > t) {
          status = seek_to(&v, seek[next]);
          draining = 0;
        }
      }
      av_frame_unref(v.frame);
      continue;
    }
    if (code == AVERROR_EOF) {
      status = slip__fail(SLIP_ETRUNCATED, "the video stream ends before the frame at timestamp %lld (the last "
                          "decoded was %lld)", (long long)pts[next], (long long)last);
      break;
    }
    if (code != AVERROR(EAGAIN)) {
      status = av_fail(code, "the video stream does not decode");
      break;
    }
    if (draining) {
      status = av_fail(AVERROR_BUG, "the video decoder wants data after its end");
      break;
    }
    /* The decoder wants a packet of the stream. */
    code = av_read_frame(v.format, v.packet);
    if (code == AVERROR_EOF) {
      draining = 1;
      code = avcodec_send_packet(v.decoder, NULL);
    } else if (code < 0) {
      status = av_fail(code, "the container's packets do not read");
      break;
    } else {
      if (v.packet->stream_index == v.stream) {
        /* A frame no other frame refers to is decoded only when it is wanted (what it shows changes nothing
         * else): most B-frames of H.264 and HEVC between the keyframe and the window, and between its frames. */
        v.decoder->skip_frame = wanted(pts, next, count, v.packet->pts) ? AVDISCARD_DEFAULT : AVDISCARD_NONREF;
        code = avcodec_send_packet(v.decoder, v.packet);
      }
      av_packet_unref(v.packet);
    }
    if (code < 0 && code != AVERROR(EAGAIN) && code != AVERROR_EOF) status = av_fail(code, "the video stream does not decode");
  }
  video_close(&v);
  return status;
}

static int32_t check_window(const uint8_t *data, const int64_t *pts, const int64_t *seek, int32_t count) {
  if (!data || !pts || !seek) return slip__fail(SLIP_EINVAL, "data, pts and seek must not be NULL");
  int64_t limit = slip_get_limit(SLIP_LIMIT_VIDEO_DECODES);
  if (count < 1 || count > limit)
    return slip__fail(count < 1 ? SLIP_EINVAL : SLIP_ETOOBIG,
                      "%d frames asked for, outside 1 to SLIP_LIMIT_VIDEO_DECODES (%lld)", count, (long long)limit);
  for (int32_t i = 0; i < count; i++) {
    if (seek[i] > pts[i])
      return slip__fail(SLIP_EINVAL, "frame %d's keyframe timestamp %lld is after its own, %lld", i,
                        (long long)seek[i], (long long)pts[i]);
    if (i > 0 && pts[i] < pts[i - 1])
      return slip__fail(SLIP_EINVAL, "the timestamps asked for go back (%lld after %lld)", (long long)pts[i],
                        (long long)pts[i - 1]);
  }
  return SLIP_OK;
}

SLIP_API int32_t slip_video_decode_crop_resize(const uint8_t *data, size_t size, const int64_t *pts,
                                               const int64_t *seek, int32_t count, int32_t height, int32_t width,
                                               int32_t y, int32_t x, int32_t h, int32_t w, int32_t out_h,
                                               int32_t out_w, int32_t flags, int32_t interp, uint8_t *out,
                                               size_t out_size, int64_t frame_stride, int64_t out_stride) {
  int32_t status = check_window(data, pts, seek, count);
  if (status != SLIP_OK) return status;
  if (!out) return slip__fail(SLIP_EINVAL, "out must not be NULL");
  if ((status = check_frame_size(height, width)) != SLIP_OK) return status;
  if ((status = slip__check_planes_crop(height, width, y, x, h, w, out_h, out_w, flags, interp)) != SLIP_OK)
    return status;
  if (out_stride < (int64_t)out_w * 3)
    return slip__fail(SLIP_EINVAL, "out_stride %lld is smaller than a row of %d pixels", (long long)out_stride, out_w);
  uint64_t frame, need;
  if (__builtin_mul_overflow((uint64_t)out_h, (uint64_t)out_stride, &frame) || frame_stride < 0 ||
      (uint64_t)frame_stride < frame)
    return slip__fail(SLIP_EINVAL, "frame_stride %lld is smaller than a frame of %d rows of %lld bytes",
                      (long long)frame_stride, out_h, (long long)out_stride);
  if (__builtin_mul_overflow((uint64_t)(count - 1), (uint64_t)frame_stride, &need) ||
      __builtin_add_overflow(need, frame, &need) || out_size < need)
    return slip__fail(SLIP_EBUFFER, "%d frames of %d x %d pixels do not fit in %zu bytes", count, out_h, out_w,
                      out_size);
  frame_sink sink = {height, width, y, x, h, w, out_h, out_w, flags, interp, frame_stride, out_stride, 0, out,
                     out_size};
  return walk(data, size, pts, seek, count, &sink);
}

SLIP_API int32_t slip_video_decode_planes(const uint8_t *data, size_t size, const int64_t *pts, const int64_t *seek,
                                          int32_t count, int32_t height, int32_t width, uint8_t *out,
                                          size_t out_size) {
  int32_t status = check_window(data, pts, seek, count);
  if (status != SLIP_OK) return status;
  if (!out) return slip__fail(SLIP_EINVAL, "out must not be NULL");
  if ((status = check_frame_size(height, width)) != SLIP_OK) return status;
  uint64_t need;
  if (__builtin_mul_overflow((uint64_t)count, (uint64_t)slip_planes_bytes(height, width), &need) || out_size < need)
    return slip__fail(SLIP_EBUFFER, "the planes of %d frames of %d x %d pixels do not fit in %zu bytes", count,
                      height, width, out_size);
  frame_sink sink = {.height = height, .width = width, .planes = 1, .out = out, .out_size = out_size};
  return walk(data, size, pts, seek, count, &sink);
}

#endif
