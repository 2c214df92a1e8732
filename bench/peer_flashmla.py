#!/usr/bin/env python3
"""FlashMLA's sparse FP8 decode at the shapes bench_decode times, for the same-run comparison.

On the GPU machine, after ../shared/peers/flashmla/build.sh (FlashMLA built under /tmp/FlashMLA).  It uses
FlashMLA's own test library to draw its inputs (MODEL1 layout, attention sink, extra cache), to run its kernel
and to time it the way FlashMLA's test does (kineto: the split-KV kernel through the combine), and checks each
output against FlashMLA's own reference with its own tolerance.  Our code only lists the shapes and prints.

usage: python3 peer_flashmla.py [/tmp/FlashMLA] [SHAPE-SUBSTRING]
"""
import os
import sys

FM = sys.argv[1] if len(sys.argv) > 1 else "/tmp/FlashMLA"
ONLY = sys.argv[2] if len(sys.argv) > 2 else ""
sys.path.insert(0, os.path.join(FM, "tests"))
sys.path.insert(0, FM)
import torch  # noqa: E402
import kernelkit as kk  # noqa: E402
import lib  # noqa: E402
import ref  # noqa: E402
import flash_mla  # noqa: E402
from lib import RawTestParamForDecode as R  # noqa: E402

torch.set_default_dtype(torch.bfloat16)
torch.set_default_device("cuda")
torch.cuda.set_device(0)

# label (as bench_decode prints it), batch, query tokens a batch entry (T = b * s_q), heads,
# compressed indices, compressed block size (2: C128, per-token lengths drawn)
SHAPES = [
    ("V4-Pro T 8", 4, 2, 128, 1024, 64),
    ("V4-Pro T 128", 64, 2, 128, 1024, 64),
    ("V4-Pro T 256", 128, 2, 128, 1024, 64),
    ("V4-Pro T 512", 256, 2, 128, 1024, 64),
    ("V4-Flash T 8", 4, 2, 64, 512, 64),
    ("V4-Flash T 128", 64, 2, 64, 512, 64),
    ("V4-Flash T 256", 128, 2, 64, 512, 64),
    ("V4-Flash T 512", 256, 2, 64, 512, 64),
    ("V4-Pro C128 T 128", 64, 2, 128, 1024, 2),
]

print(f"{'shape':20s} {'FlashMLA us':>11s} {'TFLOP/s':>8s}  correct (FlashMLA's rule)")
for name, bb, sq, h, xk, xbs in SHAPES:
    if ONLY and ONLY not in name:
        continue
    p = R(bb, h, sq, 1, 16384, True, topk=128, d_qk=512, extra_s_k=16384, extra_topk=xk, block_size=256,
          extra_block_size=xbs, have_extra_topk_length=(xbs == 2), check_correctness=True, num_runs=50,
          seed=1).to_test_param()
    torch.cuda.empty_cache()
    t = lib.generate_testcase_for_decode(p)
    sched, _ = flash_mla.get_mla_metadata()

    def run():
        return lib.run_flash_mla_decode(p, t, sched, None)

    torch.cuda.synchronize()
    out, lse = run()
    torch.cuda.synchronize()
    res = kk.bench_kineto(run, 50)
    names = res.get_kernel_names()
    sk = [n for n in names if "flash_fwd_splitkv_mla_fp8_sparse_kernel" in n]
    cb = [n for n in names if "flash_fwd_mla_combine_kernel" in n]
    us = (res.get_e2e_time(sk[0], cb[0]) if cb else res.get_kernel_times([sk[0]])[0]) * 1e6
    fl = lib.count_flop_and_mem_vol_for_decode(p, t).flop
    o_ref, l_ref = ref.ref_sparse_attn_decode(p, t)
    ok_o = kk.check_is_allclose("out", out, o_ref, abs_tol=1e-3, rel_tol=2.01 / 128, cos_diff_tol=5e-6)
    ok_l = kk.check_is_allclose("lse", lse, l_ref, abs_tol=1e-6, rel_tol=8.01 / 65536)
    print(f"{name:20s} {us:11.1f} {fl / (us * 1e-6) / 1e12:8.1f}  out {ok_o} lse {ok_l}", flush=True)
    del t, out, lse, o_ref, l_ref
