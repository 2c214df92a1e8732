-- decode_sweep.lua: the sparse MLA decode's matrix forms as sweeps
-- (docs/tuning.md), for dsv4c-tune at the V4-Pro / V4-Flash shapes:
--   sd   sm_90a: 512 points of six tile fields; the constraints and the
--        checker leave 144 variants (warpgroup, CTA pairs, warp and direct warp forms);
--   sdw  sm_90 (no wgmma): the warp-matrix forms, with bf16 or fp32 split-KV
--        partials (tile.partials), 84 variants;
--   sdl  sm_90a: CTA pairs taking their tokens longest first
--        (tile.longest_first), 8 variants;
--   sdp  sm_90a: bf16 split-KV partials (tile.partials) beside bf16 P, for
--        the tiles a batch too small to fill the GPU splits, 7 variants.
-- 243 variants in all (a bundle holds at most 256).  What each field does: docs/kernels.md.
--   dsv4c bench/decode_sweep.lua -I specs -o build/sweep --no-ptxas      (-j: every core)
--   dsv4c-tune build/sweep/decode_sweep.dsv4b --lock decode.lock         (on the GPU)
local L = include "layouts.lua"

local tile = { values_per_thread = 64, heads_per_cta = 64, matrix = true, interleave = 8 }

kernel {
  name = "sd",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = tile,
  targets = { ptx = { arch = "sm_90a" } },
  sweep = {
    tile = {
      values_per_thread = { 8, 16, 32, 64 }, -- a producer lane's values of a K row
      interleave = { 1, 2, 4, 8 },           -- in how many pieces, dim / interleave apart
      heads_per_cta = { 16, 32, 48, 64 },    -- 64: the warpgroup form; 16, 32: the direct warp form; 48: the warp form
      pair = { false, true },                -- CTA pairs sharing each tile's dequantization
      prefetch = { false, true },            -- the next tile's rows into the L2
      p = { "bf16", "bf16x2" },              -- P rounded once (FlashMLA) or as hi + lo
    },
    constraints = {
      -- pairs and the L2 prefetch belong to the warpgroup form (the checker
      -- says so too; here it costs nothing and names the rule)
      function(v)
        return v.heads_per_cta == 64 or not (v.pair or v.prefetch),
          "pair and prefetch need the warpgroup form's 64 heads a CTA"
      end,
      -- the pair form's producers copy 8-value pieces to the peer CTA (a rule
      -- of its generator, kernels/sparse_decode/warpgroup.c, that the checker
      -- does not know yet)
      function(v)
        return not v.pair or v.values_per_thread // v.interleave == 8,
          "CTA pairs copy pieces of 8 values: values_per_thread / interleave must be 8"
      end,
    },
  },
}

kernel {
  name = "sdw",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = tile,
  targets = { ptx = { arch = "sm_90" } },
  sweep = {
    tile = {
      values_per_thread = { 8, 16, 32, 64 },
      interleave = { 1, 2, 4, 8 },
      heads_per_cta = { 32, 64 },   -- 32: the direct warp form (operands from the cache), 64: the warp form
      p = { "bf16", "bf16x2" },
      partials = { "f32", "bf16" }, -- split-KV partials (tile.partials; bf16 needs bf16 P)
    },
    constraints = {
      function(v)
        return v.partials == "f32" or v.p == "bf16", "bf16 partials need bf16 P"
      end,
    },
  },
}

kernel {
  name = "sdl",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 64, heads_per_cta = 64, matrix = true, interleave = 8, pair = true, prefetch = true,
           longest_first = true },
  targets = { ptx = { arch = "sm_90a" } },
  sweep = {
    tile = {
      values_per_thread = { 8, 16, 32, 64 }, -- with interleave: the pairs' 8-value pieces
      interleave = { 1, 2, 4, 8 },
      p = { "bf16", "bf16x2" },
    },
    constraints = {
      function(v)
        return v.values_per_thread // v.interleave == 8,
          "CTA pairs copy pieces of 8 values: values_per_thread / interleave must be 8"
      end,
    },
  },
}

kernel {
  name = "sdp",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 64, heads_per_cta = 64, matrix = true, interleave = 8, p = "bf16", partials = "bf16" },
  targets = { ptx = { arch = "sm_90a" } },
  sweep = {
    tile = {
      heads_per_cta = { 32, 64 },
      pair = { false, true },
      prefetch = { false, true },
      longest_first = { false, true },
    },
    constraints = {
      function(v)
        return v.heads_per_cta == 64 or not (v.pair or v.prefetch),
          "pair and prefetch need the warpgroup form's 64 heads a CTA"
      end,
      function(v)
        return v.pair or not v.longest_first, "longest_first needs CTA pairs"
      end,
    },
  },
}
