/* plan.h -- the checked form of a spec: plain C structs, no pointers, no Lua.
 *
 * The spec checker (compiler/spec/) turns Lua tables into these structs once; code
 * generators, targets, the bundle writer and the host reference read only
 * these.  Every struct is self-contained (names are arrays, the layout is
 * copied into each kernel by value) so a kernel plan can be written to a pipe
 * as bytes and read back by the LLVM 15 SPIR-V helper built from the same
 * header.  The runtime shares dsv4_layout through runtime/include/dsv4_layout.h.
 */
#ifndef DSV4_PLAN_H
#define DSV4_PLAN_H

#include "dsv4_abi.h"
#include "dsv4_layout.h"
#include "form_rules.h"
#include "kernel_regs.h"

#define DSV4_NAME_MAX 48
#define DSV4_ARCH_MAX 16
#define DSV4_PATH_MAX 256
#define DSV4_MAX_KERNELS 256 /* a bundle's most entries (DSV4_BUNDLE_MAX_ENTRIES): a sweep's variants */
#define DSV4_MAX_LAYOUTS 32

/* Targets: X(enum suffix, spec/CLI name, artifact extension, default arch). */
#define DSV4_TARGETS(X)                     \
  X(PTX, "ptx", "ptx", "sm_90a")            \
  X(AMDGCN, "amdgcn", "hsaco", "gfx942")    \
  X(SPIRV, "spirv", "spv", "opencl1.2")

typedef enum {
#define X(e, s, x, a) DSV4_TARGET_##e,
  DSV4_TARGETS(X)
#undef X
      DSV4_TARGET_COUNT
} dsv4_target_kind;

/* Tile parameters of the gather family (the only family so far). */
typedef struct {
  int values_per_thread; /* output values one thread produces per token */
  int tokens_per_cta;    /* tokens one CTA / work-group handles (sparse_decode: heads) */
  int tokens_per_thread; /* tokens each thread handles (loads of all issued first) */
  int interleave;        /* a lane's values come in this many pieces, dim / interleave apart */
  int streaming;         /* 1: cache reads and output writes bypass caches where the target can */
  int matrix;            /* tile.matrix: 1 asks for a matrix form (which one: the launch record's form) */
  int pair;              /* tile.pair (sparse_decode): a token's two 64-head CTAs share each tile's dequantization */
  int prefetch;          /* tile.prefetch (sparse_decode's warpgroup form): the next K tile's rows into the L2 */
  int longest_first;     /* tile.longest_first (sparse_decode in CTA pairs): tokens taken in decreasing tile counts */
  int p_format;          /* tile.p (sparse_decode's matrix forms): DSV4_P_BF16 or DSV4_P_BF16X2 */
  int partials;          /* tile.partials (sparse_decode's matrix forms): DSV4_PARTIALS_F32 or DSV4_PARTIALS_BF16 */
  int threads;           /* derived: the threads of the tile's portable geometry (the spec checker's bound);
                            a launch takes its launch record's */
} dsv4_tile;

typedef struct {
  int enabled;
  char arch[DSV4_ARCH_MAX]; /* sm_90a, gfx942, opencl1.2 */
  int subgroups;            /* SPIR-V: use subgroup built-ins (0 = local mem) */
  int subgroup_size;        /* with subgroups: the sub-group size the kernel requires (32 or 64), its warp */
  int emulate_subgroups;    /* with subgroups: the SPIR 1.2 fallback emulates its sub-groups (tests on PoCL) */
} dsv4_target_opts;

/* Where the writer floors a group's amax before taking the scale exponent:
 * vLLM's writers floor amax at 1e-4 (docs/ops.md 1, 4, 5, 8); FlashMLA's test
 * quantizer floors amax / 448 at 1e-4 (so scales are >= 2^-13). */
enum { DSV4_FLOOR_AMAX = 0, DSV4_FLOOR_QUOTIENT = 1 };

/* How the decode's matrix forms hold P (the softmax numerators) for the
 * P V product: DSV4_P_BF16 rounds them once to bf16, as FlashMLA does (the
 * row sum stays fp32, from the unrounded values); DSV4_P_BF16X2 keeps
 * them as bf16 hi + lo, 1.5x the P V matrix work, for inputs on which a
 * single rounding is too coarse (docs/ops.md 3, the stress fixtures). */
enum { DSV4_P_BF16 = 0, DSV4_P_BF16X2 = 1 };

/* How a split of the decode's split-KV hands its unnormalised O to the
 * combine kernel: fp32 (FlashMLA's arithmetic), or rounded once to bf16,
 * half the bytes written and read back (docs/kernels.md, "Split-KV and the
 * combine").  bf16 needs P in bf16: hi + lo P is for inputs on which one
 * more bf16 rounding is too coarse. */
enum { DSV4_PARTIALS_F32 = 0, DSV4_PARTIALS_BF16 = 1 };

typedef struct {
  char name[DSV4_NAME_MAX];
  dsv4_op op;
  dsv4_layout layout;
  dsv4_tile tile;
  dsv4_target_opts target[DSV4_TARGET_COUNT];
  int rope_first, rope_dims; /* kv_insert: GPT-J RoPE on these dims (0: none) */
  int q_dim;                 /* kv_insert: the fused q branch's head size (0: none) */
  int quant_floor;           /* kv_insert: DSV4_FLOOR_AMAX or DSV4_FLOOR_QUOTIENT */
  int v_dim;                 /* sparse_decode: output dims (the first v_dim of K) */
  int heads;                 /* paged_mqa_logits: query heads (64 for DeepSeek-V4) */
  int topk;                  /* topk: K (512 for V4-Flash, 1024 for V4-Pro) */
  dsv4_launch launch[DSV4_TARGET_COUNT]; /* per enabled target: choose_form's form and launch record */
  char file[DSV4_PATH_MAX]; /* where the kernel was declared */
  int line;
} dsv4_kernel;

/* Sweeps (compiler/spec/sweep.c, docs/tuning.md): a kernel{} with a sweep
 * field stands for the product of its swept fields' values, each point a
 * variant named <kernel>__<tag><value>_...; a variant the constraints or
 * the checker refuse is kept here with the reason, not compiled. */
#define DSV4_MAX_SWEEPS 16
#define DSV4_SWEEP_PARAMS 8    /* swept fields a sweep */
#define DSV4_SWEEP_VALUES 16   /* values a field */
#define DSV4_MAX_VARIANTS 1024 /* variants a spec, expanded and rejected */
#define DSV4_SWEEP_REASON 512

typedef struct {
  char field[32];                     /* "tile.heads_per_cta", "v_dim" */
  char tag[8];                        /* its part of a variant's name: "h" */
  int nvalues;
  char value[DSV4_SWEEP_VALUES][24];  /* as the spec gave them: "64", "true", "bf16x2" */
} dsv4_sweep_param;

typedef struct {
  char kernel[DSV4_NAME_MAX]; /* the kernel{}'s name: the variants' prefix and the lockfile's kernel */
  dsv4_op op;
  char file[DSV4_PATH_MAX];   /* where the kernel{} was declared */
  int line;
  int nparams;                /* sorted by field */
  dsv4_sweep_param param[DSV4_SWEEP_PARAMS];
  int nconstraints;
  int first, nvariants;       /* plan->variants[first, first + nvariants), in expansion order */
} dsv4_sweep;

typedef struct {
  char name[DSV4_NAME_MAX];
  int sweep;                               /* plan->sweeps[sweep] */
  int kernel;                              /* expanded: its index in plan->kernels; rejected: -1 */
  unsigned char value[DSV4_SWEEP_PARAMS];  /* each field's value, an index into its param's values */
  char reason[DSV4_SWEEP_REASON];          /* rejected: the constraint's or the checker's message */
} dsv4_variant;

typedef struct {
  char file[DSV4_PATH_MAX];
  char spec_hash[65]; /* SHA-256 of the spec and the files it includes (spec/sweep.c): the lockfile's key */
  int nlayouts;
  dsv4_layout layouts[DSV4_MAX_LAYOUTS];
  int nkernels;
  dsv4_kernel kernels[DSV4_MAX_KERNELS];
  int nsweeps;
  dsv4_sweep sweeps[DSV4_MAX_SWEEPS];
  int nvariants;
  dsv4_variant variants[DSV4_MAX_VARIANTS];
} dsv4_plan;

/* The sweep variant named name (NULL when none). */
const dsv4_variant *dsv4_plan_variant(const dsv4_plan *p, const char *name);

const char *dsv4_op_name(dsv4_op op);
dsv4_op dsv4_op_from_name(const char *s);
const char *dsv4_target_name(dsv4_target_kind t);
const char *dsv4_target_ext(dsv4_target_kind t);
const char *dsv4_target_default_arch(dsv4_target_kind t);
int dsv4_target_from_name(const char *s); /* -1 if unknown */
/* The op's kernel arguments (dsv4_abi.h): kinds and names; returns n. */
int dsv4_op_signature(dsv4_op op, unsigned char *kinds, const char **names);

/* The op's form and launch record for kernel k on target t (forms.c): run
 * once per (kernel, target) by the spec checker, which stores it in
 * k->launch[t].  0 on success; else 1 with the spec field to blame
 * (*field, e.g. "matrix") and the reason in why. */
int dsv4_choose_form(const dsv4_kernel *k, dsv4_target_kind t, dsv4_launch *out, const char **field, char *why,
                     int why_len);
/* Kernel k's launch record on target t (what generators build to). */
static inline const dsv4_launch *dsv4_kernel_launch(const dsv4_kernel *k, dsv4_target_kind t) { return &k->launch[t]; }

#endif
