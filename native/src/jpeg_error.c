/*
 * jpeg_error.c - libjpeg error handling without exit() and without stderr.
 *
 * libjpeg's default error_exit() prints and calls exit(); its warnings go to
 * stderr and decoding goes on, filling the rest of the image with grey.  Here
 * every error, and every warning that means the pixels are wrong, becomes a
 * longjmp back into the slipstream function that called libjpeg, carrying a
 * slip_status and libjpeg's message.
 */
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
  case JERR_CONVERSION_NOTIMPL: return SLIP_EUNSUPPORTED;
  case JERR_IMAGE_TOO_BIG:
  case JERR_WIDTH_OVERFLOW:
  case JERR_NO_BACKING_STORE: return SLIP_ETOOBIG;
  case JERR_OUT_OF_MEMORY: return SLIP_ENOMEM;
  default: return SLIP_ECORRUPT;
  }
}

/* Warnings that leave the decoded pixels intact. Any other warning means
 * libjpeg is about to invent data, which is reported as an error. */
static int warning_is_harmless(int code) {
  switch (code) {
  case JWRN_EXTRANEOUS_DATA: /* junk between markers, common in camera files */
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
  if (warning_is_harmless(code)) return;
  fail_with_message(cinfo, code == JWRN_JPEG_EOF ? SLIP_ETRUNCATED : SLIP_ECORRUPT);
}

static void on_output_message(j_common_ptr cinfo) { (void)cinfo; }

struct jpeg_error_mgr *slip__jpeg_error_init(slip_jpeg_error *err) {
  struct jpeg_error_mgr *pub = jpeg_std_error(&err->pub);
  pub->error_exit = on_error_exit;
  pub->emit_message = on_emit_message;
  pub->output_message = on_output_message;
  err->status = SLIP_OK;
  return pub;
}
