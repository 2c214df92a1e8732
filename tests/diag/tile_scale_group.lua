-- one scale per thread: 32 values a thread cannot share a scale of 16
local lay = layout {
  name = "fine_scales",
  dim = 512,
  row_bytes = 576,
  scales = { placement = "block_tail", row_bytes = 28 },
  segments = {
    { dims = { 0, 448 }, type = "e4m3", offset = 0, scale = { type = "ue8m0", group = 16, offset = 0 } },
    { dims = { 448, 512 }, type = "bf16", offset = 448 },
  },
}
kernel {
  name = "g",
  op = "dequant_gather",
  layout = lay,
  tile = { values_per_thread = 32, tokens_per_cta = 8 },
  targets = { spirv = true },
}
