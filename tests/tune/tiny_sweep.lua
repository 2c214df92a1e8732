-- tiny_sweep.lua: the smallest sweeps dsv4c-tune runs end to end on an
-- OpenCL CPU device (ctest tune.quick.opencl): the portable decode and the
-- portable logits, two points each, and a kernel that is no sweep (the
-- default a tuned bundle keeps).
local L = include "layouts.lua"

kernel {
  name = "sd",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, heads_per_cta = 4 },
  targets = { ptx = { arch = "sm_80" }, spirv = true },
  sweep = { tile = { heads_per_cta = { 2, 4 } } },
}

kernel {
  name = "lg",
  op = "paged_mqa_logits",
  layout = L.indexer_fp8,
  heads = 64,
  tile = { tokens_per_cta = 128, heads_per_thread = 64 },
  targets = { ptx = { arch = "sm_80" }, spirv = true },
  sweep = { tile = { tokens_per_cta = { 64, 128 } } },
}

kernel {
  name = "topk_512",
  op = "topk",
  k = 512,
  tile = { threads = 512 },
  targets = { ptx = { arch = "sm_80" }, spirv = true },
}
