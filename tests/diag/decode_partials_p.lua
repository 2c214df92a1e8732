-- bf16 partials round each split's O once more: a kernel that keeps P as
-- hi + lo for the precision must keep them in fp32.
local L = include "layouts.lua"
kernel {
  name = "d",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 64, heads_per_cta = 64, matrix = true, interleave = 8, p = "bf16x2", partials = "bf16" },
  targets = { ptx = { arch = "sm_90a" } },
}
