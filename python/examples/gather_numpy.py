#!/usr/bin/env python3
"""Gather FP8 cache rows as bf16 with dsv4c, on any machine: no GPU needed.

    PYTHONPATH=build/python python3 python/examples/gather_numpy.py [KERNELS_DIR]

KERNELS_DIR (default build/kernels) holds decode.dsv4b.  The context is
"auto": CUDA where there is a GPU, else OpenCL (PoCL runs it on the CPU).
It writes a DeepSeek-V4 cache block of known values with NumPy (docs/ops.md
section 1: 448 e4m3 values with one UE8M0 scale per 64, then 64 bf16 RoPE
values), gathers four of its rows (one index -1: a row of zeros) and checks
them against the same values decoded in NumPy.  Exit status 0 when they
agree, 1 when not, 77 when no device or no NumPy is found.
"""

import os
import sys


def e4m3_to_float(b, np):
    """The OCP e4m3 (fn) value of each byte: bias 7, no infinities, 0x7f/0xff NaN."""
    b = b.astype(np.int32)
    sign = np.where(b & 0x80, -1.0, 1.0)
    exp, man = (b >> 3) & 0xF, b & 7
    val = np.where(exp == 0, man / 8.0 * 2.0**-6, (1 + man / 8.0) * 2.0 ** (exp - 7.0))
    return np.where((b & 0x7F) == 0x7F, np.nan, sign * val)


def bf16_to_float(u16, np):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def main():
    try:
        import numpy as np
    except ImportError:
        print("gather_numpy: skipped (needs NumPy)")
        return 77
    import dsv4c

    kdir = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DSV4C_KERNELS", "build/kernels")
    try:
        ctx = dsv4c.Context("auto")
    except dsv4c.Error as e:
        print("gather_numpy: skipped (no device: %s)" % e)
        return 77
    b = ctx.open_bundle(os.path.join(kdir, "decode.dsv4b"))
    print("device:", ctx.device_name if hasattr(ctx, "device_name") else ctx)

    # one block of 64 tokens: rows of 448 e4m3 bytes + 64 bf16 (576 bytes),
    # then 64 scale rows of 8 bytes (7 UE8M0 scales, one a 64-value group)
    rng = np.random.default_rng()
    block = np.zeros(64 * 576 + 64 * 8, np.uint8)
    rows = block[: 64 * 576].reshape(64, 576)
    scales = block[64 * 576 :].reshape(64, 8)
    e4m3 = rng.integers(0, 256, (64, 448), dtype=np.uint8)
    e4m3[(e4m3 & 0x7F) == 0x7F] = 0x38  # no NaNs
    rows[:, :448] = e4m3
    rope = (rng.standard_normal((64, 64)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    rows[:, 448:] = rope.view(np.uint8).reshape(64, 128)
    scales[:, :7] = rng.integers(120, 135, (64, 7), dtype=np.uint8)

    idx = np.array([3, 0, -1, 63], np.int32)
    out = b.dequant_gather(block.reshape(1, -1), idx, block_size=64)

    want = np.zeros((4, 512), np.float32)
    for i, t in enumerate(idx):
        if t < 0:
            continue
        s = 2.0 ** (scales[t, :7].astype(np.float64) - 127)
        want[i, :448] = (e4m3_to_float(e4m3[t], np) * np.repeat(s, 64)).astype(np.float32)
        want[i, 448:] = bf16_to_float(rope[t], np)
    got = bf16_to_float(np.asarray(out).reshape(4, 512), np)
    # the kernel rounds each product to bf16 once: within half a bf16 ulp
    err = np.abs(got - want) / np.maximum(np.abs(want), 1e-30)
    bad = int(np.sum((err > 2.0**-8) & (want != 0)) + np.sum((want == 0) & (got != 0)))
    print("gathered rows", list(idx), "as bf16:", "all %d values match" % got.size if not bad else "%d differ" % bad)
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
