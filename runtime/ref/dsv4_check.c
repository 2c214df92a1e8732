/* dsv4_check.c -- shared checking helpers (see dsv4_check.h). */
#include "dsv4_check.h"

#include "dsv4_ref.h"

#include <math.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t dsv4_check_seed(void)
{
  const char *e = getenv("DSV4_SEED");
  if (e && *e)
    return strtoull(e, NULL, 0);
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec;
}

void dsv4_rng_bytes(dsv4_rng *r, void *p, size_t n)
{
  unsigned char *q = p;
  while (n >= 8) {
    uint64_t v = dsv4_rng_next(r);
    memcpy(q, &v, 8);
    q += 8, n -= 8;
  }
  if (n) {
    uint64_t v = dsv4_rng_next(r);
    memcpy(q, &v, n);
  }
}

uint8_t *dsv4_check_random_cache(dsv4_rng *r, const dsv4_layout *L, int64_t nb, int64_t bs, int64_t stride,
                                 float half)
{
  uint8_t *c = malloc((size_t)(nb * stride));
  if (!c)
    return NULL;
  dsv4_rng_bytes(r, c, (size_t)(nb * stride));
  int tail = L->scale_place == DSV4_SCALES_BLOCK_TAIL;
  for (int64_t b = 0; b < nb; b++)
    for (int64_t t = 0; t < bs; t++) {
      uint8_t *blk = c + b * stride, *row = blk + t * L->row_bytes;
      uint8_t *srow = blk + (tail ? bs * L->row_bytes + t * L->scale_row_bytes : t * L->row_bytes);
      for (int i = 0; i < L->nseg; i++) {
        const dsv4_segment *s = &L->seg[i];
        for (int d = 0; d < s->d1 - s->d0; d++) {
          uint8_t *p = row + s->offset + d * dsv4_dtype_size(s->type);
          if (s->type == DSV4_DT_E4M3) {
            if ((p[0] & 0x7F) == 0x7F)
              p[0] &= 0xFE; /* no NaN codes */
            continue;
          }
          float x = ((float)(dsv4_rng_next(r) >> 40) / 16777216.0f * 2.0f - 1.0f) * half;
          if (s->type == DSV4_DT_BF16) {
            uint16_t h = dsv4_ref_f32_to_bf16(x);
            memcpy(p, &h, 2);
          } else
            memcpy(p, &x, 4);
        }
        if (s->scale_type == DSV4_DT_NONE || s->scale_tensor)
          continue;
        for (int g = 0; g < (s->d1 - s->d0) / s->scale_group; g++) {
          int e = (int)dsv4_rng_range(r, -9, -5);
          if (s->scale_type == DSV4_DT_UE8M0)
            srow[s->scale_offset + g] = (uint8_t)(e + 127);
          else {
            uint32_t bits = (uint32_t)(e + 127) << 23;
            memcpy(srow + s->scale_offset + 4 * g, &bits, 4);
          }
        }
      }
    }
  return c;
}

dsv4_layout dsv4_check_layout_v4(void)
{
  dsv4_layout l;
  memset(&l, 0, sizeof l);
  strcpy(l.name, "fp8_ds_mla_v4");
  l.dim = 512;
  l.row_bytes = 576;
  l.scale_place = DSV4_SCALES_BLOCK_TAIL;
  l.scale_row_bytes = 8;
  l.align = 16;
  l.nseg = 2;
  l.seg[0] = (dsv4_segment){.d0 = 0, .d1 = 448, .type = DSV4_DT_E4M3, .offset = 0, .scale_type = DSV4_DT_UE8M0,
                            .scale_group = 64, .scale_offset = 0};
  l.seg[1] = (dsv4_segment){.d0 = 448, .d1 = 512, .type = DSV4_DT_BF16, .offset = 448};
  return l;
}

dsv4_layout dsv4_check_layout_v32(void)
{
  dsv4_layout l;
  memset(&l, 0, sizeof l);
  strcpy(l.name, "fp8_ds_mla_v32");
  l.dim = 576;
  l.row_bytes = 656;
  l.scale_place = DSV4_SCALES_INLINE;
  l.align = 16;
  l.nseg = 2;
  l.seg[0] = (dsv4_segment){.d0 = 0, .d1 = 512, .type = DSV4_DT_E4M3, .offset = 0, .scale_type = DSV4_DT_F32,
                            .scale_group = 128, .scale_offset = 512};
  l.seg[1] = (dsv4_segment){.d0 = 512, .d1 = 576, .type = DSV4_DT_BF16, .offset = 528};
  return l;
}

dsv4_layout dsv4_check_layout_indexer(void)
{
  dsv4_layout l;
  memset(&l, 0, sizeof l);
  strcpy(l.name, "indexer_fp8");
  l.dim = 128;
  l.row_bytes = 128;
  l.scale_place = DSV4_SCALES_BLOCK_TAIL;
  l.scale_row_bytes = 4;
  l.align = 16;
  l.nseg = 1;
  l.seg[0] = (dsv4_segment){.d0 = 0, .d1 = 128, .type = DSV4_DT_E4M3, .offset = 0, .scale_type = DSV4_DT_F32,
                            .scale_group = 128, .scale_offset = 0};
  return l;
}

dsv4_layout dsv4_check_layout_per_tensor(void)
{
  dsv4_layout l;
  memset(&l, 0, sizeof l);
  strcpy(l.name, "fp8_per_tensor");
  l.dim = 512;
  l.row_bytes = 512;
  l.align = 16;
  l.nseg = 1;
  l.seg[0] = (dsv4_segment){.d0 = 0, .d1 = 512, .type = DSV4_DT_E4M3, .offset = 0, .scale_type = DSV4_DT_F32,
                            .scale_tensor = 1};
  return l;
}

static int is_nan16(uint16_t h) { return (h & 0x7F80) == 0x7F80 && (h & 0x7F); }

size_t dsv4_check_bf16(const uint16_t *got, const uint16_t *want, size_t n, size_t *first)
{
  size_t bad = 0;
  *first = n;
  for (size_t i = 0; i < n; i++) {
    if (got[i] == want[i] || (is_nan16(got[i]) && is_nan16(want[i])))
      continue;
    if (!bad++)
      *first = i;
  }
  return bad;
}

void dsv4_check_fill16(uint16_t *p, size_t n, uint16_t v)
{
  for (size_t i = 0; i < n; i++)
    p[i] = v;
}

int dsv4_check_flashmla_ok(double err, double want, double abs_tol, double rel_tol)
{
  return err < abs_tol || err / (fabs(want) + 1e-6) < rel_tol;
}

double dsv4_check_cond_bound(double want, double abs_tol, double rel_tol, double u_p, int64_t n, double pv_abs)
{
  return fmax(abs_tol, rel_tol * (fabs(want) + 1e-6)) + (u_p + (double)n * 0x1p-24) * pv_abs;
}

int dsv4_check_cond_ok(double err, double want, double abs_tol, double rel_tol, double u_p, int64_t n, double pv_abs)
{
  return err < dsv4_check_cond_bound(want, abs_tol, rel_tol, u_p, n, pv_abs);
}

double dsv4_check_lse_cond_bound(double want, double abs_tol, double rel_tol, int dim, double lse_abs)
{
  return fmax(abs_tol, rel_tol * (fabs(want) + 1e-6)) + (2.0 * sqrt((double)dim) + 8.0) * 0x1p-24 * lse_abs;
}

int dsv4_check_lse_cond_ok(double err, double want, double abs_tol, double rel_tol, int dim, double lse_abs)
{
  return err < dsv4_check_lse_cond_bound(want, abs_tol, rel_tol, dim, lse_abs);
}

double dsv4_rng_randn(dsv4_rng *r)
{
  double u1 = ((double)(dsv4_rng_next(r) >> 11) + 1.0) * 0x1p-53, u2 = (double)(dsv4_rng_next(r) >> 11) * 0x1p-53;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint8_t *dsv4_check_flashmla_cache(dsv4_rng *r, const dsv4_layout *L, int64_t nb, int64_t bs, int64_t stride,
                                   float sigma)
{
  int64_t n = nb * bs;
  uint8_t *c = calloc(1, (size_t)(nb * stride));
  uint16_t *kv = malloc((size_t)(n * L->dim) * 2 + 2);
  int64_t *slots = malloc((size_t)n * 8 + 8);
  int ok = c && kv && slots;
  for (int64_t i = 0; ok && i < n * L->dim; i++) {
    double v = dsv4_rng_randn(r) * sigma;
    kv[i] = dsv4_ref_f32_to_bf16((float)(v > 1 ? 1 : v < -1 ? -1 : v));
  }
  for (int64_t i = 0; ok && i < n; i++)
    slots[i] = i;
  if (ok && dsv4_ref_kv_insert(L, kv, n, slots, n, NULL, NULL, 0, 0, 0, c, nb, bs, stride))
    ok = 0;
  free(kv), free(slots);
  if (!ok) {
    free(c);
    return NULL;
  }
  return c;
}

void dsv4_check_nan_row(const dsv4_layout *L, uint8_t *cache, int64_t bs, int64_t stride, int64_t slot)
{
  uint8_t *row = cache + (slot / bs) * stride + (slot % bs) * L->row_bytes; /* the values (scales stay) */
  for (int i = 0; i < L->nseg; i++) {
    const dsv4_segment *s = &L->seg[i];
    for (int d = 0; d < s->d1 - s->d0; d++) {
      if (s->type == DSV4_DT_E4M3)
        row[s->offset + d] = 0x7F;
      else if (s->type == DSV4_DT_BF16) {
        uint16_t h = 0x7FC0;
        memcpy(row + s->offset + 2 * d, &h, 2);
      } else {
        float f = NAN;
        memcpy(row + s->offset + 4 * d, &f, 4);
      }
    }
  }
}
