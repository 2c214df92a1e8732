-- wave64.lua: the portable forms of every op with sub-groups of 64, an
-- AMDGCN wavefront's width, for SPIR-V: their cross-lane reductions are the
-- butterfly an AMD GPU runs (kb_butterfly), here over sub_group_shuffle_xor
-- at SubgroupSize 64.  The SPIR 1.2 fallback emulates the sub-groups
-- (emulate_subgroups), so that PoCL, which has none, runs them; the exec
-- tests check them against the C reference (tests/CMakeLists.txt, *.wave64).
-- The reduction widths covered: 64 (kv_insert_v4_w64's q norm), 32 (the
-- decode, kv_insert_v4's q norm, the logits), 16, 8, 4.
local L = include "layouts.lua"

local wave64 = { spirv = { subgroups = true, subgroup_size = 64, emulate_subgroups = true } }

-- no cross-lane code: the sub-group mode must leave them right all the same
kernel {
  name = "dequant_gather_fp8_ds_mla_v4",
  op = "dequant_gather",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 4 },
  targets = wave64,
}

kernel {
  name = "paged_gather_fp8_ds_mla_v4",
  op = "paged_gather",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 4 },
  targets = wave64,
}

-- a head's 32 lanes reduce q.K (width 32)
kernel {
  name = "sparse_decode_v4",
  op = "sparse_decode",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, heads_per_cta = 4 },
  targets = wave64,
}

-- 16 lanes a head (width 16), four heads a sub-group
kernel {
  name = "sparse_decode_bf16",
  op = "sparse_decode",
  layout = L.bf16,
  tile = { values_per_thread = 32, heads_per_cta = 4 },
  targets = wave64,
}

-- the scale groups' amax over 4 lanes, the q norm over 32
kernel {
  name = "kv_insert_v4",
  op = "kv_insert",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 16, tokens_per_cta = 4 },
  rope = { first = 448, dims = 64 },
  q = { dim = 512 },
  targets = wave64,
}

-- amax over 8 lanes, the q norm over a whole wave of 64 (masks 32 .. 1)
kernel {
  name = "kv_insert_v4_w64",
  op = "kv_insert",
  layout = L.fp8_ds_mla_v4,
  tile = { values_per_thread = 8, tokens_per_cta = 2 },
  rope = { first = 448, dims = 64 },
  q = { dim = 512 },
  targets = wave64,
}

-- two heads a thread: a position's 64 heads summed across 32 lanes
kernel {
  name = "mqa_logits_w32",
  op = "paged_mqa_logits",
  layout = L.indexer_fp8,
  heads = 64,
  tile = { tokens_per_cta = 8, heads_per_thread = 2 },
  targets = wave64,
}

-- eight heads a thread: groups of 8
kernel {
  name = "mqa_logits_w8",
  op = "paged_mqa_logits",
  layout = L.indexer_fp8,
  heads = 64,
  tile = { tokens_per_cta = 32, heads_per_thread = 8 },
  targets = wave64,
}

kernel {
  name = "topk_512",
  op = "topk",
  k = 512,
  tile = { threads = 512 },
  targets = wave64,
}
