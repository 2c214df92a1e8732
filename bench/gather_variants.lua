-- gather_variants.lua: tile variants of the two gathers for bench_gather
-- (an autotuning sweep written as a spec: each kernel is one point).
local L = include "layouts.lua"
local targets = { ptx = { arch = "sm_90a" }, spirv = true }

local points = {
  -- values_per_thread, tokens_per_cta, tokens_per_thread, streaming, interleave
  { 16, 4, 1, true, 1 }, { 16, 4, 1, false, 1 }, { 16, 8, 1, true, 1 }, { 16, 16, 2, true, 1 },
  { 16, 4, 1, true, 2 }, { 16, 8, 1, true, 2 }, { 16, 16, 1, true, 2 }, { 16, 32, 1, true, 2 },
  { 16, 8, 2, true, 2 }, { 16, 8, 1, true, 4 }, { 8, 4, 1, true, 1 }, { 8, 8, 1, true, 1 }, { 32, 8, 1, true, 4 },
}
for _, op in ipairs { "dequant_gather", "paged_gather" } do
  for _, p in ipairs(points) do
    kernel {
      name = string.format("%s_v%d_c%d_t%d_i%d%s", op, p[1], p[2], p[3], p[5], p[4] and "_s" or ""),
      op = op,
      layout = L.fp8_ds_mla_v4,
      tile = { values_per_thread = p[1], tokens_per_cta = p[2], tokens_per_thread = p[3], streaming = p[4],
               interleave = p[5] },
      targets = targets,
    }
  end
end
