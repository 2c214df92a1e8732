-- 64 tokens of 584 bytes need 37376 bytes: a 36864-byte page cannot hold them
local lay = layout {
  name = "tight",
  dim = 512,
  row_bytes = 576,
  scales = { placement = "block_tail", row_bytes = 8 },
  block = { tokens = 64,
            stride = 36864 },
  segments = {
    { dims = { 0, 448 }, type = "e4m3", offset = 0, scale = { type = "ue8m0", group = 64, offset = 0 } },
    { dims = { 448, 512 }, type = "bf16", offset = 448 },
  },
}
kernel { name = "g", op = "dequant_gather", layout = lay,
         tile = { values_per_thread = 16, tokens_per_cta = 4 }, targets = { ptx = true } }
