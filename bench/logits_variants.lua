-- logits_variants.lua: tile variants of the indexer's matrix-form logits for
-- bench_indexer (a sweep written as a spec: each kernel is one point), with
-- the portable kernel and the top-k it needs beside them.
local L = include "layouts.lua"

kernel {
  name = "mqa_logits_v4",
  op = "paged_mqa_logits",
  layout = L.indexer_fp8,
  heads = 64,
  tile = { tokens_per_cta = 128, heads_per_thread = 64 },
  targets = { ptx = { arch = "sm_90a" } },
}

kernel {
  name = "topk_512",
  op = "topk",
  k = 512,
  tile = { threads = 512 },
  targets = { ptx = { arch = "sm_90a" } },
}

-- top-k: threads a row (DSV4_BENCH_TOPK=topk_512_t256 ...)
for _, t in ipairs { 256, 1024 } do
  kernel {
    name = string.format("topk_512_t%d", t),
    op = "topk",
    k = 512,
    tile = { threads = t },
    targets = { ptx = { arch = "sm_90a" } },
  }
end

for _, p in ipairs { 512, 768, 1024, 1536, 2048, 4096 } do
  kernel {
    name = string.format("mqa_logits_v4_mma_p%d", p),
    op = "paged_mqa_logits",
    layout = L.indexer_fp8,
    heads = 64,
    tile = { tokens_per_cta = p, matrix = true },
    targets = { ptx = { arch = "sm_90a" } },
  }
end
