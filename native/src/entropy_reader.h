/*
 * entropy_reader.h - the bits of a JPEG scan's entropy-coded data, read most
 * significant first, as jpeg_scan.c (every symbol, once) and jpeg_splice.c
 * (the same bits again, copied) both need them.  Nothing here is part of
 * the ABI.
 */
#ifndef SLIPSTREAM_ENTROPY_READER_H
#define SLIPSTREAM_ENTROPY_READER_H

#include <stdint.h>
#include <string.h>

typedef struct bit_reader {
  const uint8_t *next; /* the next byte not yet in buf */
  const uint8_t *end;
  uint64_t buf;   /* the next bits at the top; the bits below `bits` are zero or the true next bits */
  int bits;       /* valid bits in buf; negative once a block read past a marker */
  int at_marker;  /* next points at a marker (or the end of the data): nothing more loads */
  int64_t loaded; /* data bytes (a stuffed 0xFF 0x00 counting one) loaded into buf so far */
} bit_reader;

static inline bit_reader bit_reader_at(const uint8_t *data, const uint8_t *end) {
  bit_reader r = {data, end, 0, 0, 0, 0};
  return r;
}

/* Position of the next unread bit among the data bits loaded so far: the
 * difference of two positions is the bits read between them, across any
 * number of loads (but not across a marker). */
static inline int64_t bit_position(const bit_reader *r) { return r->loaded * 8 - r->bits; }

/* Load whole bytes into r->buf until it holds more than 56 bits, or a marker
 * or the end of the data stops it.  A stuffed 0xFF 0x00 is one 0xFF byte. */
static inline void fill(bit_reader *r) {
  if (r->at_marker) return;
  /* Eight bytes at once when none is 0xFF (the usual case). */
  if (r->end - r->next >= 8) {
    uint64_t v;
    memcpy(&v, r->next, 8);
    v = __builtin_bswap64(v);
    uint64_t inverted = ~v;
    if (!((inverted - 0x0101010101010101ull) & ~inverted & 0x8080808080808080ull)) {
      int whole = (64 - r->bits) >> 3;
      r->buf |= v >> r->bits; /* the bits of a partial last byte are its true ones */
      r->next += whole;
      r->bits += whole * 8;
      r->loaded += whole;
      return;
    }
  }
  while (r->bits <= 56) {
    if (r->next >= r->end) {
      r->at_marker = 1;
      return;
    }
    uint8_t c = r->next[0];
    if (c == 0xFF) {
      if (r->end - r->next < 2 || r->next[1] != 0x00) {
        r->at_marker = 1;
        return;
      }
      r->next++;
    }
    r->next++;
    r->buf |= (uint64_t)c << (56 - r->bits);
    r->bits += 8;
    r->loaded++;
  }
}

static inline void consume(bit_reader *r, int n) {
  r->buf <<= n;
  r->bits -= n;
}

/* After the last MCU of an interval or of the scan: the padding bits of the
 * last byte are dropped, and no whole byte may be left before the marker,
 * which must be 0xFF `marker`.  Moves past it; returns 0 when any of that
 * does not hold. */
static inline int expect_marker(bit_reader *r, uint8_t marker) {
  int left = r->bits & ~7; /* whole bytes still loaded */
  if (r->bits < 0 || left) return 0;
  if (r->end - r->next < 2 || r->next[0] != 0xFF || r->next[1] != marker) return 0;
  r->next += 2;
  r->buf = 0;
  r->bits = 0;
  r->at_marker = 0;
  return 1;
}

#endif
