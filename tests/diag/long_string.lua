-- a string field longer than its buffer (found by fuzz_spec: the checker
-- then read an unterminated buffer)
local L = include "layouts.lua"
local lay = layout {
  name = "bad",
  dim = 512,
  row_bytes = 576,
  scales = { placement = "block_tail_and_then_a_good_deal_more_than_fits", row_bytes = 8 },
  segments = { { dims = { 0, 512 }, type = "e4m3", offset = 0 } },
}
kernel { name = "g", op = "dequant_gather", layout = lay,
         tile = { values_per_thread = 16, tokens_per_cta = 8 }, targets = { ptx = true } }
