-- sweep_small.lua: a small sweep of the portable decode and the matrix
-- decode (tests/tune: expansion, names, constraint and checker rejections).
local L = include "layouts.lua"

kernel {
  name = "sdp",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, heads_per_cta = 4 },
  targets = { spirv = true },
  sweep = {
    tile = { heads_per_cta = { 2, 4, 8 }, values_per_thread = { 8, 16, 32 } },
    constraints = {
      function(v) return v.heads_per_cta * 512 / v.values_per_thread < 256, "256 or more threads a CTA" end,
    },
  },
}

kernel {
  name = "sdm",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 64, heads_per_cta = 64, matrix = true, interleave = 8 },
  targets = { ptx = { arch = "sm_90a" } },
  sweep = {
    tile = { heads_per_cta = { 32, 64 }, pair = { false, true }, p = { "bf16", "bf16x2" } },
  },
}
