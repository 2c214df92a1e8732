#!/usr/bin/env python3
"""One DeepSeek-V4 decode step of a C4 layer (docs/ops.md section 0) through dsv4c's drop-in entry points.

    PYTHONPATH=build/python python3 python/examples/decode_step.py [KERNELS_DIR]

KERNELS_DIR (default build/kernels) holds decode.dsv4b, indexer.dsv4b and
insert.dsv4b.  For T decode tokens (one per request, V4-Flash shapes: 64
heads, SWA window 128, index_topk 512):

  1. the fused q-norm + RoPE + KV quant-insert writes each token into the SWA
     cache and gives the normalised, rotated q (Bundle.kv_insert, vLLM's
     fused_deepseek_v4_qnorm_rope_kv_rope_quant_insert);
  2. the indexer scores every compressed entry (DeepGEMM's
     fp8_paged_mqa_logits) and keeps the 512 best (Bundle.topk);
  3. sparse MLA decode attends to the SWA window and the chosen compressed
     entries in one softmax with the attention sink (FlashMLA's
     flash_mla_with_kvcache).

The step is captured once in a CUDA graph (after a warm-up call) and
replayed with new inputs written in place, as a serving engine runs it;
each replay is checked against the same step run eagerly (FlashMLA's
rule: the top-k's order, and so the decode's summation order, may differ).
bench/decode_step_graph.py times it beside the same step built from the
peers.

The caches' history is written by vLLM's plain writer
(quantize_and_insert_k_cache) and the indexer writer.  Needs PyTorch and a
CUDA device; skips itself (exit 0) otherwise.
"""

import os
import sys


def main():
    try:
        import torch
    except ImportError:
        print("decode_step: skipped (needs PyTorch)")
        return 0
    if not torch.cuda.is_available():
        print("decode_step: skipped (no CUDA device)")
        return 0
    import dsv4c
    from dsv4c import compat

    kdir = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DSV4C_KERNELS", "build/kernels")
    ctx = dsv4c.Context("cuda")
    decode, indexer, insert = (ctx.open_bundle(os.path.join(kdir, n + ".dsv4b")) for n in ("decode", "indexer",
                                                                                             "insert"))
    compat.configure(decode, indexer, insert)
    dev, g = "cuda", torch.Generator(device="cuda").manual_seed(0)
    T, H, W, K, C = 4, 64, 128, 512, 4  # tokens, heads, SWA window, index_topk, compress ratio
    seq = torch.tensor([300, 2500, 4000, 9000], device=dev)  # each request's length, this token included
    pos = seq - 1
    bs, S = 64, 37440  # cache blocks: 64 tokens, 37440 bytes (docs/ops.md 1)
    max_blocks = 160
    bt = torch.randperm(T * max_blocks, generator=g, device=dev).int().view(T, max_blocks)  # SWA block table
    cbt = torch.randperm(T * max_blocks, generator=g, device=dev).int().view(T, max_blocks)  # compressed (bs 64)
    swa = torch.zeros(T * max_blocks, S, dtype=torch.uint8, device=dev)
    comp = torch.zeros(T * max_blocks, S, dtype=torch.uint8, device=dev)
    icache = torch.zeros(T * max_blocks, 8640, dtype=torch.uint8, device=dev)  # indexer cache (docs/ops.md 4)
    inv = lambda theta, n: theta ** (-torch.arange(n // 2, device=dev, dtype=torch.float64) * 2 / n)
    ang = torch.arange(16384, device=dev, dtype=torch.float64)[:, None] * inv(160000.0, 64)[None]
    cos_sin = torch.cat([ang.cos(), ang.sin()], 1).float()  # [max_pos, 64]: cos, then sin

    def slots(table, p):  # global slots of positions p (rows of table) in 64-token blocks
        return (table.gather(1, (p // bs).long()) * bs + p % bs).long()

    # history: the SWA window before each token, and every compressed entry (random stand-ins for the
    # compressor's output; vLLM's plain writer quantizes them)
    for r in range(T):
        p = torch.arange(max(0, int(pos[r]) - W + 1), int(pos[r]), device=dev)
        compat.quantize_and_insert_k_cache(torch.randn(len(p), 512, generator=g, device=dev).bfloat16(), swa,
                                           slots(bt[r:r + 1], p[None])[0], block_size=bs)
        n = int(seq[r]) // C
        e = torch.arange(n, device=dev)
        s = slots(cbt[r:r + 1], e[None])[0]
        compat.quantize_and_insert_k_cache(torch.randn(n, 512, generator=g, device=dev).bfloat16() / 4, comp, s,
                                           block_size=bs)
        insert.kv_insert(icache, torch.randn(n, 128, generator=g, device=dev).bfloat16(), s, e * C, cos_sin,
                         block_size=bs, kernel="kv_insert_indexer")

    # This step's inputs live in fixed tensors (a CUDA graph replays the same addresses): an engine writes each
    # step's values into them in place.  The positions, the index lists over the SWA window and the indexer's
    # lengths depend only on the positions.
    q = torch.empty(T, H, 512, device=dev, dtype=torch.bfloat16)
    kv = torch.empty(T, 512, device=dev, dtype=torch.bfloat16)
    iq = torch.empty(T, 1, 64, 128, device=dev, dtype=torch.float8_e4m3fn)
    iw = torch.empty(T, 64, device=dev)
    q_out = torch.empty_like(q)
    sink = torch.randn(H, generator=g, device=dev)
    ctx_lens = (seq // C).int().view(T, 1)
    L = 16384 // C
    ikv = icache.as_strided((icache.shape[0], bs, 1, 132), (8640, 132, 132, 1))
    j = torch.arange(W, device=dev)[None]
    swa_lens = torch.minimum(pos + 1, torch.tensor(W, device=dev)).int()
    widx = torch.where(j < swa_lens[:, None], slots(bt, (pos - W + 1).clamp_min(0)[:, None] + j), -1).int()
    swa_slot = slots(bt, pos[:, None])[:, 0]
    meta, _ = compat.get_mla_metadata()
    view = lambda c: c.as_strided((c.shape[0], bs, 1, 584), (S, 584, 584, 1))

    def step():
        # 1. q-norm + RoPE of q, RoPE + quantize + insert of this token's KV into the SWA cache (one kernel)
        decode.kv_insert(swa, kv, swa_slot, pos, cos_sin, q, q_out=q_out, block_size=bs)
        # 2. the indexer: logits over the compressed entries (ctx = (p + 1) / 4), the top 512, mapped to slots
        logits = compat.fp8_paged_mqa_logits(iq, ikv, iw, ctx_lens, cbt, None, L, False)
        local = indexer.topk(logits, ctx_lens, kernel="topk_512")  # [T, 512] local entries, -1 padded
        xidx = torch.where(local >= 0, slots(cbt, local.clamp_min(0)), -1).int()
        xlens = (local >= 0).sum(1).int()
        # 3. sparse MLA decode over the SWA window (this token included) and the chosen compressed entries
        return compat.flash_mla_with_kvcache(
            q_out.unsqueeze(1), view(swa), None, None, 512, meta, softmax_scale=512 ** -0.5, is_fp8_kvcache=True,
            indices=widx.unsqueeze(1), attn_sink=sink, extra_k_cache=view(comp),
            extra_indices_in_kvcache=xidx.unsqueeze(1), topk_length=swa_lens, extra_topk_length=xlens)

    def new_inputs(k):
        gk = torch.Generator(device=dev).manual_seed(100 + k)
        q.copy_(torch.randn(T, H, 512, generator=gk, device=dev))
        kv.copy_(torch.randn(T, 512, generator=gk, device=dev))
        iq.copy_(torch.randn(T, 1, 64, 128, generator=gk, device=dev).clamp(-4, 4))
        iw.copy_(torch.randn(T, 64, generator=gk, device=dev) / 64)

    # warm up (the first calls choose kernels and make what a capture must not: work space, tensor maps), then
    # capture the whole step once on a side stream, as torch.cuda.graph wants
    new_inputs(0)
    step()
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        out, lse = step()
    # each decode step: new contents in place, one replay; here checked against the same step run eagerly
    for k in range(1, 3):
        new_inputs(k)
        graph.replay()
        torch.cuda.synchronize()
        eo, el = step()
        torch.cuda.synchronize()
        # (the top-k's order is unspecified, so the decode may sum the same entries in another order: held to
        # FlashMLA's rule, not bit for bit)
        err = (out.float() - eo.float()).abs()
        lerr = (lse - el).abs() <= 1e-6 + 8.01 / 65536 * el.abs()
        if not (bool(((err < 1e-3) | (err < 2.01 / 128 * (eo.float().abs() + 1e-6))).all()) and
                bool((lerr | (lse == el)).all())):
            print("decode_step: the graph's replay %d is outside FlashMLA's rule against the eager step" % k)
            return 1
    print("decode step on %s in one CUDA graph: out %s %s, lse %s; |out| mean %.4f, lse mean %.3f; replays match "
          "the eager step; indices per token: %s SWA" % (ctx.device_name, tuple(out.shape), out.dtype,
                                                         tuple(lse.shape), out.float().abs().mean(), lse.mean(),
                                                         swa_lens.tolist()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
