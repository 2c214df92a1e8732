-- spirv_sweep.lua: the portable forms as sweeps, for dsv4c-tune on any
-- OpenCL device -- a CPU through PoCL included (docs/tuning.md, "Tuning
-- without a GPU"):
--   sdp  the portable sparse MLA decode: heads a CTA (2, 4, 8) by a lane's
--        values of a K row (8, 16, 32); fewer than 256 threads a CTA, and
--        the checker's own rule (a head's lanes fit one 32-wide reduction),
--        leave 5 variants;
--   lgp  the portable indexer logits: a CTA's tokens (64, 128, 256), 3 variants.
--   dsv4c bench/spirv_sweep.lua -I specs -o spirv_sweep
--   dsv4c-tune spirv_sweep/spirv_sweep.dsv4b --lock spirv.lock --quick   (about 20 s on 2 cores)
local L = include "layouts.lua"

kernel {
  name = "sdp",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, heads_per_cta = 4 },
  targets = { spirv = true },
  sweep = {
    tile = { heads_per_cta = { 2, 4, 8 }, values_per_thread = { 8, 16, 32 } },
    constraints = {
      function(v) return v.heads_per_cta * 512 / v.values_per_thread < 256, "256 or more threads a CTA" end,
    },
  },
}

kernel {
  name = "lgp",
  op = "paged_mqa_logits",
  layout = L.indexer_fp8,
  heads = 64,
  tile = { tokens_per_cta = 128, heads_per_thread = 64 },
  targets = { spirv = true },
  sweep = { tile = { tokens_per_cta = { 64, 128, 256 } } },
}
