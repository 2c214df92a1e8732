-- embedded.lua: the spec of the consumers that embed their kernels
-- (dsv4c --emit c, dsv4c_add_kernels(... EMBED)).  Two dequant-gathers:
-- the BF16 one copies cache rows, which the test checks on the host; the
-- per-tensor FP8 one comes first, so that a call that did not name its
-- kernel would run it and fail the check.
local L = include "layouts.lua"

local targets = { ptx = { arch = "sm_80" }, spirv = true }

kernel {
  name = "gather_fp8_tensor",
  op = "dequant_gather",
  layout = L.fp8_per_tensor,
  tile = { values_per_thread = 16, tokens_per_cta = 4 },
  targets = targets,
}

kernel {
  name = "gather_bf16",
  op = "dequant_gather",
  layout = L.bf16,
  tile = { values_per_thread = 8, tokens_per_cta = 2 },
  targets = targets,
}
