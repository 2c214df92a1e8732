-- The logits' warp-matrix form needs e4m3 matrix instructions (PTX sm_89+).
local L = include "layouts.lua"
kernel {
  name = "m",
  op = "paged_mqa_logits",
  layout = L.indexer_fp8,
  heads = 64,
  tile = { tokens_per_cta = 1024, matrix = true },
  targets = { ptx = { arch = "sm_80" } },
}
