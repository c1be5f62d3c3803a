/*
 * slipstream.h - the C ABI of libslipstream.
 *
 * libslipstream holds the pixel kernels of slipstream: JPEG header parsing,
 * region-of-interest and DCT-scaled JPEG decoding, a fused decode+crop+resize,
 * resampling, Pillow's tone operations and affine and perspective warps,
 * the steps of augmentation policies, MixUp's and CutMix's mixing of a
 * sample, normalization/packing into tensor layouts, JPEG encoding for the
 * dataset writer, positional file reads, page checksums, and file mappings
 * that survive the file being truncated.  Limits (slip_set_limit) bound the
 * work any one JPEG can cause.
 *
 * Conventions shared by every function below:
 *
 *  - The caller owns all memory.  Functions never return memory to free.  The
 *    only allocations are per-thread scratch buffers (and libjpeg's own
 *    per-image working memory); scratch grows to the largest request seen on
 *    a thread and is reused, so a steady workload allocates nothing.  Scratch
 *    is freed when the thread exits.
 *  - Images are 8-bit, interleaved (HWC).  Row strides are given explicitly,
 *    in bytes, and may exceed width * channels (padded rows, sub-images).
 *  - Every fallible function returns an int32_t status: SLIP_OK (0) on
 *    success, a negative slip_status code on failure.  slip_strerror() names a
 *    code; slip_last_error() gives the detail of the calling thread's most
 *    recent failure (for example libjpeg's own message).
 *  - Every function is thread-safe and re-entrant: concurrent calls from any
 *    number of threads are allowed.  Nothing here touches Python, so callers
 *    may run it without the GIL.  Nothing ever calls exit() or abort().
 *  - Parameters documented as taking an enum are declared int32_t so that the
 *    ABI does not depend on the compiler's choice of enum size.
 *  - Results do not depend on the CPU.  On x86-64 CPUs with AVX2 (and F16C)
 *    resampling, the planes' crop, float16 packing and the blends of the
 *    tone kernels run vector code that gives the same bytes as the portable
 *    code; setting the environment variable
 *    SLIPSTREAM_PORTABLE_KERNELS=1 before a thread first calls in makes it
 *    use the portable code, which is how tests compare the two.
 *
 * slipstream/_native.py (ctypes prototypes, Numba intrinsics, Python enums) is
 * generated from this file by codegen/; keep its declarations in the simple
 * form used here (one declaration per statement, no macros in signatures).
 */
#ifndef SLIPSTREAM_H
#define SLIPSTREAM_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define SLIP_API __declspec(dllexport)
#else
#define SLIP_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Version of this ABI; bumped whenever a declaration in this file changes. */
#define SLIP_ABI_VERSION 10

/** Largest image side, in pixels, that any function accepts (libjpeg's own limit). */
#define SLIP_MAX_DIMENSION 65500

/** Most memory, in bytes, that one JPEG decode may use for libjpeg's
 *  whole-image buffers (progressive and multi-scan images) or for the fused
 *  kernel's region scratch; a larger request fails with SLIP_ETOOBIG. */
#define SLIP_MAX_DECODE_MEMORY 1073741824

/** Default of SLIP_LIMIT_SCANS: most scans of one JPEG.  Encoders write 1
 *  (baseline) to about 10 (libjpeg's and mozjpeg's progressive modes); a
 *  hostile file may repeat legal scans without end, each costing a pass over
 *  the image's blocks (about 10 ns a block on one core) in a few bytes. */
#define SLIP_DEFAULT_MAX_SCANS 100

/** Default of SLIP_LIMIT_PASSES: most passes over the image's blocks that
 *  all the scans of one JPEG may take together, where a scan of components
 *  holding a fraction f of the image's blocks counts f passes.  libjpeg's
 *  progressive modes take 5.3 (YCbCr 4:2:0) and 6 (grey), a baseline JPEG 1;
 *  a hostile file can repeat a scan over every block in a few bytes. */
#define SLIP_DEFAULT_MAX_PASSES 12

/** Default of SLIP_LIMIT_VIDEO_DECODES: most frames one video decoding call
 *  may decode.  A window of 64 frames at stride 4 in a video whose
 *  keyframes lie 10 s apart at 60 frames a second decodes up to 856; a
 *  hostile index can point a frame's keyframe anywhere before it.
 */
#define SLIP_DEFAULT_MAX_VIDEO_DECODES 4096

/** Default of SLIP_LIMIT_PIXELS: most pixels (height x width) of one JPEG,
 *  16384 x 16384.  Arithmetic coding can describe a flat image of 65500 x
 *  65500 pixels in kilobytes, whose decoding would take tens of seconds. */
#define SLIP_DEFAULT_MAX_PIXELS 268435456

/** Status codes returned by every fallible function. */
typedef enum slip_status {
  SLIP_OK = 0,            /**< success */
  SLIP_EINVAL = -1,       /**< invalid argument: null pointer, bad size, region outside the image, unknown enum value */
  SLIP_ENOMEM = -2,       /**< scratch memory could not be allocated */
  SLIP_EBUFFER = -3,      /**< the output buffer is too small for the result */
  SLIP_ENOTJPEG = -4,     /**< the data does not start with a JPEG SOI marker */
  SLIP_ECORRUPT = -5,     /**< the JPEG data is corrupt (libjpeg error or a data-corrupting warning), or a video
                               that no demuxer or decoder reads, or whose index disagrees with its stream */
  SLIP_ETRUNCATED = -6,   /**< the JPEG data ends before the image does, or a video stream before a frame */
  SLIP_EUNSUPPORTED = -7, /**< valid but unsupported JPEG: 12-bit, lossless, unknown colour space, a height
                               given by a DNL marker (0 in the frame header); a video that is not 8-bit 4:2:0,
                               of a codec without a decoder, or a build without FFmpeg */
  SLIP_ETOOBIG = -8,      /**< the image, the memory or the work it needs exceeds a limit: SLIP_MAX_DIMENSION,
                               SLIP_MAX_DECODE_MEMORY, SLIP_LIMIT_SCANS, SLIP_LIMIT_PIXELS
                               or SLIP_LIMIT_PASSES */
  SLIP_EIO = -9,          /**< an operating-system I/O error; the detail holds strerror(errno) */
  SLIP_EEOF = -10,        /**< the file ended before all requested bytes were read */
  SLIP_ESHORT = -11       /**< a video has fewer frames, or a shorter duration, than a window of frames spans */
} slip_status;

/** Colour space of the compressed JPEG data. */
typedef enum slip_colorspace {
  SLIP_COLORSPACE_UNKNOWN = 0, /**< not one of the below */
  SLIP_COLORSPACE_GRAY = 1,    /**< one luminance component */
  SLIP_COLORSPACE_RGB = 2,     /**< three components stored as RGB */
  SLIP_COLORSPACE_YCBCR = 3,   /**< three components stored as YCbCr (the usual case) */
  SLIP_COLORSPACE_CMYK = 4,    /**< four components stored as CMYK */
  SLIP_COLORSPACE_YCCK = 5     /**< four components stored as YCCK */
} slip_colorspace;

/** Chroma subsampling, named by the J:a:b convention. */
typedef enum slip_subsampling {
  SLIP_SUBSAMPLING_444 = 0,   /**< no subsampling */
  SLIP_SUBSAMPLING_422 = 1,   /**< chroma halved horizontally */
  SLIP_SUBSAMPLING_420 = 2,   /**< chroma halved in both directions */
  SLIP_SUBSAMPLING_440 = 3,   /**< chroma halved vertically */
  SLIP_SUBSAMPLING_411 = 4,   /**< chroma quartered horizontally */
  SLIP_SUBSAMPLING_441 = 5,   /**< chroma quartered vertically */
  SLIP_SUBSAMPLING_GRAY = 6,  /**< a single component: nothing to subsample */
  SLIP_SUBSAMPLING_OTHER = 7  /**< any other combination of sampling factors */
} slip_subsampling;

/** Options of the decoding functions; combine with bitwise OR. */
typedef enum slip_decode_flags {
  SLIP_DECODE_DEFAULT = 0,  /**< accurate integer IDCT, no flip; chroma is always upsampled smoothly ("fancy") */
  SLIP_DECODE_FLIP_X = 1,   /**< mirror the output horizontally */
  SLIP_DECODE_FAST_IDCT = 2 /**< libjpeg's fast integer IDCT: quicker, slightly less accurate */
} slip_decode_flags;

/** Options of slip_jpeg_encode; combine with bitwise OR. */
typedef enum slip_encode_flags {
  SLIP_ENCODE_DEFAULT = 0,      /**< baseline JPEG with the standard Huffman tables */
  SLIP_ENCODE_PROGRESSIVE = 1,  /**< progressive JPEG (libjpeg's simple progression) */
  SLIP_ENCODE_OPTIMIZE = 2,     /**< compute optimal Huffman tables: smaller files, slower encoding */
  SLIP_ENCODE_ARITHMETIC = 4    /**< arithmetic entropy coding (ITU T.81 annex D) instead of Huffman:
                                     about 5-10% smaller, slower to decode, not read by every decoder */
} slip_encode_flags;

/** Resampling filters. */
typedef enum slip_interp {
  /** Box filter weighted by exact area overlap: each output pixel is the mean
   *  of the source area it covers (antialiased when shrinking). */
  SLIP_INTERP_AREA = 0,
  /** Triangle filter with half-pixel centres; when shrinking, its support
   *  widens by the scale factor (antialiased, as torchvision's and Pillow's
   *  bilinear resize); when enlarging it is plain bilinear interpolation. */
  SLIP_INTERP_BILINEAR = 1,
  /** Keys' cubic convolution with a = -0.5 (Pillow's and torchvision's
   *  bicubic), half-pixel centres, support widened by the scale factor when
   *  shrinking (antialiased); sharper than bilinear, its overshoot at edges
   *  clamped to 0..255. */
  SLIP_INTERP_BICUBIC = 2
} slip_interp;

/** Element types of slip_pack's output. */
typedef enum slip_dtype {
  SLIP_DTYPE_UINT8 = 0,   /**< unsigned 8-bit integer (no normalization) */
  SLIP_DTYPE_FLOAT16 = 1, /**< IEEE 754 binary16 */
  SLIP_DTYPE_FLOAT32 = 2  /**< IEEE 754 binary32 */
} slip_dtype;

/** Process-wide limits on the work one JPEG may cause, set with
 *  slip_set_limit.  Every function that decodes entropy-coded data
 *  (slip_jpeg_decode, slip_jpeg_decode_crop_resize,
 *  slip_jpeg_add_restart_markers) fails with SLIP_ETOOBIG, naming the limit
 *  in slip_last_error(), for an image beyond one; slip_jpeg_info, which reads
 *  the header only, reports any image.  Together with SLIP_MAX_DECODE_MEMORY
 *  they bound the time a decode can take at about SLIP_LIMIT_PASSES passes
 *  over SLIP_LIMIT_PIXELS pixels. */
typedef enum slip_limit {
  SLIP_LIMIT_SCANS = 0, /**< most scans (progressive and multi-scan JPEGs), default SLIP_DEFAULT_MAX_SCANS;
                             a decode stops when the first scan beyond it starts */
  SLIP_LIMIT_PIXELS = 1, /**< most pixels, height x width of the whole image, default SLIP_DEFAULT_MAX_PIXELS */
  SLIP_LIMIT_PASSES = 2, /**< most passes over the image's blocks of all its scans together (a scan of components
                              holding a fraction f of the blocks counts f), default SLIP_DEFAULT_MAX_PASSES; a
                              decode stops when the first scan beyond it starts */
  SLIP_LIMIT_VIDEO_DECODES = 3 /**< most frames one call of the video decoding functions may decode, from the
                                    keyframe it starts at to the last frame asked for, default
                                    SLIP_DEFAULT_MAX_VIDEO_DECODES; SLIP_LIMIT_PIXELS bounds each frame */
} slip_limit;

/** What slip_jpeg_info reports about a JPEG, read from its header alone. */
typedef struct slip_jpeg_info_t {
  int32_t height;      /**< image height in pixels */
  int32_t width;       /**< image width in pixels */
  int32_t components;  /**< number of colour components in the file: 1, 3 or 4 */
  int32_t colorspace;  /**< slip_colorspace of the stored data */
  int32_t subsampling; /**< slip_subsampling of the stored data */
  int32_t progressive; /**< 1 for a progressive JPEG, 0 for sequential */
  int32_t mcu_height;  /**< height in pixels of one MCU row at scale 1 (8, 16 or 32): the granularity of row decoding */
  int32_t mcu_width;   /**< width in pixels of one MCU column at scale 1: the granularity of column cropping */
} slip_jpeg_info_t;

/**
 * Version of the slipstream package the library was built with, as its
 * pyproject.toml gives it (for example "0.1.0"); "0+unknown" for a build of
 * the sources outside the package build (the sanitizer and fuzzing harnesses).
 *
 * @return a static, NUL-terminated string.
 */
SLIP_API const char *slip_version(void);

/**
 * ABI version the library was built with (SLIP_ABI_VERSION).  Bindings
 * compare it with the value of the header they were generated from.
 *
 * @return SLIP_ABI_VERSION of the compiled library.
 */
SLIP_API int32_t slip_abi_version(void);

/**
 * Name and one-line meaning of a status code.
 *
 * @param status  a slip_status value (any integer is accepted).
 * @return a static, NUL-terminated string; "unknown status" for values
 *         outside slip_status.
 */
SLIP_API const char *slip_strerror(int32_t status);

/**
 * Detail of the most recent failure of a slipstream function on the calling
 * thread: which argument was wrong, libjpeg's message, the errno text.
 *
 * @return a NUL-terminated string owned by the calling thread, valid until
 *         its next slipstream call; empty when that thread has not failed.
 */
SLIP_API const char *slip_last_error(void);

/**
 * Set a decoding limit for the whole process (every thread, every later
 * call; calls already running may use the old or the new value).
 *
 * @param limit  a slip_limit.
 * @param value  the new limit (>= 1): scans for SLIP_LIMIT_SCANS, pixels for SLIP_LIMIT_PIXELS, passes for
 *               SLIP_LIMIT_PASSES.
 * @return SLIP_OK; SLIP_EINVAL for an unknown limit or a value below 1.
 */
SLIP_API int32_t slip_set_limit(int32_t limit, int64_t value);

/**
 * Current value of a decoding limit.
 *
 * @param limit  a slip_limit.
 * @return the limit (>= 1); SLIP_EINVAL for an unknown limit.
 */
SLIP_API int64_t slip_get_limit(int32_t limit);

/**
 * Read the header of a JPEG image, without decoding any pixels.
 *
 * @param data  the compressed JPEG bytes.
 * @param size  number of bytes at data.
 * @param info  receives the image description.
 * @return SLIP_OK; SLIP_EINVAL for null pointers; SLIP_ENOTJPEG when data
 *         does not start with an SOI marker; SLIP_ETRUNCATED when the data
 *         ends inside the header; SLIP_ECORRUPT for a malformed header;
 *         SLIP_EUNSUPPORTED for 12-bit and lossless JPEGs.  On failure
 *         *info is left unchanged.
 */
SLIP_API int32_t slip_jpeg_info(const uint8_t *data, size_t size, slip_jpeg_info_t *info);

/**
 * Largest DCT scaling denominator (8, 4, 2 or 1) at which a crop of
 * crop_h x crop_w source pixels still has at least out_h x out_w pixels,
 * i.e. the largest d with crop_h >= out_h * d and crop_w >= out_w * d.
 * Decoding at scale 1/d and then resizing needs at most 1/d^2 of the work of
 * decoding at full size, with no loss of output detail.
 *
 * @param crop_h  crop height in source pixels (> 0).
 * @param crop_w  crop width in source pixels (> 0).
 * @param out_h   output height in pixels (> 0).
 * @param out_w   output width in pixels (> 0).
 * @return 8, 4, 2 or 1; SLIP_EINVAL when any argument is not positive.
 */
SLIP_API int32_t slip_jpeg_scale_for(int32_t crop_h, int32_t crop_w, int32_t out_h, int32_t out_w);

/**
 * Decode a region of a JPEG image at a DCT scale into RGB pixels.
 *
 * The region (y, x, h, w) is given in source pixels.  At scale 1/d the image
 * is ceil(height/d) x ceil(width/d) pixels and the region maps to the scaled
 * rows floor(y/d) .. ceil((y+h)/d)-1 and columns floor(x/d) .. ceil((x+w)/d)-1;
 * that block (out_h x out_w, with out_h = ceil((y+h)/d) - floor(y/d) and
 * likewise out_w) is written to out.  The result is identical to the same
 * block of a full decode at the same scale and flags.  Only what the region
 * needs is decoded: rows above it are skipped without inverse DCT, rows below
 * it are not read, and only the MCU columns it touches are transformed.  When
 * the JPEG is tiled by restart markers (see slip_jpeg_add_restart_markers),
 * the tiles outside the region are not entropy-decoded at all.
 * Grayscale sources are replicated into R, G and B; CMYK and YCCK sources are
 * converted with Adobe's inverted-CMYK convention, R = (255-C)(255-K)/255.
 *
 * @param data         the compressed JPEG bytes.
 * @param size         number of bytes at data.
 * @param y            first source row of the region (>= 0).
 * @param x            first source column of the region (>= 0).
 * @param h            region height in source pixels (> 0, y + h <= image height).
 * @param w            region width in source pixels (> 0, x + w <= image width).
 * @param scale_denom  DCT scale denominator d: 1, 2, 4 or 8.
 * @param flags        slip_decode_flags.
 * @param out          receives out_h rows of out_w RGB pixels (3 bytes each).
 * @param out_size     bytes available at out; at least (out_h - 1) * out_stride + out_w * 3.
 * @param out_stride   bytes from one output row to the next (>= out_w * 3).
 * @return SLIP_OK; SLIP_EINVAL for bad arguments or a region outside the
 *         image; SLIP_EBUFFER when out_size is too small; the codes of
 *         slip_jpeg_info; SLIP_ECORRUPT or SLIP_ETRUNCATED for bad entropy
 *         data (libjpeg's corrupt-data warnings included); SLIP_ETOOBIG when
 *         libjpeg would need more than SLIP_MAX_DECODE_MEMORY or the image
 *         exceeds a slip_limit.  On failure out may be partly written.
 */
SLIP_API int32_t slip_jpeg_decode(const uint8_t *data, size_t size, int32_t y, int32_t x, int32_t h, int32_t w,
                                  int32_t scale_denom, int32_t flags, uint8_t *out, size_t out_size,
                                  int64_t out_stride);

/**
 * Whether a JPEG's entropy-coded data alone shows that it decodes: the fast
 * path of slip_jpeg_check, for tests and diagnostics.
 *
 * Reads the header with libjpeg, then every Huffman code of every block of
 * a single sequential Huffman scan of 8-bit grey, YCbCr or RGB with sampling
 * factors 1 or 2, without decoding any pixel.  It returns 1 only when a
 * decode of the whole image at scale 1/8 by slip_jpeg_decode would succeed
 * (every table the scan uses defined and valid, every code found, no bit read
 * past the end of a restart interval or of the scan, each restart marker the
 * one due, nothing left over before it, EOI after the scan).
 *
 * @param data  the compressed JPEG bytes.
 * @param size  number of bytes at data.
 * @return 1: the image decodes; 0: the scanner cannot tell (another kind of
 *         JPEG, such as a progressive one, or data it finds fault with,
 *         which a decode may still accept); a negative status when the
 *         header cannot be read (the codes of slip_jpeg_info) or the image is
 *         beyond SLIP_LIMIT_PIXELS (SLIP_ETOOBIG); SLIP_EINVAL for a NULL data.
 */
SLIP_API int32_t slip_jpeg_scan(const uint8_t *data, size_t size);

/**
 * Check that a JPEG decodes: every entropy-coded symbol of every block is
 * read, as a decode reads it, and no pixel is made.
 *
 * The verdict is exactly that of decoding the whole image at scale 1/8 with
 * slip_jpeg_decode (same status, same message on failure), at a fraction of
 * its cost for the common case: when slip_jpeg_scan shows that the image
 * decodes, nothing else is done; any other image is decoded at 1/8 scale by
 * libjpeg, whose result is returned.  Writers call it to refuse corrupt
 * images before storing them.
 *
 * @param data  the compressed JPEG bytes.
 * @param size  number of bytes at data.
 * @return SLIP_OK when the image decodes; otherwise the status
 *         slip_jpeg_decode at scale 1/8 returns: the codes of slip_jpeg_info,
 *         SLIP_ECORRUPT or SLIP_ETRUNCATED for bad entropy data, SLIP_ETOOBIG
 *         for an image beyond a slip_limit; SLIP_EINVAL for a NULL data.
 */
SLIP_API int32_t slip_jpeg_check(const uint8_t *data, size_t size);

/**
 * Decode a crop of a JPEG image and resize it to out_h x out_w RGB pixels: the
 * fused per-sample kernel of the loader.
 *
 * Picks d = slip_jpeg_scale_for(h, w, out_h, out_w), decodes only the scaled
 * block covering the crop (as slip_jpeg_decode would) into per-thread
 * scratch, and resamples the exact crop rectangle (y/d, x/d, h/d, w/d in
 * scaled pixels, fractional edges included) straight into out, mirrored when
 * SLIP_DECODE_FLIP_X is set.  After the first calls on a thread it allocates
 * nothing of its own.
 *
 * @param data        the compressed JPEG bytes.
 * @param size        number of bytes at data.
 * @param y           first source row of the crop (>= 0).
 * @param x           first source column of the crop (>= 0).
 * @param h           crop height in source pixels (> 0, y + h <= image height).
 * @param w           crop width in source pixels (> 0, x + w <= image width).
 * @param out_h       output height in pixels (> 0).
 * @param out_w       output width in pixels (> 0).
 * @param flags       slip_decode_flags.
 * @param interp      slip_interp filter.
 * @param out         receives out_h rows of out_w RGB pixels.
 * @param out_size    bytes available at out; at least (out_h - 1) * out_stride + out_w * 3.
 * @param out_stride  bytes from one output row to the next (>= out_w * 3).
 * @return as slip_jpeg_decode; SLIP_ENOMEM when scratch cannot grow;
 *         SLIP_ETOOBIG when the scaled block would exceed
 *         SLIP_MAX_DECODE_MEMORY.
 */
SLIP_API int32_t slip_jpeg_decode_crop_resize(const uint8_t *data, size_t size, int32_t y, int32_t x, int32_t h,
                                              int32_t w, int32_t out_h, int32_t out_w, int32_t flags,
                                              int32_t interp, uint8_t *out, size_t out_size, int64_t out_stride);

/**
 * Bytes of an image stored as planar YCbCr 4:2:0: the layout that
 * slip_jpeg_decode_planes and slip_rgb_to_planes write and
 * slip_planes_crop_resize reads.  The planes follow one another with no
 * padding: Y, height rows of width bytes; then Cb and Cr, each
 * ceil(height/2) rows of ceil(width/2) bytes.  Chroma sample (i, j) covers
 * the luma pixels [2i, 2i + 2) x [2j, 2j + 2), with its centre between them
 * (JPEG's siting); values are JFIF's full-range YCbCr.
 *
 * @param height  image height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param width   image width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @return height * width + 2 * ceil(height/2) * ceil(width/2);
 *         SLIP_EINVAL for a size outside 1 .. SLIP_MAX_DIMENSION.
 */
SLIP_API int64_t slip_planes_bytes(int32_t height, int32_t width);

/**
 * Decode a JPEG image into planar YCbCr 4:2:0 (see slip_planes_bytes).
 *
 * A YCbCr JPEG with 4:2:0 sampling (luma 2x2, each chroma component 1x1)
 * is decoded without chroma upsampling or colour conversion: the planes are
 * the JPEG's own decoded samples (accurate integer IDCT), so nothing is lost
 * that a decode to RGB would keep.  Any other JPEG (other subsamplings,
 * grayscale, RGB, CMYK) is decoded to RGB as slip_jpeg_decode does and
 * converted with slip_rgb_to_planes, which averages its chroma over 2 x 2
 * pixels: 4:4:4 and 4:2:2 images lose chroma resolution there.
 *
 * @param data      the compressed JPEG bytes.
 * @param size      number of bytes at data.
 * @param out       receives the planes.
 * @param out_size  bytes available at out; at least slip_planes_bytes(height, width).
 * @return SLIP_OK; SLIP_EINVAL for NULL pointers; SLIP_EBUFFER when out_size
 *         is too small; otherwise the codes of slip_jpeg_decode (a bad
 *         header, corrupt or truncated entropy data, an image over a
 *         slip_limit).  The entropy data is read on to EOI, so a damaged
 *         JPEG gets the status and message slip_jpeg_check gives it.  On
 *         failure out may be partly written.
 */
SLIP_API int32_t slip_jpeg_decode_planes(const uint8_t *data, size_t size, uint8_t *out, size_t out_size);

/**
 * Convert RGB pixels into planar YCbCr 4:2:0 (see slip_planes_bytes): JFIF's
 * full-range conversion in 16-bit fixed point, each chroma sample the mean
 * of the (up to four) pixels it covers, rounded once.
 *
 * @param src         height rows of width RGB pixels (3 bytes each).
 * @param height      image height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param width       image width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param src_stride  bytes from one source row to the next (>= width * 3).
 * @param out         receives the planes.
 * @param out_size    bytes available at out; at least slip_planes_bytes(height, width).
 * @return SLIP_OK; SLIP_EINVAL for NULL pointers, a bad size or stride;
 *         SLIP_EBUFFER when out_size is too small.
 */
SLIP_API int32_t slip_rgb_to_planes(const uint8_t *src, int32_t height, int32_t width, int64_t src_stride,
                                    uint8_t *out, size_t out_size);

/**
 * Crop an image stored as planar YCbCr 4:2:0 (see slip_planes_bytes), resize
 * the crop to out_h x out_w and convert it to RGB: the per-sample kernel of
 * images stored as planes.
 *
 * Only the rows and columns the crop covers are read.  The luma crop is
 * resampled with `interp` (as slip_resize would resample it); the chroma
 * planes are resampled at their own resolution, the crop's edges halved,
 * linearly where the chroma is enlarged (as a JPEG decoder's smooth
 * upsampling) and with `interp` where it shrinks; the three planes are
 * filtered row by row together and converted to RGB (JFIF, in single
 * precision, rounded once) at the output size, mirrored when
 * SLIP_DECODE_FLIP_X is set.  The chroma of an image at most 4 pixels wide
 * (at most 2 chroma samples across) is instead replicated over the 2 x 2
 * pixels each sample covers, in both directions, as libjpeg-turbo
 * upsamples it, and then resampled with `interp` as the luma is.  A crop
 * of the whole image at its own size equals a libjpeg-turbo decode of the
 * JPEG the planes came from within 2 levels, at every size (libjpeg-turbo
 * rounds its upsampled chroma).  After the first calls on a thread it
 * allocates nothing of its own.
 *
 * @param planes      the planes of a height x width image.
 * @param size        bytes at planes; at least slip_planes_bytes(height, width).
 * @param height      image height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param width       image width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param y           first row of the crop (>= 0).
 * @param x           first column of the crop (>= 0).
 * @param h           crop height in pixels (> 0, y + h <= height).
 * @param w           crop width in pixels (> 0, x + w <= width).
 * @param out_h       output height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param out_w       output width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param flags       slip_decode_flags; SLIP_DECODE_FLIP_X mirrors the
 *                    output, SLIP_DECODE_FAST_IDCT has no effect.
 * @param interp      slip_interp filter.
 * @param out         receives out_h rows of out_w RGB pixels.
 * @param out_size    bytes available at out; at least (out_h - 1) * out_stride + out_w * 3.
 * @param out_stride  bytes from one output row to the next (>= out_w * 3).
 * @return SLIP_OK; SLIP_EINVAL for bad arguments or a crop outside the
 *         image; SLIP_ETRUNCATED when size is smaller than the planes of a
 *         height x width image; SLIP_EBUFFER when out_size is too small;
 *         SLIP_ENOMEM when scratch cannot grow.
 */
SLIP_API int32_t slip_planes_crop_resize(const uint8_t *planes, size_t size, int32_t height, int32_t width,
                                         int32_t y, int32_t x, int32_t h, int32_t w, int32_t out_h, int32_t out_w,
                                         int32_t flags, int32_t interp, uint8_t *out, size_t out_size,
                                         int64_t out_stride);

/**
 * Crop and resize an interleaved 8-bit image (the reference semantics are
 * those of slip_interp; weights are computed in double precision and
 * applied in single precision, vertical pass first).
 *
 * Filter taps are clipped to the crop: pixels outside (y, x, h, w) never
 * contribute, exactly as if the crop had been copied out first.
 *
 * @param src         the source image, src_h rows of src_w pixels of `channels` bytes.
 * @param src_h       source height in pixels (> 0).
 * @param src_w       source width in pixels (> 0).
 * @param channels    bytes per pixel: 1, 3 or 4.
 * @param src_stride  bytes from one source row to the next (>= src_w * channels).
 * @param y           first row of the crop (>= 0).
 * @param x           first column of the crop (>= 0).
 * @param h           crop height (> 0, y + h <= src_h).
 * @param w           crop width (> 0, x + w <= src_w).
 * @param dst         receives dst_h rows of dst_w pixels of `channels` bytes.
 * @param dst_h       output height in pixels (> 0).
 * @param dst_w       output width in pixels (> 0).
 * @param dst_stride  bytes from one output row to the next (>= dst_w * channels).
 * @param interp      slip_interp filter.
 * @param flip_x      non-zero to mirror the output horizontally.
 * @return SLIP_OK; SLIP_EINVAL for bad arguments; SLIP_ENOMEM when scratch
 *         cannot grow.
 */
SLIP_API int32_t slip_resize(const uint8_t *src, int32_t src_h, int32_t src_w, int32_t channels, int64_t src_stride,
                             int32_t y, int32_t x, int32_t h, int32_t w, uint8_t *dst, int32_t dst_h, int32_t dst_w,
                             int64_t dst_stride, int32_t interp, int32_t flip_x);

/**
 * Resize a rectangle of an interleaved 8-bit image whose edges may fall
 * between pixels, as slip_resize does for whole-pixel crops: the rectangle
 * [cy, cy + ch) x [cx, cx + cw), in source pixels, is resampled into
 * dst_h x dst_w pixels.  Filter taps are limited to the whole pixels the
 * rectangle touches.  This is how a crop chosen in full-resolution pixels is
 * taken from an image decoded at a DCT scale 1/d: divide its edges by d.
 *
 * @param src         the source image, src_h rows of src_w pixels of `channels` bytes.
 * @param src_h       source height in pixels (> 0).
 * @param src_w       source width in pixels (> 0).
 * @param channels    bytes per pixel: 1, 3 or 4.
 * @param src_stride  bytes from one source row to the next (>= src_w * channels).
 * @param cy          top edge of the rectangle, in source pixels (>= 0).
 * @param cx          left edge of the rectangle, in source pixels (>= 0).
 * @param ch          rectangle height, in source pixels (> 0, cy + ch <= src_h).
 * @param cw          rectangle width, in source pixels (> 0, cx + cw <= src_w).
 * @param dst         receives dst_h rows of dst_w pixels of `channels` bytes.
 * @param dst_h       output height in pixels (> 0).
 * @param dst_w       output width in pixels (> 0).
 * @param dst_stride  bytes from one output row to the next (>= dst_w * channels).
 * @param interp      slip_interp filter.
 * @param flip_x      non-zero to mirror the output horizontally.
 * @return SLIP_OK; SLIP_EINVAL for bad arguments (including a rectangle that
 *         is empty, not finite or not inside the image); SLIP_ENOMEM when
 *         scratch cannot grow.
 */
SLIP_API int32_t slip_resize_region(const uint8_t *src, int32_t src_h, int32_t src_w, int32_t channels,
                                    int64_t src_stride, double cy, double cx, double ch, double cw, uint8_t *dst,
                                    int32_t dst_h, int32_t dst_w, int64_t dst_stride, int32_t interp, int32_t flip_x);

/*
 * Tone kernels: torchvision's PIL path and its augmentation policies change
 * values with Pillow's ImageOps (posterize, solarize, invert, autocontrast,
 * equalize) and ImageEnhance (brightness, color, contrast, sharpness).  These
 * functions compute them with Pillow's arithmetic, step for step, so that the
 * output equals Pillow's byte for byte.  Each reads an image src and writes
 * dst, of the same height, width and channels; dst may be src itself (the
 * same pointer and stride: in place) for every kernel but slip_sharpness, and
 * must not otherwise overlap src.  The ImageEnhance kernels blend a
 * "degenerate" value d towards the pixel's value v as Pillow's Image.blend
 * does: d + f * (v - d) in single precision, f the factor rounded to single
 * precision, stored as 0 at or below 0 and for NaN, 255 at or above 255,
 * else truncated.
 */

/**
 * ImageOps.posterize: keep the top `bits` bits of every value, zeroing the
 * others.
 *
 * @param src         height rows of width pixels of `channels` bytes.
 * @param src_size    bytes available at src; at least (height - 1) * src_stride + width * channels.
 * @param height      image height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param width       image width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param channels    bytes per pixel, 1 to 4.
 * @param src_stride  bytes from one source row to the next (>= width * channels).
 * @param dst         receives the result, of src's height, width and channels; may be src (in place).
 * @param dst_size    bytes available at dst; at least (height - 1) * dst_stride + width * channels.
 * @param dst_stride  bytes from one output row to the next (>= width * channels; src_stride when dst is src).
 * @param bits        bits kept per value, 0 (black) to 8 (unchanged); values beyond are taken as 0 or 8.
 * @return SLIP_OK; SLIP_EINVAL for a NULL pointer, a size outside
 *         1 .. SLIP_MAX_DIMENSION, channels outside 1 .. 4, a stride smaller
 *         than a row, or a dst that overlaps src without being src;
 *         SLIP_EBUFFER when src_size or dst_size is too small.  On failure
 *         dst is not written.
 */
SLIP_API int32_t slip_posterize(const uint8_t *src, size_t src_size, int32_t height, int32_t width, int32_t channels,
                                int64_t src_stride, uint8_t *dst, size_t dst_size, int64_t dst_stride, int64_t bits);

/**
 * ImageOps.solarize: every value v >= threshold becomes 255 - v.
 *
 * @param src         height rows of width pixels of `channels` bytes.
 * @param src_size    bytes available at src; at least (height - 1) * src_stride + width * channels.
 * @param height      image height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param width       image width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param channels    bytes per pixel, 1 to 4.
 * @param src_stride  bytes from one source row to the next (>= width * channels).
 * @param dst         receives the result, of src's height, width and channels; may be src (in place).
 * @param dst_size    bytes available at dst; at least (height - 1) * dst_stride + width * channels.
 * @param dst_stride  bytes from one output row to the next (>= width * channels; src_stride when dst is src).
 * @param threshold   the value, in levels (0 .. 255, fractions allowed), from which values are inverted:
 *                    0 or less (and NaN, as Pillow's v < NaN is false) inverts every value, above 255 none.
 * @return as slip_posterize.
 */
SLIP_API int32_t slip_solarize(const uint8_t *src, size_t src_size, int32_t height, int32_t width, int32_t channels,
                               int64_t src_stride, uint8_t *dst, size_t dst_size, int64_t dst_stride,
                               double threshold);

/**
 * ImageOps.invert: every value v becomes 255 - v.
 *
 * @param src         height rows of width pixels of `channels` bytes.
 * @param src_size    bytes available at src; at least (height - 1) * src_stride + width * channels.
 * @param height      image height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param width       image width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param channels    bytes per pixel, 1 to 4.
 * @param src_stride  bytes from one source row to the next (>= width * channels).
 * @param dst         receives the result, of src's height, width and channels; may be src (in place).
 * @param dst_size    bytes available at dst; at least (height - 1) * dst_stride + width * channels.
 * @param dst_stride  bytes from one output row to the next (>= width * channels; src_stride when dst is src).
 * @return as slip_posterize.
 */
SLIP_API int32_t slip_invert(const uint8_t *src, size_t src_size, int32_t height, int32_t width, int32_t channels,
                             int64_t src_stride, uint8_t *dst, size_t dst_size, int64_t dst_stride);

/**
 * ImageOps.autocontrast (no cutoff, nothing ignored), channel by channel:
 * with lo and hi the channel's lowest and highest values, value v becomes
 * (int)(v * scale + offset) in double precision, scale = 255.0 / (hi - lo),
 * offset = -lo * scale, clipped to 0 .. 255; a channel of one value is left
 * as it is.
 *
 * @param src         height rows of width pixels of `channels` bytes.
 * @param src_size    bytes available at src; at least (height - 1) * src_stride + width * channels.
 * @param height      image height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param width       image width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param channels    bytes per pixel, 1 to 4.
 * @param src_stride  bytes from one source row to the next (>= width * channels).
 * @param dst         receives the result, of src's height, width and channels; may be src (in place).
 * @param dst_size    bytes available at dst; at least (height - 1) * dst_stride + width * channels.
 * @param dst_stride  bytes from one output row to the next (>= width * channels; src_stride when dst is src).
 * @return as slip_posterize.
 */
SLIP_API int32_t slip_autocontrast(const uint8_t *src, size_t src_size, int32_t height, int32_t width,
                                   int32_t channels, int64_t src_stride, uint8_t *dst, size_t dst_size,
                                   int64_t dst_stride);

/**
 * ImageOps.equalize, channel by channel: with step the channel's pixel
 * count less the count of its highest value, divided by 255 (integer
 * division), value v becomes (step / 2 + the number of values below v) /
 * step (integer division), at most 255; a channel of one value, or whose
 * step is 0, is left as it is.
 *
 * @param src         height rows of width pixels of `channels` bytes.
 * @param src_size    bytes available at src; at least (height - 1) * src_stride + width * channels.
 * @param height      image height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param width       image width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param channels    bytes per pixel, 1 to 4.
 * @param src_stride  bytes from one source row to the next (>= width * channels).
 * @param dst         receives the result, of src's height, width and channels; may be src (in place).
 * @param dst_size    bytes available at dst; at least (height - 1) * dst_stride + width * channels.
 * @param dst_stride  bytes from one output row to the next (>= width * channels; src_stride when dst is src).
 * @return as slip_posterize.
 */
SLIP_API int32_t slip_equalize(const uint8_t *src, size_t src_size, int32_t height, int32_t width, int32_t channels,
                               int64_t src_stride, uint8_t *dst, size_t dst_size, int64_t dst_stride);

/**
 * ImageEnhance.Brightness(image).enhance(factor): every value blended with
 * black (d = 0).
 *
 * @param src         height rows of width pixels of `channels` bytes.
 * @param src_size    bytes available at src; at least (height - 1) * src_stride + width * channels.
 * @param height      image height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param width       image width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param channels    bytes per pixel, 1 to 4.
 * @param src_stride  bytes from one source row to the next (>= width * channels).
 * @param dst         receives the result, of src's height, width and channels; may be src (in place).
 * @param dst_size    bytes available at dst; at least (height - 1) * dst_stride + width * channels.
 * @param dst_stride  bytes from one output row to the next (>= width * channels; src_stride when dst is src).
 * @param factor      the blend factor: 0 black, 1 unchanged, above 1 brighter (any value, infinities and
 *                    NaN included: the blend's rule gives their bytes).
 * @return as slip_posterize.
 */
SLIP_API int32_t slip_brightness(const uint8_t *src, size_t src_size, int32_t height, int32_t width,
                                 int32_t channels, int64_t src_stride, uint8_t *dst, size_t dst_size,
                                 int64_t dst_stride, double factor);

/**
 * ImageEnhance.Color(image).enhance(factor): each of R, G and B blended with
 * the pixel's gray value, Pillow's RGB to L conversion (ITU-R 601-2 luma in
 * 16-bit fixed point, (19595 R + 38470 G + 7471 B + 0x8000) >> 16).  A
 * one-channel image is copied unchanged, whatever the factor, as Pillow
 * leaves an L image.
 *
 * @param src         height rows of width pixels of `channels` bytes.
 * @param src_size    bytes available at src; at least (height - 1) * src_stride + width * channels.
 * @param height      image height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param width       image width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param channels    bytes per pixel: 3 (RGB) or 1.
 * @param src_stride  bytes from one source row to the next (>= width * channels).
 * @param dst         receives the result, of src's height, width and channels; may be src (in place).
 * @param dst_size    bytes available at dst; at least (height - 1) * dst_stride + width * channels.
 * @param dst_stride  bytes from one output row to the next (>= width * channels; src_stride when dst is src).
 * @param factor      the blend factor: 0 gray, 1 unchanged, above 1 more saturated (any value, as
 *                    slip_brightness's).
 * @return as slip_posterize; SLIP_EINVAL also for channels other than 1 and 3.
 */
SLIP_API int32_t slip_color(const uint8_t *src, size_t src_size, int32_t height, int32_t width, int32_t channels,
                            int64_t src_stride, uint8_t *dst, size_t dst_size, int64_t dst_stride, double factor);

/**
 * ImageEnhance.Contrast(image).enhance(factor): every value blended with the
 * image's mean gray value, (int)(mean + 0.5) in double precision, the gray
 * value of an RGB pixel as slip_color computes it, of a one-channel pixel
 * its value.
 *
 * @param src         height rows of width pixels of `channels` bytes.
 * @param src_size    bytes available at src; at least (height - 1) * src_stride + width * channels.
 * @param height      image height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param width       image width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param channels    bytes per pixel: 3 (RGB) or 1.
 * @param src_stride  bytes from one source row to the next (>= width * channels).
 * @param dst         receives the result, of src's height, width and channels; may be src (in place).
 * @param dst_size    bytes available at dst; at least (height - 1) * dst_stride + width * channels.
 * @param dst_stride  bytes from one output row to the next (>= width * channels; src_stride when dst is src).
 * @param factor      the blend factor: 0 the mean gray, 1 unchanged, above 1 more contrast (any value, as
 *                    slip_brightness's).
 * @return as slip_posterize; SLIP_EINVAL also for channels other than 1 and 3.
 */
SLIP_API int32_t slip_contrast(const uint8_t *src, size_t src_size, int32_t height, int32_t width, int32_t channels,
                               int64_t src_stride, uint8_t *dst, size_t dst_size, int64_t dst_stride,
                               double factor);

/**
 * ImageEnhance.Sharpness(image).enhance(factor): every value blended with
 * the image smoothed by ImageFilter.SMOOTH, a 3 x 3 filter of weights
 * (1, 1, 1, 1, 5, 1, 1, 1, 1) / 13 in single precision (each weight divided
 * by 13 in single precision; each row of the kernel summed left to right,
 * the rows below, at and above the pixel added in that order onto 0.5, the
 * sum stored as a blended value is).  The smoothed image's outermost rows
 * and columns are the image's own, as is the whole of an image narrower or
 * lower than 3 pixels (Pillow's filter leaves them): there every value is
 * blended with itself, so it keeps its value for a finite factor.
 *
 * @param src         height rows of width pixels of `channels` bytes.
 * @param src_size    bytes available at src; at least (height - 1) * src_stride + width * channels.
 * @param height      image height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param width       image width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param channels    bytes per pixel, 1 to 4.
 * @param src_stride  bytes from one source row to the next (>= width * channels).
 * @param dst         receives the result, of src's height, width and channels; must not overlap src (the
 *                    filter reads the neighbours of each pixel).
 * @param dst_size    bytes available at dst; at least (height - 1) * dst_stride + width * channels.
 * @param dst_stride  bytes from one output row to the next (>= width * channels).
 * @param factor      the blend factor: 0 smoothed, 1 unchanged, above 1 sharpened (any value, as
 *                    slip_brightness's).
 * @return as slip_posterize; SLIP_EINVAL also when dst overlaps src, dst
 *         itself included.
 */
SLIP_API int32_t slip_sharpness(const uint8_t *src, size_t src_size, int32_t height, int32_t width,
                                int32_t channels, int64_t src_stride, uint8_t *dst, size_t dst_size,
                                int64_t dst_stride, double factor);

/*
 * Warps: torchvision's RandomRotation, RandomAffine and RandomPerspective on
 * PIL images, and the geometric steps of its augmentation policies, call
 * Pillow's Image.transform.  These functions compute its pixels, byte for
 * byte: output pixel (x, y) is centred on (x + 0.5, y + 0.5), mapped to a
 * point of src by the map's inverse; nearest neighbour takes the pixel
 * containing that point, bilinear blends the four pixel centres around it
 * (edges clamped) in double precision and truncates; where the point lies
 * outside src (or is not a number), the pixel is `fill`.
 */

/**
 * Image.transform(size, AFFINE, matrix, NEAREST or BILINEAR, fillcolor):
 * output point (x, y) comes from the point (m0 x + m1 y + m2, m3 x + m4 y +
 * m5) of src.  Nearest neighbour takes Pillow's own paths, so that the same
 * pixels are picked: a pure scale (m1 = m3 = 0) sums its coordinates step
 * by step in double precision; any other map, when
 * every corner of the output maps to coordinates below 32768 in magnitude,
 * in 16.16 fixed point (each coefficient and the first point rounded half
 * up, the integer part taken by an arithmetic shift), else in double
 * precision sums.  Bilinear takes a shift by whole pixels (m0 = m4 = 1,
 * m1 = m3 = 0, m2 and m5 whole numbers below 32768 in magnitude) as a copy of
 * rows, whose pixels are the same.
 *
 * @param src         src_h rows of src_w pixels of `channels` bytes.
 * @param src_size    bytes available at src; at least (src_h - 1) * src_stride + src_w * channels.
 * @param src_h       source height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param src_w       source width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param channels    bytes per pixel, 1 to 4.
 * @param src_stride  bytes from one source row to the next (>= src_w * channels).
 * @param dst         receives dst_h rows of dst_w pixels of `channels` bytes, every one written; must not
 *                    overlap src.
 * @param dst_size    bytes available at dst; at least (dst_h - 1) * dst_stride + dst_w * channels.
 * @param dst_h       output height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param dst_w       output width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param dst_stride  bytes from one output row to the next (>= dst_w * channels).
 * @param matrix      6 values m0 .. m5, Pillow's AFFINE data (the inverse of the warp), in pixels; any values,
 *                    infinities and NaN included (points they make that are not numbers are outside src).
 * @param nearest     non-zero: nearest neighbour; zero: bilinear.
 * @param fill        the colour of output pixels whose point lies outside src: `channels` values.
 * @param fill_size   values at fill (>= channels; only the first `channels` are read).
 * @return SLIP_OK; SLIP_EINVAL for a NULL pointer, a size outside
 *         1 .. SLIP_MAX_DIMENSION, channels outside 1 .. 4, a stride smaller
 *         than a row, or a dst that overlaps src; SLIP_EBUFFER when
 *         src_size, dst_size or fill_size is too small.  On failure dst is
 *         not written.
 */
SLIP_API int32_t slip_warp_affine(const uint8_t *src, size_t src_size, int32_t src_h, int32_t src_w,
                                  int32_t channels, int64_t src_stride, uint8_t *dst, size_t dst_size, int32_t dst_h,
                                  int32_t dst_w, int64_t dst_stride, const double *matrix, int32_t nearest,
                                  const uint8_t *fill, size_t fill_size);

/**
 * Image.transform(size, PERSPECTIVE, coefficients, NEAREST or BILINEAR,
 * fillcolor): output point (x, y) comes from the point ((a0 x + a1 y + a2) /
 * w, (a3 x + a4 y + a5) / w) of src, w = a6 x + a7 y + 1, each in double
 * precision; where w is 0 the pixel is `fill`.
 *
 * @param src           src_h rows of src_w pixels of `channels` bytes.
 * @param src_size      bytes available at src; at least (src_h - 1) * src_stride + src_w * channels.
 * @param src_h         source height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param src_w         source width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param channels      bytes per pixel, 1 to 4.
 * @param src_stride    bytes from one source row to the next (>= src_w * channels).
 * @param dst           receives dst_h rows of dst_w pixels of `channels` bytes, every one written; must not
 *                      overlap src.
 * @param dst_size      bytes available at dst; at least (dst_h - 1) * dst_stride + dst_w * channels.
 * @param dst_h         output height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param dst_w         output width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param dst_stride    bytes from one output row to the next (>= dst_w * channels).
 * @param coefficients  8 values a0 .. a7, Pillow's PERSPECTIVE data (the inverse of the warp); any values,
 *                      infinities and NaN included (points they make that are not numbers are outside src).
 * @param nearest       non-zero: nearest neighbour; zero: bilinear.
 * @param fill          the colour of output pixels whose point lies outside src: `channels` values.
 * @param fill_size     values at fill (>= channels; only the first `channels` are read).
 * @return as slip_warp_affine.
 */
SLIP_API int32_t slip_warp_perspective(const uint8_t *src, size_t src_size, int32_t src_h, int32_t src_w,
                                       int32_t channels, int64_t src_stride, uint8_t *dst, size_t dst_size,
                                       int32_t dst_h, int32_t dst_w, int64_t dst_stride, const double *coefficients,
                                       int32_t nearest, const uint8_t *fill, size_t fill_size);

/*
 * Policy steps: torchvision's augmentation policies (TrivialAugmentWide,
 * RandAugment, AutoAugment, AugMix) and timm's RandAugment apply, per sample,
 * a few operations drawn from a table.  One call computes one such step's
 * pixels: the matrix of a geometric operation as torchvision or timm builds
 * it, then the warp (slip_warp_affine) or the tone kernel above.  The caller
 * keeps the map of the geometric steps (boxes and masks follow it) from the
 * Pillow AFFINE data the call returns.
 */

/** The operations of torchvision's augmentation policies, by the names of
 *  its _apply_op (torchvision/transforms/autoaugment.py): the `op` of
 *  slip_policy_step.  Magnitudes are torchvision's: a shear's is the shear
 *  factor, a translation's pixels, a rotation's degrees counter-clockwise, an
 *  enhancement's the blend factor less 1, posterize's bits, solarize's
 *  threshold. */
typedef enum slip_primitive {
  SLIP_PRIMITIVE_IDENTITY = 0,     /**< the image unchanged */
  SLIP_PRIMITIVE_SHEAR_X = 1,      /**< F.affine with an x shear of atan(magnitude) in degrees, about (0, 0) */
  SLIP_PRIMITIVE_SHEAR_Y = 2,      /**< F.affine with a y shear of atan(magnitude) in degrees, about (0, 0) */
  SLIP_PRIMITIVE_TRANSLATE_X = 3,  /**< F.affine shifting by the magnitude's whole pixels (truncated) along x */
  SLIP_PRIMITIVE_TRANSLATE_Y = 4,  /**< F.affine shifting by the magnitude's whole pixels (truncated) along y */
  SLIP_PRIMITIVE_ROTATE = 5,       /**< F.rotate: Image.rotate by the magnitude in degrees about the centre */
  SLIP_PRIMITIVE_BRIGHTNESS = 6,   /**< slip_brightness, factor 1 + magnitude */
  SLIP_PRIMITIVE_COLOR = 7,        /**< slip_color, factor 1 + magnitude */
  SLIP_PRIMITIVE_CONTRAST = 8,     /**< slip_contrast, factor 1 + magnitude */
  SLIP_PRIMITIVE_SHARPNESS = 9,    /**< slip_sharpness, factor 1 + magnitude */
  SLIP_PRIMITIVE_POSTERIZE = 10,   /**< slip_posterize, the magnitude's bits (truncated) */
  SLIP_PRIMITIVE_SOLARIZE = 11,    /**< slip_solarize, threshold the magnitude */
  SLIP_PRIMITIVE_AUTOCONTRAST = 12, /**< slip_autocontrast; the magnitude is not read */
  SLIP_PRIMITIVE_EQUALIZE = 13,    /**< slip_equalize; the magnitude is not read */
  SLIP_PRIMITIVE_INVERT = 14       /**< slip_invert; the magnitude is not read */
} slip_primitive;

/** The operations of timm's RandAugment, by its names
 *  (timm/data/auto_augment.py): the `op` of slip_timm_step.  Each takes the
 *  argument timm's level_to_arg gives it; the "increasing" variants differ
 *  from their plain ones in that argument only. */
typedef enum slip_timm_op {
  SLIP_TIMM_AUTO_CONTRAST = 0,        /**< slip_autocontrast; the argument is not read */
  SLIP_TIMM_EQUALIZE = 1,             /**< slip_equalize; the argument is not read */
  SLIP_TIMM_INVERT = 2,               /**< slip_invert; the argument is not read */
  SLIP_TIMM_ROTATE = 3,               /**< Image.rotate by the argument in degrees about the centre */
  SLIP_TIMM_POSTERIZE = 4,            /**< slip_posterize, the argument's bits (truncated; 8 and more keep all) */
  SLIP_TIMM_POSTERIZE_INCREASING = 5, /**< as SLIP_TIMM_POSTERIZE */
  SLIP_TIMM_SOLARIZE = 6,             /**< slip_solarize, threshold the argument */
  SLIP_TIMM_SOLARIZE_INCREASING = 7,  /**< as SLIP_TIMM_SOLARIZE */
  SLIP_TIMM_SOLARIZE_ADD = 8,         /**< values below 128 raised by the argument's whole levels (truncated),
                                           clipped to 0 .. 255; the others kept */
  SLIP_TIMM_COLOR = 9,                /**< slip_color, factor the argument */
  SLIP_TIMM_COLOR_INCREASING = 10,    /**< as SLIP_TIMM_COLOR */
  SLIP_TIMM_CONTRAST = 11,            /**< slip_contrast, factor the argument */
  SLIP_TIMM_CONTRAST_INCREASING = 12, /**< as SLIP_TIMM_CONTRAST */
  SLIP_TIMM_BRIGHTNESS = 13,          /**< slip_brightness, factor the argument */
  SLIP_TIMM_BRIGHTNESS_INCREASING = 14, /**< as SLIP_TIMM_BRIGHTNESS */
  SLIP_TIMM_SHARPNESS = 15,           /**< slip_sharpness, factor the argument */
  SLIP_TIMM_SHARPNESS_INCREASING = 16, /**< as SLIP_TIMM_SHARPNESS */
  SLIP_TIMM_SHEAR_X = 17,             /**< Pillow AFFINE data (1, argument, 0, 0, 1, 0) */
  SLIP_TIMM_SHEAR_Y = 18,             /**< Pillow AFFINE data (1, 0, 0, argument, 1, 0) */
  SLIP_TIMM_TRANSLATE_X_REL = 19,     /**< Pillow AFFINE data (1, 0, argument * width, 0, 1, 0) */
  SLIP_TIMM_TRANSLATE_Y_REL = 20      /**< Pillow AFFINE data (1, 0, 0, 0, 1, argument * height) */
} slip_timm_op;

/**
 * One step of torchvision's augmentation policies: the pixels of
 * torchvision's _apply_op(image, op, magnitude, interpolation, fill) on a PIL
 * image.  A geometric step builds Pillow's AFFINE data as torchvision does,
 * in double precision and its order of operations: shears and translations
 * with _get_inverse_affine_matrix (shears about (0, 0), translations about
 * (width / 2, height / 2)), rotations as Image.rotate (the angle taken modulo
 * 360 as Python's % takes it, its cosine and sines rounded to 15 decimals,
 * half to even, as Python's round(v, 15)), and warps src by it
 * (slip_warp_affine); a map that is the identity (a magnitude of 0) copies
 * src, as Pillow's pixels then are.  Every other step is its tone kernel.
 *
 * @param op            slip_primitive.
 * @param magnitude     the operation's magnitude in its units (see slip_primitive); any value but NaN,
 *                      infinities included.
 * @param src           height rows of width pixels of `channels` bytes.
 * @param src_size      bytes available at src; at least (height - 1) * src_stride + width * channels.
 * @param height        image height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param width         image width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param channels      bytes per pixel, 1 to 4 (SLIP_PRIMITIVE_COLOR and SLIP_PRIMITIVE_CONTRAST: 1 or 3).
 * @param src_stride    bytes from one source row to the next (>= width * channels).
 * @param dst           receives the result, of src's height, width and channels; must not overlap src.
 * @param dst_size      bytes available at dst; at least (height - 1) * dst_stride + width * channels.
 * @param dst_stride    bytes from one output row to the next (>= width * channels).
 * @param fill          the colour of the pixels a geometric step uncovers: `channels` values.
 * @param fill_size     values at fill (>= channels; only the first `channels` are read).
 * @param nearest       non-zero: geometric steps take the nearest neighbour; zero: bilinear.
 * @param inverse       receives 6 values, Pillow's AFFINE data of the map the step applied (output point
 *                      (x, y) shows input point (i0 x + i1 y + i2, i3 x + i4 y + i5)), in pixels: the
 *                      identity (1, 0, 0, 0, 1, 0) when the return value is 0.
 * @param inverse_size  values available at inverse (>= 6).
 * @return 1 when the step moved pixels by a map other than the identity,
 *         whose inverse the caller composes into the image's transform; 0
 *         when it changed values only, or none; SLIP_EINVAL for an unknown
 *         op, a NaN magnitude, a NULL pointer, a size outside 1 ..
 *         SLIP_MAX_DIMENSION, channels outside 1 .. 4 (or other than 1 and 3
 *         for color and contrast), a stride smaller than a row, or a dst that
 *         overlaps src; SLIP_EBUFFER when src_size, dst_size, fill_size or
 *         inverse_size is too small.  On failure neither dst nor inverse is
 *         written.
 */
SLIP_API int32_t slip_policy_step(int32_t op, double magnitude, const uint8_t *src, size_t src_size, int32_t height,
                                  int32_t width, int32_t channels, int64_t src_stride, uint8_t *dst, size_t dst_size,
                                  int64_t dst_stride, const uint8_t *fill, size_t fill_size, int32_t nearest,
                                  double *inverse, size_t inverse_size);

/**
 * One step of timm's RandAugment: the pixels of timm's operation `op`
 * (timm/data/auto_augment.py: its functions on PIL images) with `argument`,
 * as slip_policy_step computes torchvision's.  Its shears and translations
 * are Pillow AFFINE data without a centre (see slip_timm_op), its rotation
 * Image.rotate's matrix as slip_policy_step builds it; a map that is the
 * identity copies src.
 *
 * @param op            slip_timm_op.
 * @param argument      the operation's argument (see slip_timm_op); any value but NaN, infinities included.
 * @param src           height rows of width pixels of `channels` bytes.
 * @param src_size      bytes available at src; at least (height - 1) * src_stride + width * channels.
 * @param height        image height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param width         image width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param channels      bytes per pixel, 1 to 4 (SLIP_TIMM_COLOR and SLIP_TIMM_CONTRAST and their increasing
 *                      variants: 1 or 3).
 * @param src_stride    bytes from one source row to the next (>= width * channels).
 * @param dst           receives the result, of src's height, width and channels; must not overlap src.
 * @param dst_size      bytes available at dst; at least (height - 1) * dst_stride + width * channels.
 * @param dst_stride    bytes from one output row to the next (>= width * channels).
 * @param fill          the colour of the pixels a geometric step uncovers: `channels` values.
 * @param fill_size     values at fill (>= channels; only the first `channels` are read).
 * @param nearest       non-zero: geometric steps take the nearest neighbour; zero: bilinear.
 * @param inverse       receives 6 values, as slip_policy_step's.
 * @param inverse_size  values available at inverse (>= 6).
 * @return as slip_policy_step.
 */
SLIP_API int32_t slip_timm_step(int32_t op, double argument, const uint8_t *src, size_t src_size, int32_t height,
                                int32_t width, int32_t channels, int64_t src_stride, uint8_t *dst, size_t dst_size,
                                int64_t dst_stride, const uint8_t *fill, size_t fill_size, int32_t nearest,
                                double *inverse, size_t inverse_size);

/*
 * Mixing: MixUp and CutMix mix each sample of a batch with a partner.  These
 * functions compute one sample's values; the caller draws lambda and the box.
 */

/**
 * MixUp's blend of one sample: dst[j] = lam * a[j] + (1 - lam) * b[j], in
 * double precision (each value converted to double, the two products summed
 * in that order), stored as the element type stores it: float32 rounded to
 * nearest; uint8 rounded half to even and clipped to 0 .. 255 (a sum that is
 * not a number stores 0).
 *
 * @param a         count elements of the sample.
 * @param a_size    bytes available at a (>= count elements).
 * @param b         count elements of its partner; may be a, or overlap it.
 * @param b_size    bytes available at b (>= count elements).
 * @param dst       receives count elements; may be a or b itself (in place), and must not otherwise overlap them.
 * @param dst_size  bytes available at dst (>= count elements).
 * @param count     elements of the sample (0: nothing to do).
 * @param dtype     slip_dtype of the elements: SLIP_DTYPE_UINT8 or SLIP_DTYPE_FLOAT32 (whose a, b and dst are
 *                  aligned to 4 bytes).
 * @param lam       the weight of a, a finite number (MixUp draws it from Beta(alpha, alpha), in [0, 1]).
 * @return SLIP_OK; SLIP_EINVAL for a NULL pointer, another dtype, a
 *         misaligned float32 array, a lam that is not finite, or a dst that
 *         overlaps a or b without being it; SLIP_EBUFFER when a_size, b_size
 *         or dst_size holds fewer than count elements.  On failure dst is not
 *         written.
 */
SLIP_API int32_t slip_mix_blend(const void *a, size_t a_size, const void *b, size_t b_size, void *dst,
                                size_t dst_size, size_t count, int32_t dtype, double lam);

/**
 * CutMix's paste of one sample: dst is a with the box of rows top .. bottom
 * - 1 and columns left .. right - 1 of every plane taken from b.  A sample
 * is `planes` planes of height rows of width pixels of `pixel_bytes` bytes,
 * packed: an (height, width, channels) uint8 image is one plane of
 * `channels`-byte pixels, a (channels, height, width) float32 (or float16)
 * sample `channels` planes of 4-byte (2-byte) pixels.
 *
 * @param a            the sample, planes * height * width * pixel_bytes bytes.
 * @param a_size       bytes available at a (>= the sample's).
 * @param b            its partner, of the same layout; may be a, or overlap it.
 * @param b_size       bytes available at b (>= the sample's).
 * @param dst          receives the sample's bytes; must not overlap a or b.
 * @param dst_size     bytes available at dst (>= the sample's).
 * @param planes       planes of the sample (1 .. SLIP_MAX_DIMENSION).
 * @param height       rows of a plane (1 .. SLIP_MAX_DIMENSION).
 * @param width        pixels of a row (1 .. SLIP_MAX_DIMENSION).
 * @param pixel_bytes  bytes of a pixel (1 .. 16).
 * @param top          the box's first row (0 .. bottom).
 * @param left         the box's first column (0 .. right).
 * @param bottom       one past the box's last row (top .. height); top == bottom: an empty box.
 * @param right        one past the box's last column (left .. width); left == right: an empty box.
 * @return SLIP_OK; SLIP_EINVAL for a NULL pointer, a size outside its
 *         range, a box outside the plane or inverted, or a dst that overlaps
 *         a or b; SLIP_EBUFFER when a_size, b_size or dst_size is smaller
 *         than the sample.  On failure dst is not written.
 */
SLIP_API int32_t slip_mix_paste(const void *a, size_t a_size, const void *b, size_t b_size, void *dst,
                                size_t dst_size, int32_t planes, int32_t height, int32_t width, int32_t pixel_bytes,
                                int32_t top, int32_t left, int32_t bottom, int32_t right);

/**
 * Convert an interleaved 8-bit image into a tensor element type and layout,
 * normalizing per channel in the same pass.
 *
 * Element (c, i, j) of the output, at byte offset c * dst_stride_c +
 * i * dst_stride_y + j * dst_stride_x from dst, receives
 * (src[i][j][c] - mean[c]) / std[c], computed in double precision and
 * rounded once to the output type (round to nearest, ties to even).
 * dst_stride_c = height * width * size, dst_stride_y = width * size,
 * dst_stride_x = size gives CHW; dst_stride_c = size,
 * dst_stride_y = width * channels * size, dst_stride_x = channels * size
 * gives HWC.
 *
 * @param src           the source image, height rows of width pixels of `channels` bytes.
 * @param height        image height in pixels (> 0).
 * @param width         image width in pixels (> 0).
 * @param channels      bytes per source pixel, 1 to 4.
 * @param src_stride    bytes from one source row to the next (>= width * channels).
 * @param dst           the output tensor memory, aligned to the element size.
 * @param dtype         slip_dtype of the output elements.
 * @param dst_stride_c  bytes between channels (a multiple of the element size, may be 0 only when channels == 1).
 * @param dst_stride_y  bytes between rows (a multiple of the element size).
 * @param dst_stride_x  bytes between columns (a multiple of the element size).
 * @param mean          `channels` values subtracted per channel, in pixel units (0..255),
 *                      or NULL for 0; must be NULL for SLIP_DTYPE_UINT8.
 * @param std           `channels` divisors per channel, in pixel units, non-zero,
 *                      or NULL for 1; must be NULL for SLIP_DTYPE_UINT8.
 * @return SLIP_OK; SLIP_EINVAL for bad arguments (misaligned strides, zero
 *         std, normalization requested for uint8 output).
 */
SLIP_API int32_t slip_pack(const uint8_t *src, int32_t height, int32_t width, int32_t channels, int64_t src_stride,
                           void *dst, int32_t dtype, int64_t dst_stride_c, int64_t dst_stride_y,
                           int64_t dst_stride_x, const double *mean, const double *std);

/**
 * Upper bound of the size of slip_jpeg_encode's output for an image of the
 * given size, whatever its content, quality, subsampling and flags.
 *
 * @param height    image height in pixels (>= 0).
 * @param width     image width in pixels (>= 0).
 * @param channels  1 or 3 (any other value is treated as 3).
 * @return a size in bytes.
 */
SLIP_API size_t slip_jpeg_encode_bound(int32_t height, int32_t width, int32_t channels);

/**
 * Compress an 8-bit grayscale or RGB image into a baseline or progressive
 * JPEG with JFIF header.
 *
 * @param src           the source image, height rows of width pixels of `channels` bytes.
 * @param height        image height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param width         image width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param channels      1 (grayscale JPEG) or 3 (RGB input, YCbCr JPEG).
 * @param src_stride    bytes from one source row to the next (>= width * channels).
 * @param quality       libjpeg quality, 1 (smallest) .. 100 (best).
 * @param subsampling   slip_subsampling: 444, 422, 420 or 440 for channels == 3;
 *                      SLIP_SUBSAMPLING_GRAY (or any of those) for channels == 1.
 * @param flags         slip_encode_flags.
 * @param out           receives the JPEG bytes.
 * @param out_capacity  bytes available at out (may be 0); slip_jpeg_encode_bound() suffices
 *                      for Huffman coding (and for arithmetic coding of real images).
 * @param out_size      receives the size of the JPEG in bytes, also when it does not fit.
 * @return SLIP_OK; SLIP_EINVAL for bad arguments; SLIP_EBUFFER when the
 *         JPEG is larger than out_capacity (out then holds its first
 *         out_capacity bytes and *out_size its full size).
 */
SLIP_API int32_t slip_jpeg_encode(const uint8_t *src, int32_t height, int32_t width, int32_t channels,
                                  int64_t src_stride, int32_t quality, int32_t subsampling, int32_t flags,
                                  uint8_t *out, size_t out_capacity, size_t *out_size);

/**
 * Losslessly rewrite a JPEG so that regions of it decode faster: the same
 * quantized DCT coefficients (the decoded pixels do not change), coded as one
 * baseline Huffman scan with a restart marker every R MCUs, where R divides
 * the MCUs of a row.  Each restart interval is then an independently
 * decodable tile of R MCUs, and slip_jpeg_decode and
 * slip_jpeg_decode_crop_resize entropy-decode only the tiles a region
 * touches.  R is the largest divisor of the MCUs per row whose tile is at
 * most interval_width pixels wide (1 when none is).  Markers other than
 * JFIF and Adobe (EXIF, ICC profiles, comments) are dropped.
 *
 * A sequential Huffman JPEG whose AC tables were counted for it (fewer than
 * baseline's 162 symbols, as an encoder's optimized tables are) keeps them:
 * each block's AC bits are copied as they are and only its DC difference is
 * coded again, with a DC table counted for the new differences: the cost
 * is little more than reading every Huffman code once.  Any other JPEG
 * (general-purpose tables such as T.81's examples, progressive, arithmetic-
 * coded) is decoded to its coefficients and coded with tables counted for
 * them, which costs several times more.  Either way the result is the same
 * kind of file, the verdict on bad data is the same, and re-coding a result
 * again at the same width gives it back byte for byte.
 *
 * A progressive JPEG whose scans leave any coefficient of any component
 * unsent or unrefined (legal: T.81 requires only the DC) is refused with
 * SLIP_EUNSUPPORTED: libjpeg-turbo decodes it with inter-block smoothing,
 * which the complete baseline scan written here would not get, so its
 * pixels would change.  All such files are refused, whichever
 * coefficients the smoothing of this libjpeg-turbo version reads.
 *
 * @param data            the compressed JPEG bytes.
 * @param size            number of bytes at data.
 * @param interval_width  widest tile wanted, in pixels (> 0).  At 32, 800
 *                        ImageNet photos grew by 1.5% (their own tables kept,
 *                        the markers' cost added); re-encoded at quality 90
 *                        with general-purpose tables, they shrank by 2%.
 * @param out             receives the rewritten JPEG.
 * @param out_capacity    bytes available at out (may be 0); size + size / 4 + 65536 suffices
 *                        for real images.
 * @param out_size        receives the size of the rewritten JPEG in bytes, also when it does not fit.
 * @return SLIP_OK; SLIP_EINVAL for bad arguments; SLIP_ENOTJPEG, SLIP_ETRUNCATED,
 *         SLIP_ECORRUPT, SLIP_EUNSUPPORTED, SLIP_ETOOBIG or SLIP_ENOMEM as
 *         slip_jpeg_decode; SLIP_EUNSUPPORTED also for two kinds of JPEG
 *         that slip_jpeg_decode and slip_jpeg_check accept: a progressive
 *         JPEG with incomplete scans (above), and one with a DC difference
 *         wider than 11 bits or an AC coefficient wider than 10, which
 *         baseline Huffman coding cannot code;
 *         SLIP_EBUFFER when the result is larger than
 *         out_capacity (out then holds its first out_capacity bytes and
 *         *out_size its full size).
 */
SLIP_API int32_t slip_jpeg_add_restart_markers(const uint8_t *data, size_t size, int32_t interval_width,
                                               uint8_t *out, size_t out_capacity, size_t *out_size);

/**
 * Read exactly `count` bytes of a file at a byte offset, without moving the
 * file position (POSIX pread), retrying short reads and EINTR.
 *
 * @param fd      an open file descriptor.
 * @param buf     receives the bytes.
 * @param count   number of bytes to read.
 * @param offset  byte offset in the file (>= 0).
 * @return SLIP_OK when all `count` bytes were read; SLIP_EEOF when the file
 *         ends first (the detail says how many bytes were read); SLIP_EIO for
 *         an operating-system error; SLIP_EINVAL for a null buf or a negative
 *         offset.
 */
SLIP_API int32_t slip_pread(int32_t fd, void *buf, size_t count, int64_t offset);

/**
 * CRC-32 of a byte range: the polynomial of zlib, gzip and PNG (the page
 * checksums of dataset files), equal to zlib's crc32(crc, data, size).
 * Uses carry-less multiplication (PCLMULQDQ) where the processor has it,
 * table lookups elsewhere.
 *
 * @param data  the bytes (may be NULL when size is 0).
 * @param size  number of bytes at data.
 * @param crc   the CRC of the bytes before data, to continue it; 0 to start.
 * @return the CRC-32 of the bytes before data followed by data; crc when data is NULL.
 */
SLIP_API uint32_t slip_crc32(const uint8_t *data, size_t size, uint32_t crc);

/**
 * Protect a read-only memory mapping of a file from the file being
 * truncated under it.  Touching a mapped page beyond a file's end raises
 * SIGBUS, which ends the process; inside a guarded mapping, slipstream's
 * SIGBUS handler instead maps a page of zeros over the lost page, so that the
 * access reads zeros and execution goes on, and counts the fault for
 * slip_guard_faults().  The first call installs the handler for the process
 * (again if another has replaced it since); any SIGBUS outside the guarded
 * mappings goes to the action that was installed before.  Call
 * slip_unguard_mapping() before unmapping the range.
 *
 * @param address  start of the mapping (page-aligned, as mmap returns it).
 * @param length   its length in bytes (> 0).
 * @param guard    receives the guard's number, for slip_guard_faults and slip_unguard_mapping.
 * @return SLIP_OK; SLIP_EINVAL for a null address or guard or a zero length;
 *         SLIP_ETOOBIG when 65536 mappings are guarded already; SLIP_EIO when
 *         the handler cannot be installed.
 */
SLIP_API int32_t slip_guard_mapping(const void *address, size_t length, int32_t *guard);

/**
 * Number of pages of a guarded mapping that were lost to truncation and read
 * as zeros since it was guarded: anything read from the mapping after the
 * first of them may be wrong.
 *
 * @param guard  a number from slip_guard_mapping.
 * @return the count (>= 0); SLIP_EINVAL for a number that is not a guarded mapping.
 */
SLIP_API int64_t slip_guard_faults(int32_t guard);

/**
 * Stop guarding a mapping: a later SIGBUS inside its range is handed on as
 * any other.  Call it before the range is unmapped.
 *
 * @param guard  a number from slip_guard_mapping.
 * @return SLIP_OK; SLIP_EINVAL for a number that is not a guarded mapping.
 */
SLIP_API int32_t slip_unguard_mapping(int32_t guard);

/**
 * Reserve `length` bytes of address space for slip_range_map_file(),
 * slip_range_map_memory() and slip_range_release() to fill and empty: the
 * range is mapped PROT_NONE with MAP_NORESERVE, so it costs no memory and no
 * swap, and touching a part not mapped since raises SIGSEGV.  A dataset of
 * many files is read through one such range: each file's bytes are mapped
 * at their place in it, and the decoders see one base address.  Free it
 * with slip_range_free().
 *
 * @param length  bytes to reserve: a non-zero multiple of the OS page size (sysconf(_SC_PAGESIZE)).
 * @param base    receives the range's first address, as a number (0 on failure).
 * @return SLIP_OK; SLIP_EINVAL for a null base or a length that is not a
 *         whole number of OS pages; SLIP_ENOMEM when the address space is
 *         short (a virtual-memory limit: ulimit -v); SLIP_EIO for other OS errors.
 */
SLIP_API int32_t slip_range_reserve(size_t length, uint64_t *base);

/**
 * Map `length` bytes of a file, from byte `offset` on, read-only and shared,
 * at `at` inside a reserved range, replacing what was mapped there in one
 * step (MAP_FIXED): no other thread can take the place meanwhile.  The
 * mapping holds its own reference to the file, so `fd` may be closed, and
 * the file unlinked, while it stays readable.  Guard the range
 * (slip_guard_mapping) to survive the file being truncated.
 *
 * @param at        where in the range: a multiple of the OS page size.
 * @param length    bytes to map: a non-zero multiple of the OS page size
 *                  (bytes past the file's end read as zeros up to the end
 *                  of its last OS page, and raise SIGBUS beyond it).
 * @param fd        an open file descriptor, readable.
 * @param offset    byte offset in the file: a multiple of the OS page size.
 * @param populate  non-zero: fill the page tables now (MAP_POPULATE, Linux),
 *                  reading the file's pages in the calling thread, rather
 *                  than fault by fault in whatever code reads them first.
 * @return SLIP_OK; SLIP_EINVAL for a null or misaligned address, length or
 *         offset; SLIP_ENOMEM or SLIP_EIO when mmap(2) fails (the detail
 *         holds strerror(errno)).
 */
SLIP_API int32_t slip_range_map_file(void *at, size_t length, int32_t fd, int64_t offset, int32_t populate);

/**
 * Map zero-filled private memory at `at` inside a reserved range (MAP_FIXED):
 * read-only as a page of zeros that stands for bytes that cannot be had,
 * or writable as a slot that bytes are read into (slip_pread).
 *
 * @param at        where in the range: a multiple of the OS page size.
 * @param length    bytes: a non-zero multiple of the OS page size.
 * @param writable  non-zero: PROT_READ | PROT_WRITE; zero: PROT_READ.
 * @return SLIP_OK; SLIP_EINVAL for a null or misaligned address or length;
 *         SLIP_ENOMEM or SLIP_EIO when mmap(2) fails.
 */
SLIP_API int32_t slip_range_map_memory(void *at, size_t length, int32_t writable);

/**
 * Give back what is mapped at `at`: the place becomes reserved address space
 * again (PROT_NONE, MAP_FIXED), and a file mapped there is let go (its
 * pages, and the disk blocks of a file since unlinked).  Nothing may read
 * the place until it is mapped again.
 *
 * @param at      where in the range: a multiple of the OS page size.
 * @param length  bytes: a non-zero multiple of the OS page size.
 * @return SLIP_OK; SLIP_EINVAL for a null or misaligned address or length;
 *         SLIP_ENOMEM or SLIP_EIO when mmap(2) fails.
 */
SLIP_API int32_t slip_range_release(void *at, size_t length);

/**
 * Unmap a whole range from slip_range_reserve(), with everything mapped in
 * it.  Call slip_unguard_mapping() first if it is guarded.
 *
 * @param base    the range's first address, as slip_range_reserve() gave it.
 * @param length  the length it was reserved with.
 * @return SLIP_OK; SLIP_EINVAL for a null or misaligned address or length;
 *         SLIP_EIO when munmap(2) fails.
 */
SLIP_API int32_t slip_range_free(void *base, size_t length);

/* ---------------------------------------------------------------- video */

/** Codec of a video stream. */
typedef enum slip_video_codec {
  SLIP_VIDEO_CODEC_OTHER = 0, /**< a codec this build's FFmpeg decodes but none of the below */
  SLIP_VIDEO_CODEC_H264 = 1,  /**< H.264 / AVC */
  SLIP_VIDEO_CODEC_HEVC = 2,  /**< H.265 / HEVC */
  SLIP_VIDEO_CODEC_VP9 = 3,   /**< VP9 */
  SLIP_VIDEO_CODEC_AV1 = 4,   /**< AV1 */
  SLIP_VIDEO_CODEC_MPEG4 = 5  /**< MPEG-4 part 2 */
} slip_video_codec;

/** How a video stream's samples map to RGB. */
typedef enum slip_video_colour {
  SLIP_VIDEO_COLOUR_BT601_LIMITED = 0, /**< ITU-R BT.601, luma 16 to 235 (standard definition; also what an
                                            unlabelled stream is taken to be, as FFmpeg's swscale takes it) */
  SLIP_VIDEO_COLOUR_BT709_LIMITED = 1, /**< ITU-R BT.709, luma 16 to 235 (high definition) */
  SLIP_VIDEO_COLOUR_BT601_FULL = 2,    /**< BT.601, full range: JFIF's conversion */
  SLIP_VIDEO_COLOUR_BT709_FULL = 3     /**< BT.709, full range */
} slip_video_colour;

/** What slip_video_index reports about a video: its first video stream's
 *  facts, read from the container's header, its packets and its first
 *  decoded frame. */
typedef struct slip_video_info_t {
  int32_t height;         /**< frame height in pixels */
  int32_t width;          /**< frame width in pixels */
  int32_t frames;         /**< frames of the stream: its packets, each one frame */
  int32_t keyframes;      /**< packets marked as keyframes: where decoding can start */
  int32_t codec;          /**< slip_video_codec */
  int32_t colour;         /**< slip_video_colour the header declares */
  int32_t yuv420;         /**< 1 when the frames are 8-bit YCbCr 4:2:0 (what the decoding functions take) */
  int32_t reserved;       /**< 0 */
  int64_t time_base_num;  /**< numerator of the unit of the timestamps, in seconds */
  int64_t time_base_den;  /**< denominator of the unit of the timestamps */
} slip_video_info_t;

/**
 * Whether this build of the library decodes video: it was built with
 * FFmpeg's libavformat and libavcodec.  Without them every other video
 * function fails with SLIP_EUNSUPPORTED.
 *
 * @return 1 when it does, 0 when it does not.
 */
SLIP_API int32_t slip_video_available(void);

/**
 * Read a video's container (MP4, QuickTime, Matroska, WebM, AVI or anything
 * this build's libavformat reads) from memory and index its first video
 * stream, decoding its first frame alone: its facts, and per frame, in
 * presentation order, its timestamp and the timestamp of the keyframe that
 * decoding must start at to reach it (the latest keyframe, in decoding
 * order, before the frame's packet whose own timestamp is not later than
 * the frame's: an open GOP's leading frames start at the keyframe before).
 * The slip_video_decode_* functions take these timestamps, so that a
 * window of frames seeks straight to its keyframe.
 *
 * Call it with pts and seek NULL to learn info->frames, then with arrays of
 * that many entries.
 *
 * @param data      the container's bytes.
 * @param size      number of bytes at data.
 * @param info      receives the stream's facts.
 * @param pts       NULL, or receives info->frames presentation timestamps,
 *                  ascending, in units of info->time_base_num / info->time_base_den seconds.
 * @param seek      NULL (when pts is), or receives per frame the timestamp of
 *                  its keyframe (<= its pts).
 * @param capacity  entries available at pts and at seek.
 * @return SLIP_OK; SLIP_EINVAL for NULL data or info, or one of pts and seek
 *         NULL; SLIP_EBUFFER when capacity is below info->frames (info is
 *         filled); SLIP_ECORRUPT for data no demuxer reads, a container
 *         without a video stream, frames without timestamps or two frames
 *         with one timestamp, a first frame that does not decode or has
 *         another size than the header's; SLIP_EUNSUPPORTED for a codec this build
 *         cannot decode or without FFmpeg; SLIP_ETOOBIG for frames beyond
 *         SLIP_MAX_DIMENSION or SLIP_LIMIT_PIXELS; SLIP_ENOMEM.
 */
SLIP_API int32_t slip_video_index(const uint8_t *data, size_t size, slip_video_info_t *info, int64_t *pts,
                                  int64_t *seek, int32_t capacity);

/**
 * Decode `count` frames of a video, given by their timestamps in
 * presentation order, crop each to (y, x, h, w), resize it to out_h x
 * out_w and convert it to RGB: one window of frames with one crop, the
 * frames' 8-bit YCbCr 4:2:0 planes going straight into the kernel of
 * slip_planes_crop_resize (the crop's rows and columns alone are read,
 * the chroma resampled at its own resolution, converted at the output
 * size), with the stream's colour (slip_video_colour; BT.601 limited
 * range where it declares none) and its chroma sited as JPEG's.
 *
 * Decoding starts at seek[0] and runs forward, seeking again only where a
 * wanted frame's keyframe lies ahead of the frames decoded so far; one
 * decoder, on the calling thread (no threads of FFmpeg's own), is opened
 * and closed per call.  Frames are matched by timestamp exactly, so they
 * are the frames a frame-accurate decoder gives for these timestamps.
 *
 * @param data         the container's bytes.
 * @param size         number of bytes at data.
 * @param pts          count presentation timestamps (slip_video_index's),
 *                     non-decreasing; a repeated one gives the frame again.
 * @param seek         per timestamp, its keyframe's (slip_video_index's seek).
 * @param count        frames wanted (1 .. SLIP_LIMIT_VIDEO_DECODES).
 * @param height       the frames' height, as the index gave it.
 * @param width        the frames' width.
 * @param y            first row of the crop (>= 0).
 * @param x            first column of the crop (>= 0).
 * @param h            crop height in pixels (> 0, y + h <= height).
 * @param w            crop width in pixels (> 0, x + w <= width).
 * @param out_h        output height in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param out_w        output width in pixels (1 .. SLIP_MAX_DIMENSION).
 * @param flags        slip_decode_flags; SLIP_DECODE_FLIP_X mirrors every frame.
 * @param interp       slip_interp filter.
 * @param out          receives count frames of out_h rows of out_w RGB pixels.
 * @param out_size     bytes available at out; at least (count - 1) * frame_stride + out_h * out_stride.
 * @param frame_stride bytes from one frame to the next (>= out_h * out_stride).
 * @param out_stride   bytes from one row to the next (>= out_w * 3).
 * @return SLIP_OK; SLIP_EINVAL for bad arguments (timestamps out of order,
 *         a seek after its timestamp, a crop outside the frame);
 *         SLIP_EBUFFER when out_size is too small; SLIP_ECORRUPT for data
 *         no demuxer or decoder reads, a frame of another size than
 *         height x width, or a timestamp the stream does not have (an
 *         index that disagrees with the stream); SLIP_ETRUNCATED when the
 *         stream ends before a wanted frame; SLIP_EUNSUPPORTED for frames
 *         that are not 8-bit 4:2:0, a codec this build cannot decode, or a
 *         build without FFmpeg; SLIP_ETOOBIG beyond SLIP_LIMIT_VIDEO_DECODES
 *         or SLIP_LIMIT_PIXELS; SLIP_ENOMEM.  On failure out may be partly
 *         written.
 */
SLIP_API int32_t slip_video_decode_crop_resize(const uint8_t *data, size_t size, const int64_t *pts,
                                               const int64_t *seek, int32_t count, int32_t height, int32_t width,
                                               int32_t y, int32_t x, int32_t h, int32_t w, int32_t out_h,
                                               int32_t out_w, int32_t flags, int32_t interp, uint8_t *out,
                                               size_t out_size, int64_t frame_stride, int64_t out_stride);

/**
 * Decode `count` frames of a video, as slip_video_decode_crop_resize does,
 * into their planes: each frame's Y, Cb and Cr samples exactly as the
 * decoder gives them, in the layout of slip_planes_bytes (the frames
 * slip_planes_bytes(height, width) bytes apart).  Values are the stream's
 * own (limited range where it is), not JFIF's.
 *
 * @param data      the container's bytes.
 * @param size      number of bytes at data.
 * @param pts       count presentation timestamps, non-decreasing.
 * @param seek      per timestamp, its keyframe's.
 * @param count     frames wanted (1 .. SLIP_LIMIT_VIDEO_DECODES).
 * @param height    the frames' height.
 * @param width     the frames' width.
 * @param out       receives the planes of count frames.
 * @param out_size  bytes available at out; at least count * slip_planes_bytes(height, width).
 * @return as slip_video_decode_crop_resize.
 */
SLIP_API int32_t slip_video_decode_planes(const uint8_t *data, size_t size, const int64_t *pts, const int64_t *seek,
                                          int32_t count, int32_t height, int32_t width, uint8_t *out,
                                          size_t out_size);

#ifdef __cplusplus
}
#endif

#endif /* SLIPSTREAM_H */
