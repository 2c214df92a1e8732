local lay = layout {
  name = "pt",
  dim = 512,
  row_bytes = 512,
  segments = {
    { dims = { 0, 512 }, type = "e4m3", offset = 0, scale = { type = "f32", per = "tensor", group = 64 } },
  },
}
kernel { name = "g", op = "dequant_gather", layout = lay,
         tile = { values_per_thread = 16, tokens_per_cta = 4 }, targets = { ptx = true } }
