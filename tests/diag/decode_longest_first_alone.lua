-- tile.longest_first ranks a CTA pair's tokens; the single-CTA form has
-- no register to hold a ranked token, so it needs tile.pair.
local L = include "layouts.lua"
kernel {
  name = "d",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 64, heads_per_cta = 64, matrix = true, interleave = 8, longest_first = true },
  targets = { ptx = { arch = "sm_90a" } },
}
