-- a sweep whose every variant the checker refuses: an error, with the
-- first refusal as the checker reports it
local L = include "layouts.lua"
kernel {
  name = "sd",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 64, heads_per_cta = 32, matrix = true, interleave = 8 },
  targets = { ptx = { arch = "sm_90a" } },
  sweep = {
    tile = { pair = { true }, p = { "bf16", "bf16x2" } },
  },
}
