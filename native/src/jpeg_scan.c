/*
 * jpeg_scan.c - reading every Huffman symbol of a sequential JPEG's scan
 * without decoding any pixel: the fast path of slip_jpeg_check.
 *
 * A 1/8-scale decode spends most of its time entropy-decoding, but also
 * stores coefficients, runs the 1x1 inverse DCT, upsamples and converts
 * colour.  What tells corrupt data from good is only the entropy decoding:
 * a code no table holds, data that ends (or meets a marker) before the last
 * block, a restart marker out of sequence, bytes left over before a marker.
 * This scanner does exactly that reading and nothing else.
 *
 * It answers "good" only for the files it fully understands, and only when
 * libjpeg-turbo, decoding the same file at 1/8 scale and finishing the
 * decompression, would report no error and no corrupt-data warning:
 *
 * - one baseline or extended sequential Huffman scan (Ss 0, Se 63, Ah and Al
 *   0) of every component, 8-bit, grey (1 component) or YCbCr/RGB (3),
 *   sampling factors 1 or 2, at most 10 blocks per MCU, every quantization
 *   and Huffman table the scan uses defined and valid by libjpeg's rules
 *   (jpeg_make_d_derived_tbl);
 * - each block decoded as libjpeg's decode_mcu does (codes found by the
 *   same canonical tables, AC runs advancing the same way), no bit read past
 *   the end of a restart interval or of the scan, no DC prediction leaving
 *   the range of an int;
 * - each restart interval followed at once, after its last byte's padding
 *   bits, by the restart marker due next, and the scan by EOI.
 *
 * Anything else is "unsure": slip_jpeg_check then lets libjpeg decode the
 * image at 1/8 scale and reports what it finds.  So the check is never
 * weaker than that decode, and never stricter either.
 */
#include <string.h>

#include "entropy_reader.h"
#include "internal.h"

#define LOOKAHEAD 11 /* bits resolved by one table lookup */

/* The fields of scan_table.skip: the bits of the two symbols together in the
 * low 6 bits (a shift count as it is), then the two's advance, then the
 * first's bits and advance alone. */
#define SKIP_BITS2(e) ((int)((e) & 63))
#define SKIP_ADVANCE2(e) ((int)(((e) >> 6) & 255))
#define SKIP_BITS1(e) ((int)(((e) >> 14) & 63))
#define SKIP_ADVANCE1(e) ((int)((e) >> 20))
/* For a DC table: the symbol's bits (code and value) in the low 6 bits, as
 * for AC, then the code's length, then the value's size. */
#define SKIP_DC_LENGTH(e) ((int)(((e) >> 6) & 31))
#define SKIP_DC_SIZE(e) ((int)((e) >> 11))

/* A Huffman table as the scanner reads it: the canonical decoding tables of
 * ITU-T T.81 figure F.16, plus a lookup of the codes of up to LOOKAHEAD bits. */
typedef struct scan_table {
  int32_t maxcode[18];   /* largest code of each length, -1 when none; [17] ends the search */
  int32_t valoffset[18]; /* index in huffval of the first code of each length, minus that code */
  uint8_t huffval[256];
  uint16_t lookup[1 << LOOKAHEAD]; /* (length << 8) | symbol; 0 for codes longer than LOOKAHEAD */
  /* For AC tables, what the next LOOKAHEAD bits hold when they start with a
   * code of up to LOOKAHEAD bits: the first symbol's bits (code and value)
   * and the positions it advances (an end of block 64, a run of 16 zeros
   * 16), and the same for it and the symbol after it together when that one
   * too lies within the LOOKAHEAD bits (else the first's again); 0 for a
   * longer first code.  For DC tables, the one symbol's bits, its code's
   * length and its value's size; 0 for a longer code.  See SKIP_*. */
  uint32_t skip[1 << LOOKAHEAD];
} scan_table;

/* The AC symbol that the top `valid` of the LOOKAHEAD bits `peek` start
 * with, when its code lies within them: the bits of its code and value, and
 * the positions it advances. */
static int ac_step(const scan_table *t, uint32_t peek, int valid, int *bits, int *advance) {
  uint32_t entry = t->lookup[peek];
  int length = (int)(entry >> 8);
  if (!entry || length > valid) return 0;
  int run = (int)(entry & 0xFF) >> 4, size = (int)(entry & 15);
  *bits = length + size;
  *advance = size ? run + 1 : run == 15 ? 16 : 64;
  return 1;
}

/* Build t from libjpeg's table h under jpeg_make_d_derived_tbl's rules:
 * returns 0 where libjpeg would fail (too many symbols, a code that does not
 * fit its length, a DC symbol above 15). */
static int build_table(const JHUFF_TBL *h, int dc, scan_table *t) {
  uint8_t size[257];
  uint32_t code_of[257];
  int p = 0;
  for (int l = 1; l <= 16; l++) {
    int n = h->bits[l];
    if (p + n > 256) return 0;
    while (n--) size[p++] = (uint8_t)l;
  }
  size[p] = 0;
  int symbols = p;
  uint32_t code = 0;
  int length = size[0];
  p = 0;
  while (size[p]) {
    while (size[p] == length) code_of[p++] = code++;
    if (code >= (1u << length)) return 0;
    code <<= 1;
    length++;
  }
  p = 0;
  for (int l = 1; l <= 16; l++) {
    if (h->bits[l]) {
      t->valoffset[l] = p - (int32_t)code_of[p];
      p += h->bits[l];
      t->maxcode[l] = (int32_t)code_of[p - 1];
    } else {
      t->maxcode[l] = -1;
    }
  }
  t->valoffset[17] = 0;
  t->maxcode[17] = 0xFFFFF;
  memcpy(t->huffval, h->huffval, sizeof t->huffval);
  memset(t->lookup, 0, sizeof t->lookup);
  p = 0;
  for (int l = 1; l <= LOOKAHEAD; l++) {
    for (int i = 0; i < h->bits[l]; i++, p++) {
      uint32_t first = code_of[p] << (LOOKAHEAD - l);
      for (uint32_t k = 0; k < (1u << (LOOKAHEAD - l)); k++)
        t->lookup[first + k] = (uint16_t)((l << 8) | h->huffval[p]);
    }
  }
  if (dc) {
    for (int i = 0; i < symbols; i++)
      if (h->huffval[i] > 15) return 0;
    for (uint32_t i = 0; i < (1u << LOOKAHEAD); i++) {
      uint32_t e = t->lookup[i];
      uint32_t length = e >> 8, size = e & 0xFF;
      t->skip[i] = e ? (length + size) | length << 6 | size << 11 : 0;
    }
    return 1;
  }
  for (uint32_t i = 0; i < (1u << LOOKAHEAD); i++) {
    int bits1, advance1, bits2, advance2;
    if (!ac_step(t, i, LOOKAHEAD, &bits1, &advance1)) {
      t->skip[i] = 0;
      continue;
    }
    bits2 = bits1;
    advance2 = advance1;
    int second_bits, second_advance;
    if (advance1 < 64 && bits1 < LOOKAHEAD &&
        ac_step(t, (i << bits1) & ((1u << LOOKAHEAD) - 1), LOOKAHEAD - bits1, &second_bits, &second_advance) &&
        bits1 + second_bits <= LOOKAHEAD) {
      bits2 = bits1 + second_bits;
      advance2 = advance1 + second_advance;
    }
    t->skip[i] = (uint32_t)bits2 | (uint32_t)advance2 << 6 | (uint32_t)bits1 << 14 | (uint32_t)advance1 << 20;
  }
  return 1;
}

/* The next symbol, or -1 for a code longer than 16 bits (libjpeg's corrupt-
 * data warning).  Needs at least 16 bits loaded unless at a marker. */
static inline int next_symbol(bit_reader *r, const scan_table *t) {
  uint32_t entry = t->lookup[r->buf >> (64 - LOOKAHEAD)];
  if (entry) {
    consume(r, (int)(entry >> 8));
    return (int)(entry & 0xFF);
  }
  int l = LOOKAHEAD + 1;
  int32_t code = (int32_t)(r->buf >> (64 - l));
  while (code > t->maxcode[l]) {
    l++;
    code = (int32_t)(r->buf >> (64 - l));
  }
  if (l > 16) return -1;
  consume(r, l);
  return t->huffval[(code + t->valoffset[l]) & 0xFF];
}

/* Read one block; returns 0 when it is corrupt or runs past the data.  With
 * a record, also says where its DC and AC bits lie and its DC coefficient. */
static inline __attribute__((always_inline)) int scan_block(bit_reader *r, const scan_table *dc,
                                                              const scan_table *ac, int64_t *prediction,
                                                              slip__scanned_block *record) {
  if (r->bits < 32) fill(r);
  int64_t start = record ? bit_position(r) : 0;
  uint64_t before = r->buf;
  uint32_t entry = dc->skip[before >> (64 - LOOKAHEAD)];
  int length, s;
  if (__builtin_expect(entry != 0, 1)) {
    r->buf <<= entry & 63;
    r->bits -= (int)(entry & 63);
    length = SKIP_DC_LENGTH(entry);
    s = SKIP_DC_SIZE(entry);
  } else {
    s = next_symbol(r, dc);
    if (s < 0) return 0;
    length = 0;
    before = r->buf;
    consume(r, s);
  }
  /* HUFF_EXTEND: the s bits after the code, the top one telling the sign (s
   * is 0 to 15; 0 codes a difference of 0).  Computed without branches: the
   * sign, and whether s is 0, follow no pattern a branch predictor learns. */
  int64_t raw = (int64_t)((before << length >> 1) >> (63 - s));
  int64_t v = raw - ((-(int64_t)(raw < (((int64_t)1 << s) >> 1))) & (((int64_t)1 << s) - 1));
  *prediction += v;
  if (__builtin_expect(*prediction > INT32_MAX || *prediction < INT32_MIN, 0)) return 0;
  int64_t ac_start = 0;
  if (record) {
    /* libjpeg keeps the prediction as an int and stores it in a 16-bit
     * coefficient: its low 16 bits, as a two's complement number. */
    int32_t low = (int32_t)(*prediction & 0xFFFF);
    record->dc = (int16_t)(low >= 0x8000 ? low - 0x10000 : low);
    ac_start = bit_position(r);
    record->dc_bits = (uint8_t)(ac_start - start);
  }
  for (int k = 1; k < 64;) {
    if (r->bits < 32) fill(r);
    uint32_t skip = ac->skip[r->buf >> (64 - LOOKAHEAD)];
    if (skip) {
      /* Both symbols at once: the shift by the entry itself is the whole
       * dependency from one lookup to the next. */
      uint64_t before = r->buf;
      int first_end = k + SKIP_ADVANCE1(skip);
      r->buf <<= skip & 63;
      r->bits -= SKIP_BITS2(skip);
      k += SKIP_ADVANCE2(skip);
      if (__builtin_expect(first_end >= 64 && SKIP_ADVANCE1(skip) < 64, 0)) {
        /* The first symbol filled the block (its last coefficient coded):
         * the second belongs to the next block, unread. */
        r->buf = before << SKIP_BITS1(skip);
        r->bits += SKIP_BITS2(skip) - SKIP_BITS1(skip);
        k = first_end;
      }
      continue;
    }
    int rs = next_symbol(r, ac);
    if (rs < 0) return 0;
    int size = rs & 15, run = rs >> 4;
    if (size) {
      consume(r, size);
      k += run + 1;
    } else {
      if (run != 15) break;
      k += 16;
    }
  }
  if (record) record->ac_bits = (uint16_t)(bit_position(r) - ac_start);
  return r->bits >= 0;
}

/* The scanner itself: slip__jpeg_scan_is_good without records (compiled
 * without the recording), slip__jpeg_scan_blocks with. */
static inline __attribute__((always_inline)) int scan(const struct jpeg_decompress_struct *dec,
                                                      slip__scanned_block *records, int64_t capacity) {
  if (dec->progressive_mode || dec->arith_code || dec->data_precision != 8) return 0;
  if (dec->Ss != 0 || dec->Se != 63 || dec->Ah != 0 || dec->Al != 0) return 0;
  int components = dec->num_components;
  if (dec->comps_in_scan != components) return 0;
  if (!((components == 1 && dec->jpeg_color_space == JCS_GRAYSCALE) ||
        (components == 3 && (dec->jpeg_color_space == JCS_YCbCr || dec->jpeg_color_space == JCS_RGB))))
    return 0;
  if (dec->image_height == 0 || dec->image_width == 0 || dec->unread_marker != 0) return 0;

  /* The tables of each block of an MCU, and each component's prediction.
   * The address of this thread's tables is taken once: in a shared library
   * each use of a thread-local variable may call __tls_get_addr. */
  static __thread scan_table thread_tables[2 * NUM_HUFF_TBLS];
  scan_table *tables = thread_tables;
  int built[2 * NUM_HUFF_TBLS] = {0};
  const scan_table *block_dc[D_MAX_BLOCKS_IN_MCU], *block_ac[D_MAX_BLOCKS_IN_MCU];
  int block_component[D_MAX_BLOCKS_IN_MCU];
  int blocks = 0;
  for (int c = 0; c < components; c++) {
    const jpeg_component_info *comp = dec->cur_comp_info[c];
    int h = comp->h_samp_factor, v = comp->v_samp_factor;
    if (h < 1 || h > 2 || v < 1 || v > 2) return 0;
    if (comp->quant_tbl_no < 0 || comp->quant_tbl_no >= NUM_QUANT_TBLS || !dec->quant_tbl_ptrs[comp->quant_tbl_no])
      return 0;
    const scan_table *pair[2];
    for (int ac = 0; ac < 2; ac++) {
      int number = ac ? comp->ac_tbl_no : comp->dc_tbl_no;
      if (number < 0 || number >= NUM_HUFF_TBLS) return 0;
      const JHUFF_TBL *h_tbl = ac ? dec->ac_huff_tbl_ptrs[number] : dec->dc_huff_tbl_ptrs[number];
      int slot = ac * NUM_HUFF_TBLS + number;
      if (!h_tbl) return 0;
      if (!built[slot]) {
        if (!build_table(h_tbl, !ac, &tables[slot])) return 0;
        built[slot] = 1;
      }
      pair[ac] = &tables[slot];
    }
    int count = components == 1 ? 1 : h * v; /* a lone component is coded block by block */
    if (blocks + count > D_MAX_BLOCKS_IN_MCU) return 0;
    for (int k = 0; k < count; k++, blocks++) {
      block_dc[blocks] = pair[0];
      block_ac[blocks] = pair[1];
      block_component[blocks] = c;
    }
  }

  int64_t mcus;
  if (components == 1) {
    mcus = (int64_t)dec->cur_comp_info[0]->width_in_blocks * dec->cur_comp_info[0]->height_in_blocks;
  } else {
    int64_t across = ((int64_t)dec->image_width + 8 * dec->max_h_samp_factor - 1) / (8 * dec->max_h_samp_factor);
    int64_t down = ((int64_t)dec->image_height + 8 * dec->max_v_samp_factor - 1) / (8 * dec->max_v_samp_factor);
    mcus = across * down;
  }

  if (records && mcus * blocks != capacity) return 0;
  bit_reader r = bit_reader_at(dec->src->next_input_byte, dec->src->next_input_byte + dec->src->bytes_in_buffer);
  int64_t prediction[MAX_COMPONENTS] = {0};
  int64_t interval = dec->restart_interval, to_go = interval;
  int next_restart = 0;
  for (int64_t m = 0; m < mcus; m++) {
    if (interval && to_go == 0) {
      if (!expect_marker(&r, (uint8_t)(0xD0 + next_restart))) return 0;
      next_restart = (next_restart + 1) & 7;
      memset(prediction, 0, sizeof prediction);
      to_go = interval;
    }
    for (int b = 0; b < blocks; b++)
      if (!scan_block(&r, block_dc[b], block_ac[b], &prediction[block_component[b]],
                      records ? &records[m * blocks + b] : NULL))
        return 0;
    to_go--;
  }
  return expect_marker(&r, 0xD9);
}

int slip__jpeg_scan_is_good(const struct jpeg_decompress_struct *dec) { return scan(dec, NULL, 0); }

int slip__jpeg_scan_blocks(const struct jpeg_decompress_struct *dec, slip__scanned_block *records,
                           int64_t count) {
  return records ? scan(dec, records, count) : 0;
}
