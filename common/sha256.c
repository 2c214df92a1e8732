/* sha256.c -- SHA-256 (FIPS 180-4) and hex digits (see sha256.h). */
#include "sha256.h"

#include <string.h>

/* ---- SHA-256 (FIPS 180-4) ------------------------------------------------------ */

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
    0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
    0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
    0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha_block(dsv4_sha256_ctx *c, const unsigned char *p)
{
  uint32_t w[64], s[8];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  memcpy(s, c->h, sizeof s);
  for (int i = 0; i < 64; i++) {
    uint32_t S1 = ror(s[4], 6) ^ ror(s[4], 11) ^ ror(s[4], 25), ch = (s[4] & s[5]) ^ (~s[4] & s[6]);
    uint32_t t1 = s[7] + S1 + ch + K256[i] + w[i];
    uint32_t S0 = ror(s[0], 2) ^ ror(s[0], 13) ^ ror(s[0], 22), maj = (s[0] & s[1]) ^ (s[0] & s[2]) ^ (s[1] & s[2]);
    uint32_t t2 = S0 + maj;
    memmove(s + 1, s, 7 * sizeof *s);
    s[4] += t1;
    s[0] = t1 + t2;
  }
  for (int i = 0; i < 8; i++)
    c->h[i] += s[i];
}

void dsv4_sha256_init(dsv4_sha256_ctx *c)
{
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(c->h, h0, sizeof h0);
  c->bytes = 0, c->nbuf = 0;
}

void dsv4_sha256_update(dsv4_sha256_ctx *c, const void *data, size_t n)
{
  const unsigned char *p = data;
  c->bytes += n;
  while (n) {
    size_t k = 64 - c->nbuf < n ? 64 - c->nbuf : n;
    memcpy(c->buf + c->nbuf, p, k);
    c->nbuf += k, p += k, n -= k;
    if (c->nbuf == 64)
      sha_block(c, c->buf), c->nbuf = 0;
  }
}

void dsv4_sha256_final(dsv4_sha256_ctx *c, unsigned char out[32])
{
  uint64_t bits = c->bytes * 8;
  unsigned char pad = 0x80, zero = 0, len[8];
  dsv4_sha256_update(c, &pad, 1);
  while (c->nbuf != 56)
    dsv4_sha256_update(c, &zero, 1);
  for (int i = 0; i < 8; i++)
    len[i] = (unsigned char)(bits >> (56 - 8 * i));
  dsv4_sha256_update(c, len, 8);
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 4; j++)
      out[4 * i + j] = (unsigned char)(c->h[i] >> (24 - 8 * j));
}

void dsv4_hex(const unsigned char *p, size_t n, char *out)
{
  static const char d[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++)
    out[2 * i] = d[p[i] >> 4], out[2 * i + 1] = d[p[i] & 15];
  out[2 * n] = 0;
}

void dsv4_sha256_hex(const void *p, size_t n, char hex[65])
{
  dsv4_sha256_ctx c;
  unsigned char h[32];
  dsv4_sha256_init(&c);
  dsv4_sha256_update(&c, p, n);
  dsv4_sha256_final(&c, h);
  dsv4_hex(h, 32, hex);
}
