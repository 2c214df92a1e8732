#!/usr/bin/env python3
"""dsv4c's top-k (specs/indexer.lua: topk_512, topk_1024, topk_2048) beside torch.topk, same run, same tensors.

For engines that keep their logits (issue 41 item 4): each row of fp32 logits [rows, L], every position valid
(context_lens = L, so that both compute the same thing), K 512 / 1024 / 2048, L from 8K to 1M.  Each answer is
checked first: the multiset of logits at our K positions equals torch's K values (ties at the K-th value may pick
other positions; the values are what must agree).  Timing: 20 calls captured in a CUDA graph, each side, on the
same inputs in the same process, replayed (device time, no host time), median of 5 replays; torch.topk with
sorted=False, its fastest.  Ours runs as the runtime's rule chooses (split rows where the rows alone leave the GPU
idle); "whole rows" times the one-CTA-a-row form beside it.

usage: PYTHONPATH=python LD_LIBRARY_PATH=lib python3 topk_torch.py KERNELS_DIR [--quick]
"""
import os
import sys

import torch

import dsv4c

KDIR = sys.argv[1] if len(sys.argv) > 1 else "."
QUICK = "--quick" in sys.argv
ROWS = (1, 8, 32, 128)
LENS = (8192, 32768, 131072)
KS = (512, 1024, 2048)


def timed(fn, calls=20, rounds=5):
    """Device microseconds a call: `calls` calls captured in one CUDA graph (no host time), replayed; the
    median of `rounds` replays.  A warm-up call first (it sizes our work space, which no capture may do)."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(rounds):
        e0.record()
        g.replay()
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1) * 1000.0 / calls)
    return sorted(ts)[len(ts) // 2]


def main():
    ctx = dsv4c.Context("cuda")
    b = ctx.open_bundle(os.path.join(KDIR, "indexer.dsv4b"))
    names = {k: "topk_%d" % k for k in KS}
    have = {k for k in KS if any(e["name"] == names[k] and e["runs"] for e in b.kernels())}
    shapes = [(r, n) for r in ROWS for n in LENS] + [(1, 1 << 20)]
    if QUICK:
        shapes = [(1, 8192), (128, 32768), (1, 1 << 20)]
    print("device:", ctx.device_name, "| torch", torch.__version__)
    print("%-6s %-8s %-5s %10s %12s %10s %8s  %s" % ("rows", "L", "K", "dsv4c us", "whole rows", "torch us", "torch/us",
                                                   "values agree"))
    gen = torch.Generator(device="cuda").manual_seed(41)
    for rows, n in shapes:
        logits = torch.randn(rows, n, device="cuda", generator=gen, dtype=torch.float32)
        lens = torch.full((rows,), n, dtype=torch.int32, device="cuda")
        for k in KS:
            if k not in have:
                print("%-6d %-8d %-5d   (no kernel %s in the bundle)" % (rows, n, k, names[k]))
                continue
            out = torch.empty(rows, k, dtype=torch.int32, device="cuda")
            ours = lambda: b.topk(logits, lens, out, kernel=names[k])  # noqa: E731
            whole = lambda: b.topk(logits, lens, out, kernel=names[k], splits=1)  # noqa: E731
            theirs = lambda: torch.topk(logits, k, dim=1, sorted=False)  # noqa: E731
            tv = theirs().values.sort(dim=1).values
            ok = True
            for f in (ours, whole):
                out.fill_(-7)
                f()
                got = torch.gather(logits, 1, out.clamp(min=0).long())
                ok = ok and bool((out >= 0).all()) and torch.equal(got.sort(dim=1).values, tv)
            t_ours, t_whole, t_torch = timed(ours), timed(whole), timed(theirs)
            print("%-6d %-8d %-5d %10.1f %12.1f %10.1f %8.2f  %s" % (rows, n, k, t_ours, t_whole, t_torch,
                                                                     t_torch / t_ours, "yes" if ok else "NO"))
        del logits
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
