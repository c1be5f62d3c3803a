/*
 * crc32.c - CRC-32 (the polynomial of zlib, gzip and PNG) for the page
 * checksums of dataset files.
 *
 * On x86-64 processors with PCLMULQDQ, the data is folded 64 bytes at a time
 * by carry-less multiplication (Gopal et al., "Fast CRC Computation for
 * Generic Polynomials Using PCLMULQDQ Instruction", Intel, 2009) and reduced
 * to 32 bits by Barrett reduction; elsewhere, and for short inputs and
 * tails, eight table lookups per 8 bytes ("slicing-by-8").  Both give zlib's
 * crc32() exactly.
 */
#include <pthread.h>

#include "internal.h"

#define POLY_REFLECTED 0xEDB88320u /* x^32 + x^26 + ... + 1, bit-reversed */

static uint32_t table[8][256];
static int use_pclmul; /* the processor has PCLMULQDQ (set with the table) */
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void make_table(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  use_pclmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
#endif
  for (uint32_t n = 0; n < 256; n++) {
    uint32_t c = n;
    for (int k = 0; k < 8; k++) c = c & 1 ? POLY_REFLECTED ^ (c >> 1) : c >> 1;
    table[0][n] = c;
  }
  for (uint32_t n = 0; n < 256; n++)
    for (int k = 1; k < 8; k++) table[k][n] = table[0][table[k - 1][n] & 0xFF] ^ (table[k - 1][n] >> 8);
}

/* crc is the running register (inverted), as inside zlib. */
static uint32_t crc_tables(uint32_t crc, const uint8_t *p, size_t n) {
  for (; n && ((uintptr_t)p & 7); n--) crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
    crc = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^ table[4][lo >> 24] ^
          table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^ table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
  }
  for (; n; n--) crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

/*
 * Folding constants, in the bit-reversed domain of the reflected CRC: with
 * P(x) the CRC polynomial, k(n) = reverse32(x^n mod P) << 1 (the shift makes
 * up for the factor x that a carry-less product of bit-reversed operands
 * carries).  Computed by tests/test_native_crc32.py, which checks them.
 */
#define K_FOLD_512_LO 0x154442bd4ull /* k(4*128 + 32): a 64-byte fold, low half */
#define K_FOLD_512_HI 0x1c6e41596ull /* k(4*128 - 32): a 64-byte fold, high half */
#define K_FOLD_128_LO 0x1751997d0ull /* k(128 + 32): a 16-byte fold, low half */
#define K_FOLD_128_HI 0x0ccaa009eull /* k(128 - 32): a 16-byte fold, high half; also 128 -> 96 bits */
#define K_FOLD_64 0x163cd6124ull     /* k(64): 96 -> 64 bits */
#define P_REFLECTED 0x1db710641ull   /* P(x), bit-reversed over 33 bits */
#define MU_REFLECTED 0x1f7011641ull  /* floor(x^64 / P(x)), bit-reversed over 33 bits: Barrett's constant */

__attribute__((target("pclmul,sse2"))) static inline __m128i fold(__m128i x, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* crc is the running register (inverted); n >= 64. Returns the register
 * after the largest multiple of 16 bytes, which it reports in *used. */
__attribute__((target("pclmul,sse2"))) static uint32_t crc_pclmul(uint32_t crc, const uint8_t *p, size_t n,
                                                                   size_t *used) {
  const __m128i k512 = _mm_set_epi64x((long long)K_FOLD_512_HI, (long long)K_FOLD_512_LO);
  const __m128i k128 = _mm_set_epi64x((long long)K_FOLD_128_HI, (long long)K_FOLD_128_LO);
  const __m128i k64 = _mm_set_epi64x(0, (long long)K_FOLD_64);
  const __m128i barrett = _mm_set_epi64x((long long)MU_REFLECTED, (long long)P_REFLECTED);
  const __m128i low32 = _mm_set_epi32(0, 0, 0, -1);
  const uint8_t *start = p;

  __m128i x0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)crc));
  __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
  __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
  __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
  for (p += 64, n -= 64; n >= 64; p += 64, n -= 64) {
    x0 = _mm_xor_si128(fold(x0, k512), _mm_loadu_si128((const __m128i *)p));
    x1 = _mm_xor_si128(fold(x1, k512), _mm_loadu_si128((const __m128i *)(p + 16)));
    x2 = _mm_xor_si128(fold(x2, k512), _mm_loadu_si128((const __m128i *)(p + 32)));
    x3 = _mm_xor_si128(fold(x3, k512), _mm_loadu_si128((const __m128i *)(p + 48)));
  }
  __m128i x = _mm_xor_si128(fold(x0, k128), x1);
  x = _mm_xor_si128(fold(x, k128), x2);
  x = _mm_xor_si128(fold(x, k128), x3);
  for (; n >= 16; p += 16, n -= 16) x = _mm_xor_si128(fold(x, k128), _mm_loadu_si128((const __m128i *)p));

  /* 128 -> 96 -> 64 bits, then Barrett reduction to the 32-bit remainder. */
  x = _mm_xor_si128(_mm_clmulepi64_si128(x, k128, 0x10), _mm_srli_si128(x, 8));
  x = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x, low32), k64, 0x00), _mm_srli_si128(x, 4));
  __m128i t = _mm_and_si128(_mm_clmulepi64_si128(_mm_and_si128(x, low32), barrett, 0x10), low32);
  t = _mm_clmulepi64_si128(t, barrett, 0x00);
  *used = (size_t)(p - start);
  return (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(_mm_xor_si128(x, t), 4));
}
#endif

SLIP_API uint32_t slip_crc32(const uint8_t *data, size_t size, uint32_t crc) {
  if (!data) return crc;
  pthread_once(&table_once, make_table);
  crc = ~crc;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (size >= 64 && use_pclmul) {
    size_t used;
    crc = crc_pclmul(crc, data, size, &used);
    data += used;
    size -= used;
  }
#endif
  return ~crc_tables(crc, data, size);
}
