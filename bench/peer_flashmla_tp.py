#!/usr/bin/env python3
"""The decode at tensor-parallel head counts (issue 40): FlashMLA as engines run it, heads padded to 64, beside
dsv4c given only the GPU's heads, on FlashMLA's own generated test tensors with FlashMLA's timer.

On the GPU machine, after ../shared/peers/flashmla/build.sh (FlashMLA built under /tmp/FlashMLA):

    DSV4C_BUNDLES=decode.dsv4b python3 peer_flashmla_tp.py /tmp/FlashMLA [--tokens 8,128,512] [--heads 8,16]

For each model (V4-Flash: 512 compressed entries, V4-Pro: 1024; SWA 128 in 256-token blocks, s_q 2) and T,
FlashMLA's test library draws a 64-head case (lib.generate_testcase_for_decode); FlashMLA runs it whole (its
sm90 sparse decode takes only 64 or 128 heads: an engine pads its 8-16 heads a GPU to 64 and drops the rest),
and dsv4c.compat.flash_mla_with_kvcache runs the first H heads of the same q and sink (the same tensors, sliced
views), both through FlashMLA's lib.run_flash_mla_decode and both timed by its kernelkit.bench_kineto (L2
flushed before each run; first kernel's start to the last one's end).  dsv4c's outputs are held to FlashMLA's
own check against the first H heads of its reference.  The floor is the shape's KV bytes (584 a valid index)
read once at a device-to-device copy's bandwidth measured in this process.
"""
import argparse
import copy
import os
import sys

ap = argparse.ArgumentParser()
ap.add_argument("flashmla")
ap.add_argument("--tokens", default="8,128,512")
ap.add_argument("--heads", default="8,16")
args = ap.parse_args()
sys.path.insert(0, os.path.join(args.flashmla, "tests"))
sys.path.insert(0, args.flashmla)

import torch  # noqa: E402
import kernelkit as kk  # noqa: E402
import lib  # noqa: E402
import ref  # noqa: E402
import flash_mla  # noqa: E402
from lib import RawTestParamForDecode as R  # noqa: E402

import dsv4c.compat as compat  # noqa: E402
import graph_timing  # noqa: E402

torch.set_default_dtype(torch.bfloat16)
torch.set_default_device("cuda")
torch.cuda.set_device(0)


def copy_gbps():
    a = torch.empty(1 << 28, dtype=torch.uint8)
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    e0.record()
    for _ in range(20):
        b.copy_(a)
    e1.record()
    torch.cuda.synchronize()
    return 2 * a.numel() * 20 / (e0.elapsed_time(e1) * 1e-3) / 1e9


bw = copy_gbps()
heads = [int(x) for x in args.heads.split(",")]
print(f"device-to-device copy {bw:.0f} GB/s (this process)")
print(f"{'shape':22s} {'FlashMLA H 64 us':>16s} " + " ".join(f"{'dsv4c H %d us' % h:>13s} {'x FM':>5s}" for h in heads)
      + f" {'floor us':>9s}  dsv4c vs FlashMLA's reference", flush=True)
for model, xk in (("V4-Flash", 512), ("V4-Pro", 1024)):
    for T in (int(x) for x in args.tokens.split(",")):
        sq, b = 2, T // 2
        p = R(b, 64, sq, 1, 16384, True, topk=128, d_qk=512, extra_s_k=16384, extra_topk=xk, block_size=256,
              extra_block_size=64, have_topk_length=True, have_extra_topk_length=True, check_correctness=True,
              num_runs=30, seed=T * 7 + xk).to_test_param()
        torch.cuda.empty_cache()
        t = lib.generate_testcase_for_decode(p)
        lib.flash_mla = flash_mla
        sched, _ = flash_mla.get_mla_metadata()
        fm = graph_timing.kineto_us(kk, lambda: lib.run_flash_mla_decode(p, t, sched, None),
                                    ("flash_fwd", "mla_combine"))
        o_ref, l_ref = ref.ref_sparse_attn_decode(p, t)
        cells, oks = [], []
        for h in heads:
            th = copy.copy(t)
            th.q = t.q[:, :, :h]
            th.attn_sink = t.attn_sink[:h] if t.attn_sink is not None else None
            lib.flash_mla = compat
            csched, _ = compat.get_mla_metadata()

            def run():
                return lib.run_flash_mla_decode(p, th, csched, None)

            out, lse = run()
            torch.cuda.synchronize()
            us = graph_timing.kineto_us(kk, run, ("decode",))
            ok = graph_timing.flashmla_ok(kk, out, lse, o_ref[:, :, :h], l_ref[:, :h])
            cells.append(f"{us:13.1f} {fm / us:5.2f}")
            oks.append(ok)
        lib.flash_mla = flash_mla
        # the KV bytes: every valid index of both lists, 584 bytes a row, read once
        n_main = int(t.kv_scope.topk_length.sum().item()) if t.kv_scope.topk_length is not None else T * 128
        xs = t.extra_kv_scope
        n_extra = int(xs.topk_length.sum().item()) if xs is not None and xs.topk_length is not None else T * xk
        floor = (n_main + n_extra) * 584 / (bw * 1e9) * 1e6
        label = f"{model} T {T} (b {b} x 2)"
        print(f"{label:22s} {fm:16.1f} " + " ".join(cells) + f" {floor:9.1f}  "
              + ("pass" if all(oks) else "FAIL"), flush=True)
        del t, o_ref, l_ref
