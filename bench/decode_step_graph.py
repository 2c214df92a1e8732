#!/usr/bin/env python3
"""One DeepSeek-V4 attention decode step (a C4 layer) in a CUDA graph: dsv4c's against the same step built
from the peers, same process, same card, same inputs.

On the GPU machine, after ../shared/peers/flashmla/build.sh and ../shared/peers/deepgemm/build.sh:

    PYTHONPATH=python:/tmp/FlashMLA:/tmp/DeepGEMM python3 decode_step_graph.py KERNELS_DIR [--tokens 1,2,...]

A step, for T decode tokens (one a request, s_q 1), as docs/ops.md section 0 lays a layer out:

  1. q-norm + RoPE of q, RoPE + FP8 quant-insert of the token's KV into the SWA cache
     dsv4c: decode.kv_insert (one fused kernel)      peers: torch operations (no peer kernel is at hand)
  2. the indexer's key insert (RoPE, FP8 with a power-of-two scale) into the indexer cache
     dsv4c: kv_insert_indexer                       peers: torch operations
  3. the indexer's logits over the compressed entries
     dsv4c: compat.fp8_paged_mqa_logits             peers: DeepGEMM's fp8_paged_mqa_logits (+ its schedule)
  4. the top index_topk of them, mapped to compressed-cache slots
     dsv4c: indexer.topk, then torch to map         peers: torch.topk, then the same mapping
  5. sparse MLA decode over the SWA window and the chosen compressed entries, one softmax with the sink
     dsv4c: compat.flash_mla_with_kvcache           peers: FlashMLA's flash_mla_with_kvcache

Both steps start from the same caches and inputs; each is captured once (after a warm-up call) and replayed
100 times back to back between CUDA events.  The two steps' results are held to each other: the caches
they wrote byte for byte (both follow vLLM's quantizer), q_out within vLLM's tolerance, the logits by
DeepGEMM's calc_diff, the top-k sets equal, and out / lse by FlashMLA's rule.  Those are two independent
implementations agreeing, not the C reference (runtime/ref), which the Python package does not expose.
"""
import argparse
import os
import sys

import torch

ap = argparse.ArgumentParser()
ap.add_argument("kernels")
ap.add_argument("--tokens", default="1,2,4,8,16,32,64,128")
ap.add_argument("--models", default="flash,pro")
args = ap.parse_args()

import dsv4c  # noqa: E402
import graph_timing  # noqa: E402
from dsv4c import compat  # noqa: E402

try:
    import flash_mla  # noqa: E402
except ImportError:
    flash_mla = None
try:
    import deep_gemm  # noqa: E402
except ImportError:
    deep_gemm = None

DEV = "cuda"
BS, SWA_PAGE, IDX_PAGE, W, C, EPS = 64, 37440, 8640, 128, 4, 1e-6
MODELS = {"flash": ("V4-Flash", 64, 512), "pro": ("V4-Pro", 128, 1024)}  # name, heads, index_topk


def rope_pairs(x, cos, sin):
    """GPT-J RoPE in fp32 on x [..., 64] (pairs (2i, 2i+1)), cos / sin [..., 32]."""
    e, o = x[..., 0::2], x[..., 1::2]
    r = torch.empty_like(x)
    r[..., 0::2] = e * cos - o * sin
    r[..., 1::2] = e * sin + o * cos
    return r


def pow2_scale(amax):
    """The exponent e of 2^ceil(log2(max(amax, 1e-4) / 448)) (docs/ops.md section 1)."""
    return torch.ceil(torch.log2(amax.clamp_min(1e-4) / 448))


def e4m3(x):
    return x.clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8)


def torch_swa_insert(cache, kv, slots, pos, cos_sin):
    """docs/ops.md section 5's KV branch for fp8_ds_mla_v4, in torch: RoPE dims 448..511, bf16, seven UE8M0
    blocks of 64, the RoPE dims stored as bf16."""
    x = kv.float()
    cs = cos_sin[pos]
    x = torch.cat([x[:, :448], rope_pairs(x[:, 448:], cs[:, :32], cs[:, 32:])], 1).bfloat16().float()
    blocks = x[:, :448].view(-1, 7, 64)
    e = pow2_scale(blocks.abs().amax(-1))
    codes = e4m3(blocks * torch.exp2(-e)[..., None]).view(-1, 448)
    rope = x[:, 448:].bfloat16().view(torch.uint8)
    sc = torch.zeros(len(slots), 8, dtype=torch.uint8, device=DEV)
    sc[:, :7] = (e + 127).clamp(0, 255).to(torch.uint8)
    flat = cache.view(-1)
    blk, row = slots // BS, slots % BS
    data = (blk * SWA_PAGE + row * 576)[:, None] + torch.arange(576, device=DEV)
    flat[data] = torch.cat([codes, rope], 1)
    flat[(blk * SWA_PAGE + 576 * BS + row * 8)[:, None] + torch.arange(8, device=DEV)] = sc


def torch_q(q, pos, cos_sin):
    """The q branch: RMSNorm without weight, RoPE dims 448..511, one rounding to bf16."""
    x = q.float()
    y = x * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + EPS).float()
    cs = cos_sin[pos][:, None]
    return torch.cat([y[..., :448], rope_pairs(y[..., 448:], cs[..., :32], cs[..., 32:])], -1).bfloat16()


def torch_index_insert(cache, key, slots, pos, cos_sin):
    """The indexer writer (kv_insert_indexer): RoPE dims 64..127 at pos, bf16, one power-of-two fp32 scale."""
    x = key.float()
    cs = cos_sin[pos]
    x = torch.cat([x[:, :64], rope_pairs(x[:, 64:], cs[:, :32], cs[:, 32:])], 1).bfloat16().float()
    e = pow2_scale(x.abs().amax(-1))
    codes = e4m3(x * torch.exp2(-e)[:, None])
    flat = cache.view(-1)
    blk, row = slots // BS, slots % BS
    flat[(blk * IDX_PAGE + row * 128)[:, None] + torch.arange(128, device=DEV)] = codes
    flat[(blk * IDX_PAGE + 128 * BS + row * 4)[:, None] + torch.arange(4, device=DEV)] = \
        torch.exp2(e).float().view(-1, 1).view(torch.uint8).view(-1, 4)


def topk_valid(lg, local, ctx, K):
    """Whether each row of local [T, K] is a top-K of lg[r, :ctx[r]]: positions 0..ctx-1 where ctx <= K, else K
    distinct positions below ctx whose least logit is >= the greatest one left out."""
    T, L = lg.shape
    n = ctx.view(-1).long()
    chosen = torch.zeros(T, L + 1, dtype=torch.bool, device=lg.device)
    chosen.scatter_(1, torch.where(local >= 0, local.long(), L), True)
    chosen = chosen[:, :L]
    inside = torch.arange(L, device=lg.device)[None] < n[:, None]
    if bool((chosen & ~inside).any()) or not bool((chosen.sum(1) == torch.minimum(n, torch.tensor(K))).all()):
        return False
    lo = torch.where(chosen, lg, float("inf")).amin(1)
    hi = torch.where(inside & ~chosen, lg, float("-inf")).amax(1)
    return bool((lo >= hi).all())


def main():
    ctx = dsv4c.Context("cuda")
    decode, indexer, insert = (ctx.open_bundle(os.path.join(args.kernels, n + ".dsv4b"))
                               for n in ("decode", "indexer", "insert"))
    compat.configure(decode, indexer, insert)
    print(f"device {torch.cuda.get_device_name()}; FlashMLA {'yes' if flash_mla else 'MISSING'}, DeepGEMM "
          f"{'yes' if deep_gemm else 'MISSING (the peer step is not timed)'}", flush=True)
    print(f"{'shape':20s} {'dsv4c us':>9s} {'peers us':>9s} {'peers/dsv4c':>11s}  agreement", flush=True)
    ang_inv = lambda n: 160000.0 ** (-torch.arange(n // 2, device=DEV, dtype=torch.float64) * 2 / n)
    ang = torch.arange(65536, device=DEV, dtype=torch.float64)[:, None] * ang_inv(64)[None]
    cos_sin = torch.cat([ang.cos(), ang.sin()], 1).float().contiguous()
    host = []
    for m in args.models.split(","):
        name, H, K = MODELS[m]
        for T in (int(x) for x in args.tokens.split(",")):
            g = torch.Generator(device=DEV).manual_seed(T * 7 + H)
            seq = torch.randint(4 * K // 2, 16384, (T,), generator=g, device=DEV)  # each request's length
            pos = seq - 1
            maxb = 16384 // BS
            nb = T * maxb
            bt = torch.randperm(nb, generator=g, device=DEV).int().view(T, maxb)
            cbt = torch.randperm(T * (maxb // C), generator=g, device=DEV).int().view(T, maxb // C)
            swa = torch.zeros(nb, SWA_PAGE, dtype=torch.uint8, device=DEV)
            comp = torch.zeros(T * maxb // C, SWA_PAGE, dtype=torch.uint8, device=DEV)
            icache = torch.zeros(T * maxb // C, IDX_PAGE, dtype=torch.uint8, device=DEV)

            def slots(table, p):
                return (table.gather(1, (p // BS).long()) * BS + p % BS).long()

            # history, written by dsv4c's plain writers (the same starting caches for both steps)
            for r in range(T):
                p = torch.arange(max(0, int(pos[r]) - W + 1), int(pos[r]), device=DEV)
                compat.quantize_and_insert_k_cache(torch.randn(len(p), 512, generator=g, device=DEV).bfloat16(),
                                                   swa, slots(bt[r:r + 1], p[None])[0], block_size=BS)
                n = int(seq[r]) // C
                e = torch.arange(n, device=DEV)
                s = slots(cbt[r:r + 1], e[None])[0]
                compat.quantize_and_insert_k_cache(torch.randn(n, 512, generator=g, device=DEV).bfloat16() / 4,
                                                   comp, s, block_size=BS)
                insert.kv_insert(icache, torch.randn(n, 128, generator=g, device=DEV).bfloat16(), s, e * C,
                                 cos_sin, block_size=BS, kernel="kv_insert_indexer")
            # this step's inputs (an engine writes them in place before each replay)
            q = torch.randn(T, H, 512, generator=g, device=DEV).bfloat16()
            kv = torch.randn(T, 512, generator=g, device=DEV).bfloat16()
            ikey = torch.randn(T, 128, generator=g, device=DEV).bfloat16()
            iq = torch.randn(T, 1, 64, 128, generator=g, device=DEV).clamp(-4, 4).to(torch.float8_e4m3fn)
            iw = torch.randn(T, 64, generator=g, device=DEV) / 64
            sink = torch.randn(H, generator=g, device=DEV)
            swa_slot = slots(bt, pos[:, None])[:, 0]
            ient = ((pos + 1) // C - 1).clamp_min(0)  # the compressed entry this token completes (every step here)
            islot = slots(cbt, ient[:, None])[:, 0]
            ctx_lens = ((pos + 1) // C).int().view(T, 1)
            L = 16384 // C
            j = torch.arange(W, device=DEV)[None]
            swa_lens = torch.minimum(pos + 1, torch.tensor(W, device=DEV)).int()
            widx = torch.where(j < swa_lens[:, None], slots(bt, ((pos - W + 1).clamp_min(0))[:, None] + j), -1).int()
            view = lambda c: c.as_strided((c.shape[0], BS, 1, 584), (SWA_PAGE, 584, 584, 1))
            iview = lambda c: c.as_strided((c.shape[0], BS, 1, 132), (IDX_PAGE, 132, 132, 1))
            state = dict(swa=swa.clone(), icache=icache.clone())
            meta, _ = compat.get_mla_metadata()
            q_out = torch.empty_like(q)

            def ours():
                decode.kv_insert(state["swa"], kv, swa_slot, pos, cos_sin, q, q_out=q_out, block_size=BS)
                insert.kv_insert(state["icache"], ikey, islot, ient * C, cos_sin, block_size=BS,
                                 kernel="kv_insert_indexer")
                lg = compat.fp8_paged_mqa_logits(iq, iview(state["icache"]), iw, ctx_lens, cbt, None, L, False)
                local = indexer.topk(lg, ctx_lens, kernel="topk_%d" % K)
                xidx = torch.where(local >= 0, slots(cbt, local.clamp_min(0)), -1).int()
                xlens = (local >= 0).sum(1).int()
                out, lse = compat.flash_mla_with_kvcache(
                    q_out.unsqueeze(1), view(state["swa"]), None, None, 512, meta, softmax_scale=512 ** -0.5,
                    is_fp8_kvcache=True, indices=widx.unsqueeze(1), attn_sink=sink, extra_k_cache=view(comp),
                    extra_indices_in_kvcache=xidx.unsqueeze(1), topk_length=swa_lens, extra_topk_length=xlens)
                return out, lse, lg, local

            t_ours, g_ours, r_ours = graph_timing.graph_us(ours, 100, 5)
            got = dict(swa=state["swa"].clone(), icache=state["icache"].clone(), q_out=q_out.clone())
            line = f"{name} T {T}"
            if flash_mla is None or deep_gemm is None:
                print(f"{line:20s} {t_ours:9.1f} {'-':>9s} {'-':>11s}  (no peer step)", flush=True)
                continue
            pstate = dict(swa=swa.clone(), icache=icache.clone())
            past = torch.arange(L, device=DEV)[None] >= ctx_lens
            sched, _ = flash_mla.get_mla_metadata()
            nsm = deep_gemm.get_num_sms()

            def peers():
                qo = torch_q(q, pos, cos_sin)
                torch_swa_insert(pstate["swa"], kv, swa_slot, pos, cos_sin)
                torch_index_insert(pstate["icache"], ikey, islot, ient * C, cos_sin)
                # as vLLM calls it (2-D lengths, clean_logits False); torch.topk, unlike a length-aware top-k,
                # then needs the positions past each context masked
                dmeta = deep_gemm.get_paged_mqa_logits_metadata(ctx_lens, BS, nsm)
                lg = deep_gemm.fp8_paged_mqa_logits(iq, iview(pstate["icache"]), iw, ctx_lens, cbt, dmeta, L, False)
                lg.masked_fill_(past, float("-inf"))
                vals, local = lg.topk(K, dim=-1)
                local = torch.where(vals > float("-inf"), local, -1).int()
                xidx = torch.where(local >= 0, slots(cbt, local.clamp_min(0)), -1).int()
                xlens = (local >= 0).sum(1).int()
                out, lse = flash_mla.flash_mla_with_kvcache(
                    qo.unsqueeze(1), view(pstate["swa"]), None, None, 512, sched, None, 512 ** -0.5, False, True,
                    widx.unsqueeze(1), sink, view(comp), xidx.unsqueeze(1), swa_lens, xlens)
                return out, lse, lg, local, qo

            t_peer, g_peer, r_peer = graph_timing.graph_us(peers, 100, 5)
            # agreement (the graphs' last replays; both wrote the same slots with the same inputs each replay)
            o1, l1, lg1, k1, = r_ours
            o2, l2, lg2, k2, qo2 = r_peer
            notes = []
            notes.append("swa cache %s" % ("equal" if torch.equal(got["swa"], pstate["swa"]) else
                                           "DIFFERS in %d bytes" % int((got["swa"] != pstate["swa"]).sum())))
            notes.append("indexer cache %s" % ("equal" if torch.equal(got["icache"], pstate["icache"]) else
                                               "DIFFERS in %d bytes" % int((got["icache"] != pstate["icache"]).sum())))
            dq = (got["q_out"].float() - qo2.float()).abs() - (1e-2 + 1e-2 * qo2.float().abs())
            notes.append("q_out %s" % ("ok" if bool((dq <= 0).all()) else "OUT of vLLM's tolerance"))
            valid = torch.arange(L, device=DEV)[None] < ctx_lens
            x, y = lg1[valid].double(), lg2[valid].double()
            cd = float(1 - 2 * (x * y).sum() / (x * x + y * y).sum())
            notes.append("logits calc_diff %.1e" % cd)
            # top-k: each a valid top-k of its own logits (every chosen logit >= every one left out); the
            # two logit sets differ by rounding, so near-ties at the K-th value may pick different entries
            own = all(topk_valid(lg, kk, ctx_lens, K) for lg, kk in ((lg1, k1), (lg2, k2)))
            srt = lambda k: torch.where(k >= 0, k, L).sort(1).values
            same = (srt(k1) == srt(k2)).all(1)
            notes.append("top-k %s, sets equal in %d of %d rows" % ("each valid on its own logits" if own else
                                                                     "INVALID", int(same.sum()), T))
            o1, o2, l1, l2 = o1[same], o2[same], l1[same], l2[same]
            err = (o1.float() - o2.float()).abs()
            lse_ok = ((l1 - l2).abs() <= 1e-6 + 8.01 / 65536 * l2.abs()) | (torch.isinf(l1) & torch.isinf(l2))
            ok = bool(((err < 1e-3) | (err < 2.01 / 128 * (o2.float().abs() + 1e-6))).all()) and bool(lse_ok.all())
            notes.append("out, lse %s on those rows" % ("within FlashMLA's rule" if ok else "OUTSIDE FlashMLA's rule"))
            print(f"{line:20s} {t_ours:9.1f} {t_peer:9.1f} {t_peer / t_ours:11.2f}  " + "; ".join(notes), flush=True)
            # the host time of the indexer's drop-in beside DeepGEMM's own call, as an engine makes them each
            # step (its schedule, then the logits), same tensors
            ikvp = iview(pstate["icache"])
            dg = lambda: deep_gemm.fp8_paged_mqa_logits(
                iq, ikvp, iw, ctx_lens, cbt, deep_gemm.get_paged_mqa_logits_metadata(ctx_lens, BS, nsm), L, False)
            me = lambda: compat.fp8_paged_mqa_logits(
                iq, ikvp, iw, ctx_lens, cbt, compat.get_paged_mqa_logits_metadata(ctx_lens, BS, nsm), L, False)
            host.append((line, graph_timing.host_us(dg, 5, 40), graph_timing.host_us(me, 5, 40)))
            del g_ours, g_peer, swa, comp, icache, state, pstate
            torch.cuda.empty_cache()
    if host:
        print("host us a call, schedule + logits: DeepGEMM's fp8_paged_mqa_logits / dsv4c.compat's", flush=True)
        for line, a, b in host:
            print(f"  {line:20s} {a:7.1f} {b:7.1f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
