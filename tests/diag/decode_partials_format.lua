-- tile.partials is 'f32' or 'bf16', nothing else.
local L = include "layouts.lua"
kernel {
  name = "d",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 64, heads_per_cta = 64, matrix = true, interleave = 8, partials = "fp16" },
  targets = { ptx = { arch = "sm_90a" } },
}
