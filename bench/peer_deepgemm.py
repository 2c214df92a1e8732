#!/usr/bin/env python3
"""DeepGEMM's fp8_paged_mqa_logits at the shapes bench_indexer times, for the same-run comparison (issue 41).

On the GPU machine, after ../shared/peers/deepgemm/build.sh (DeepGEMM built under /tmp/DeepGEMM; built with
the system's g++, see gpu_run.sh indexer).  It drives DeepGEMM's own code: inputs drawn as its
tests/test_attention.py (test_paged_mqa_logits) draws them, with that test's nested kv_cache_cast_to_fp8 taken
from the test file itself; the output checked against the test's ref_paged_mqa_logits with its calc_diff rule
(below 1e-3 against the bf16 reference, below 5e-6 against the reference on the FP8-rounded inputs), and its
calc_diff printed against our float64 reference on the exact FP8 inputs (exact_diff); the kernel
timed the test's way (bench_kineto, L2 flushed by an 8 GB memset before each call) and the way bench_indexer
times ours (CUDA events around batches of 20 back-to-back calls rotating over 4 input sets, median of 7), with a
1 GiB device-to-device copy timed that same way in this process.  Our code only lists the shapes and prints.

Bytes for "% of copy" are counted as bench_indexer counts them: each request's KV once (132 B a position), each
row's valid logits once (4 B), q (e4m3) and weights once.

usage: python3 peer_deepgemm.py [--dg /tmp/DeepGEMM] [--shapes matrix|B:CTX,...] [--lens test equal]
                                [--next-n 1 2] [--no-check] [--no-kineto]
Each result is one line starting "DG " (gpu_run.sh indexer merges them with bench_indexer's).
"""
import argparse
import ast
import os
import sys
import time
from typing import Tuple

ap = argparse.ArgumentParser()
ap.add_argument("--dg", default="/tmp/DeepGEMM")
ap.add_argument("--shapes", default="matrix")
ap.add_argument("--lens", nargs="+", default=["test", "equal"], choices=["test", "equal"])
ap.add_argument("--next-n", nargs="+", type=int, default=[1, 2])
ap.add_argument("--no-check", action="store_true", help="time only (the second, after-run pass)")
ap.add_argument("--no-kineto", action="store_true")
ap.add_argument("--ours", default="", help="also run dsv4c's kernel (--ours-kernel) from this bundle on the same "
                                          "tensors, through the Python package: same check, kineto and events")
ap.add_argument("--ours-kernel", default="", help="a kernel name; empty: the runtime's rule, which takes the logits' "
                                                 "step (256, 512 or 1024 positions a CTA) by the batch")
args = ap.parse_args()

os.environ.setdefault("DG_JIT_CACHE_DIR", "/tmp/deepgemm_jit_cache")
sys.path.insert(0, os.path.join(args.dg, "tests"))
sys.path.insert(0, args.dg)
import torch  # noqa: E402

torch.cuda.set_device(0)
torch.zeros(1, device="cuda")
import deep_gemm  # noqa: E402
from deep_gemm.testing import bench_kineto, calc_diff  # noqa: E402

H, D, BKV, SETS, BATCH, REPS = 64, 128, 64, 4, 20, 7
NUM_SMS = deep_gemm.get_num_sms()

if args.shapes == "matrix":
    SHAPES = [(b, c) for c in (8192, 32768, 131072) for b in (1, 8, 32, 128)] + [(1, 1 << 20)]
else:
    SHAPES = [tuple(int(x) for x in s.split(":")) for s in args.shapes.split(",")]


def test_helpers():
    """The test's ref_paged_mqa_logits (a module function) and its kv_cache_cast_to_fp8 (nested inside
    test_paged_mqa_logits: taken from the file's syntax tree and compiled as it stands)."""
    path = os.path.join(args.dg, "tests", "test_attention.py")
    tree = ast.parse(open(path).read(), path)
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "kv_cache_cast_to_fp8")
    ns = {"torch": torch, "Tuple": Tuple}
    exec(compile(ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[])), path, "exec"), ns)
    import test_attention
    return test_attention.ref_paged_mqa_logits, ns["kv_cache_cast_to_fp8"]


OURS = None
if args.ours:
    try:
        import dsv4c
        OURS = dsv4c.Context("cuda").open_bundle(args.ours)
    except Exception as e:  # noqa: BLE001 -- the peer's figures stand without ours
        print(f"peer_deepgemm: dsv4c not available here ({e!r}); DeepGEMM alone", flush=True)
ref_paged_mqa_logits, kv_cache_cast_to_fp8 = test_helpers() if not args.no_check else (None, None)


def exact_logits(q_in, kv_in, weights, ctx_nextn, block_table, max_model_len):
    """Our own float64 reference on the exact FP8 inputs (no bf16 rounding of the dequantized K or of each
    head's q.k, which the test's "simulated" reference has): logits[b * next_n + j, t] =
    sum_h weights[., h] relu(q[b, j, h] . k_t * scale_t), for t < ctx_nextn[b, j]; 0 elsewhere."""
    nb = kv_in.shape[0]
    flat = kv_in.view(nb, BKV * (D + 4))
    B, nn = ctx_nextn.shape
    out = torch.zeros((B * nn, max_model_len), device="cuda", dtype=torch.double)
    lens = ctx_nextn.max(dim=1).values.tolist()
    for b in range(B):
        nblk = (lens[b] + BKV - 1) // BKV
        if nblk == 0:
            continue
        blk = flat[block_table[b, :nblk].long()]                                          # uint8 [nblk, 8448]
        v = blk[:, :BKV * D].contiguous().view(torch.float8_e4m3fn).to(torch.double).view(-1, D)
        sc = blk[:, BKV * D:].contiguous().view(torch.float).to(torch.double).view(-1, 1)
        s = torch.einsum("jhd,td->jht", q_in[b].to(torch.double), v * sc).relu()        # [nn, H, T]
        out[b * nn:(b + 1) * nn, :v.shape[0]] = torch.einsum("jht,jh->jt", s, weights[b * nn:(b + 1) * nn].double())
    pos = torch.arange(max_model_len, device="cuda").unsqueeze(0)
    return out.masked_fill(~(pos < ctx_nextn.view(-1, 1)), 0)


def med_batched(fn, n_sets):
    """bench_indexer's timing (bench_common.c bench_time_ms): warm up over the sets, then REPS batches of
    BATCH calls rotating over the sets, each batch between two events; median of the per-call times."""
    for i in range(n_sets):
        fn(i)
    torch.cuda.synchronize()
    ts = []
    for _ in range(REPS):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for i in range(BATCH):
            fn(i % n_sets)
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1) * 1e-3 / BATCH)
    return sorted(ts)[REPS // 2]


def copy_gbs(n=1 << 30):
    src = [torch.ones(n, dtype=torch.uint8, device="cuda") for _ in range(SETS)]
    dst = [torch.empty_like(s) for s in src]
    t = med_batched(lambda i: dst[i].copy_(src[i]), SETS)
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n / t / 1e9


def case(B, C, nn, lens, copy):
    torch.manual_seed(B * 1000003 + C * 31 + nn * 7 + (lens == "test"))
    # ---- inputs, as test_paged_mqa_logits draws them (non-varlen, FP8, 2-D context lens) ----
    q = torch.randn((B, nn, H, D), device="cuda", dtype=torch.bfloat16)
    weights = torch.randn((B * nn, H), device="cuda", dtype=torch.float)
    if lens == "test":
        context_lens = torch.randint(int(0.7 * C), int(1.3 * C), (B,), device="cuda", dtype=torch.int)
    else:
        context_lens = torch.full((B,), C, device="cuda", dtype=torch.int)
    blocks = (context_lens + BKV - 1) // BKV
    max_model_len = blocks.max().item() * BKV
    total_blocks = blocks.sum().item()
    kv_cache = torch.randn((total_blocks, BKV, 1, D), device="cuda", dtype=torch.bfloat16)
    block_table = torch.zeros((B, blocks.max().item()), device="cuda", dtype=torch.int)
    pool = torch.randperm(total_blocks, device="cuda", dtype=torch.int)
    off = 0
    for i, nb in enumerate(blocks.tolist()):
        block_table[i, :nb] = pool[off:off + nb]
        off += nb
    if lens == "test":
        ctx_nextn = ((context_lens.unsqueeze(1) + 1) * torch.rand(B, nn, device="cuda")).int()
        ctx_nextn[:, -1] = context_lens
    else:   # decode with MTP: the next_n rows see C-next_n+1 .. C (as bench_indexer's "equal")
        ctx_nextn = (context_lens.unsqueeze(1) - (nn - 1)
                     + torch.arange(nn, device="cuda", dtype=torch.int).unsqueeze(0)).int()
    ctx_nextn = ctx_nextn.contiguous()
    q_in = q.to(torch.float8_e4m3fn)
    diff = sim_diff = odiff = osim = xdiff = oxdiff = float("nan")
    check = ocheck = "-"
    if ref_paged_mqa_logits is not None:
        ref = ref_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, max_model_len, True)
        kv_in, kv_sim = kv_cache_cast_to_fp8(kv_cache)
        del kv_cache
        sim = ref_paged_mqa_logits(q_in.to(torch.bfloat16), kv_sim, weights, context_lens, block_table,
                                   max_model_len, True)
        del kv_sim
    else:
        # timing only: the same fused layout ([blocks, 64, 1, 132] uint8: FP8 values, then fp32 scales) with
        # random finite codes; the kernel's time does not depend on the values
        kv_in = torch.randint(0, 0x77, (total_blocks, BKV, 1, D + 4), device="cuda", dtype=torch.uint8)
        kv_in.view(total_blocks, BKV * (D + 4))[:, BKV * D:].view(torch.float).fill_(1.0 / 448)
        del kv_cache
    del q
    meta = deep_gemm.get_paged_mqa_logits_metadata(ctx_nextn, BKV, NUM_SMS)
    qs, kvs, ws = [q_in], [kv_in], [weights]
    for _ in range(SETS - 1):  # distinct memory for each set, as bench_indexer rotates over 4 copies
        qs.append(q_in.clone()), kvs.append(kv_in.clone()), ws.append(weights.clone())

    def fn(i=0):
        return deep_gemm.fp8_paged_mqa_logits(qs[i], kvs[i], ws[i], ctx_nextn, block_table, meta,
                                              max_model_len, False)

    R = B * nn
    preps = []
    if OURS is not None:   # dsv4c on the same tensors: one prepared call a set, each with its own logits
        try:
            stride = (max_model_len + 255) // 256 * 256
            for i in range(SETS):
                out = torch.empty((R, stride), device="cuda", dtype=torch.float)[:, :max_model_len]
                preps.append(OURS.prepare("paged_mqa_logits", qs[i], kvs[i], ws[i], ctx_nextn, block_table,
                                          logits=out, kernel=args.ours_kernel or None))
        except Exception as e:  # noqa: BLE001 -- DeepGEMM's figures stand without ours
            print(f"OURS B {B}, ctx {C}, next_n {nn}, {lens:5s} ERROR {e!r}", flush=True)
            preps = []
    t0 = time.time()
    logits = fn()
    torch.cuda.synchronize()
    first = time.time() - t0
    if ref_paged_mqa_logits is not None:
        pos = torch.arange(max_model_len, device="cuda").unsqueeze(0)
        neginf = ~(pos < ctx_nextn.view(-1, 1))
        got = logits.masked_fill(neginf, 0)
        diff = float(calc_diff(got, ref.masked_fill(neginf, 0)))
        sim_diff = float(calc_diff(got, sim.masked_fill(neginf, 0)))
        same = torch.equal(fn().masked_fill(neginf, 0).view(torch.int32), got.view(torch.int32))
        check = "PASS" if diff < 1e-3 and sim_diff < 5e-6 and same else "FAIL"
        try:
            exact = exact_logits(q_in, kv_in, weights, ctx_nextn, block_table, max_model_len)
            xdiff = float(calc_diff(got, exact))
        except Exception as e:  # noqa: BLE001 -- the test's own checks stand without it
            print(f"peer_deepgemm: exact reference failed ({e!r})", flush=True)
            exact = None
        if preps:
            try:
                preps[0]()
                og = preps[0].outputs.masked_fill(neginf, 0)
                odiff = float(calc_diff(og, ref.masked_fill(neginf, 0)))
                osim = float(calc_diff(og, sim.masked_fill(neginf, 0)))
                oxdiff = float(calc_diff(og, exact)) if exact is not None else float("nan")
                ocheck = "PASS" if odiff < 1e-3 and osim < 5e-6 else "FAIL"
                del og
            except Exception as e:  # noqa: BLE001
                print(f"OURS B {B}, ctx {C}, next_n {nn}, {lens:5s} ERROR {e!r}", flush=True)
                preps = []
        del ref, sim, got, neginf, pos, exact
    del logits
    t = med_batched(fn, SETS)
    tk = float("nan")
    if not args.no_kineto:
        tk = bench_kineto(fn, "paged_mqa_logits", suppress_kineto_output=True)
    nbytes = (context_lens.sum().item() * (D + 4) + ctx_nextn.sum().item() * 4 + R * H * (D + 4))
    flop = 2 * ctx_nextn.sum().item() * H * D
    print(f"DG B {B}, ctx {C}, next_n {nn}, {lens:5s} us {t * 1e6:9.1f} kineto_us {tk * 1e6:9.1f} "
          f"GB/s {nbytes / t / 1e9:6.0f} pct {100 * nbytes / t / 1e9 / copy:6.1f} TFLOP/s {flop / t / 1e12:6.1f} "
          f"diff {diff:.1e} sim_diff {sim_diff:.1e} {check} exact_diff {xdiff:.1e} first_call_s {first:.1f}",
          flush=True)
    if preps:
        try:
            ot = med_batched(lambda i: preps[i](), SETS)
            otk = float("nan")
            if not args.no_kineto:
                # (kineto finds the kernel by name: each step's kernel starts with mqa_logits_v4_mma)
                otk = bench_kineto(lambda: preps[0](), args.ours_kernel or "mqa_logits_v4_mma",
                                   suppress_kineto_output=True) or float("nan")
            print(f"OURS B {B}, ctx {C}, next_n {nn}, {lens:5s} us {ot * 1e6:9.1f} kineto_us {otk * 1e6:9.1f} "
                  f"GB/s {nbytes / ot / 1e9:6.0f} pct {100 * nbytes / ot / 1e9 / copy:6.1f} "
                  f"TFLOP/s {flop / ot / 1e12:6.1f} diff {odiff:.1e} sim_diff {osim:.1e} {ocheck} "
                  f"exact_diff {oxdiff:.1e} (dsv4c {args.ours_kernel or 'rule'}, same tensors)", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"OURS B {B}, ctx {C}, next_n {nn}, {lens:5s} ERROR {e!r}", flush=True)
        for p in preps:
            p.close()
    del preps, qs, kvs, ws, meta, q_in, kv_in, weights, block_table, ctx_nextn, context_lens
    torch.cuda.empty_cache()
    return check != "FAIL"


copy = copy_gbs()
print(f"device {torch.cuda.get_device_name()}; torch {torch.__version__}; deep_gemm "
      f"{getattr(deep_gemm, '__version__', '?')} from {os.path.dirname(deep_gemm.__file__)}; "
      f"{NUM_SMS} SMs\nd2d copy: {copy:.0f} GB/s", flush=True)
bad = 0
for B, C in SHAPES:
    for nn in args.next_n:
        for lens in args.lens:
            try:
                bad += not case(B, C, nn, lens, copy)
            except Exception as e:  # noqa: BLE001 -- report the case and go on to the next
                bad += 1
                print(f"DG B {B}, ctx {C}, next_n {nn}, {lens:5s} ERROR {e!r}", flush=True)
                torch.cuda.empty_cache()
print(f"peer_deepgemm: {bad} failed")
sys.exit(1 if bad else 0)
