-- indexer_shapes.lua: the logits op at shapes other than DeepSeek-V4's 64
-- heads x 128 dims, for test_indexer: each shape in the portable form (all
-- targets) and the matrix forms (sm_90a: wgmma, 64-byte swizzle at 64
-- dims, up to 256 product columns; sm_89: mma.sync).  The layouts are the
-- indexer cache's with other row widths.
local function indexer_layout(dim)
  return layout {
    name = "indexer_fp8_d" .. dim,
    dim = dim,
    row_bytes = dim,
    scales = { placement = "block_tail", row_bytes = 4 },
    align = 16,
    block = { tokens = 64, stride = 64 * (dim + 4) },
    segments = {
      { dims = { 0, dim }, type = "e4m3", offset = 0, scale = { type = "f32", group = dim, offset = 0 } },
    },
  }
end

local shapes = { { heads = 32, dim = 64 }, { heads = 8, dim = 128 }, { heads = 128, dim = 64 } }
for _, s in ipairs(shapes) do
  local L = indexer_layout(s.dim)
  local base = string.format("mqa_logits_h%d_d%d", s.heads, s.dim)
  kernel {
    name = base,
    op = "paged_mqa_logits",
    layout = L,
    heads = s.heads,
    tile = { tokens_per_cta = 128, heads_per_thread = math.min(s.heads, 64) },
    targets = { ptx = { arch = "sm_90a" }, amdgcn = { arch = "gfx942" }, spirv = true },
  }
  for _, t in ipairs { { "_mma", "sm_90a" }, { "_mma_sm89", "sm_89" } } do
    kernel {
      name = base .. t[1],
      op = "paged_mqa_logits",
      layout = L,
      heads = s.heads,
      tile = { tokens_per_cta = 512, matrix = true },
      targets = { ptx = { arch = t[2] } },
    }
  end
end
