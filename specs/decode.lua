-- decode.lua: the DeepSeek-V4 decode kernels dsv4c builds (docs/ops.md).
local L = include "layouts.lua"

-- Every target, with its default arch unless named.
local all = {
  ptx = { arch = "sm_90a" },
  amdgcn = { arch = "gfx942" },
  spirv = { subgroups = false },
}

-- docs/ops.md 2a: dequantize scattered slots (index -1 gives a zero row).
-- 16 values a thread in two pieces of 8, 256 values apart (interleave 2),
-- so each store instruction of a warp covers whole sectors; 4 tokens a CTA
-- gives 128 threads; loads and stores stream past the caches.  The fastest
-- of the points in bench/gather_variants.lua on the H200 (bench/RESULTS.md).
kernel {
  name = "dequant_gather_v4",
  op = "dequant_gather",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 4, interleave = 2 },
  targets = all,
}

-- docs/ops.md 2b: per-request paged gather into a workspace.
kernel {
  name = "paged_gather_v4",
  op = "paged_gather",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 4, interleave = 2 },
  targets = all,
}

-- docs/ops.md 5: the fused q-norm + RoPE + KV quant-insert of one DSv4 layer's
-- decode step (16 values a thread; a 64-value scale group is 4 lanes).
kernel {
  name = "kv_insert_v4",
  op = "kv_insert",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 4 },
  rope = { first = 448, dims = 64 },
  q = { dim = 512 },
  targets = all,
}

-- docs/ops.md 3: sparse MLA decode over the SWA and compressed caches.
kernel {
  name = "sparse_decode_v4",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, heads_per_cta = 4 },
  targets = all,
}

-- The same on the matrix units: on sm_90a the warpgroup form (wgmma bf16,
-- split-KV for small batches, the next tile's rows prefetched into the
-- L2); sparse_decode.lua has every form.  P is
-- rounded once to bf16 for the P V product, as FlashMLA does, and so are
-- the split-KV partials (tile.partials); the _bf16x2 twin keeps P as bf16
-- hi + lo and fp32 partials (docs/ops.md section 3).
kernel {
  name = "sparse_decode_v4_mma",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 64, heads_per_cta = 64, matrix = true, interleave = 8, prefetch = true, p = "bf16",
           partials = "bf16" },
  targets = { ptx = { arch = "sm_90a" } },
}

kernel {
  name = "sparse_decode_v4_mma_bf16x2",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 64, heads_per_cta = 64, matrix = true, interleave = 8, prefetch = true, p = "bf16x2" },
  targets = { ptx = { arch = "sm_90a" } },
}

-- Tensor-parallel head counts (8-16 heads a GPU, where FlashMLA pads to
-- 64): 16 heads a CTA, the direct warp form, its operands read straight
-- from the cache bytes (direct.c); the runtime takes it at serving batches
-- (rt.c's rule: from about 400 tokens; on an H200 it was faster than the
-- warpgroup form at T 512, even or slower at T 256 and below).  The 32-head CTA (sparse_decode.lua) is slower than
-- the warpgroup form at 32 heads, so the bundle leaves it out.
kernel {
  name = "sparse_decode_v4_mma_h16",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 64, heads_per_cta = 16, matrix = true, interleave = 8, p = "bf16", partials = "bf16" },
  targets = { ptx = { arch = "sm_90a" } },
}
