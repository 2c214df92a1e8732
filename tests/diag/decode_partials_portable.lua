-- The portable form has no split-KV, so no partials to choose.
local L = include "layouts.lua"
kernel {
  name = "d",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, heads_per_cta = 4, partials = "bf16" },
  targets = { spirv = {} },
}
