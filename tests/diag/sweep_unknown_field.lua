-- a sweep of a field the op does not take is the spec's error
local L = include "layouts.lua"
kernel {
  name = "sd",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, heads_per_cta = 4 },
  targets = { spirv = true },
  sweep = {
    tile = { heads_per_cta = { 2, 4 }, tokens_per_thread = { 1, 2 } },
  },
}
