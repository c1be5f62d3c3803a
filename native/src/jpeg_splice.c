/*
 * jpeg_splice.c - re-coding a sequential JPEG into restart-marker tiles
 * without decoding a coefficient: the fast path of
 * slip_jpeg_add_restart_markers.
 *
 * A sequential Huffman scan codes each block as the difference of its DC
 * coefficient from the previous block's of the same component, then its AC
 * symbols, which depend on nothing outside the block.  Restart markers
 * change only two things: each interval starts from a DC prediction of 0,
 * and ends on a byte boundary.  So the tiles are the original's bits, block
 * by block, with each DC difference coded anew:
 *
 * 1. jpeg_scan.c's scanner reads the scan once (every symbol, by the rules
 *    that make it vouch for libjpeg's verdict), recording each block's DC
 *    coefficient and how many bits its DC and AC parts take;
 * 2. the DC differences of the new intervals are computed and counted, and
 *    an optimal DC table built for them (T.81 K.2, as huffman.c builds it);
 * 3. the scan is written again: each block's new DC code, then its AC bits
 *    copied from the original 56 at a time, a restart marker every
 *    `interval` MCUs.
 *
 * The AC tables stay the original's, so the splice is for images whose
 * tables were counted for them (most photos: an encoder's optimized
 * tables): re-coding every AC symbol, as libjpeg's transcoding does, costs
 * several times this whole splice and saves nothing on such an image.  An
 * image coded with general-purpose tables is re-coded whole.
 *
 * What this does not splice goes to libjpeg's transcoding, which also says
 * what is wrong with an image, if anything: every scan the scanner is
 * unsure of (progressive, arithmetic-coded, 12-bit, damaged...), AC tables
 * with values wider than baseline's 10 bits, and DC differences wider than
 * its 11 (the transcoding's own refusals).  So an image gets the same
 * verdict either way, and the same pixels.
 */
#include <string.h>

#include "entropy_reader.h"
#include "internal.h"

#define BASELINE_AC_SYMBOLS 162 /* every run of 0 to 15 zeros with every category 1 to 10, ZRL and EOB */
#define HEADER_BOUND 4096  /* every marker segment this writes before the scan, and EOI */

/* The blocks of one MCU of the scan, and how many MCUs there are. */
typedef struct splice_layout {
  int interleaved; /* several components: MCUs of each one's sampling, with dummy blocks at the edges */
  int blocks;      /* per MCU */
  int component[D_MAX_BLOCKS_IN_MCU]; /* index in the scan of each block's component */
  int row[D_MAX_BLOCKS_IN_MCU];       /* the block's row among its component's blocks of the MCU */
  int column[D_MAX_BLOCKS_IN_MCU];    /* and its column */
  int64_t columns, mcus;              /* MCUs per row, in all */
} splice_layout;

/* The layout of dec's scan, or 0 for one the scanner would not read (it
 * checks the rest). */
static int layout_of(const struct jpeg_decompress_struct *dec, splice_layout *l) {
  int n = dec->comps_in_scan;
  if (n != dec->num_components || (n != 1 && n != 3)) return 0;
  l->interleaved = n > 1;
  l->blocks = 0;
  for (int c = 0; c < n; c++) {
    const jpeg_component_info *comp = dec->cur_comp_info[c];
    int h = l->interleaved ? comp->h_samp_factor : 1, v = l->interleaved ? comp->v_samp_factor : 1;
    if (h < 1 || h > 2 || v < 1 || v > 2 || l->blocks + h * v > D_MAX_BLOCKS_IN_MCU) return 0;
    for (int y = 0; y < v; y++)
      for (int x = 0; x < h; x++, l->blocks++) {
        l->component[l->blocks] = c;
        l->row[l->blocks] = y;
        l->column[l->blocks] = x;
      }
  }
  int32_t mcu_h, mcu_w;
  slip__mcu_size(dec, &mcu_h, &mcu_w);
  l->columns = ((int64_t)dec->image_width + mcu_w - 1) / mcu_w;
  l->mcus = l->columns * (((int64_t)dec->image_height + mcu_h - 1) / mcu_h);
  return l->columns > 0 && l->mcus > 0;
}

/* Whether the AC tables the scan uses are its own: counted for this image
 * (fewer than the 162 symbols baseline has), and of values no wider than
 * baseline's (libjpeg's transcoding refuses wider ones the scan uses).  A
 * table of every symbol is a general-purpose one, such as T.81's example
 * tables that libjpeg, Pillow and many cameras write by default: counted
 * tables code such an image in about a tenth fewer bytes, which is worth
 * libjpeg's transcoding. */
static int ac_tables_are_its_own(const struct jpeg_decompress_struct *dec) {
  for (int c = 0; c < dec->comps_in_scan; c++) {
    int number = dec->cur_comp_info[c]->ac_tbl_no;
    if (number < 0 || number >= NUM_HUFF_TBLS || !dec->ac_huff_tbl_ptrs[number]) return 0;
    const JHUFF_TBL *t = dec->ac_huff_tbl_ptrs[number];
    int symbols = 0;
    for (int length = 1; length <= 16; length++) symbols += t->bits[length];
    if (symbols >= BASELINE_AC_SYMBOLS) return 0;
    for (int i = 0; i < symbols; i++)
      if ((t->huffval[i] & 15) > SLIP__MAX_AC_CATEGORY) return 0;
  }
  return 1;
}

/* Replace each record's DC coefficient by its difference in the re-coded
 * scan, and count those differences' categories by DC table.  A dummy
 * block (past a component's edge in an interleaved MCU; the decoder
 * discards it) repeats the prediction, as libjpeg's encoder codes it.
 * Returns 0 when a difference is wider than baseline's 11 bits. */
static int new_dc_differences(const struct jpeg_decompress_struct *dec, const splice_layout *l, int64_t interval,
                              slip__scanned_block *records, long counts[NUM_HUFF_TBLS][257]) {
  int32_t last[MAX_COMPONENTS];
  for (int64_t m = 0; m < l->mcus; m++) {
    if (m % interval == 0) memset(last, 0, sizeof last);
    int64_t mcu_row = m / l->columns, mcu_column = m % l->columns;
    for (int b = 0; b < l->blocks; b++) {
      slip__scanned_block *record = &records[m * l->blocks + b];
      int c = l->component[b];
      const jpeg_component_info *comp = dec->cur_comp_info[c];
      int real = !l->interleaved ||
                 (mcu_row * comp->v_samp_factor + l->row[b] < comp->height_in_blocks &&
                  mcu_column * comp->h_samp_factor + l->column[b] < comp->width_in_blocks);
      int32_t difference = real ? record->dc - last[c] : 0;
      if (real) last[c] = record->dc;
      int category = slip__category(difference);
      if (category > SLIP__MAX_DC_CATEGORY) return 0;
      counts[comp->dc_tbl_no][category]++;
      record->dc = (int16_t)difference;
    }
  }
  return 1;
}

/* The code of each DC category in table t (length 0: not in the table). */
typedef struct dc_codes {
  uint32_t code[16];
  uint8_t length[16];
} dc_codes;

static void derive_dc_codes(const JHUFF_TBL *t, dc_codes *d) {
  memset(d, 0, sizeof *d);
  uint32_t code = 0;
  for (int length = 1, p = 0; length <= 16; length++, code <<= 1)
    for (int i = 0; i < t->bits[length]; i++, p++, code++)
      if (t->huffval[p] < 16) {
        d->code[t->huffval[p]] = code;
        d->length[t->huffval[p]] = (uint8_t)length;
      }
}

/* ------------------------------------------------------ the scan's bits */

/* Entropy-coded bytes being written, with 0xFF stuffed. */
typedef struct bit_writer {
  uint8_t *next;
  uint64_t pending; /* the low `bits` bits are still to be written, most significant first */
  int bits;         /* 0 .. 7 between calls */
} bit_writer;

/* Append the n low bits of value (n <= 56; the bits above them zero), and
 * write out every whole byte: eight at once when none of them is 0xFF (the
 * bytes past the whole ones are written again by the next call). */
static inline void put_bits(bit_writer *w, uint64_t value, int n) {
  w->pending = w->pending << n | value;
  w->bits += n;
  if (w->bits < 8) return;
  int whole = w->bits >> 3;
  uint64_t top = w->pending << (64 - w->bits), inverted = ~top;
  uint64_t ff = (inverted - 0x0101010101010101ull) & ~inverted & 0x8080808080808080ull; /* never misses one */
  w->bits &= 7;
  if (!(ff & ~0ull << (64 - 8 * whole))) {
    top = __builtin_bswap64(top);
    memcpy(w->next, &top, 8);
    w->next += whole;
    return;
  }
  for (int k = 0; k < whole; k++) {
    uint8_t b = (uint8_t)(top >> (56 - 8 * k));
    *w->next++ = b;
    if (b == 0xFF) *w->next++ = 0x00;
  }
}

/* Pad the last byte with 1 bits, as T.81 F.1.2.3 asks before a marker. */
static void flush_to_byte(bit_writer *w) {
  int pad = (8 - w->bits) & 7;
  put_bits(w, (1u << pad) - 1, pad);
}

static void put_marker(bit_writer *w, uint8_t marker) {
  w->next[0] = 0xFF;
  w->next[1] = marker;
  w->next += 2;
}

/* Copy the next n bits of r to w. */
static inline void copy_bits(bit_reader *r, bit_writer *w, int n) {
  while (n > 0) {
    if (r->bits < 56) fill(r);
    int take = n < 56 ? n : 56;
    put_bits(w, r->buf >> (64 - take), take);
    consume(r, take);
    n -= take;
  }
}

/* Write the scan again from the records: returns 0 when the data no longer
 * holds the markers the scanner found (it cannot; a safeguard). */
static int write_scan(const struct jpeg_decompress_struct *dec, const splice_layout *l, int64_t interval,
                      const slip__scanned_block *records, const dc_codes *tables, bit_writer *w) {
  const dc_codes *block_codes[D_MAX_BLOCKS_IN_MCU];
  for (int b = 0; b < l->blocks; b++) block_codes[b] = &tables[dec->cur_comp_info[l->component[b]]->dc_tbl_no];
  bit_reader r = bit_reader_at(dec->src->next_input_byte, dec->src->next_input_byte + dec->src->bytes_in_buffer);
  int64_t original_interval = dec->restart_interval, to_go = original_interval;
  int original_marker = 0, marker = 0;
  for (int64_t m = 0; m < l->mcus; m++) {
    if (original_interval && to_go == 0) {
      if (!expect_marker(&r, (uint8_t)(0xD0 + original_marker))) return 0;
      original_marker = (original_marker + 1) & 7;
      to_go = original_interval;
    }
    if (m && m % interval == 0) {
      flush_to_byte(w);
      put_marker(w, (uint8_t)(0xD0 + marker));
      marker = (marker + 1) & 7;
    }
    const slip__scanned_block *record = &records[m * l->blocks];
    for (int b = 0; b < l->blocks; b++, record++) {
      int difference = record->dc, category = slip__category(difference);
      uint32_t extra = (uint32_t)(difference < 0 ? difference - 1 : difference) & ((1u << category) - 1);
      put_bits(w, block_codes[b]->code[category] << category | extra, block_codes[b]->length[category] + category);
      if (r.bits < 32) fill(&r);
      consume(&r, record->dc_bits);
      copy_bits(&r, w, record->ac_bits);
    }
    to_go--;
  }
  if (r.bits < 0 || r.bits >= 8) return 0;
  flush_to_byte(w);
  put_marker(w, 0xD9);
  return 1;
}

/* --------------------------------------------------------- the headers */

static uint8_t *put16(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
  return p + 2;
}

static uint8_t *segment(uint8_t *p, uint8_t marker, uint32_t length) {
  p[0] = 0xFF;
  p[1] = marker;
  return put16(p + 2, length);
}

/* SOI, then what libjpeg writes for the image's colour space when it
 * re-codes one (jpeg_copy_critical_parameters): a JFIF APP0 marker for grey
 * and YCbCr, with the version and density of the input's own; an Adobe
 * APP14 marker (no transform) for RGB. */
static uint8_t *put_start(uint8_t *p, const struct jpeg_decompress_struct *dec) {
  p = segment(p, 0xD8, 0) - 2; /* SOI has no length */
  if (dec->jpeg_color_space == JCS_RGB) {
    static const uint8_t adobe[12] = {'A', 'd', 'o', 'b', 'e', 0, 100, 0, 0, 0, 0, 0};
    p = segment(p, 0xEE, 14);
    memcpy(p, adobe, sizeof adobe);
    return p + sizeof adobe;
  }
  int major = 1, minor = 1, unit = 0, x_density = 1, y_density = 1;
  if (dec->saw_JFIF_marker) {
    if (dec->JFIF_major_version == 1 || dec->JFIF_major_version == 2) {
      major = dec->JFIF_major_version;
      minor = dec->JFIF_minor_version;
    }
    unit = dec->density_unit;
    x_density = dec->X_density;
    y_density = dec->Y_density;
  }
  p = segment(p, 0xE0, 16);
  memcpy(p, "JFIF", 5);
  p += 5;
  *p++ = (uint8_t)major;
  *p++ = (uint8_t)minor;
  *p++ = (uint8_t)unit;
  p = put16(p, (uint32_t)x_density);
  p = put16(p, (uint32_t)y_density);
  *p++ = 0; /* no thumbnail */
  *p++ = 0;
  return p;
}

static int is_16_bit(const JQUANT_TBL *t) {
  for (int i = 0; i < DCTSIZE2; i++)
    if (t->quantval[i] > 255) return 1;
  return 0;
}

/* DQT (each table the components use, in zig-zag order), SOF0 or, for
 * 16-bit quantization or table numbers past 1, SOF1, DHT (the new DC
 * tables, the original AC ones), DRI and SOS. */
static uint8_t *put_tables(uint8_t *p, const struct jpeg_decompress_struct *dec, const JHUFF_TBL *dc_tables,
                           int64_t interval) {
  int baseline = 1, written = 0;
  for (int c = 0; c < dec->num_components; c++) {
    int number = dec->comp_info[c].quant_tbl_no;
    const JQUANT_TBL *t = dec->quant_tbl_ptrs[number];
    if (written >> number & 1) continue;
    written |= 1 << number;
    int wide = is_16_bit(t);
    baseline &= !wide;
    p = segment(p, 0xDB, 3 + (uint32_t)DCTSIZE2 * (1 + wide));
    *p++ = (uint8_t)(wide << 4 | number);
    for (int k = 0; k < DCTSIZE2; k++) {
      if (wide) *p++ = (uint8_t)(t->quantval[slip__zigzag[k]] >> 8);
      *p++ = (uint8_t)t->quantval[slip__zigzag[k]];
    }
  }
  int n = dec->comps_in_scan;
  for (int c = 0; c < n; c++)
    baseline &= dec->cur_comp_info[c]->dc_tbl_no <= 1 && dec->cur_comp_info[c]->ac_tbl_no <= 1;

  p = segment(p, baseline ? 0xC0 : 0xC1, 8 + 3 * (uint32_t)dec->num_components);
  *p++ = 8;
  p = put16(p, dec->image_height);
  p = put16(p, dec->image_width);
  *p++ = (uint8_t)dec->num_components;
  for (int c = 0; c < dec->num_components; c++) {
    const jpeg_component_info *comp = &dec->comp_info[c];
    *p++ = (uint8_t)comp->component_id;
    *p++ = (uint8_t)(comp->h_samp_factor << 4 | comp->v_samp_factor);
    *p++ = (uint8_t)comp->quant_tbl_no;
  }

  /* A DHT segment a table, each component's DC table and then its AC one,
   * in the order libjpeg's encoder writes them. */
  int sent = 0; /* bit k: DC table k; bit NUM_HUFF_TBLS + k: AC table k */
  for (int c = 0; c < n; c++) {
    for (int ac = 0; ac < 2; ac++) {
      int number = ac ? dec->cur_comp_info[c]->ac_tbl_no : dec->cur_comp_info[c]->dc_tbl_no;
      int bit = 1 << (ac * NUM_HUFF_TBLS + number);
      if (sent & bit) continue;
      sent |= bit;
      const JHUFF_TBL *t = ac ? dec->ac_huff_tbl_ptrs[number] : &dc_tables[number];
      uint32_t symbols = 0;
      for (int l = 1; l <= 16; l++) symbols += t->bits[l];
      p = segment(p, 0xC4, 19 + symbols);
      *p++ = (uint8_t)(ac << 4 | number);
      memcpy(p, &t->bits[1], 16);
      memcpy(p + 16, t->huffval, symbols);
      p += 16 + symbols;
    }
  }

  p = put16(segment(p, 0xDD, 4), (uint32_t)interval);
  p = segment(p, 0xDA, 6 + 2 * (uint32_t)n);
  *p++ = (uint8_t)n;
  for (int c = 0; c < n; c++) {
    *p++ = (uint8_t)dec->cur_comp_info[c]->component_id;
    *p++ = (uint8_t)(dec->cur_comp_info[c]->dc_tbl_no << 4 | dec->cur_comp_info[c]->ac_tbl_no);
  }
  *p++ = 0;  /* Ss */
  *p++ = 63; /* Se */
  *p++ = 0;  /* Ah, Al */
  return p;
}

int32_t slip__jpeg_splice_restarts(slip_thread_state *ts, const struct jpeg_decompress_struct *dec,
                                   int32_t interval, uint8_t *out, size_t out_capacity, const uint8_t **result,
                                   size_t *result_size) {
  splice_layout l;
  if (interval < 1 || interval > 0xFFFF || !layout_of(dec, &l) || !ac_tables_are_its_own(dec)) return 0;
  int64_t count = l.mcus * l.blocks;
  /* The records are bounded as decoding memory is (a quarter of the limit:
   * the output may need twice the data again); past that, libjpeg's
   * transcoding, whose coefficients take 128 bytes a block, decides. */
  if ((uint64_t)count * sizeof(slip__scanned_block) > SLIP_MAX_DECODE_MEMORY / 4) return 0;
  slip__scanned_block *records = slip__scratch_reserve(&ts->splice_blocks, (size_t)count * sizeof *records);
  if (!records) return SLIP_ENOMEM;
  if (!slip__jpeg_scan_blocks(dec, records, count)) return 0;

  long counts[NUM_HUFF_TBLS][257];
  memset(counts, 0, sizeof counts);
  if (!new_dc_differences(dec, &l, interval, records, counts)) return 0;
  JHUFF_TBL dc_tables[NUM_HUFF_TBLS];
  dc_codes codes[NUM_HUFF_TBLS];
  int built = 0;
  for (int c = 0; c < dec->comps_in_scan; c++) {
    int number = dec->cur_comp_info[c]->dc_tbl_no;
    if (built >> number & 1) continue;
    built |= 1 << number;
    slip__optimal_huffman_table(counts[number], &dc_tables[number]);
    derive_dc_codes(&dc_tables[number], &codes[number]);
  }

  /* The most the file can take: each block's DC code and value at most 27
   * bits, its AC bits as they are, a padding byte and a marker each
   * interval, every byte possibly stuffed, and room for put_bits' 8 bytes. */
  int64_t bits = 27 * count, intervals = (l.mcus + interval - 1) / interval;
  for (int64_t i = 0; i < count; i++) bits += records[i].ac_bits;
  size_t bound = HEADER_BOUND + 2 * (size_t)(bits / 8 + intervals) + 2 * (size_t)intervals + 16;
  uint8_t *start = out_capacity >= bound ? out : slip__scratch_reserve(&ts->splice_out, bound);
  if (!start) return SLIP_ENOMEM;
  bit_writer w = {put_tables(put_start(start, dec), dec, dc_tables, interval), 0, 0};
  if (!write_scan(dec, &l, interval, records, codes, &w)) return 0;
  *result = start;
  *result_size = (size_t)(w.next - start);
  return 1;
}
