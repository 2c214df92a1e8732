-- gather_layouts.lua: the two dequant-gather ops built for every layout of
-- layouts.lua -- a layout is data, so each is a spec entry, not new code.
local L = include "layouts.lua"

local targets = {
  ptx = { arch = "sm_90a" },
  amdgcn = { arch = "gfx942" },
  spirv = true,
}

-- tokens per CTA chosen so the thread count is a multiple of a 64-wide wave
local tiles = {
  fp8_ds_mla_v4 = { values_per_thread = 16, tokens_per_cta = 4, interleave = 2 },
  fp8_ds_mla_v32 = { values_per_thread = 16, tokens_per_cta = 16, interleave = 2 },
  fp8_per_tensor = { values_per_thread = 16, tokens_per_cta = 4 },
  bf16 = { values_per_thread = 8, tokens_per_cta = 2 },
  indexer_fp8 = { values_per_thread = 16, tokens_per_cta = 16 },
}

for _, name in ipairs { "fp8_ds_mla_v4", "fp8_ds_mla_v32", "fp8_per_tensor", "bf16", "indexer_fp8" } do
  for _, op in ipairs { "dequant_gather", "paged_gather" } do
    kernel {
      name = op .. "_" .. name,
      op = op,
      layout = L[name],
      tile = tiles[name],
      targets = targets,
    }
  end
end
