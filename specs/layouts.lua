-- layouts.lua: the paged KV-cache layouts of OPS.md, as data.
--
-- A layout names where each of a token's `dim` output values is stored in a
-- cache block and how it is dequantized.  Data rows of `row_bytes` come
-- first in a block; scales sit either in per-token rows at the block tail
-- (`block_tail`, after bs * row_bytes bytes) or inside the data row
-- (`inline`).  Each segment maps output dims [first, last) to stored values
-- of one type at a byte offset in the data row, optionally with one scale
-- per `group` values at a byte offset in the scale row.

local L = {}

-- DeepSeek-V4 fp8_ds_mla ("MODEL1"), OPS.md section 1: 584 bytes per token,
-- 576 in the data row (448 e4m3 + 64 bf16 RoPE), 8 in the scale row
-- (7 UE8M0 bytes + 1 pad byte).
L.fp8_ds_mla_v4 = layout {
  name = "fp8_ds_mla_v4",
  dim = 512,
  row_bytes = 576,
  scales = { placement = "block_tail", row_bytes = 8 },
  align = 16,
  segments = {
    { dims = { 0, 448 }, type = "e4m3", offset = 0,
      scale = { type = "ue8m0", group = 64, offset = 0 } },
    { dims = { 448, 512 }, type = "bf16", offset = 448 },
  },
}

return L
