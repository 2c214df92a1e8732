/* decode_precision.c -- which P format a sparse-decode kernel can use.
 *
 *   decode_precision GOLDEN_DIR
 *
 * The matrix forms round the softmax weights P before P V (tile.p).  This
 * host program replays the kernels' online softmax (tiles of 64 rows, a
 * running max, fp32 weights) on the FlashMLA fixtures with P rounded to
 * each candidate format, everything else exact (double), and counts the
 * outputs that fail FlashMLA's rule (dsv4_check_flashmla_ok, test_decode's
 * too) and, on the v4_sparse_decode_* stress set, those beyond docs/ops.md
 * section 3's condition-aware bound at the format's unit roundoff
 * (dsv4_check_cond_ok).  The fm_sparse_decode_* set is drawn from
 * FlashMLA's own test distribution, where every format must pass its rule.
 * Formats: exact fp32 weights, bf16 hi + lo parts (what the kernels do),
 * fp16, bf16 alone (FlashMLA's own numerics), and bf16 with the row sum
 * taken over the rounded weights (so that O is an exact mean of the rows
 * under the weights P V used).  A model of the arithmetic, not
 * of the kernels' code: exact exp, the max of every tile (no lazy
 * rescaling), P V in double.  Exits 1 if exact weights or hi + lo fail
 * FlashMLA's rule on any output, bf16 on any of the fm_* set, any format
 * the condition-aware bound on the stress set, or a fixture is missing or
 * malformed; 77 without the fixtures' folder.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dsv4_check.h"
#include "dsv4_ref.h"
#include "golden_load.h"

enum { EXACT, HILO, FP16, BF16, BF16_L, NFMT };
static const char *const fmt_name[NFMT] = {"fp32", "bf16 hi + lo", "fp16", "bf16", "bf16, l of P"};
/* the formats' unit roundoff, for the condition-aware bound */
static const double fmt_u[NFMT] = {0x1p-24, 0x1p-16, 0x1p-11, 0x1p-8, 0x1p-8};

static double bf16r(double x) { return dsv4_ref_bf16_to_f32(dsv4_ref_f32_to_bf16((float)x)); }

/* Round to the nearest fp16 value, ties to even (11 significant bits,
 * subnormals spaced 2^-24, beyond 65504 infinite). */
static double f16r(double x)
{
  int e;
  if (x == 0 || !isfinite(x))
    return x;
  frexp(x, &e);
  int q = e - 11 < -24 ? -24 : e - 11;
  double r = ldexp(nearbyint(ldexp(x, -q)), q);
  return fabs(r) > 65504 ? copysign(INFINITY, x) : r;
}

static double round_p(double p, int fmt)
{
  switch (fmt) {
  case HILO: {
    double hi = bf16r(p);
    return hi + bf16r(p - hi);
  }
  case FP16:
    return f16r(p);
  case BF16:
  case BF16_L:
    return bf16r(p);
  default:
    return p;
  }
}

static const char *const cases[] = {"v4_sparse_decode_c128_h64",       "v4_sparse_decode_c4_h128",
                                    "v4_sparse_decode_c4_h64",         "v4_sparse_decode_swa_only_h64",
                                    "fm_sparse_decode_c128_h128",      "fm_sparse_decode_c4_h128",
                                    "fm_sparse_decode_c4_h64",         "fm_sparse_decode_odd_blocks_h64",
                                    "fm_sparse_decode_swa_only_h128"};
enum { NSTRESS = 4 }; /* the first NSTRESS: the stress set */

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: decode_precision GOLDEN_DIR\n");
    return 2;
  }
  if (!golden_root(argv[1]))
    return 77;
  dsv4_layout L = dsv4_check_layout_v4();
  int hilo_fails = 0;
  printf("outputs outside FlashMLA's rule (stress set: / beyond the condition-aware bound)\n");
  printf("%-32s %8s", "fixture", "outputs");
  for (int f = 0; f < NFMT; f++)
    printf(" %13s", fmt_name[f]);
  printf("\n");
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char dir[1024], err[256];
    snprintf(dir, sizeof dir, "%s/%s", argv[1], cases[c]);
    golden_case *g = golden_open(dir, err, sizeof err);
    if (!g) {
      fprintf(stderr, "decode_precision: %s\n", err);
      return 1;
    }
    const golden_tensor *q = golden_tensor_get(g, "q"), *sink = golden_tensor_get(g, "attn_sink"),
                        *out = golden_tensor_get(g, "out");
    const golden_tensor *cache[2] = {golden_tensor_get(g, "swa_cache"), golden_tensor_get(g, "extra_cache")};
    const golden_tensor *ind[2] = {golden_tensor_get(g, "swa_indices"), golden_tensor_get(g, "extra_indices")};
    const golden_tensor *len[2] = {golden_tensor_get(g, "swa_lens"), golden_tensor_get(g, "extra_lens")};
    double scale = 0, bs[2] = {1, 1}, stride[2] = {0, 0};
    if (!q || !sink || !out || !cache[0] || !ind[0] || !len[0] || (cache[1] && (!ind[1] || !len[1])) ||
        golden_param_num(g, "softmax_scale", &scale) || golden_param_num(g, "swa_block_size", &bs[0]) ||
        golden_param_num(g, "swa_block_stride", &stride[0]) ||
        (cache[1] && (golden_param_num(g, "extra_block_size", &bs[1]) ||
                      golden_param_num(g, "extra_block_stride", &stride[1])))) {
      fprintf(stderr, "decode_precision: %s: not a sparse_mla_decode case\n", dir);
      return 1;
    }
    int64_t T = q->shape[0], H = q->shape[1], nmax = ind[0]->shape[1] + (ind[1] ? ind[1]->shape[1] : 0);
    double *K = malloc(sizeof(double) * (size_t)(nmax * 512)), *s = malloc(sizeof(double) * (size_t)nmax);
    long fails[NFMT] = {0}, cfails[NFMT] = {0};
    uint16_t row[512];
    for (int64_t t = 0; t < T; t++) {
      int64_t n = 0; /* the token's valid rows, main list first */
      for (int li = 0; li < 2; li++) {
        if (!cache[li])
          continue;
        int64_t width = ind[li]->shape[1], m = ((const int32_t *)len[li]->data)[t];
        for (int64_t j = 0; j < (m < width ? m : width); j++) {
          int32_t v = ((const int32_t *)ind[li]->data)[t * width + j];
          int64_t b = (int64_t)bs[li];
          if (v == -1)
            continue;
          if (v < 0 || v >= cache[li]->shape[0] * b) {
            fprintf(stderr, "decode_precision: %s: index %d outside its cache\n", dir, v);
            return 1;
          }
          dsv4_ref_dequant_token(&L, (const uint8_t *)cache[li]->data + (v / b) * (int64_t)stride[li], b, v % b, row);
          for (int d = 0; d < 512; d++)
            K[n * 512 + d] = dsv4_ref_bf16_to_f32(row[d]);
          n++;
        }
      }
      for (int64_t h = 0; h < H; h++) {
        const uint16_t *qr = (const uint16_t *)q->data + (t * H + h) * 512;
        for (int64_t j = 0; j < n; j++) {
          double dot = 0;
          for (int d = 0; d < 512; d++)
            dot += dsv4_ref_bf16_to_f32(qr[d]) * K[j * 512 + d];
          s[j] = scale * dot;
        }
        for (int f = 0; f < NFMT; f++) {
          double m = -INFINITY, l = 0, lr = 0, acc[512] = {0}, aacc[512] = {0};
          for (int64_t j0 = 0; j0 < n; j0 += 64) { /* one tile: a running max, rescaled state */
            int64_t j1 = j0 + 64 < n ? j0 + 64 : n;
            double mn = m;
            for (int64_t j = j0; j < j1; j++)
              mn = s[j] > mn ? s[j] : mn;
            double corr = m == -INFINITY ? 0 : exp(m - mn);
            l *= corr, lr *= corr;
            for (int d = 0; d < 512; d++)
              acc[d] *= corr, aacc[d] *= corr;
            for (int64_t j = j0; j < j1; j++) {
              double p = (float)exp(s[j] - mn), pr = round_p(p, f);
              l += p, lr += pr; /* (the kernels keep the sum of the fp32 weights) */
              for (int d = 0; d < 512; d++)
                acc[d] += pr * K[j * 512 + d], aacc[d] += p * fabs(K[j * 512 + d]);
            }
            m = mn;
          }
          double lse = m + log(l), factor = 1.0 / (1.0 + exp(((const float *)sink->data)[h] - lse));
          for (int d = 0; d < 512; d++) {
            double got = n ? bf16r(acc[d] / (f == BF16_L ? lr : l) * factor) : 0;
            double want = dsv4_ref_bf16_to_f32(((const uint16_t *)out->data)[(t * H + h) * 512 + d]);
            if (!dsv4_check_flashmla_ok(fabs(got - want), want, out->tol_abs, out->tol_rel))
              fails[f]++;
            if (!dsv4_check_cond_ok(fabs(got - want), want, out->tol_abs, out->tol_rel, fmt_u[f], n,
                                    n ? aacc[d] / l * factor : 0))
              cfails[f]++;
          }
        }
      }
    }
    printf("%-32s %8lld", cases[c], (long long)out->nelem);
    for (int f = 0; f < NFMT; f++) {
      char cell[32];
      snprintf(cell, sizeof cell, c < NSTRESS ? "%ld / %ld" : "%ld", fails[f], cfails[f]);
      printf(" %13s", cell);
      hilo_fails += c < NSTRESS && cfails[f] > 0;
    }
    printf("\n");
    hilo_fails += fails[HILO] > 0 || fails[EXACT] > 0 || (c >= NSTRESS && fails[BF16] > 0);
    free(K), free(s);
    golden_close(g);
  }
  return hilo_fails ? 1 : 0;
}
