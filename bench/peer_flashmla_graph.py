#!/usr/bin/env python3
"""A decode step where serving engines measure it: FlashMLA's op and dsv4c's drop-in on FlashMLA's own tensors.

On the GPU machine, after ../shared/peers/flashmla/build.sh (FlashMLA built under /tmp/FlashMLA):

    DSV4C_BUNDLES=decode.dsv4b python3 peer_flashmla_graph.py /tmp/FlashMLA [--shapes pro|flash|all]

For each shape FlashMLA's test library draws the inputs (lib.generate_testcase_for_decode: q and the index
lists strided views of wider tensors, SWA list 128 in 256-token blocks plus a compressed list of 512 (V4-Flash,
H 64) or 1024 (V4-Pro, H 128) entries in 64-token blocks, topk lengths drawn) and both implementations are
called through its lib.run_flash_mla_decode on those same tensors, FlashMLA's op and then
dsv4c.compat.flash_mla_with_kvcache put in its place.  Columns, all from this one process on this card:

  host us      host time of one call issued back to back (chunks of 50, synchronised between chunks, untimed)
  graph us     one call captured in a CUDA graph, replayed 200 times back to back: device time a replay
  kernel us    the kernels alone by FlashMLA's own timer (kernelkit.bench_kineto, L2 flushed before each run):
               first kernel's start to the last one's end
  ratio        FlashMLA's graph us / ours (above 1: ours faster in a graph)

Each dsv4c output is held to FlashMLA's own check (kk.check_is_allclose, its tests' tolerances) against its
reference.  T = b * s_q for s_q 1 and 2.
"""
import argparse
import os
import sys
import types

ap = argparse.ArgumentParser()
ap.add_argument("flashmla")
ap.add_argument("--shapes", default="all", choices=("pro", "flash", "all"))
ap.add_argument("--tokens", default="1,2,4,8,16,32,64,128")
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

ours = types.SimpleNamespace(flash_mla_with_kvcache=compat.flash_mla_with_kvcache,
                             get_mla_metadata=compat.get_mla_metadata)


models = [("V4-Flash", 64, 512), ("V4-Pro", 128, 1024)]
if args.shapes != "all":
    models = [m for m in models if m[0].lower().endswith(args.shapes)]
print(f"{'shape':28s} {'FlashMLA host':>13s} {'dsv4c host':>10s} {'FlashMLA graph':>14s} {'dsv4c graph':>11s} "
      f"{'ratio':>6s} {'FlashMLA kern':>13s} {'dsv4c kern':>10s}  dsv4c vs FlashMLA's reference", flush=True)
ratios = []
for model, h, xk in models:
    for T in (int(x) for x in args.tokens.split(",")):
        for sq in (1, 2):
            if T % sq:
                continue
            b = T // sq
            p = R(b, h, sq, 1, 16384, True, topk=128, d_qk=512, extra_s_k=16384, extra_topk=xk, block_size=256,
                  extra_block_size=64, have_topk_length=True, have_extra_topk_length=True, check_correctness=True,
                  num_runs=30, seed=T * 10 + sq).to_test_param()
            torch.cuda.empty_cache()
            t = lib.generate_testcase_for_decode(p)
            row = {}
            for who, mod in (("FlashMLA", flash_mla), ("dsv4c", ours)):
                lib.flash_mla = mod
                sched, _ = mod.get_mla_metadata()

                def run():
                    return lib.run_flash_mla_decode(p, t, sched, None)

                out, lse = run()
                torch.cuda.synchronize()
                want = ("flash_fwd", "mla_combine") if who == "FlashMLA" else ("decode",)
                row[who] = dict(host=graph_timing.host_us(run, 6, 50), kern=graph_timing.kineto_us(kk, run, want))
                row[who]["graph"], g, (gout, glse) = graph_timing.graph_us(run, 200, 10)
                same = torch.equal(gout.view(torch.int16), out.view(torch.int16))
                row[who]["ok"] = same
                if who == "dsv4c":
                    o_ref, l_ref = ref.ref_sparse_attn_decode(p, t)
                    row[who]["ok"] = same and graph_timing.flashmla_ok(kk, out, lse, o_ref, l_ref)
                del g
            lib.flash_mla = flash_mla
            f, o = row["FlashMLA"], row["dsv4c"]
            r = f["graph"] / o["graph"]
            ratios.append(r)
            label = f"{model} T {T} (b {b} x s_q {sq})"
            print(f"{label:28s} {f['host']:13.1f} {o['host']:10.1f} {f['graph']:14.2f} {o['graph']:11.2f} "
                  f"{r:6.2f} {f['kern']:13.2f} {o['kern']:10.2f}  {'pass' if o['ok'] else 'FAIL'}"
                  f"{'' if f['ok'] else ' (FlashMLA replay differs)'}", flush=True)
            del t
if ratios:
    import math

    print(f"graph-replay ratio FlashMLA / dsv4c: min {min(ratios):.2f}, geomean "
          f"{math.exp(sum(math.log(x) for x in ratios) / len(ratios)):.2f}, max {max(ratios):.2f} "
          f"over {len(ratios)} shapes", flush=True)
