-- insert.lua: the cache writers (docs/ops.md sections 4, 5 and 8), one generator
-- over three layouts.
local L = include "layouts.lua"

local targets = {
  ptx = { arch = "sm_90a" },
  amdgcn = { arch = "gfx942" },
  spirv = true,
}

-- DSv4: the fused q-norm + RoPE + KV RoPE + UE8M0 quant-insert of vLLM's
-- fused_deepseek_v4_qnorm_rope_kv_rope_quant_insert.  16 values a thread:
-- a 64-value scale group is 4 lanes; 32 lanes a token, 4 tokens a CTA.
kernel {
  name = "kv_insert_v4",
  op = "kv_insert",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 4 },
  rope = { first = 448, dims = 64 },
  q = { dim = 512 },
  targets = targets,
}

-- DSv4 without RoPE or q: vLLM's plain writer (quantize_and_insert_k_cache),
-- for caches whose input is already rotated (and the golden fixture).
kernel {
  name = "kv_quant_insert_v4",
  op = "kv_insert",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 4 },
  targets = targets,
}

-- DSv3.2 (FlashMLA V32 layout): fp32 power-of-two scales per 128 values,
-- inline; the input already carries its RoPE.
kernel {
  name = "kv_insert_v32",
  op = "kv_insert",
  layout = L.fp8_ds_mla_v32,
  tile = { values_per_thread = 16, tokens_per_cta = 4 },
  targets = targets,
}

-- The same with FlashMLA's test quantizer's rule (amax / 448 floored at
-- 1e-4, scales >= 2^-13), which made the V32 fixture: the rule is a spec
-- parameter, not code.
kernel {
  name = "kv_insert_v32_flashmla",
  op = "kv_insert",
  layout = L.fp8_ds_mla_v32,
  tile = { values_per_thread = 16, tokens_per_cta = 4 },
  quant = { floor = "quotient" },
  targets = targets,
}

-- The indexer's K cache (docs/ops.md section 4): one fp32 scale per 128-value
-- entry, RoPE on the last 64 dims.
kernel {
  name = "kv_insert_indexer",
  op = "kv_insert",
  layout = L.indexer_fp8,
  tile = { values_per_thread = 16, tokens_per_cta = 16 },
  rope = { first = 64, dims = 64 },
  targets = targets,
}
