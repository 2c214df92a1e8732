#!/usr/bin/env python3
"""Host overhead of one sparse decode call through the dsv4c Python module, beside the same call in C.

    PYTHONPATH=build/python python3 bench/bench_python_overhead.py [KERNELS_DIR] [--iters N] [--backend cuda|opencl]

For each shape (V4-Flash-like: H 64, 128 SWA + 512 compressed indices; T 1
and T 8) it times, in host microseconds a call:

  C loop        dsv4rt_sparse_decode called in a C loop inside the extension
                (Bundle._bench_c_loop: the arguments taken once): the runtime's
                own validation and launch, the floor;
  extension     the extension method called directly (dsv4c._dsv4c.Bundle.
                sparse_decode with keywords): argument parsing, DLPack, checks;
  Bundle        dsv4c.Bundle.sparse_decode (the Python layer on top), with
                stream= given;
  Bundle cur    the same without stream=: torch's current stream looked up;
  prepared      a dsv4c.Prepared launched (Bundle.prepare: the arguments
                read and checked once; each launch looks up torch's current
                stream and makes the runtime's call);
  compat        dsv4c.compat.flash_mla_with_kvcache (FlashMLA's signature:
                reshapes, lengths, torch's current stream);

and the device time a call (CUDA events around the same loop), so that the
host figure can be read against it: a call whose host time exceeds its
device time leaves the GPU idle.  Launches are issued in chunks of 100 with
a synchronisation between chunks (not timed), so the launch queue never
fills and blocks the host.  Needs PyTorch and a CUDA device (tensors are
torch tensors); --backend opencl runs the same with NumPy on OpenCL as a
smoke test of the script (the module's figures then include its host to
device copies, the C loop's do not).
"""

import argparse
import os
import statistics
import sys
import time

import dsv4c
from dsv4c import compat

CHUNK = 100


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kernels", nargs="?", default=os.environ.get("DSV4C_KERNELS", "build/kernels"))
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--backend", default="cuda", choices=("cuda", "opencl"))
    ap.add_argument("--kernel", default=None, help="a sparse_decode kernel name (default: the runtime's choice)")
    a = ap.parse_args()
    cuda = a.backend == "cuda"
    if cuda:
        try:
            import torch
        except ImportError:
            print("bench_python_overhead: skipped (needs PyTorch for CUDA tensors)")
            return 0
        if not torch.cuda.is_available():
            print("bench_python_overhead: skipped (no CUDA device)")
            return 0
    try:
        ctx = dsv4c.Context(a.backend)
    except dsv4c.Error as e:
        print("bench_python_overhead: skipped (%s)" % e)
        return 0
    spec = "sparse_decode.dsv4b" if os.path.exists(os.path.join(a.kernels, "sparse_decode.dsv4b")) else "decode.dsv4b"
    b = ctx.open_bundle(os.path.join(a.kernels, spec))
    compat.configure(b)
    global CHUNK
    if not cuda:
        CHUNK = 5
    iters = max(CHUNK, a.iters // CHUNK * CHUNK) if cuda else 10
    print("device: %s; bundle %s; %d calls a figure (median of 5 runs)" % (ctx.device_name, spec, iters))
    print("%-24s %7s %9s %7s %10s %8s %7s %7s %10s %12s" % (
        "shape", "C loop", "extension", "Bundle", "Bundle cur", "prepared", "compat", "device", "Bundle - C",
        "prepared - C"))
    for T, H, topk, xtopk in ((1, 64, 128, 512), (8, 64, 128, 512), (8, 128, 128, 1024)):
        r = run_shape(ctx, b, cuda, T, H, topk, xtopk, iters, a.kernel)
        print("T %-2d H %-3d %4d + %-4d  %7.2f %9.2f %7.2f %10.2f %8.2f %7.2f %7s %10.2f %12.2f" % (
            T, H, topk, xtopk, r["c"], r["ext"], r["bundle"], r["bundle_cur"], r["prepared"], r["compat"],
            "%.2f" % r["device"] if r["device"] is not None else "-", r["bundle"] - r["c"], r["prepared"] - r["c"]))
    print("(host microseconds a call; device: microseconds a call on the GPU, CUDA events)")
    return 0


def inputs(cuda, T, H, topk, xtopk):
    """A V4 decode step's arguments: SWA cache (blocks of 64) and compressed cache (blocks of 64)."""
    nb, xnb, bs = 64, 256, 64
    S = bs * 584 + 64
    if cuda:
        import torch

        dev = "cuda"
        g = torch.Generator(device=dev).manual_seed(1)
        mk = lambda nbk: torch.randint(0, 120, (nbk, S), generator=g, device=dev, dtype=torch.uint8)
        cache, xcache = mk(nb), mk(xnb)
        view = lambda c: c.as_strided((c.shape[0], bs, 1, 584), (S, 584, 584, 1))
        q = torch.randn(T, H, 512, generator=g, device=dev).bfloat16()
        idx = torch.randint(0, nb * bs, (T, topk), generator=g, device=dev, dtype=torch.int32)
        xidx = torch.randint(0, xnb * bs, (T, xtopk), generator=g, device=dev, dtype=torch.int32)
        lens = torch.full((T,), topk, dtype=torch.int32, device=dev)
        xlens = torch.full((T,), xtopk, dtype=torch.int32, device=dev)
        sink = torch.zeros(H, device=dev)
        out = torch.empty(T, H, 512, dtype=torch.bfloat16, device=dev)
        lse = torch.empty(T, H, device=dev)
    else:
        import numpy as np

        rng = np.random.default_rng(1)
        mk = lambda nbk: rng.integers(0, 120, size=(nbk, S)).astype(np.uint8)
        cache, xcache = mk(nb), mk(xnb)
        view = lambda c: np.lib.stride_tricks.as_strided(c, (c.shape[0], bs, 1, 584), (S, 584, 584, 1))
        q = rng.integers(0, 0x3F80, size=(T, H, 512)).astype(np.uint16)
        idx = rng.integers(0, nb * bs, size=(T, topk)).astype(np.int32)
        xidx = rng.integers(0, xnb * bs, size=(T, xtopk)).astype(np.int32)
        lens = np.full(T, topk, np.int32)
        xlens = np.full(T, xtopk, np.int32)
        sink = np.zeros(H, np.float32)
        out = np.empty((T, H, 512), np.uint16)
        lse = np.empty((T, H), np.float32)
    return dict(out=out, lse=lse, q=q, cache=view(cache), indices=idx, lens=lens, softmax_scale=512 ** -0.5,
                extra_cache=view(xcache), extra_indices=xidx, extra_lens=xlens, attn_sink=sink)


def timed(fn, iters, sync):
    """Host seconds a call of fn(), issued in chunks with an untimed sync between them."""
    total = 0.0
    for _ in range(iters // CHUNK):
        t0 = time.perf_counter()
        for _ in range(CHUNK):
            fn()
        total += time.perf_counter() - t0
        sync()
    return total / (iters // CHUNK * CHUNK)


def run_shape(ctx, b, cuda, T, H, topk, xtopk, iters, kernel):
    kw = inputs(cuda, T, H, topk, xtopk)
    kw["kernel"] = kernel
    kw["cache"] = dsv4c._raw(kw["cache"])
    pos = {k: kw[k] for k in ("q", "cache", "indices", "lens")}
    named = {k: v for k, v in kw.items() if k not in pos}
    raw = b._b
    sync = ctx.synchronize
    if cuda:
        import torch

        sync = torch.cuda.synchronize
        stream = torch.cuda.current_stream().cuda_stream
        kw["stream"] = named["stream"] = stream
    cur = {k: v for k, v in named.items() if k != "stream"}
    prepared = b.prepare("sparse_decode", pos["q"], pos["cache"], pos["indices"], pos["lens"], **cur)
    q4 = kw["q"].reshape(T, 1, H, 512)
    idx4 = kw["indices"].reshape(T, 1, topk)
    xidx4 = kw["extra_indices"].reshape(T, 1, xtopk)
    meta, _ = compat.get_mla_metadata()
    calls = {
        "ext": lambda: raw.sparse_decode(**kw),
        "bundle": lambda: b.sparse_decode(pos["q"], pos["cache"], pos["indices"], pos["lens"], **named),
        "bundle_cur": lambda: b.sparse_decode(pos["q"], pos["cache"], pos["indices"], pos["lens"], **cur),
        "prepared": prepared,
        "compat": lambda: compat.flash_mla_with_kvcache(
            q4, kw["cache"], None, None, 512, meta, softmax_scale=kw["softmax_scale"], is_fp8_kvcache=True,
            indices=idx4, attn_sink=kw["attn_sink"], extra_k_cache=kw["extra_cache"],
            extra_indices_in_kvcache=xidx4, topk_length=kw["lens"], extra_topk_length=kw["extra_lens"]),
    }
    for f in calls.values():  # warm up: kernels loaded, work space grown
        f()
    sync()
    res = {}
    reps = 5 if cuda else 1
    res["c"] = 1e6 * statistics.median(
        sum(b._bench_c_loop("sparse_decode", CHUNK, **kw) for _ in range(iters // CHUNK)) / (iters // CHUNK)
        for _ in range(reps))
    for name, f in calls.items():
        res[name] = 1e6 * statistics.median(timed(f, iters, sync) for _ in range(reps))
    res["device"] = None
    if cuda:
        import torch

        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        sync()
        e0.record()  # the C loop issues faster than the GPU runs: the events time the GPU
        b._bench_c_loop("sparse_decode", CHUNK, **kw)
        e1.record()
        e1.synchronize()
        res["device"] = 1e3 * e0.elapsed_time(e1) / CHUNK
    return res


if __name__ == "__main__":
    sys.exit(main())
