-- a swept value of the wrong type is the spec's error, at the field
local L = include "layouts.lua"
kernel {
  name = "sd",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 64, heads_per_cta = 64, matrix = true, interleave = 8 },
  targets = { ptx = { arch = "sm_90a" } },
  sweep = {
    tile = { pair = { false, "yes" } },
  },
}
