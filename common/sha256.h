/* sha256.h -- SHA-256 and hex digits: the spec hash (dsv4c), a kernel's
 * code hash (dsv4c, libdsv4rt, dsv4c-tune) and a report's stamp. */
#ifndef DSV4_SHA256_H
#define DSV4_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint32_t h[8];
  uint64_t bytes;
  unsigned char buf[64];
  size_t nbuf;
} dsv4_sha256_ctx;
void dsv4_sha256_init(dsv4_sha256_ctx *c);
void dsv4_sha256_update(dsv4_sha256_ctx *c, const void *p, size_t n);
void dsv4_sha256_final(dsv4_sha256_ctx *c, unsigned char out[32]);
/* The hash of n bytes as 64 lower-case hex digits (and a NUL). */
void dsv4_sha256_hex(const void *p, size_t n, char hex[65]);
void dsv4_hex(const unsigned char *p, size_t n, char *out); /* 2n digits and a NUL */

#endif
