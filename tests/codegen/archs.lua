-- the second arch of each target: sm_80 PTX (no fp8 conversion instructions,
-- so the generic integer path) and gfx90a code objects
local L = include "layouts.lua"
kernel {
  name = "dequant_gather_sm80",
  op = "dequant_gather",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 4, interleave = 2 },
  targets = { ptx = { arch = "sm_80" }, amdgcn = { arch = "gfx90a" } },
}
