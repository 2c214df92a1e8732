-- layouts.lua: the paged KV-cache layouts of docs/ops.md sections 1, 4 and 8, as data.
--
-- A layout names where each of a token's `dim` output values is stored in a
-- cache block and how it is dequantized.  Data rows of `row_bytes` come
-- first in a block; scales sit either in per-token rows at the block tail
-- (`block_tail`, after bs * row_bytes bytes) or inside the data row
-- (`inline`).  Each segment maps output dims [first, last) to stored values
-- of one type at a byte offset in the data row, optionally with one scale
-- per `group` values at a byte offset in the scale row, or one scale for the
-- whole cache given at launch (`per = "tensor"`).  `block` declares the page
-- vLLM allocates (checked to fit; the runtime takes the real stride).

local L = {}

-- DeepSeek-V4 fp8_ds_mla ("MODEL1"), docs/ops.md section 1: 584 bytes per token,
-- 576 in the data row (448 e4m3 + 64 bf16 RoPE), 8 in the scale row
-- (7 UE8M0 bytes + 1 pad byte).  Page: roundup(64 * 584, 576) = 37440.
L.fp8_ds_mla_v4 = layout {
  name = "fp8_ds_mla_v4",
  dim = 512,
  row_bytes = 576,
  scales = { placement = "block_tail", row_bytes = 8 },
  align = 16,
  block = { tokens = 64, stride = 37440 },
  segments = {
    { dims = { 0, 448 }, type = "e4m3", offset = 0,
      scale = { type = "ue8m0", group = 64, offset = 0 } },
    { dims = { 448, 512 }, type = "bf16", offset = 448 },
  },
}

-- DeepSeek-V3.2 fp8_ds_mla ("V32"), docs/ops.md section 8: 656 bytes per token,
-- all inline: 512 e4m3, 4 fp32 power-of-two scales (one per 128), 64 bf16.
-- Head size 576 (d_v 512).
L.fp8_ds_mla_v32 = layout {
  name = "fp8_ds_mla_v32",
  dim = 576,
  row_bytes = 656,
  scales = { placement = "inline" },
  align = 16,
  block = { tokens = 64, stride = 41984 },
  segments = {
    { dims = { 0, 512 }, type = "e4m3", offset = 0,
      scale = { type = "f32", group = 128, offset = 512 } },
    { dims = { 512, 576 }, type = "bf16", offset = 528 },
  },
}

-- Per-tensor FP8 (FlashInfer TRT-LLM sparse MLA): 512 e4m3 per token and
-- one fp32 kv_scale for the whole cache, a launch argument.
L.fp8_per_tensor = layout {
  name = "fp8_per_tensor",
  dim = 512,
  row_bytes = 512,
  align = 16,
  block = { tokens = 64, stride = 32768 },
  segments = {
    { dims = { 0, 512 }, type = "e4m3", offset = 0, scale = { type = "f32", per = "tensor" } },
  },
}

-- BF16 cache (FlashInfer sparse MLA, reference paths): 1024 bytes per token.
L.bf16 = layout {
  name = "bf16",
  dim = 512,
  row_bytes = 1024,
  align = 16,
  block = { tokens = 64, stride = 65536 },
  segments = {
    { dims = { 0, 512 }, type = "bf16", offset = 0 },
  },
}

-- Indexer FP8 K cache (DeepGEMM paged MQA logits, docs/ops.md section 4):
-- bs * 128 e4m3 values, then bs fp32 scales (one per token).
L.indexer_fp8 = layout {
  name = "indexer_fp8",
  dim = 128,
  row_bytes = 128,
  scales = { placement = "block_tail", row_bytes = 4 },
  align = 16,
  block = { tokens = 64, stride = 8448 },
  segments = {
    { dims = { 0, 128 }, type = "e4m3", offset = 0,
      scale = { type = "f32", group = 128, offset = 0 } },
  },
}

return L
