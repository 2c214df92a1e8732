-- The logits' matrix forms keep q rows and a K ring in static shared
-- memory: 128 heads of 128 dims do not fit the warpgroup form's 48 KB.
local L = include "layouts.lua"
kernel {
  name = "m",
  op = "paged_mqa_logits",
  layout = L.indexer_fp8,
  heads = 128,
  tile = { tokens_per_cta = 1024, matrix = true },
  targets = { ptx = { arch = "sm_90a" } },
}
