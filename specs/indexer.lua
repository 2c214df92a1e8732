-- indexer.lua: the top-k indexer of C4 layers (docs/ops.md section 4): paged MQA
-- logits over the indexer FP8 cache, then top-k.  Heads and head dim come
-- from here: 64 x 128 for DeepSeek-V4 (the layout's 128 dims).
local L = include "layouts.lua"

local targets = {
  ptx = { arch = "sm_90a" },
  amdgcn = { arch = "gfx942" },
  spirv = true,
}

-- 128 positions a CTA.  Portable path: a thread a position, all 64 heads.
-- Matrix path (PTX sm_89+, mma.sync m16n8k32 e4m3): 4 warps of 32
-- positions, each warp loading the row's q fragments once.
kernel {
  name = "mqa_logits_v4",
  op = "paged_mqa_logits",
  layout = L.indexer_fp8,
  heads = 64,
  tile = { tokens_per_cta = 128, heads_per_thread = 64 },
  targets = targets,
}

-- Top-k over each logits row: K = 512 (V4-Flash), 1024 (V4-Pro) and 2048
-- (the widest compressed list the decode takes).
for _, k in ipairs { 512, 1024, 2048 } do
  kernel {
    name = "topk_" .. k,
    op = "topk",
    k = k,
    tile = { threads = 512 },
    targets = targets,
  }
end

-- The matrix form, 1024 positions a CTA of 4 warps.  On sm_90a the CTA is
-- one warpgroup: wgmma e4m3 with K rows and q both read from shared memory.
kernel {
  name = "mqa_logits_v4_mma",
  op = "paged_mqa_logits",
  layout = L.indexer_fp8,
  heads = 64,
  tile = { tokens_per_cta = 1024, matrix = true },
  targets = { ptx = { arch = "sm_90a" } },
}

-- The same with 256 and 512 positions a CTA: a small batch on 1024-position
-- CTAs leaves most of the device idle (H200: B 1 / 8K 11.1 us at 1024, 5.0
-- at 256; B 8 / 32K 15.9 at 1024, 13.6 at 512).  The runtime's rule takes
-- the largest step whose grid reaches twice the processors, else the
-- smallest (runtime/src/rt.c, fills_better).
for _, c in ipairs { 256, 512 } do
  kernel {
    name = "mqa_logits_v4_mma_p" .. c,
    op = "paged_mqa_logits",
    layout = L.indexer_fp8,
    heads = 64,
    tile = { tokens_per_cta = c, matrix = true },
    targets = { ptx = { arch = "sm_90a" } },
  }
end

-- The same for sm_89 (no wgmma): mma.sync m16n8k32 e4m3 per warp, K rows
-- as the A operand, q^T fragments from shared memory.  Runs on sm_90 too.
kernel {
  name = "mqa_logits_v4_mma_sm89",
  op = "paged_mqa_logits",
  layout = L.indexer_fp8,
  heads = 64,
  tile = { tokens_per_cta = 1024, matrix = true },
  targets = { ptx = { arch = "sm_89" } },
}

-- The logits and the top-k in one op (paged_mqa_logits_topk): a CTA holds
-- the logits of tokens_per_cta positions on chip and selects among them,
-- so only its K candidates reach memory (then a merge, where a row spans
-- several chunks).  Portable on every target: 4096 positions a CTA in
-- static shared memory, steps of 256.  On sm_90a the logits' warpgroup
-- form with the chunks in dynamic shared memory: 1024 positions a CTA,
-- and 512 / 2048 / 4096 beside it.
for _, k in ipairs { 512, 1024, 2048 } do
  kernel {
    name = "mqa_logits_topk_" .. k,
    op = "paged_mqa_logits_topk",
    layout = L.indexer_fp8,
    heads = 64,
    k = k,
    tile = { tokens_per_cta = 4096, heads_per_thread = 64 },
    targets = targets,
  }
  for _, c in ipairs { 1024, 512, 2048, 4096 } do
    kernel {
      name = "mqa_logits_topk_" .. k .. "_mma" .. (c == 1024 and "" or "_p" .. c),
      op = "paged_mqa_logits_topk",
      layout = L.indexer_fp8,
      heads = 64,
      k = k,
      tile = { tokens_per_cta = c, matrix = true },
      targets = { ptx = { arch = "sm_90a" } },
    }
  end
end
