-- 64 heads of 512 dims need more shared memory than sm_86 gives a CTA.
local L = include "layouts.lua"
kernel {
  name = "d",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, heads_per_cta = 64, matrix = true },
  targets = { ptx = { arch = "sm_86" } },
}
