-- tile.p applies to the matrix forms only: the portable form keeps P in
-- fp32 and has no choice to make.
local L = include "layouts.lua"
kernel {
  name = "d",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, heads_per_cta = 4, p = "bf16" },
  targets = { ptx = { arch = "sm_90a" }, spirv = true },
}
