kernel {
  name = "g",
  op = "dequant_gather",
  tile = { values_per_thread = 16, tokens_per_cta = 8 },
  targets = { ptx = true },
}
