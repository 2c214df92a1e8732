local lay = layout {
  name = "bad",
  dim = 512,
  row_bytes = 576,
  scales = { placement = "block_tailÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿÿ", row_bytes = 8 },
  segments = {
    { dims = { 0, 448 }, type = "fp8", offset = 0, scale = { type = "ue8m0", group = 64, offset = 0 } },
    { dims = { 448, 512 }, type = "bf16", offset = 448 },
  },
}
kernel { name = "g", op = "dequant_gather", layout = lay,
         tile = { values_per_thread = 16, tokens_per_cta = 8 }, targets = { ptx = true } }
