kernel {
  name = "g",
  op = "dequant_gather"
  layout = 3,
}
