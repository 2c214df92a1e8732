/* dsv4_check.h -- what tests, benchmarks and dsv4rt-check share when they
 * hold a kernel's output against the reference: a seeded generator, the
 * docs/ops.md layouts written out in C (independently of specs/layouts.lua), and
 * a NaN-aware bit-exact comparison of bf16 arrays. */
#ifndef DSV4_CHECK_H
#define DSV4_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "dsv4_layout.h"

typedef struct {
  uint64_t s;
} dsv4_rng;

/* Seed from DSV4_SEED when set, else from the clock (fresh inputs each run). */
uint64_t dsv4_check_seed(void);
static inline uint64_t dsv4_rng_next(dsv4_rng *r) /* splitmix64 */
{
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/* Uniform in [lo, hi] (inclusive). */
static inline int64_t dsv4_rng_range(dsv4_rng *r, int64_t lo, int64_t hi)
{
  return lo + (int64_t)(dsv4_rng_next(r) % (uint64_t)(hi - lo + 1));
}
void dsv4_rng_bytes(dsv4_rng *r, void *p, size_t n);

/* A malloc'd cache of nb blocks (stride bytes apart) of bs rows in layout L
 * holding valid random values: finite e4m3 codes, bf16 / f32 values uniform
 * in [-half, half), group scales 2^-9 .. 2^-5 (per-tensor scales are the
 * caller's).  For layouts the reference writer does not write and for
 * timing caches; NULL when out of memory. */
uint8_t *dsv4_check_random_cache(dsv4_rng *r, const dsv4_layout *L, int64_t nb, int64_t bs, int64_t stride,
                                 float half);

/* N(0, 1) from r (Box-Muller, double precision). */
double dsv4_rng_randn(dsv4_rng *r);

/* FlashMLA's K (docs/ops.md section 3: its tests/lib.py): a malloc'd cache of nb
 * blocks (stride bytes apart) of bs rows, each value bf16(randn * sigma)
 * clamped to +-1 (FlashMLA draws sigma 1/10), written by the reference
 * writer (dsv4_ref_kv_insert).  NULL when out of memory or when the writer
 * does not write layout L (a per-tensor scale: the caller's). */
uint8_t *dsv4_check_flashmla_cache(dsv4_rng *r, const dsv4_layout *L, int64_t nb, int64_t bs, int64_t stride,
                                   float sigma);

/* Every value of cache row `slot` set to NaN (e4m3 0x7F, bf16 0x7FC0, f32
 * NaN): what a decode that reads a row no valid index names (even to mask
 * it) carries into its output, as FlashMLA's tests poison them. */
void dsv4_check_nan_row(const dsv4_layout *L, uint8_t *cache, int64_t bs, int64_t stride, int64_t slot);

/* docs/ops.md section 1: the DSv4 fp8_ds_mla layout (584 bytes per token). */
dsv4_layout dsv4_check_layout_v4(void);
/* docs/ops.md section 8: DSv3.2 (656 bytes inline: 512 e4m3, 4 fp32 scales, 64 bf16). */
dsv4_layout dsv4_check_layout_v32(void);
/* docs/ops.md section 4: the indexer FP8 cache (128 e4m3, one fp32 scale per token at the block tail). */
dsv4_layout dsv4_check_layout_indexer(void);
/* docs/ops.md section 8: per-tensor FP8 (512 e4m3, kv_scale a launch argument). */
dsv4_layout dsv4_check_layout_per_tensor(void);

/* Bit-exact comparison of n bf16 values; any two NaNs are equal.  Returns
 * the number of mismatches and the first mismatching index in *first. */
size_t dsv4_check_bf16(const uint16_t *got, const uint16_t *want, size_t n, size_t *first);

/* FlashMLA's element rule (its tests' check_is_allclose): a finite value
 * with error err against want passes unless err reaches both abs_tol and
 * rel_tol * (|want| + 1e-6). */
int dsv4_check_flashmla_ok(double err, double want, double abs_tol, double rel_tol);

/* docs/ops.md section 3's condition-aware bound, for inputs (the v4_sparse_decode_* stress fixtures) on which
 * no fixed element tolerance is meaningful: a finite value with error err against want passes while err
 * stays below FlashMLA's max(abs_tol, rel_tol * (|want| + 1e-6)) plus (u_p + n 2^-24) pv_abs, the forward-
 * error bound of the P V dot product: u_p the unit roundoff of the kernel's P format (2^-8 bf16, 2^-16
 * bf16 hi + lo), n the row's participating entries and pv_abs = sum_j p_j |V_j| from
 * dsv4_ref_sparse_decode_cond. */
int dsv4_check_cond_ok(double err, double want, double abs_tol, double rel_tol, double u_p, int64_t n, double pv_abs);
/* The bound itself (what err must stay below). */
double dsv4_check_cond_bound(double want, double abs_tol, double rel_tol, double u_p, int64_t n, double pv_abs);

/* The same for lse on those inputs (dsv4_ref_sparse_decode_cond's lse_abs): err < max(abs_tol, rel_tol
 * (|want| + 1e-6)) + (2 sqrt(dim) + 8) 2^-24 lse_abs.  2 sqrt(dim) u is the forward error of a blocked
 * fp32 dot product of dim terms (blocks of sqrt(dim)); 8 u the exp, log and the sum m + ln S.  FlashMLA's
 * fixed lse tolerance (abs 1e-6) cannot hold where lse = m + ln S is near 0 with |m| of a few units: fp32
 * rounds each term to 2^-24 |m|. */
int dsv4_check_lse_cond_ok(double err, double want, double abs_tol, double rel_tol, int dim, double lse_abs);
/* The bound itself (what err must stay below). */
double dsv4_check_lse_cond_bound(double want, double abs_tol, double rel_tol, int dim, double lse_abs);

/* Fill n bf16 values with the pattern v. */
void dsv4_check_fill16(uint16_t *p, size_t n, uint16_t v);

#endif
