#!/usr/bin/env python3
"""FlashMLA's own sparse-decode test matrix with dsv4c behind flash_mla_with_kvcache (issue 28 item 3).

On the GPU machine, after FlashMLA is unpacked (../shared/peers/flashmla/build.sh; only its Python test
library is used, not its kernels): every d_qk 512 case of FlashMLA's tests/test_flash_mla_sparse_decoding.py
gen_testcase() -- correctness and corner cases: extra cache or not, topk/extra lengths, H 64/128, block
sizes 2..576, batch sizes, all indices invalid, zero-length, sinks -- drawn by FlashMLA's own generator,
run through dsv4c.compat.flash_mla_with_kvcache, and compared with FlashMLA's own reference by its own
check (kk.check_is_allclose with the test's tolerances).  Prints one line a failure and a summary.

usage: DSV4C_BUNDLES=decode.dsv4b python3 flashmla_matrix.py FLASHMLA_DIR [--stride K] [--seconds S]
  --stride K   every K-th case (a deterministic subset; 1: all)
  --seconds S  stop starting new cases after S seconds (the summary says how many ran)
"""
import argparse
import os
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("flashmla")
ap.add_argument("--stride", type=int, default=1)
ap.add_argument("--seconds", type=float, default=0)
args = ap.parse_args()
sys.path.insert(0, os.path.join(args.flashmla, "tests"))
sys.path.insert(0, args.flashmla)

import types  # noqa: E402

import torch  # noqa: E402
import dsv4c.compat as compat  # noqa: E402

# dsv4c's entry points under the name of FlashMLA's compiled module, installed before FlashMLA's test
# library imports it: its kernels are never loaded
_shim = types.ModuleType("flash_mla")
_shim.flash_mla_with_kvcache = compat.flash_mla_with_kvcache
_shim.get_mla_metadata = compat.get_mla_metadata
sys.modules["flash_mla"] = _shim
try:  # FlashMLA's test file prints its tables with rich; only gen_testcase is used here
    import rich.console  # noqa: F401
    import rich.table  # noqa: F401
except ImportError:
    for m in ("rich", "rich.console", "rich.table"):
        sys.modules[m] = types.ModuleType(m)
import kernelkit as kk  # noqa: E402
import lib  # noqa: E402
import ref  # noqa: E402
import test_flash_mla_sparse_decoding as fmt  # noqa: E402

torch.set_default_dtype(torch.bfloat16)
torch.set_default_device("cuda")
torch.cuda.set_device(0)

raw = [r for r in fmt.gen_testcase() if r.d_qk == 512 and r.check_correctness]
cases = raw[:: max(1, args.stride)]
print(f"{len(raw)} d_qk 512 correctness cases in FlashMLA's matrix; running {len(cases)} (stride {args.stride})",
      flush=True)
t0 = time.time()
ran = passed = 0
fails = []
for i, r in enumerate(cases):
    if args.seconds and time.time() - t0 > args.seconds:
        break
    p = r.to_test_param()
    if p.seed == -1:
        p.seed = i
    try:
        t = lib.generate_testcase_for_decode(p)
        out, lse = lib.run_flash_mla_decode(p, t, compat.get_mla_metadata()[0], None)
        torch.cuda.synchronize()
        o_ref, l_ref = ref.ref_sparse_attn_decode(p, t)
        ok = kk.check_is_allclose("out", out, o_ref, abs_tol=1e-3, rel_tol=2.01 / 128, cos_diff_tol=5e-6) and \
            kk.check_is_allclose("lse", lse, l_ref, abs_tol=1e-6, rel_tol=8.01 / 65536)
        why = "" if ok else "outside FlashMLA's tolerance"
    except Exception as e:  # a refusal or a crash of the case is a failure, reported
        ok, why = False, f"{type(e).__name__}: {e}"
    ran += 1
    passed += bool(ok)
    if not ok:
        fails.append((r, why))
        print(f"FAIL {r}: {why}", flush=True)
    torch.cuda.empty_cache()
print(f"{passed} of {ran} passed ({len(cases) - ran} not run, time limit), {len(fails)} failed; "
      f"{time.time() - t0:.0f} s", flush=True)
sys.exit(1 if fails else 0)
