/*
 * huffman.c - optimal Huffman tables for the lossless re-coding of a JPEG
 * into restart-marker tiles, counted straight from its DCT coefficients.
 *
 * libjpeg's own optimize_coding runs a whole extra encoding pass whose
 * symbol statistics are gathered by plain C (one bit-length loop per
 * coefficient); on ImageNet photos that pass cost more than the decoding
 * and the final encoding together.  The symbols a baseline sequential scan
 * codes follow from the coefficients and the MCU order alone, so they are
 * counted here in one pass, the tables built as ITU-T T.81 Annex K.2
 * describes (code lengths limited to 16 bits, no all-ones code word), and
 * handed to the compressor as fixed tables.
 */
#include <pthread.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "internal.h"

#define SYMBOLS 256

const uint8_t slip__zigzag[DCTSIZE2] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48,
    41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23,
    30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};

/* zigzag_bits[r][m]: the zig-zag positions, as bits, of the coefficients
 * of row r of a block whose columns are the set bits of m. */
static uint64_t zigzag_bits[DCTSIZE][256];
static pthread_once_t zigzag_bits_once = PTHREAD_ONCE_INIT;

static void make_zigzag_bits(void) {
  for (int k = 0; k < DCTSIZE2; k++)
    for (int m = 0; m < 256; m++)
      if (m >> (slip__zigzag[k] % DCTSIZE) & 1) zigzag_bits[slip__zigzag[k] / DCTSIZE][m] |= (uint64_t)1 << k;
}

/* The nonzero coefficients of a block as bits, in natural order. */
static uint64_t nonzero_natural(const JCOEF *block) {
#if defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  uint64_t mask = 0;
  for (int i = 0; i < DCTSIZE2; i += 16) {
    __m128i lo = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(block + i)), zero);
    __m128i hi = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(block + i + 8)), zero);
    mask |= (uint64_t)(uint16_t)~_mm_movemask_epi8(_mm_packs_epi16(lo, hi)) << i;
  }
  return mask;
#else
  uint64_t mask = 0;
  for (int i = 0; i < DCTSIZE2; i++) mask |= (uint64_t)(block[i] != 0) << i;
  return mask;
#endif
}

/* Count the symbols of one block: its DC difference from *last_dc, then its
 * AC run/size pairs, zero-run extensions (0xF0) and end of block (0x00).
 * The nonzero AC coefficients are found as the set bits of a mask in
 * zig-zag order: most of a block is zeros, and the runs between them are
 * the distances between set bits.  Returns 0 when a coefficient is out of
 * the range 8-bit baseline JPEG codes (T.81 F.1.2: DC differences of at
 * most 11 bits, AC values of at most 10), which libjpeg's encoder would
 * write without a code for it. */
static int count_block(const JCOEF *block, int *last_dc, long *dc, long *ac) {
  int size = slip__category(block[0] - *last_dc);
  if (size > SLIP__MAX_DC_CATEGORY) return 0;
  dc[size]++;
  *last_dc = block[0];
  uint64_t natural = nonzero_natural(block), nonzero = 0;
  for (int r = 0; r < DCTSIZE; r++) nonzero |= zigzag_bits[r][natural >> (r * DCTSIZE) & 0xFF];
  nonzero &= ~(uint64_t)1; /* the DC coefficient */
  int previous = 0; /* zig-zag position of the last coefficient coded */
  while (nonzero) {
    int k = __builtin_ctzll(nonzero);
    nonzero &= nonzero - 1;
    int run = k - previous - 1;
    for (; run > 15; run -= 16) ac[0xF0]++;
    size = slip__category(block[slip__zigzag[k]]);
    if (size > SLIP__MAX_AC_CATEGORY) return 0;
    ac[run << 4 | size]++;
    previous = k;
  }
  if (previous < DCTSIZE2 - 1) ac[0x00]++;
  return 1;
}

/* T.81 K.2: Huffman code lengths, then lengths over 16 bits moved up the
 * tree, then the reserved all-ones code point taken out. */
void slip__optimal_huffman_table(long freq[SYMBOLS + 1], JHUFF_TBL *tbl) {
  int codesize[SYMBOLS + 1], others[SYMBOLS + 1];
  memset(codesize, 0, sizeof codesize);
  for (int i = 0; i <= SYMBOLS; i++) others[i] = -1;
  freq[SYMBOLS] = 1; /* the reserved symbol: no code word is all ones */
  int live[SYMBOLS + 1], n = 0; /* the symbols whose frequency is not 0, in increasing order */
  for (int i = 0; i <= SYMBOLS; i++)
    if (freq[i]) live[n++] = i;
  while (n > 1) {
    int a = -1, b = -1; /* positions in live of the two least frequent, ties to the larger symbol */
    for (int i = 0; i < n; i++)
      if (a < 0 || freq[live[i]] <= freq[live[a]]) a = i;
    for (int i = 0; i < n; i++)
      if (i != a && (b < 0 || freq[live[i]] <= freq[live[b]])) b = i;
    int v1 = live[a], v2 = live[b];
    freq[v1] += freq[v2];
    freq[v2] = 0;
    memmove(&live[b], &live[b + 1], (size_t)(n - b - 1) * sizeof live[0]);
    n--;
    for (codesize[v1]++; others[v1] >= 0; codesize[v1]++) v1 = others[v1];
    others[v1] = v2;
    for (codesize[v2]++; others[v2] >= 0; codesize[v2]++) v2 = others[v2];
  }
  int bits[2 * SYMBOLS + 2];
  memset(bits, 0, sizeof bits);
  for (int i = 0; i <= SYMBOLS; i++)
    if (codesize[i]) bits[codesize[i]]++;
  for (int i = 2 * SYMBOLS + 1; i > 16; i--) {
    while (bits[i] > 0) { /* two codes of length i become one of i - 1 and a longer prefix */
      int j = i - 2;
      while (bits[j] == 0) j--;
      bits[i] -= 2;
      bits[i - 1]++;
      bits[j + 1] += 2;
      bits[j]--;
    }
  }
  int longest = 16;
  while (bits[longest] == 0) longest--;
  bits[longest]--; /* the reserved symbol's code */
  memset(tbl->bits, 0, sizeof tbl->bits);
  for (int i = 1; i <= 16; i++) tbl->bits[i] = (UINT8)bits[i];
  /* The symbols by code length, then by value: a counting sort. */
  int first[2 * SYMBOLS + 2];
  memset(first, 0, sizeof first);
  for (int s = 0; s < SYMBOLS; s++)
    if (codesize[s]) first[codesize[s]]++;
  for (int length = 1, at = 0; length <= 2 * SYMBOLS + 1; length++) {
    int count = first[length];
    first[length] = at;
    at += count;
  }
  for (int s = 0; s < SYMBOLS; s++)
    if (codesize[s]) tbl->huffval[first[codesize[s]]++] = (UINT8)s;
  tbl->sent_table = FALSE;
}

static JHUFF_TBL *table(j_compress_ptr cout, JHUFF_TBL **slot) {
  if (!*slot) *slot = jpeg_alloc_huff_table((j_common_ptr)cout);
  return *slot;
}

void slip__optimal_huffman_tables(j_decompress_ptr din, jvirt_barray_ptr *coefficients, j_compress_ptr cout,
                                  slip__huffman_counts *c) {
  pthread_once(&zigzag_bits_once, make_zigzag_bits);
  memset(c, 0, sizeof *c);
  int n = cout->num_components;
  int single = n == 1;
  int64_t mcu_cols = single ? din->comp_info[0].width_in_blocks
                            : ((int64_t)din->image_width + din->max_h_samp_factor * DCTSIZE - 1) /
                                  (din->max_h_samp_factor * DCTSIZE);
  int64_t mcu_rows = single ? din->comp_info[0].height_in_blocks
                            : ((int64_t)din->image_height + din->max_v_samp_factor * DCTSIZE - 1) /
                                  (din->max_v_samp_factor * DCTSIZE);
  int64_t interval = cout->restart_interval;
  int last_dc[MAX_COMPONENTS] = {0};
  for (int64_t row = 0; row < mcu_rows; row++) {
    /* The block rows of every component this MCU row covers. */
    JBLOCKARRAY rows[MAX_COMPONENTS];
    for (int ci = 0; ci < n; ci++) {
      jpeg_component_info *comp = &din->comp_info[ci];
      int v = single ? 1 : comp->v_samp_factor;
      rows[ci] = (*din->mem->access_virt_barray)((j_common_ptr)din, coefficients[ci], (JDIMENSION)(row * v),
                                                 (JDIMENSION)v, FALSE);
    }
    for (int64_t col = 0; col < mcu_cols; col++) {
      if (interval && (row * mcu_cols + col) % interval == 0) memset(last_dc, 0, sizeof last_dc);
      for (int ci = 0; ci < n; ci++) {
        jpeg_component_info *in = &din->comp_info[ci];
        int h = single ? 1 : in->h_samp_factor, v = single ? 1 : in->v_samp_factor;
        long *dc = c->dc[cout->comp_info[ci].dc_tbl_no], *ac = c->ac[cout->comp_info[ci].ac_tbl_no];
        for (int y = 0; y < v; y++) {
          for (int x = 0; x < h; x++) {
            int64_t by = row * v + y, bx = col * h + x;
            if (by < in->height_in_blocks && bx < in->width_in_blocks) {
              if (!count_block(rows[ci][y][bx], &last_dc[ci], dc, ac))
                slip__jpeg_fail((j_common_ptr)din, SLIP_EUNSUPPORTED,
                                "a DC difference wider than the 11 bits or an AC coefficient wider than the 10 bits "
                                "of 8-bit baseline JPEG: the image decodes, but cannot be re-coded as baseline tiles");
            } else { /* a dummy block at the edge: the previous block's DC, no AC */
              dc[0]++;
              ac[0x00]++;
            }
          }
        }
      }
    }
  }
  int built_dc[NUM_HUFF_TBLS] = {0}, built_ac[NUM_HUFF_TBLS] = {0};
  for (int ci = 0; ci < n; ci++) {
    int d = cout->comp_info[ci].dc_tbl_no, a = cout->comp_info[ci].ac_tbl_no;
    if (!built_dc[d]++) slip__optimal_huffman_table(c->dc[d], table(cout, &cout->dc_huff_tbl_ptrs[d]));
    if (!built_ac[a]++) slip__optimal_huffman_table(c->ac[a], table(cout, &cout->ac_huff_tbl_ptrs[a]));
  }
  cout->optimize_coding = FALSE;
}
