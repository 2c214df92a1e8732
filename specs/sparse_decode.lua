-- sparse_decode.lua: sparse MLA decode (docs/ops.md section 3) for every layout it
-- applies to.  The portable form: one head's lanes reduce q.K, an online
-- softmax in base 2 runs over the main then the extra index list.
local L = include "layouts.lua"

local targets = {
  ptx = { arch = "sm_90a" },
  amdgcn = { arch = "gfx942" },
  spirv = true,
}

-- DSv4: 512 dims, V = K.  32 lanes of 16 values a head, 4 heads a CTA.
kernel {
  name = "sparse_decode_v4",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, heads_per_cta = 4 },
  targets = targets,
}

-- DSv3.2: K has 576 dims, V the first 512 (FlashMLA's head_dim_v).
kernel {
  name = "sparse_decode_v32",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v32,
  tile = { values_per_thread = 32, heads_per_cta = 4 },
  v_dim = 512,
  targets = targets,
}

-- Per-tensor FP8: kv_scale folded into the softmax scale and the output.
kernel {
  name = "sparse_decode_fp8_per_tensor",
  op = "sparse_decode",
  layout = L.fp8_per_tensor,
  tile = { values_per_thread = 16, heads_per_cta = 4 },
  targets = targets,
}

-- BF16 cache.
kernel {
  name = "sparse_decode_bf16",
  op = "sparse_decode",
  layout = L.bf16,
  tile = { values_per_thread = 16, heads_per_cta = 4 },
  targets = targets,
}

-- The matrix forms.  On sm_90a a 512-dim layout with V = K takes the
-- warpgroup form (wgmma; producer warps dequantize the next K tile while
-- a lead and a follower warpgroup compute this one); elsewhere (DSv3.2's
-- 576 dims do not fit its shared memory twice over) the warp-matrix form
-- (PTX mma.sync bf16, sm_80 and later): 64 heads a CTA
-- (16 warps), K tiles of 64 rows dequantized in shared memory by lanes of
-- 64 values in eight interleaved pieces, so that one pass covers a whole
-- tile (narrower lanes take several passes a tile and are slower; see
-- docs/kernels.md).
--
-- The DSv4 kernels' producers prefetch each next tile's rows into the L2
-- (tile.prefetch; the warpgroup forms only), so that a kernel's time does
-- not depend on whether the cache fits the L2 (docs/kernels.md).
--
-- The pairs take their tokens longest first (tile.longest_first): where
-- the grid comes in more than one wave, a token with many tiles started
-- last would end the kernel late (V4-Pro with C128 lists of varied
-- lengths: 90 -> 70 us on an H200; lists all of one length pay 1.5-2.5%
-- for the ranking, docs/perf-log.md).
--
-- P, the softmax numerators the P V product takes (tile.p): "bf16" rounds
-- them once to bf16, FlashMLA's arithmetic (its rule holds on its own
-- input distribution, docs/ops.md section 3); each kernel has a "_bf16x2" twin
-- that keeps P as bf16 hi + lo parts (twice the P V matrix work) for
-- ill-conditioned inputs (the v4_sparse_decode_* stress fixtures).
--
-- Where a batch is too small to fill the GPU, the matrix forms split each
-- token's tiles over several CTAs, which hand their partial O to a combine
-- kernel (tile.partials): the bf16-P kernels round it once more to bf16,
-- half the bytes written and read back (V4-Pro T 8 20.5 -> 18.6 us on an
-- H200, docs/kernels.md); the "_bf16x2" twins keep fp32 partials.
local mma = { ptx = { arch = "sm_90a" } }
for _, v in ipairs {
  { "sparse_decode_v4_mma", L.fp8_ds_mla_v4, nil },
  { "sparse_decode_v32_mma", L.fp8_ds_mla_v32, 512 },
  { "sparse_decode_fp8_per_tensor_mma", L.fp8_per_tensor, nil },
  { "sparse_decode_bf16_mma", L.bf16, nil },
  -- the warpgroup form in CTA pairs (clusters of two): a token's two
  -- 64-head CTAs each dequantize half of every K tile for both (FlashMLA's
  -- "crossover"); for 128 heads (an odd head group runs beside a CTA of
  -- padding heads, so 64 heads take the kernel above)
  { "sparse_decode_v4_mma_pair", L.fp8_ds_mla_v4, nil, nil, true },
  -- the warp-matrix form of the DSv4 cache on the same GPU (sm_90 has no
  -- wgmma), for the benchmark's side-by-side and the tests
  { "sparse_decode_v4_mma_sm90", L.fp8_ds_mla_v4, nil, { ptx = { arch = "sm_90" } } },
  -- tensor-parallel head counts (8-32 heads a GPU): 16 or 32 heads a CTA
  -- take the warp form with operands read straight from the cache bytes
  -- (form_rules.h, direct.c), where the bytes and not the matrix work
  -- bound the decode
  { "sparse_decode_v4_mma_h16", L.fp8_ds_mla_v4, nil, nil, nil, 16 },
  { "sparse_decode_v4_mma_h32", L.fp8_ds_mla_v4, nil, nil, nil, 32 },
} do
  for _, p in ipairs { "bf16", "bf16x2" } do
    kernel {
      name = p == "bf16" and v[1] or v[1] .. "_bf16x2",
      op = "sparse_decode",
      layout = v[2],
      tile = { values_per_thread = 64, heads_per_cta = v[6] or 64, matrix = true, interleave = 8, pair = v[5],
               prefetch = v[2] == L.fp8_ds_mla_v4 and v[4] == nil and v[6] == nil, p = p, longest_first = v[5],
               partials = p == "bf16" and "bf16" or "f32" },
      v_dim = v[3],
      targets = v[4] or mma,
    }
  end
end
