"""Drop-in entry points with the signatures serving engines call, on dsv4c kernels.

    from dsv4c import compat
    compat.configure(ctx.open_bundle("decode.dsv4b"), ctx.open_bundle("indexer.dsv4b"))
    out, lse = compat.flash_mla_with_kvcache(q, swa_cache, None, None, 512, meta, ...)

- ``flash_mla_with_kvcache`` (FlashMLA, sparse FP8 mode: indices, attn_sink,
  extra_k_cache, extra_indices_in_kvcache, topk_length, extra_topk_length) and
  ``get_mla_metadata``;
- ``dequantize_and_gather_k_cache`` and ``quantize_and_insert_k_cache`` (vLLM's
  DeepSeek-V4 cache helpers);
- ``fp8_paged_mqa_logits`` and ``get_paged_mqa_logits_metadata`` (DeepGEMM).

Each maps onto one runtime op (docs/ops.md sections 2-5) of a configured bundle,
chosen by the op and the cache layout the arguments imply.  What the runtime
does not have raises ``NotImplementedError`` naming it (dense FlashMLA decode,
FNUZ caches, MXFP4 indexer keys).  Launches go on torch's current stream for
torch CUDA tensors.  Bundles come from :func:`configure`, else from the
``DSV4C_BUNDLES`` environment variable (paths separated by ``os.pathsep``,
opened on ``Context("auto")``).
"""

import os

from . import Context, _empty, _is_numpy, _quiet, _raw

__all__ = ["configure", "flash_mla_with_kvcache", "get_mla_metadata", "dequantize_and_gather_k_cache",
           "quantize_and_insert_k_cache", "fp8_paged_mqa_logits", "fp8_fp4_paged_mqa_logits",
           "get_paged_mqa_logits_metadata"]

_bundles = []
_chosen = {}


def configure(*bundles):
    """Use these dsv4c.Bundle objects (searched in order) for the entry points below."""
    _bundles[:] = bundles
    _chosen.clear()
    _rules.clear()
    _decoders.clear()


def _configured():
    if not _bundles:
        paths = [p for p in os.environ.get("DSV4C_BUNDLES", "").split(os.pathsep) if p]
        if not paths:
            raise RuntimeError("dsv4c.compat: no bundle configured: call dsv4c.compat.configure(bundle, ...) or set "
                               "DSV4C_BUNDLES")
        ctx = Context("auto")
        configure(*[ctx.open_bundle(p) for p in paths])
    return _bundles


def _find(op, key, **want):
    """(bundle, kernel name) of the first configured kernel of `op` that runs here and whose
    parameters (op_info / kernels() fields) equal `want` (cached under (op, key)); else
    NotImplementedError naming what was wanted."""
    key = (op, key)
    hit = _chosen.get(key)
    if hit:
        return hit
    for b in _configured():
        for k in b.kernels():
            if k["op"] == op and k["runs"] and all(k.get(f) == v for f, v in want.items()):
                hit = _chosen[key] = (b, k["name"])
                return hit
    raise NotImplementedError("dsv4c.compat: no configured bundle has a %s kernel that runs on this device with %s%s"
                              % (op, ", ".join("%s=%r" % kv for kv in sorted(want.items())),
                                 " (%s)" % key[1] if isinstance(key[1], str) else ""))


_rules = {}  # (bundle, op, name) -> what _rule_or answers (kernels() builds a dict an entry: not per call)


def _rule_or(b, op, name):
    """None (the runtime's default rule picks the form: runtime/src/rt.c rt_default_rank) where `name` is
    the first kernel of `op` in `b` that runs here, whose layout the rule then keeps; else `name`."""
    key = (b, op, name)
    if key not in _rules:
        first = next((k["name"] for k in b.kernels() if k["op"] == op and k["runs"]), name)
        _rules[key] = None if first == name else name
    return _rules[key]


def _token_bytes(cache):
    """Bytes a token takes in a [num_blocks, block_size, ...] cache."""
    n = 1
    for d in cache.shape[2:]:
        n *= int(d)
    return n * _itemsize(cache)


def _itemsize(x):
    it = getattr(x, "itemsize", None)  # NumPy, torch >= 2.1
    if it is None:
        it = x.element_size()
    return int(it)


def _flat(x, *shape):
    """x reshaped (a view where x is contiguous)."""
    return x.reshape(shape)


_fulls = {}  # (device, n, value) -> an int32 tensor of n values, made once (FlashMLA's absent topk_length)


def _full(like, n, value):
    """A [n] int32 tensor of `value` on like's device, made once and kept: the same tensor at every
    call, so a call in a CUDA graph launches nothing but the op (a call that first makes it inside a
    capture captures its fill too; docs/python.md)."""
    key = (str(getattr(like, "device", "cpu")) if not _is_numpy(like) else "numpy", n, value)
    t = _fulls.get(key)
    if t is None:
        t = _empty(like, (n,), "i32")
        t.fill(value) if _is_numpy(t) else t.fill_(value)
        _fulls[key] = t
    return t


# ---- FlashMLA ----

class FlashMLASchedMeta:
    """What get_mla_metadata returns; dsv4c needs no schedule (its runtime picks split-KV itself)."""

    have_initialized = False


def get_mla_metadata(*args, **kwargs):
    """FlashMLA's get_mla_metadata: (a placeholder schedule, None)."""
    return FlashMLASchedMeta(), None


def flash_mla_with_kvcache(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata,
                           num_splits=None, softmax_scale=None, causal=False, is_fp8_kvcache=False, indices=None,
                           attn_sink=None, extra_k_cache=None, extra_indices_in_kvcache=None, topk_length=None,
                           extra_topk_length=None):
    """FlashMLA's flash_mla_with_kvcache in its sparse mode (docs/ops.md 3).

    q [b, s_q, h_q, d] bf16; k_cache [num_blocks, block_size, 1, token bytes] (584 for the DSv4
    MODEL1 cache, 656 for DSv3.2); indices [b, s_q, topk] int32 global slots (-1 skipped);
    topk_length [b] int32 (each of a batch entry's s_q tokens uses its entry's); the extra cache
    and its indices and lengths likewise, attended in the same softmax; attn_sink [h_q] f32.
    Returns (out [b, s_q, h_q, head_dim_v] bf16, lse [b, h_q, s_q] f32).  The kernel is the
    configured sparse_decode kernel whose layout has k_cache's token bytes and q's head size.
    q and the index lists are read where they lie (any strides on their outer dims, as FlashMLA's
    tests hand them over): q's strides multiples of 8 elements (16-byte rows), every last dim
    contiguous; a view outside that is refused by name, never copied (a copy would run inside the
    caller's CUDA graph)."""
    if indices is None:
        raise NotImplementedError("flash_mla_with_kvcache: dense decode (block_table + cache_seqlens, no indices) is "
                                  "not in dsv4rt: its decode is the sparse one (docs/ops.md 3); pass indices")
    if causal:
        raise ValueError("causal: must be False when sparse attention is enabled (flash_mla_with_kvcache)")
    if num_splits is not None:
        raise ValueError("num_splits: must be None (flash_mla_with_kvcache)")
    if (extra_k_cache is None) != (extra_indices_in_kvcache is None):
        raise ValueError("%s: extra_k_cache and extra_indices_in_kvcache go together (flash_mla_with_kvcache)"
                         % ("extra_k_cache" if extra_k_cache is None else "extra_indices_in_kvcache"))
    qs = q.shape
    if len(qs) != 4:
        raise ValueError("q: expected [batch, s_q, h_q, head_dim], got shape %s" % (tuple(qs),))
    k_cache, extra_k_cache = _raw(k_cache), _raw(extra_k_cache)
    b, s_q, h, d = qs
    tb = _token_bytes(k_cache)
    hit = _decoders.get((tb, d, head_dim_v))
    if hit is None:
        b_, name = _find("sparse_decode", (tb, d), token_bytes=tb, dim=d)
        v = b_.op_info("sparse_decode", name)["v_dim"]
        if head_dim_v != v:
            raise ValueError("head_dim_v: %d, but kernel %s (layout %s) outputs %d dims"
                             % (head_dim_v, name, b_.op_info("sparse_decode", name)["layout"], v))
        hit = _decoders[(tb, d, head_dim_v)] = (b_._b.sparse_decode, _rule_or(b_, "sparse_decode", name))
    call, kernel = hit
    if extra_k_cache is not None and _token_bytes(extra_k_cache) != tb:
        raise ValueError("extra_k_cache: %d-byte tokens, k_cache has %d (one layout for both)"
                         % (_token_bytes(extra_k_cache), tb))
    if softmax_scale is None:
        softmax_scale = d ** -0.5
    if topk_length is None:
        topk_length = _full(indices, b, indices.shape[-1])
    if extra_k_cache is not None and extra_topk_length is None:
        extra_topk_length = _full(extra_indices_in_kvcache, b, extra_indices_in_kvcache.shape[-1])
    with _quiet(q):
        out = _empty(q, (b, s_q, h, head_dim_v), "bf16", q)
        lse = _empty(q, (b, h, s_q), "f32", name="lse")
        # the extension's own call: q [b, s_q, h, d], the lists [b, s_q, topk] and topk_length [b] taken as the
        # strided views they are (no copy), lse written straight into FlashMLA's [b, h, s_q]
        call(out=out, lse=lse, q=_raw(q), cache=k_cache, indices=indices, lens=topk_length,
             softmax_scale=softmax_scale, extra_cache=extra_k_cache, extra_indices=extra_indices_in_kvcache,
             extra_lens=extra_topk_length, attn_sink=attn_sink, kernel=kernel, stream=None)
    return out, lse


_decoders = {}  # (token bytes, dim, head_dim_v) -> (the extension's call, kernel= argument)


# ---- vLLM ----

def dequantize_and_gather_k_cache(out, k_cache, seq_lens, gather_lens, block_table, block_size, offset,
                                  use_fnuz=False):
    """vLLM's dequantize_and_gather_k_cache (docs/ops.md 2b) on the DSv4 fp8_ds_mla cache: out bf16
    [num_reqs, max_tokens, 512] (any row strides); k_cache [num_blocks, block_size, 584] or
    [num_blocks, block_bytes] uint8; seq_lens / gather_lens (or None) [R] int32; block_table
    [R, max_blocks] int32.  out[r, offset + i] = the i-th of request r's trailing gather_lens[r]
    tokens; other rows untouched.  Returns None."""
    if use_fnuz:
        raise NotImplementedError("dequantize_and_gather_k_cache: FNUZ e4m3 caches (ROCm gfx942's SWA writer) have "
                                  "no layout in dsv4rt (specs/layouts.lua reads OCP e4m3fn only)")
    b, name = _find("paged_gather", "the DSv4 fp8_ds_mla cache", layout="fp8_ds_mla_v4")
    b.paged_gather(out, k_cache, seq_lens, block_table, gather_lens, offset, block_size=block_size, kernel=name)


def quantize_and_insert_k_cache(k, k_cache, slot_mapping, block_size=64, is_ue8m0=True, use_fnuz=False):
    """vLLM's quantize_and_insert_k_cache (docs/ops.md 5, the KV branch without RoPE): k bf16
    [num_tokens, 512] (already rotated); k_cache [num_blocks, block_bytes] (with block_size) or
    [num_blocks, block_size, 584] uint8; slot_mapping int64 [<= num_tokens] (negative: skipped;
    rows past its length, DP padding, skipped).  Needs a kv_insert kernel of the fp8_ds_mla_v4
    layout without RoPE or q branch (specs/insert.lua's kv_quant_insert_v4).  Returns None."""
    if not is_ue8m0:
        raise NotImplementedError("quantize_and_insert_k_cache: only UE8M0 scales (is_ue8m0=True) exist in the "
                                  "fp8_ds_mla layout")
    if use_fnuz:
        raise NotImplementedError("quantize_and_insert_k_cache: FNUZ e4m3 caches have no layout in dsv4rt")
    b, name = _find("kv_insert", "vLLM's plain DSv4 writer (no RoPE, no q; specs/insert.lua's kv_quant_insert_v4)",
                    layout="fp8_ds_mla_v4", rope_dims=0, q_dim=0, quant_floor=0)
    b.kv_insert(k_cache, k, slot_mapping, block_size=block_size, kernel=name)


# ---- DeepGEMM ----

def get_paged_mqa_logits_metadata(context_lens, block_kv, num_sms):
    """DeepGEMM's schedule: dsv4c's kernels need none (None)."""
    return None


def fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                         clean_logits=False):
    """DeepGEMM's fp8_paged_mqa_logits (docs/ops.md 4): q e4m3 [B, next_n, H, D]; kv_cache [num_blocks,
    block_size, 1, D + 4] uint8; weights f32 [B * next_n, H]; context_lens int32 [B, next_n] (or
    DeepGEMM's older 1-D [B]: row j of entry b then sees ctx[b] - next_n + j + 1 positions);
    block_table int32 [B, max_blocks].  Returns logits f32 [B * next_n, max_context_len] (row stride
    padded to 256 elements), -inf past each row's context whatever clean_logits says."""
    if isinstance(q, (tuple, list)):
        raise NotImplementedError("fp8_paged_mqa_logits: an MXFP4 q (values, scales) needs the MXFP4 indexer cache, "
                                  "which dsv4rt lacks (a 4-bit element type; docs/design.md)")
    q = _raw(q)
    B, nn, H, D = q.shape
    b, name = _find("paged_mqa_logits", (H, D), heads=H, dim=D)
    context_lens = _lens_2d(context_lens, B, nn)
    L = int(max_context_len)
    stride = (L + 255) // 256 * 256
    with _quiet(q):
        logits = _empty(weights, (B * nn, max(stride, 1)), "f32")[:, :L]
        # the extension's own call (Bundle.paged_mqa_logits adds only what this has done)
        b._b.paged_mqa_logits(logits=logits, q=q, cache=_raw(kv_cache), weights=_raw(weights),
                              context_lens=_raw(context_lens), block_table=_raw(block_table), kernel=name,
                              stream=None)
    return logits


def fp8_paged_mqa_logits_topk(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                              topk, out=None):
    """fp8_paged_mqa_logits's arguments and the K wanted, in one op whose logits are never written
    (dsv4c's paged_mqa_logits_topk, docs/ops.md 4): returns out int32 [B * next_n, topk], each row's
    topk positions of the largest logits below min(context, max_context_len) in no order, rows with
    context <= topk as 0..ctx-1 then -1 -- what torch.topk over fp8_paged_mqa_logits' rows would give
    (up to its ties), and the sparse decode's compressed list as it reads it."""
    q = _raw(q)
    B, nn, H, D = q.shape
    b, _ = _find("paged_mqa_logits_topk", (H, D, int(topk)), heads=H, dim=D, topk=int(topk))
    context_lens = _lens_2d(context_lens, B, nn)
    with _quiet(q):
        if out is None:
            out = _empty(weights, (B * nn, int(topk)), "i32")
        # unnamed with k: the runtime's rule among the bundle's kernels of that K
        b._b.paged_mqa_logits_topk(out=_raw(out), q=q, cache=_raw(kv_cache), weights=_raw(weights),
                                   context_lens=_raw(context_lens), block_table=_raw(block_table),
                                   row_len=int(max_context_len), k=int(topk), stream=None)
    return out


def _lens_2d(context_lens, B, nn):
    """DeepGEMM's context lengths as [B, next_n]: its older 1-D [B] composed (row j of entry b sees
    ctx[b] - next_n + j + 1 positions)."""
    if context_lens.ndim == 1:  # the older semantics, composed into the 2-D lengths
        if nn == 1:
            context_lens = _flat(context_lens, B, 1)
        else:
            if _is_numpy(context_lens):
                import numpy as np

                j = np.arange(nn, dtype=np.int32)
                context_lens = np.maximum(context_lens[:, None] - nn + 1 + j[None, :], 0).astype(np.int32)
            else:
                import torch

                j = torch.arange(nn, dtype=torch.int32, device=context_lens.device)
                context_lens = (context_lens[:, None] - nn + 1 + j[None, :]).clamp_min(0).to(torch.int32)
    return context_lens


def fp8_fp4_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                             clean_logits=False, *args, **kwargs):
    """DeepGEMM's newer name; the FP8 path only (an MXFP4 q raises NotImplementedError)."""
    return fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                                clean_logits)
