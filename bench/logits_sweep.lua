-- logits_sweep.lua: the indexer's paged MQA logits (docs/ops.md section 4) as
-- sweeps (docs/tuning.md), for dsv4c-tune at the V4 shapes (B 64..256,
-- next_n 1 and 2, contexts to 64K):
--   lgm  the matrix form on sm_90a (wgmma e4m3, K by TMA where it can):
--        positions a CTA walks;
--   lgw  the warp-matrix form of sm_89 (mma.sync e4m3), which runs on
--        sm_90 parts too;
--   lgp  the portable geometry (on sm_90a its rows take e4m3 mma.sync):
--        positions a CTA and heads a thread sums.
--   dsv4c bench/logits_sweep.lua -I specs -o build/logits_sweep --no-ptxas
--   dsv4c-tune build/logits_sweep/logits_sweep.dsv4b --lock logits.lock   (on the GPU)
local L = include "layouts.lua"

kernel {
  name = "lgm",
  op = "paged_mqa_logits",
  layout = L.indexer_fp8,
  heads = 64,
  tile = { tokens_per_cta = 1024, matrix = true },
  targets = { ptx = { arch = "sm_90a" } },
  sweep = { tile = { tokens_per_cta = { 256, 512, 768, 1024, 1536, 2048, 3072, 4096, 8192 } } },
}

kernel {
  name = "lgw",
  op = "paged_mqa_logits",
  layout = L.indexer_fp8,
  heads = 64,
  tile = { tokens_per_cta = 1024, matrix = true },
  targets = { ptx = { arch = "sm_89" } },
  sweep = { tile = { tokens_per_cta = { 256, 512, 1024, 2048, 4096 } } },
}

kernel {
  name = "lgp",
  op = "paged_mqa_logits",
  layout = L.indexer_fp8,
  heads = 64,
  tile = { tokens_per_cta = 128, heads_per_thread = 64 },
  targets = { ptx = { arch = "sm_90a" } },
  sweep = { tile = { tokens_per_cta = { 64, 128, 256, 512 }, heads_per_thread = { 16, 32, 64 } } },
}
