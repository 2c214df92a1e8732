#!/usr/bin/env python3
"""The dsv4c Python package on the OpenCL path with NumPy (PoCL on the CPU in CI).

    PYTHONPATH=build/python python3 tests/python/test_numpy.py build/python/kernels [unittest args]

Every op against the NumPy reference of docs/ops.md (tests/python/numpy_ref.py)
with docs/ops.md's tolerances on fresh random inputs (DSV4_SEED repeats a run),
the drop-in entry points of dsv4c.compat, the tensor protocols (buffer,
DLPack, __array_interface__), and every kind of bad argument: the right
exception, and poisoned outputs left as they were.  Exit status 77
("skipped" for CTest) when NumPy, the package or an OpenCL device is
missing, so that such a run never counts as passed.
"""

import os
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
KERNELS = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else os.environ.get(
    "DSV4C_KERNELS", "build/python/kernels")

try:
    import numpy as np

    import numpy_ref as R
except ImportError as e:  # reported as a skip below
    np = None
    NO_NUMPY = str(e)

try:
    import dsv4c
    from dsv4c import compat
except ImportError as e:
    dsv4c = None
    NO_DSV4C = str(e)

CTX = None
B = {}  # bundle name -> dsv4c.Bundle
SEED = int(os.environ.get("DSV4_SEED", np.random.SeedSequence().entropy % 2**32 if np else 0))


def setUpModule():
    global CTX
    if np is None:
        raise unittest.SkipTest("NumPy is not installed (%s): apt-get install python3-numpy" % NO_NUMPY)
    if dsv4c is None:
        raise unittest.SkipTest("the dsv4c package is not importable (%s): set PYTHONPATH to build/python" % NO_DSV4C)
    try:
        CTX = dsv4c.Context("opencl")
    except dsv4c.Error as e:
        raise unittest.SkipTest("no OpenCL device: %s" % e)
    for name in ("decode", "indexer", "insert"):
        B[name] = CTX.open_bundle(os.path.join(KERNELS, name + ".dsv4b"))
    compat.configure(B["decode"], B["indexer"], B["insert"])
    print("seed %d (DSV4_SEED repeats it); device: %s" % (SEED, CTX.device_name), file=sys.stderr)


def rng(k):
    return np.random.default_rng([SEED, k])


class Case(unittest.TestCase):
    def refuses(self, exc, fn, *outs, status=None, match=None):
        """fn() raises exc (with .status and a message containing match) and leaves outs as they were."""
        before = [np.array(o, copy=True) for o in outs]
        with self.assertRaises(exc) as cm:
            fn()
        if status is not None:
            self.assertEqual(cm.exception.status, status, str(cm.exception))
        if match is not None:
            self.assertIn(match, str(cm.exception))
        for o, b in zip(outs, before):
            self.assertTrue(np.array_equal(np.asarray(o).view(np.uint8), b.view(np.uint8)),
                            "an output was written on a refusal (%s)" % cm.exception)
        return cm.exception

    def assertBits(self, got, ref, what):
        """bf16 bits equal, NaN compared as NaN."""
        g, r = np.asarray(got, dtype=np.uint16), np.asarray(ref, dtype=np.uint16)
        gn, rn = np.isnan(R.bf16_to_f32(g)), np.isnan(R.bf16_to_f32(r))
        same = (g == r) | (gn & rn)
        self.assertTrue(same.all(), "%s: %d of %d values differ, first at %s" % (
            what, (~same).sum(), same.size, np.argwhere(~same)[:1].tolist()))


def poison(shape, dtype, byte=0xA5):
    a = np.empty(shape, dtype=dtype)
    a.view(np.uint8)[...] = byte
    return a


class FakeDevice:
    """A tensor that says it lives on a CUDA device (DLPack device 2)."""

    def __init__(self, a):
        self.a = a

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        raise AssertionError("__dlpack__ must not be called for a tensor on the wrong device")


class CudaInterfaceOnly:
    def __init__(self, a):
        self.__cuda_array_interface__ = {"data": (a.ctypes.data, False), "shape": a.shape,
                                         "typestr": a.dtype.str, "strides": None, "version": 3}


class DLPackOnly:
    """Only __dlpack__ / __dlpack_device__ (the extension's capsule path on the host)."""

    def __init__(self, a):
        self.a = a

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()


class ArrayInterfaceOnly:
    def __init__(self, a):
        self.a = a
        self.__array_interface__ = a.__array_interface__


# ---- the context and bundles ----


class TestContext(Case):
    def test_context(self):
        self.assertEqual(CTX.backend, "opencl")
        self.assertEqual(CTX.stream, 0)
        with self.assertRaises(ValueError):
            CTX.stream = 5
        self.assertEqual(CTX.stream, 0)
        with self.assertRaisesRegex(ValueError, "backend"):
            dsv4c.Context("vulkan")
        CTX.synchronize()

    def test_hip(self):
        """Context("hip"): without the library an Error (ERR_NO_BACKEND); on the fake HIP runtime
        (tests/unit/fake_libamdhip64.c, DSV4C_TEST_FAKE_HIP) a context that says hip and its processor,
        refuses host arrays by name, and launches a gfx942 kernel on ROCm device memory (the fake's
        allocations, through __cuda_array_interface__): the fake records the launch, its kernarg block
        holding the tensors' addresses, and finds nothing amiss."""
        import ctypes
        old = os.environ.get("DSV4RT_HIP_LIBRARY")
        lib, bundle = os.environ.get("DSV4C_TEST_FAKE_HIP"), os.environ.get("DSV4C_TEST_AMD_BUNDLE")
        try:
            os.environ["DSV4RT_HIP_LIBRARY"] = "/nonexistent/libamdhip64.so"
            self.refuses(dsv4c.Error, lambda: dsv4c.Context("hip"), status=dsv4c.ERR_NO_BACKEND,
                         match="DSV4RT_HIP_LIBRARY")
            if not lib or not bundle:
                self.skipTest("DSV4C_TEST_FAKE_HIP / DSV4C_TEST_AMD_BUNDLE not set (ctest sets them)")
            os.environ["DSV4RT_HIP_LIBRARY"] = lib
            ctx = dsv4c.Context("hip")
            self.assertEqual(ctx.backend, "hip")
            self.assertIn("gfx942", ctx.device_name)
            b = ctx.open_bundle(bundle)
            with self.assertRaisesRegex(ValueError, r"^(out|cache): CPU \(host\) memory .*HIP context .*ROCm device"):
                b.dequant_gather(np.zeros((4, 64, 584), np.uint8), np.zeros(4, np.int32))
            fake = ctypes.CDLL(lib)
            fake.fake_hip_violations.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

            class Dev:  # ROCm device memory of the fake, as CuPy-on-ROCm hands it over
                def __init__(self, shape, typestr):
                    n = int(np.prod(shape)) * int(typestr[2:])
                    self.ptr = ctypes.c_void_p()
                    assert fake.hipMalloc(ctypes.byref(self.ptr), ctypes.c_size_t(n)) == 0
                    self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "version": 3,
                                                     "data": (self.ptr.value, False), "strides": None}

            cache, idx, out = Dev((4, 64, 584), "|u1"), Dev((4,), "<i4"), Dev((4, 512), "<u2")
            n = fake.fake_hip_launch_count()
            b.dequant_gather(cache, idx, out, kernel="dequant_gather_v4")
            ctx.synchronize()
            self.assertEqual(fake.fake_hip_launch_count(), n + 1)
            why = ctypes.create_string_buffer(512)
            self.assertEqual(fake.fake_hip_violations(why, 512), 0, why.value)
            for d in (cache, idx, out):
                fake.hipFree(d.ptr)
        finally:
            if old is None:
                os.environ.pop("DSV4RT_HIP_LIBRARY", None)
            else:
                os.environ["DSV4RT_HIP_LIBRARY"] = old

    def test_bundles(self):
        e = self.refuses(dsv4c.Error, lambda: CTX.open_bundle("/nonexistent.dsv4b"), status=dsv4c.ERR_IO)
        self.assertNotIsInstance(e, ValueError)
        self.refuses(dsv4c.Error, lambda: CTX.open_bundle_bytes(b"DSV4BNDL" + bytes(100)))
        with open(os.path.join(KERNELS, "decode.dsv4b"), "rb") as f:
            b = CTX.open_bundle_bytes(f.read())
        names = {k["name"]: k for k in b.kernels()}
        self.assertEqual(set(names), {"dequant_gather_v4", "paged_gather_v4", "kv_insert_v4", "sparse_decode_v4"})
        self.assertTrue(all(k["runs"] and k["targets"] == ["spirv"] for k in names.values()))
        self.assertEqual(b.op_info("sparse_decode")["v_dim"], 512)
        self.assertEqual(B["indexer"].op_info("topk", "topk_1024")["topk"], 1024)
        self.refuses(dsv4c.Error, lambda: b.op_info("paged_mqa_logits"), status=dsv4c.ERR_NO_KERNEL)
        with b:
            pass
        self.assertRaises(ValueError, b.entries)


# ---- gathers (docs/ops.md 2) ----


class TestDequantGather(Case):
    def setUp(self):
        g = rng(1)
        self.bs, self.nb = 16, 5
        self.raw, _ = R.v4_cache(g, self.nb, self.bs, stride=self.bs * R.V4_TOKEN + 48)
        self.cache = R.token_view(self.raw, self.bs)
        n = 37
        self.idx = g.integers(-3, self.nb * self.bs, size=n).astype(np.int32)
        self.ref = R.v4_dequant(self.raw, self.bs, self.idx)

    def test_values(self):
        b = B["decode"]
        self.assertBits(b.dequant_gather(self.cache, self.idx), self.ref, "dequant_gather [nb, bs, 584]")
        out = poison((37, 512), np.uint16)
        self.assertIs(b.dequant_gather(self.raw, self.idx, out, block_size=self.bs), out)
        self.assertBits(out, self.ref, "dequant_gather [nb, S] with block_size")
        idx2 = self.idx[:36].reshape(6, 6)
        out2 = b.dequant_gather(self.cache, idx2)
        self.assertEqual(out2.shape, (6, 6, 512))
        self.assertBits(out2.reshape(36, 512), self.ref[:36], "dequant_gather, 2-D indices")
        self.assertEqual(b.dequant_gather(self.cache, self.idx[:0]).shape, (0, 512))

    def test_protocols(self):
        b = B["decode"]
        out = np.zeros((37, 512), np.uint16)
        base = sys.getrefcount(out)
        b.dequant_gather(DLPackOnly(self.cache), DLPackOnly(self.idx), DLPackOnly(out))
        self.assertBits(out, self.ref, "through DLPack")
        self.assertEqual(sys.getrefcount(out), base, "the DLPack capsule's deleter was not called")
        out[...] = 0
        b.dequant_gather(ArrayInterfaceOnly(self.cache), ArrayInterfaceOnly(self.idx), ArrayInterfaceOnly(out))
        self.assertBits(out, self.ref, "through __array_interface__")

    def test_refusals(self):
        b, c, i = B["decode"], self.cache, self.idx
        out = poison((37, 512), np.uint16)
        g = b.dequant_gather
        self.refuses(TypeError, lambda: g(c, i.astype(np.float32), out), out, match="indices")
        self.refuses(TypeError, lambda: g(c, i.astype(np.int64), out), out, match="indices")
        self.refuses(TypeError, lambda: g(c, i, out.view(np.int16)), out, match="out")
        self.refuses(TypeError, lambda: g(c, i, np.zeros((37, 512), np.float32)), match="out")
        self.refuses(ValueError, lambda: g(c, i, out[:, :256]), out, match="out")
        self.refuses(ValueError, lambda: g(c, i, out[:36]), out, match="out")
        wide = poison((37, 1024), np.uint16)
        self.refuses(ValueError, lambda: g(c, i, wide[:, ::2]), wide, match="contiguous")
        self.refuses(ValueError, lambda: g(c, np.repeat(i, 2)[::2], out), out, match="indices")
        self.refuses(ValueError, lambda: g(self.raw[:, :576 * 4].reshape(5, 4, 576), i, out), out, match="cache")
        self.refuses(ValueError, lambda: g(self.raw, i, out), out, match="block_size")
        self.refuses(ValueError, lambda: g(c, i, out, block_size=64), out, match="block_size")
        self.refuses(TypeError, lambda: g(c.view(np.float32), i, out), out, match="cache")
        self.refuses(ValueError, lambda: g(c, FakeDevice(i), out), out, match="indices")
        self.refuses(ValueError, lambda: g(c, CudaInterfaceOnly(i), out), out, match="indices")
        self.refuses(ValueError, lambda: g(FakeDevice(c), i, out), out, match="CUDA")
        self.refuses(TypeError, lambda: g(c, [1, 2, 3], out), out, match="indices")
        ro = out.copy()
        ro.flags.writeable = False
        self.refuses(ValueError, lambda: g(c, i, ro), ro, match="read-only")
        # an output sharing memory with an input
        buf = poison((37 * 512 + 64,), np.uint16)
        alias_out = buf[:37 * 512].reshape(37, 512)
        alias_idx = buf[37 * 512 - 74:37 * 512].view(np.int32)
        alias_idx[...] = 0
        self.refuses(ValueError, lambda: g(c, alias_idx, alias_out), buf, match="shares memory")
        # runtime refusals: contents, kernel names
        bad = i.copy()
        bad[5] = self.nb * self.bs
        e = self.refuses(dsv4c.ArgumentError, lambda: g(c, bad, out, check_contents=True), out,
                         status=dsv4c.ERR_BAD_CONTENTS, match="indices[5]")
        self.assertIsInstance(e, ValueError)
        self.assertEqual(e.status_name, "bad device contents")
        self.refuses(dsv4c.Error, lambda: g(c, i, out, kernel="nope"), out, status=dsv4c.ERR_NO_KERNEL, match="nope")
        self.refuses(dsv4c.Error, lambda: g(c, i, out, kernel="paged_gather_v4"), out, status=dsv4c.ERR_NO_KERNEL)
        self.refuses(ValueError, lambda: g(c, i, out, stream=3), out, match="stream")
        self.refuses(TypeError, lambda: g(c, i, out, stream="s"), out, match="stream")


class TestPagedGather(Case):
    def setUp(self):
        g = rng(2)
        self.bs, self.nb, self.R, self.M = 16, 9, 3, 40
        self.raw, _ = R.v4_cache(g, self.nb, self.bs)
        self.cache = R.token_view(self.raw, self.bs)
        self.maxb = 4
        self.bt = np.stack([g.permutation(self.nb)[:self.maxb] for _ in range(self.R)]).astype(np.int32)
        self.seq = np.array([37, 5, 64], np.int32)
        self.gl = np.array([30, 5, 0], np.int32)

    def expect(self, out, gl, offset, before):
        ref = before.copy()
        for r in range(self.R):
            g = int(self.seq[r] if gl is None else gl[r])
            pos = np.arange(self.seq[r] - g, self.seq[r])
            slots = self.bt[r, pos // self.bs] * self.bs + pos % self.bs
            ref[r, offset:offset + g] = R.v4_dequant(self.raw, self.bs, slots)
        self.assertBits(out, ref, "paged_gather")

    def test_values(self):
        b = B["decode"]
        out = poison((self.R + 1, self.M, 512), np.uint16)
        before = out.copy()
        self.assertIs(b.paged_gather(out, self.cache, self.seq, self.bt, self.gl, 3), out)
        self.expect(out, self.gl, 3, before)
        out = poison((self.R, 70, 512), np.uint16)
        before = out.copy()
        b.paged_gather(out, self.raw, self.seq, self.bt, block_size=self.bs)
        self.expect(out, None, 0, before)

    def test_strided_out(self):
        b = B["decode"]
        big = poison((self.R, self.M, 1024), np.uint16)  # rows 1024 elements apart
        out = big[:, :, :512]
        before = out.copy()
        b.paged_gather(out, self.cache, self.seq, self.bt, self.gl, 1)
        self.expect(out, self.gl, 1, before)
        self.assertTrue((big[:, :, 512:] == 0xA5A5).all(), "bytes between rows written")
        inter = poison((self.M, self.R, 512), np.uint16).transpose(1, 0, 2)  # requests interleaved
        before = inter.copy()
        b.paged_gather(inter, self.cache, self.seq, self.bt, self.gl, 2)
        self.expect(inter, self.gl, 2, before)
        # the block table a column slice of a wider one (vLLM's), other blocks in the columns past it
        wide = np.full((self.R, self.maxb + 5), self.nb - 1, np.int32)
        wide[:, :self.maxb] = self.bt
        out = poison((self.R, self.M, 512), np.uint16)
        before = out.copy()
        b.paged_gather(out, self.cache, self.seq, wide[:, :self.maxb], self.gl, 1)
        self.expect(out, self.gl, 1, before)
        self.refuses(ValueError, lambda: b.paged_gather(out, self.cache, self.seq,
                                                        np.broadcast_to(self.bt[:1], self.bt.shape), self.gl, 1),
                     out, match="broadcast")

    def test_refusals(self):
        b, c = B["decode"], self.cache
        out = poison((self.R, self.M, 512), np.uint16)
        p = b.paged_gather
        self.refuses(TypeError, lambda: p(out, c, self.seq.astype(np.int64), self.bt), out, match="seq_lens")
        self.refuses(ValueError, lambda: p(out, c, self.seq, self.bt[:2]), out, match="block_table")
        self.refuses(ValueError, lambda: p(out, c, self.seq, self.bt, self.gl[:2]), out, match="gather_lens")
        self.refuses(ValueError, lambda: p(out[:2], c, self.seq, self.bt), out, match="out")
        self.refuses(ValueError, lambda: p(out, c, self.seq, np.asfortranarray(self.bt)), out, match="last dim")
        big = poison((self.R, self.M, 1024), np.uint16)
        self.refuses(ValueError, lambda: p(big[:, :, ::2], c, self.seq, self.bt), big, match="last dim")
        odd = poison((self.R, self.M, 516), np.uint16)
        self.refuses(dsv4c.ArgumentError, lambda: p(odd[:, :, :512], c, self.seq, self.bt), odd,
                     status=dsv4c.ERR_MISALIGNED, match="out_stride")
        self.refuses(dsv4c.ArgumentError, lambda: p(out, c, self.seq, self.bt, offset=self.M + 1), out,
                     status=dsv4c.ERR_OUT_OF_RANGE, match="offset")
        bad = self.seq.copy()
        bad[1] = 999
        self.refuses(dsv4c.ArgumentError, lambda: p(out, c, bad, self.bt, check_contents=True), out,
                     status=dsv4c.ERR_BAD_CONTENTS)


# ---- the cache writer (docs/ops.md 5) ----


class TestKvInsert(Case):
    def setUp(self):
        g = rng(3)
        self.bs, self.nb, self.N, self.H = 16, 4, 7, 3
        self.kv = R.f32_to_bf16(g.standard_normal((self.N, 512)).astype(np.float32) *
                                np.float32(10.0) ** g.integers(-3, 2, size=(self.N, 1)).astype(np.float32))
        self.kv[1, :64] = 0  # an all-zero scale block
        self.slots = g.permutation(self.nb * self.bs)[:self.N - 1].astype(np.int64)  # the last row: DP padding
        self.slots[2] = -1
        self.pos = g.integers(0, 100, size=self.N).astype(np.int64)
        self.cs = R.cos_sin_table(100)
        self.q = R.f32_to_bf16(g.standard_normal((self.N, self.H, 512)).astype(np.float32))

    def expect_cache(self, raw, before, rope):
        for n in range(len(self.slots)):
            s = int(self.slots[n])
            if s < 0:
                continue
            x = R.bf16_to_f32(self.kv[n]).copy()
            if rope:
                x[448:] = R.rope(x[None, 448:], self.pos[n:n + 1], self.cs)[0]
            R.v4_write(before, self.bs, s, R.f32_to_bf16(x))
        S = self.bs * R.V4_ROW
        data_ok = raw[:, :S].reshape(self.nb, self.bs, R.V4_ROW)
        data_ref = before[:, :S].reshape(self.nb, self.bs, R.V4_ROW)
        self.assertTrue(np.array_equal(data_ok[:, :, :448], data_ref[:, :, :448]), "fp8 codes differ")
        got = R.bf16_to_f32(data_ok[:, :, 448:].copy().view(np.uint16))
        ref = R.bf16_to_f32(data_ref[:, :, 448:].copy().view(np.uint16))
        ulp = np.abs(ref) * 2.0 ** -7 + 1e-30
        self.assertTrue((np.abs(got - ref) <= ulp).all(), "RoPE dims beyond 1 bf16 ulp")
        self.assertTrue(np.array_equal(raw[:, S:], before[:, S:]), "scale bytes (or padding) differ")

    def test_fused(self):
        b = B["decode"]
        raw = poison((self.nb, self.bs * R.V4_TOKEN + 16), np.uint8, 0x5A)
        before = raw.copy()
        qo = b.kv_insert(R.token_view(raw, self.bs), self.kv, self.slots, self.pos, self.cs, self.q, padded_heads=4)
        self.expect_cache(raw, before, rope=True)
        self.assertEqual(qo.shape, (self.N, 4, 512))
        x = R.bf16_to_f32(self.q)
        y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + np.float32(1e-6))
        y[..., 448:] = R.rope(y[..., 448:].astype(np.float32), self.pos, self.cs)
        got = R.bf16_to_f32(qo)
        self.assertTrue(np.allclose(got[:, :self.H], y, atol=1e-2, rtol=1e-2), "q_out beyond 1e-2")
        self.assertTrue((qo[:, self.H:] == 0).all(), "padded heads not zero")

    def test_compat_plain_writer(self):
        raw = poison((self.nb, self.bs * R.V4_TOKEN), np.uint8, 0x5A)
        before = raw.copy()
        self.assertIsNone(compat.quantize_and_insert_k_cache(self.kv, raw, self.slots, block_size=self.bs))
        self.expect_cache(raw, before, rope=False)
        self.assertRaises(NotImplementedError, lambda: compat.quantize_and_insert_k_cache(
            self.kv, raw, self.slots, self.bs, is_ue8m0=False))

    def test_refusals(self):
        b = B["decode"]
        raw = poison((self.nb, self.bs * R.V4_TOKEN), np.uint8)
        c = R.token_view(raw, self.bs)
        qo = poison((self.N, self.H, 512), np.uint16)
        k = b.kv_insert
        args = (c, self.kv, self.slots, self.pos, self.cs, self.q, qo)
        self.refuses(TypeError, lambda: k(c, self.kv, self.slots, self.pos.astype(np.int32), self.cs, self.q, qo),
                     raw, qo, match="positions")
        self.refuses(TypeError, lambda: k(c, self.kv, self.slots.astype(np.int32), self.pos, self.cs, self.q, qo),
                     raw, qo, match="slot_mapping")
        self.refuses(TypeError, lambda: k(c, self.kv, self.slots), raw, match="positions")
        self.refuses(ValueError, lambda: k(c, self.kv[:3], self.slots, self.pos, self.cs, self.q, qo), raw, qo,
                     match="slot_mapping")
        self.refuses(ValueError, lambda: k(c, self.kv, self.slots, self.pos, self.cs[:, :32], self.q, qo), raw, qo,
                     match="cos_sin")
        self.refuses(ValueError, lambda: k(*args[:6], qo[:, :2]), raw, qo, match="q_out")
        self.refuses(ValueError, lambda: k(*args, eps=float("nan")), raw, qo, status=dsv4c.ERR_NOT_FINITE)
        ro = raw.copy()
        ro.flags.writeable = False
        self.refuses(ValueError, lambda: k(R.token_view(ro, self.bs), *args[1:]), ro, qo, match="read-only")
        bad = self.pos.copy()
        bad[0] = 1000
        self.refuses(dsv4c.ArgumentError, lambda: k(c, self.kv, self.slots, bad, self.cs, self.q, qo,
                                                    check_contents=True), raw, qo, status=dsv4c.ERR_BAD_CONTENTS)
        plain = B["insert"]
        self.refuses(TypeError, lambda: plain.kv_insert(c, self.kv, self.slots, self.pos, self.cs,
                                                        kernel="kv_quant_insert_v4"), raw, match="RoPE")
        self.refuses(TypeError, lambda: plain.kv_insert(c, self.kv, self.slots, q=self.q, q_out=qo,
                                                        kernel="kv_quant_insert_v4"), raw, qo, match="q branch")


# ---- sparse MLA decode (docs/ops.md 3) ----


def decode_case(g, T=5, H=8, topk=128, xtopk=64, extra=True, sink=True):
    """FlashMLA's distribution (docs/ops.md 3): q = randn clamped to 1, K = randn/10 clamped, rows no
    valid index names set to NaN, sinks a third +inf, a third -inf."""
    bs, nb, xbs, xnb = 64, 3, 2, 40
    main, _ = R.v4_cache(g, nb, bs, scale=0.1)
    c = {"q": R.f32_to_bf16(np.clip(g.standard_normal((T, H, 512)), -1, 1).astype(np.float32)),
         "main": main, "bs": bs}
    c["idx"] = g.integers(0, nb * bs, size=(T, topk)).astype(np.int32)
    c["idx"][g.random((T, topk)) < 0.1] = -1
    c["lens"] = g.integers(0, topk + 1, size=T).astype(np.int32)
    c["lens"][0], c["idx"][1] = 0, -1  # an empty list; a list of -1
    used = set()
    if extra:
        xc, _ = R.v4_cache(g, xnb, xbs, scale=0.1)
        c.update(xcache=xc, xbs=xbs, xidx=g.integers(0, xnb * xbs, size=(T, xtopk)).astype(np.int32),
                 xlens=g.integers(0, xtopk + 1, size=T).astype(np.int32))
        c["xlens"][0] = 0
        xused = {int(s) for t in range(T) for j, s in enumerate(c["xidx"][t]) if j < c["xlens"][t] and s >= 0}
        nan_rows(c["xcache"], xbs, xused)
    used = {int(s) for t in range(T) for j, s in enumerate(c["idx"][t]) if j < c["lens"][t] and s >= 0}
    nan_rows(c["main"], bs, used)
    if sink:
        s = g.standard_normal(H).astype(np.float32)
        r = g.random(H)
        s[r < 1 / 3] = np.inf
        s[r > 2 / 3] = -np.inf
        c["sink"] = s
    c["scale"] = 512 ** -0.55
    return c


def nan_rows(raw, bs, used):
    """Every token of the cache that no valid index names: NaN data (e4m3 0x7F, bf16 NaN)."""
    nb = raw.shape[0]
    for s in range(nb * bs):
        if s not in used:
            blk, row = divmod(s, bs)
            raw[blk, row * R.V4_ROW:row * R.V4_ROW + 448] = 0x7F
            raw[blk, row * R.V4_ROW + 448:(row + 1) * R.V4_ROW].view(np.uint16)[...] = 0x7FC0


def decode_ref(c):
    deq = lambda raw, bs: R.bf16_to_f32(R.v4_dequant(raw, bs, np.arange(raw.shape[0] * bs)))
    xk = deq(c["xcache"], c["xbs"]) if "xcache" in c else None
    return R.sparse_decode_ref(c["q"], deq(c["main"], c["bs"]), c["idx"], c["lens"], c["scale"], c.get("sink"),
                               xk, c.get("xidx"), c.get("xlens"))


class TestSparseDecode(Case):
    def check(self, out, lse, ref_out, ref_lse):
        errs = R.flashmla_check("out", R.bf16_to_f32(out), ref_out, 1e-3, 2.01 / 128, 5e-6)
        errs += R.flashmla_check("lse", lse, ref_lse, 1e-6, 8 / 65536)
        self.assertFalse(errs, "; ".join(errs))

    def test_values(self):
        b = B["decode"]
        for k, (extra, sink) in enumerate([(True, True), (False, True), (True, False), (False, False)]):
            c = decode_case(rng(40 + k), extra=extra, sink=sink)
            kw = dict(softmax_scale=c["scale"], attn_sink=c.get("sink"))
            if extra:
                kw.update(extra_cache=R.token_view(c["xcache"], c["xbs"]), extra_indices=c["xidx"],
                          extra_lens=c["xlens"])
            out, lse = b.sparse_decode(c["q"], R.token_view(c["main"], c["bs"]), c["idx"], c["lens"], **kw)
            self.assertEqual((out.shape, lse.shape), ((5, 8, 512), (5, 8)))
            ro, rl = decode_ref(c)
            self.check(out, lse, ro, rl)
            self.assertTrue((R.bf16_to_f32(out[0]) == 0).all() and np.isposinf(lse[0]).all() or extra,
                            "an empty row: out 0, lse +inf")

    def test_compat_flash_mla(self):
        c = decode_case(rng(50), T=6)
        bsz, s_q = 3, 2
        lens_b = c["lens"][::2].copy()  # one length a batch entry
        xlens_b = c["xlens"][::2].copy()
        c["lens"], c["xlens"] = np.repeat(lens_b, 2), np.repeat(xlens_b, 2)
        q4 = c["q"].reshape(bsz, s_q, 8, 512)
        k4 = R.token_view(c["main"], c["bs"]).reshape(-1, c["bs"], 1, R.V4_TOKEN)
        x4 = R.token_view(c["xcache"], c["xbs"]).reshape(-1, c["xbs"], 1, R.V4_TOKEN)
        meta, _ = compat.get_mla_metadata()
        out, lse = compat.flash_mla_with_kvcache(
            q4, k4, None, None, 512, meta, softmax_scale=c["scale"], is_fp8_kvcache=True,
            indices=c["idx"].reshape(bsz, s_q, -1), attn_sink=c["sink"], extra_k_cache=x4,
            extra_indices_in_kvcache=c["xidx"].reshape(bsz, s_q, -1), topk_length=lens_b, extra_topk_length=xlens_b)
        self.assertEqual((out.shape, lse.shape), ((3, 2, 8, 512), (3, 8, 2)))
        ro, rl = decode_ref(c)
        self.check(out.reshape(6, 8, 512), lse.transpose(0, 2, 1).reshape(6, 8), ro, rl)
        self.assertRaises(NotImplementedError, lambda: compat.flash_mla_with_kvcache(
            q4, k4, np.zeros((3, 1), np.int32), np.ones(3, np.int32), 512, meta))

    def test_strided_views(self):
        """FlashMLA's views: q [B, s_q, H, D] and the index lists strided (every dim padded, as its tests'
        non_contiguousify makes them), topk_length one a batch entry, out a strided [B, s_q, H, V] and lse
        FlashMLA's [B, H, s_q] inside wider arrays: read and written where they lie, every gap untouched; views
        the kernels cannot take refused by name, nothing written."""
        b = B["decode"]
        c = decode_case(rng(70), T=6)
        bsz, s_q, H = 3, 2, 8
        c["lens"], c["xlens"] = np.repeat(c["lens"][::2], 2), np.repeat(c["xlens"][::2], 2)
        ro, rl = decode_ref(c)

        def pad(a, fill, last=128):
            big = np.full([d + 1 for d in a.shape[:-1]] + [a.shape[-1] + last], fill, a.dtype)
            v = big[tuple(slice(0, d) for d in a.shape)]
            v[...] = a
            return big, v

        _, q4 = pad(c["q"].reshape(bsz, s_q, H, 512), 0x7FC0)  # NaN in the gaps
        _, i4 = pad(c["idx"].reshape(bsz, s_q, -1), 0)
        _, x4 = pad(c["xidx"].reshape(bsz, s_q, -1), 0)
        obig, o4 = pad(np.zeros((bsz, s_q, H, 512), np.uint16), 0x1234)
        lbig = np.full((bsz, H, s_q + 3), 7.0, np.float32)
        l3 = lbig[:, :, :s_q]
        cache, xc = R.token_view(c["main"], c["bs"]), R.token_view(c["xcache"], c["xbs"])
        kw = dict(softmax_scale=c["scale"], extra_cache=xc, extra_indices=x4, extra_lens=c["xlens"][::2].copy(),
                  attn_sink=c["sink"])
        out, lse = b.sparse_decode(q4, cache, i4, c["lens"][::2].copy(), out=o4, lse=l3, **kw)
        self.assertIs(out, o4)
        self.check(out.reshape(6, H, 512), lse.transpose(0, 2, 1).reshape(6, H), ro, rl)
        gap = np.ones(obig.shape, bool)
        gap[:bsz, :s_q, :H, :512] = False
        self.assertTrue((obig[gap] == 0x1234).all(), "out's gaps were written")
        self.assertTrue((lbig[:, :, s_q:] == 7.0).all(), "lse's gaps were written")
        # allocated outputs: out [B, s_q, H, V], lse [B, H, s_q]; lens [B, s_q] too
        o2, l2 = b.sparse_decode(q4, cache, i4, c["lens"].reshape(bsz, s_q), **kw)
        self.assertEqual((o2.shape, l2.shape), ((bsz, s_q, H, 512), (bsz, H, s_q)))
        self.check(o2.reshape(6, H, 512), l2.transpose(0, 2, 1).reshape(6, H), ro, rl)
        # refused, nothing written: q rows 516 elements apart (not 16-byte rows), out rows overlapping, a
        # broadcast length view
        o4[...], l3[...] = 0x5A5A, 9.0
        _, qodd = pad(c["q"].reshape(bsz, s_q, H, 512), 0, last=4)
        self.refuses(dsv4c.ArgumentError, lambda: b.sparse_decode(qodd, cache, i4, c["lens"][::2].copy(), out=o4,
                                                                 lse=l3, **kw),
                     o4, l3, status=dsv4c.ERR_MISALIGNED, match="q_strides")
        ov = np.lib.stride_tricks.as_strided(obig, (bsz, s_q, H, 512), (obig.strides[0], obig.strides[1], 512, 2))
        self.refuses(dsv4c.ArgumentError, lambda: b.sparse_decode(q4, cache, i4, c["lens"][::2].copy(), out=ov,
                                                                 lse=l3, **kw),
                     o4, l3, status=dsv4c.ERR_ALIASING, match="out_strides")
        self.refuses(ValueError, lambda: b.sparse_decode(q4, cache, i4, np.broadcast_to(c["lens"][:1], (bsz,)),
                                                         out=o4, lse=l3, **kw), o4, l3, match="broadcast")

    def test_refusals(self):
        b = B["decode"]
        c = decode_case(rng(60))
        out, lse = poison((5, 8, 512), np.uint16), poison((5, 8), np.float32)
        cache = R.token_view(c["main"], c["bs"])
        xc = R.token_view(c["xcache"], c["xbs"])
        kw = dict(out=out, lse=lse, softmax_scale=c["scale"])

        def d(q=c["q"], idx=c["idx"], lens=c["lens"], **more):
            return b.sparse_decode(q, cache, idx, lens, **dict(kw, **more))

        self.refuses(ValueError, lambda: d(q=c["q"][:, :, :256].copy()), out, lse, match="q")
        self.refuses(TypeError, lambda: d(q=R.bf16_to_f32(c["q"])), out, lse, match="q")
        self.refuses(TypeError, lambda: d(idx=c["idx"].astype(np.int64)), out, lse, match="indices")
        self.refuses(ValueError, lambda: d(lens=c["lens"][:4]), out, lse, match="lens")
        self.refuses(ValueError, lambda: d(lse=poison((5, 4), np.float32)), out, lse, match="lse")
        self.refuses(ValueError, lambda: d(attn_sink=c["sink"][:4]), out, lse, match="attn_sink")
        self.refuses(TypeError, lambda: d(extra_cache=xc, extra_indices=c["xidx"]), out, lse, match="together")
        self.refuses(ValueError, lambda: d(idx=np.repeat(c["idx"], 2, axis=1)[:, ::2]), out, lse, match="contiguous")
        self.refuses(dsv4c.ArgumentError, lambda: d(softmax_scale=float("nan")), out, lse,
                     status=dsv4c.ERR_NOT_FINITE, match="softmax_scale")
        bad = c["lens"].copy()
        bad[2] = 500
        self.refuses(dsv4c.ArgumentError, lambda: d(lens=bad, check_contents=True), out, lse,
                     status=dsv4c.ERR_BAD_CONTENTS, match="lens[2]")
        self.refuses(ValueError, lambda: d(out=lse.view(np.uint16).reshape(5, 8, 2)), out, lse, match="out")


# ---- the indexer (docs/ops.md 4) ----


class TestIndexer(Case):
    def setUp(self):
        g = rng(7)
        self.bs, self.nb, self.Bn, self.nn, self.L = 16, 12, 2, 2, 200
        self.raw, self.kv, self.ks = R.idx_cache(g, self.nb, self.bs)
        self.cache = R.token_view(self.raw, self.bs, R.IDX_TOKEN)
        self.q = g.integers(0, 256, size=(self.Bn, self.nn, 64, 128)).astype(np.uint8)
        self.q[(self.q & 0x7F) == 0x7F] = 0
        self.w = g.standard_normal((self.Bn * self.nn, 64)).astype(np.float32)
        self.maxb = 13
        self.bt = np.stack([g.permutation(self.nb + 1)[:self.maxb] % self.nb for _ in range(self.Bn)]).astype(np.int32)
        self.ctx = np.array([[200, 7], [0, 150]], np.int32)

    def check_logits(self, got, ctx):
        ref = R.logits_ref(self.q, self.kv, self.ks, self.w, ctx, self.bt, self.bs, self.L)
        valid = np.isfinite(ref)
        self.assertTrue(np.isneginf(got[~valid]).all(), "positions past the context not -inf")
        self.assertLess(R.calc_diff(got[valid], ref[valid]), 5e-6)

    def test_logits(self):
        b = B["indexer"]
        padded = poison((4, 256), np.float32)
        lg = padded[:, :self.L]
        self.assertIs(b.paged_mqa_logits(self.q, self.cache, self.w, self.ctx, self.bt, logits=lg), lg)
        self.check_logits(lg, self.ctx)
        self.assertTrue((padded[:, self.L:].view(np.uint32) == 0xA5A5A5A5).all(), "row padding written")
        lg2 = b.paged_mqa_logits(self.q, self.raw, self.w, self.ctx, self.bt, row_len=self.L, block_size=self.bs)
        self.check_logits(lg2, self.ctx)

    def test_compat_deepgemm(self):
        kv4 = self.cache.reshape(self.nb, self.bs, 1, R.IDX_TOKEN)
        meta = compat.get_paged_mqa_logits_metadata(self.ctx, 64, 132)
        lg = compat.fp8_paged_mqa_logits(self.q, kv4, self.w, self.ctx, self.bt, meta, self.L, False)
        self.assertEqual(lg.shape, (4, self.L))
        self.check_logits(lg, self.ctx)
        ctx1 = np.array([180, 60], np.int32)  # the older 1-D lengths: row j sees ctx - next_n + j + 1
        lg = compat.fp8_paged_mqa_logits(self.q, kv4, self.w, ctx1, self.bt, meta, self.L, True)
        self.check_logits(lg, np.array([[179, 180], [59, 60]], np.int32))
        self.assertRaises(NotImplementedError, lambda: compat.fp8_paged_mqa_logits(
            (self.q, self.q), kv4, self.w, self.ctx, self.bt, meta, self.L, False))

    def test_topk(self):
        g = rng(8)
        b = B["indexer"]
        rows, L = 6, 1500
        lg = g.standard_normal((rows, 1536)).astype(np.float32)[:, :L]
        lg[2, :600] = np.round(lg[2, :600])  # ties
        ctx = np.array([0, 100, 1500, 512, 1024, 1300], np.int32)
        for name, K in (("topk_512", 512), ("topk_1024", 1024)):
            out = b.topk(lg, ctx, kernel=name)
            self.assertEqual(out.shape, (rows, K))
            errs = R.topk_check(out, lg, ctx, K)
            self.assertFalse(errs, "%s: %s" % (name, "; ".join(errs[:3])))

    def test_logits_topk(self):
        """The fused op beside paged_mqa_logits + the tie-tolerant check: the portable kernels share the
        logits' arithmetic, so the sets must be a top-k of those very logits; rows over one 4096-position
        chunk (the merge) and within it, K 512 and 1024, the Bundle call and DeepGEMM's signature."""
        g = rng(9)
        b = B["indexer"]
        bs, nb, maxb, L = 64, 80, 72, 4600
        raw, kv, ks = R.idx_cache(g, nb, bs)
        cache = R.token_view(raw, bs, R.IDX_TOKEN)
        q = g.integers(0, 256, size=(2, 1, 64, 128)).astype(np.uint8)
        q[(q & 0x7F) == 0x7F] = 0
        w = g.standard_normal((2, 64)).astype(np.float32)
        bt = np.stack([g.permutation(nb)[:maxb] for _ in range(2)]).astype(np.int32)
        ctx = np.array([[4400], [300]], np.int32)
        lg = b.paged_mqa_logits(q, cache, w, ctx, bt, row_len=L)
        for K in (512, 1024):
            out = b.paged_mqa_logits_topk(q, cache, w, ctx, bt, L, k=K)
            self.assertEqual(out.shape, (2, K))
            errs = R.topk_check(out, lg, ctx.reshape(-1), K)
            self.assertFalse(errs, "K %d: %s" % (K, "; ".join(errs[:3])))
        kv4 = cache.reshape(nb, bs, 1, R.IDX_TOKEN)
        out = compat.fp8_paged_mqa_logits_topk(q, kv4, w, ctx, bt, None, L, 512)
        errs = R.topk_check(out, lg, ctx.reshape(-1), 512)
        self.assertFalse(errs, "compat: %s" % "; ".join(errs[:3]))
        self.assertRaises(NotImplementedError, lambda: compat.fp8_paged_mqa_logits_topk(q, kv4, w, ctx, bt, None, L, 7))

    def test_refusals(self):
        b = B["indexer"]
        lg = poison((4, self.L), np.float32)
        m = b.paged_mqa_logits
        args = (self.q, self.cache, self.w, self.ctx, self.bt)
        self.refuses(TypeError, lambda: m(self.q.astype(np.int8), *args[1:], logits=lg), lg, match="q")
        self.refuses(ValueError, lambda: m(self.q[:, :, :32].copy(), *args[1:], logits=lg), lg, match="q")
        self.refuses(ValueError, lambda: m(*args[:2], self.w[:3], *args[3:], logits=lg), lg, match="weights")
        self.refuses(ValueError, lambda: m(*args[:3], self.ctx.reshape(4), self.bt, logits=lg), lg,
                     match="context_lens")
        self.refuses(TypeError, lambda: m(*args[:3], self.ctx.astype(np.int64), self.bt, logits=lg), lg,
                     match="context_lens")
        wide = poison((4, 2 * self.L), np.float32)
        self.refuses(ValueError, lambda: m(*args, logits=wide[:, ::2]), wide, match="logits")
        self.refuses(ValueError, lambda: m(*args[:2], self.w, self.ctx, self.bt, logits=lg[:3]), lg, match="logits")
        self.refuses(ValueError, lambda: m(self.q, self.cache[:, :, :128], *args[2:], logits=lg), lg, match="cache")
        self.refuses(TypeError, lambda: m(*args), match="row_len")
        out = poison((4, 512), np.int32)
        t = b.topk
        self.refuses(ValueError, lambda: t(lg, self.ctx, poison((4, 256), np.int32)), match="out")
        self.refuses(TypeError, lambda: t(lg, self.ctx, out.view(np.float32)), out, match="out")
        self.refuses(ValueError, lambda: t(lg, self.ctx[:1], out), out, match="context_lens")
        self.refuses(TypeError, lambda: t(lg.astype(np.float64), self.ctx, out), out, match="logits")
        self.refuses(dsv4c.Error, lambda: t(lg, self.ctx, out, kernel="mqa_logits_v4"), out,
                     status=dsv4c.ERR_NO_KERNEL)


# ---- prepared calls ----


class TestPrepared(Case):
    def decode(self, c):
        kw = dict(softmax_scale=c["scale"], attn_sink=c["sink"], extra_cache=R.token_view(c["xcache"], c["xbs"]),
                  extra_indices=c["xidx"], extra_lens=c["xlens"])
        return (c["q"], R.token_view(c["main"], c["bs"]), c["idx"], c["lens"]), kw

    def test_launches_follow_the_inputs(self):
        """A prepared decode gives the op call's answer, and each launch reads the inputs' current
        contents (fresh values written in place between launches) into the same outputs."""
        b = B["decode"]
        c = decode_case(rng(70))
        args, kw = self.decode(c)
        p = b.prepare("sparse_decode", *args, **kw)
        self.assertIsInstance(p, dsv4c.Prepared)
        self.assertEqual(p.op, "sparse_decode")
        out, lse = p.outputs
        out[...], lse[...] = 0xA5A5, np.nan  # poisoned: the launch must write them
        got = p()
        self.assertIs(got[0], out)
        self.assertIs(got[1], lse)
        ro, rl = decode_ref(c)
        TestSparseDecode.check(self, out, lse, ro, rl)
        self.assertBits(out, b.sparse_decode(*args, **kw)[0], "prepared against the op call")
        c2 = decode_case(rng(71))  # new contents, same shapes, written into the same arrays
        for k in ("q", "main", "idx", "lens", "xcache", "xidx", "xlens", "sink"):
            c[k][...] = c2[k]
        out[...] = 0xA5A5
        p(stream=0)
        ro, rl = decode_ref(c)
        TestSparseDecode.check(self, out, lse, ro, rl)
        p.close()
        self.assertIsNone(p.op)
        self.assertRaises(ValueError, p)

    def test_other_ops(self):
        g = rng(72)
        raw, _ = R.v4_cache(g, 2, 16)
        idx = g.integers(-1, 32, size=40).astype(np.int32)
        p = B["decode"].prepare("dequant_gather", R.token_view(raw, 16), idx)
        self.assertTrue(np.array_equal(p(), R.v4_dequant(raw, 16, idx)))
        idx[...] = g.integers(-1, 32, size=40)
        self.assertTrue(np.array_equal(p(), R.v4_dequant(raw, 16, idx)))

    def test_refusals(self):
        """Prepare checks what the op call checks, before anything is bound; a launch refuses a bad
        stream and a closed bundle."""
        b = B["decode"]
        c = decode_case(rng(73))
        (q, cache, idx, lens), kw = self.decode(c)
        out, lse = poison((5, 8, 512), np.uint16), poison((5, 8), np.float32)
        kw.update(out=out, lse=lse)
        self.refuses(ValueError, lambda: b.prepare("sparse_decode", q[:, :, :256].copy(), cache, idx, lens, **kw),
                     out, lse, match="q")
        self.refuses(TypeError, lambda: b.prepare("sparse_decode", q, cache, idx.astype(np.int64), lens, **kw),
                     out, lse, match="indices")
        self.refuses(ValueError, lambda: b.prepare("sparse_decode", q, cache, idx, lens, **dict(kw, out=q)),
                     out, lse, match="out")
        self.assertRaises(ValueError, lambda: b.prepare("no_such_op"))
        p = b.prepare("sparse_decode", q, cache, idx, lens, **kw)
        self.refuses(ValueError, lambda: p(stream=1), out, lse, match="stream")
        self.refuses(TypeError, lambda: p(1, 2), out, lse)
        bad = lens.copy()
        bad[2] = 500
        p2 = b.prepare("sparse_decode", q, cache, idx, bad, check_contents=True, **kw)
        self.refuses(dsv4c.ArgumentError, p2, out, lse, status=dsv4c.ERR_BAD_CONTENTS, match="lens[2]")
        b2 = CTX.open_bundle(os.path.join(KERNELS, "decode.dsv4b"))
        p3 = b2.prepare("sparse_decode", q, cache, idx, lens, **kw)
        b2.close()
        self.refuses(dsv4c.Error, p3, out, lse, match="closed")


# ---- threads ----


class TestThreads(Case):
    def gather_case(self, k):
        g = rng(k)
        raw, _ = R.v4_cache(g, 2, 16)
        idx = g.integers(-1, 32, size=64).astype(np.int32)
        return R.token_view(raw, 16), idx, R.v4_dequant(raw, 16, idx)

    def in_threads(self, call, ref, threads=4, calls=10):
        """call() from several threads at once, `calls` times each: every result equals ref, nothing raises."""
        errors = []

        def work():
            try:
                for _ in range(calls):
                    if not np.array_equal(call(), ref):
                        errors.append("wrong result")
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(repr(e))

        ts = [threading.Thread(target=work) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertFalse(errors, errors[:3])

    def test_concurrent_calls(self):
        """Calls from several threads on one context (the extension's lock; GIL released)."""
        cache, idx, ref = self.gather_case(9)
        self.in_threads(lambda: B["decode"].dequant_gather(cache, idx), ref)

    def test_close_while_calling(self):
        """Bundle.close in one thread while others call it and launch a prepared call of it: nothing
        crashes, every call gives the right answer or raises 'the bundle is closed' (never a call on
        a destroyed bundle), and every call after the close raises it (issue 37, item 5)."""
        cache, idx, ref = self.gather_case(11)
        for round in range(8):
            b = CTX.open_bundle(os.path.join(KERNELS, "decode.dsv4b"))
            p = b.prepare("dequant_gather", cache, idx)
            closed, errors, done = threading.Event(), [], []
            start = threading.Barrier(5)

            def work(call):
                start.wait()
                for _ in range(40):
                    after = closed.is_set()
                    try:
                        if not np.array_equal(call(), ref):
                            errors.append("wrong result")
                        elif after:
                            errors.append("a call after close() ran")
                    except ValueError as e:
                        if "closed" not in str(e):
                            errors.append(repr(e))
                    except Exception as e:  # noqa: BLE001 (reported below)
                        errors.append(repr(e))
                done.append(1)

            def closer():
                start.wait()
                time.sleep(0.002 * round)
                b.close()
                closed.set()

            ts = [threading.Thread(target=work, args=(lambda: b.dequant_gather(cache, idx),)) for _ in range(3)]
            ts += [threading.Thread(target=work, args=(p,)), threading.Thread(target=closer)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            self.assertEqual(len(done), 4)
            self.assertFalse(errors, errors[:3])
            with self.assertRaisesRegex(ValueError, "closed"):
                b.dequant_gather(cache, idx)
            with self.assertRaisesRegex(ValueError, "closed"):
                p()
            p.close()

    def test_prepared_from_threads(self):
        """One prepared call launched from several threads at once (each launch under the context's
        lock, the GIL let go): every launch gives the reference's answer, and close() afterwards
        lets go of the tensors."""
        cache, idx, ref = self.gather_case(10)
        p = B["decode"].prepare("dequant_gather", cache, idx)
        self.in_threads(p, ref)
        p.close()
        self.assertRaises(ValueError, p)


# ---- every refusal names its argument first (issue 37, item 6) ----


class TestArgumentNames(Case):
    """Each bad argument is refused with a message that starts with its Python name (CPython's own
    conversion errors and the runtime's C field names included), before anything is written."""

    def check_all(self, cases, *outs):
        bad = []
        for name, fn in cases:
            before = [np.array(o, copy=True) for o in outs]
            try:
                fn()
            except (TypeError, ValueError, OverflowError, dsv4c.Error) as e:
                if not str(e).startswith(name + ":") and not str(e).startswith(name + "["):
                    bad.append("%s: %s: %s" % (name, type(e).__name__, e))
            else:
                bad.append("%s: not refused" % name)
            for o, b in zip(outs, before):
                if not np.array_equal(np.asarray(o).view(np.uint8), b.view(np.uint8)):
                    bad.append("%s: an output was written" % name)
        self.assertFalse(bad, "\n".join(bad))
        return len(cases)

    def test_gathers(self):
        b = B["decode"]
        g = rng(80)
        raw, _ = R.v4_cache(g, 5, 16)
        c = R.token_view(raw, 16)
        i = g.integers(-1, 80, size=37).astype(np.int32)
        out = poison((37, 512), np.uint16)
        d = b.dequant_gather
        pout = poison((3, 40, 512), np.uint16)
        seq, bt = np.array([37, 5, 64], np.int32), np.zeros((3, 4), np.int32)
        p = b.paged_gather
        n = self.check_all([
            ("block_size", lambda: d(raw, i, out, block_size=2 ** 70)),
            ("block_size", lambda: d(raw, i, out, block_size="64")),
            ("block_size", lambda: d(raw, i, out, block_size=1.5)),
            ("block_size", lambda: d(raw, i, out, block_size=-1)),
            ("kernel", lambda: d(c, i, out, kernel=123)),
            ("kernel", lambda: d(c, i, out, kernel="dequant\0gather_v4")),
            ("kernel", lambda: d(c, i, out, kernel="nope")),
            ("stream", lambda: d(c, i, out, stream=-1)),
            ("stream", lambda: d(c, i, out, stream=2 ** 70)),
            ("stream", lambda: d(c, i, out, stream=1.5)),
            ("tensor_scale", lambda: d(c, i, out, tensor_scale="x")),
            ("check_contents", lambda: d(c, i, out, check_contents=np.array([1, 2]))),
            ("indices", lambda: d(c, [1, 2, 3], out)),
            ("indices", lambda: d(c, "indices", out)),
            ("cache", lambda: d(b"bytes", i, out)),
            ("out", lambda: d(c, i, 5)),
            ("offset", lambda: p(pout, c, seq, bt, offset="x")),
            ("offset", lambda: p(pout, c, seq, bt, offset=2 ** 70)),
            ("offset", lambda: p(pout, c, seq, bt, offset=41)),
            ("seq_lens", lambda: p(pout, c, np.array([999, 1, 1], np.int32), bt, check_contents=True)),
        ], out, pout)
        self.assertEqual(n, 20)

    def test_decode_and_insert(self):
        b = B["decode"]
        c = decode_case(rng(81))
        out, lse = poison((5, 8, 512), np.uint16), poison((5, 8), np.float32)
        cache = R.token_view(c["main"], c["bs"])
        xc = R.token_view(c["xcache"], c["xbs"])

        def d(q=c["q"], idx=c["idx"], lens=c["lens"], **more):
            return b.sparse_decode(q, cache, idx, lens, **dict(dict(out=out, lse=lse, softmax_scale=c["scale"]),
                                                              **more))

        raw = poison((4, 16 * R.V4_TOKEN), np.uint8)
        kc = R.token_view(raw, 16)
        kv = np.zeros((7, 512), np.uint16)
        sm, pos, cs = np.zeros(6, np.int64), np.zeros(7, np.int64), R.cos_sin_table(100)
        qk = np.zeros((7, 3, 512), np.uint16)
        k = b.kv_insert
        self.check_all([
            ("softmax_scale", lambda: d(softmax_scale="x")),
            ("softmax_scale", lambda: d(softmax_scale=float("nan"))),
            ("splits", lambda: d(splits="x")),
            ("splits", lambda: d(splits=2 ** 40)),
            ("splits", lambda: d(splits=-1)),
            ("q", lambda: d(q=np.zeros((5, 0, 512), np.uint16), out=np.zeros((5, 0, 512), np.uint16),
                            lse=np.zeros((5, 0), np.float32))),
            ("q", lambda: d(q=[[1.0]])),
            ("extra_block_size", lambda: d(extra_cache=xc, extra_indices=c["xidx"], extra_lens=c["xlens"],
                                           extra_block_size="x")),
            ("extra_indices", lambda: d(extra_cache=xc, extra_lens=c["xlens"])),
            ("lens", lambda: d(lens=np.full(5, 500, np.int32), check_contents=True)),
            ("indices", lambda: d(idx=np.full((5, 128), 10 ** 6, np.int32), check_contents=True)),
            ("attn_sink", lambda: d(attn_sink=np.zeros(8, np.float64))),
            ("eps", lambda: k(kc, kv, sm, pos, cs, eps="x")),
            ("eps", lambda: k(kc, kv, sm, pos, cs, qk, eps=-1.0)),
            ("padded_heads", lambda: k(kc, kv, sm, pos, cs, qk, padded_heads=0)),
            ("padded_heads", lambda: k(kc, kv, sm, pos, cs, qk, padded_heads="4")),
            ("positions", lambda: k(kc, kv, sm, pos.astype(np.int32), cs)),
            ("positions", lambda: B["insert"].kv_insert(kc, kv, sm, pos, cs, kernel="kv_quant_insert_v4")),
            ("q", lambda: B["insert"].kv_insert(kc, kv, sm, q=qk, kernel="kv_quant_insert_v4")),
            ("q", lambda: k(kc, kv, sm, pos, cs, [1, 2])),
        ], out, lse, raw)

    def test_indexer(self):
        b = B["indexer"]
        lg = poison((4, 200), np.float32)
        q = np.zeros((2, 2, 64, 128), np.uint8)
        cache = R.token_view(poison((12, 16 * R.IDX_TOKEN), np.uint8), 16, R.IDX_TOKEN)
        w, ctx, bt = np.zeros((4, 64), np.float32), np.zeros((2, 2), np.int32), np.zeros((2, 13), np.int32)
        m = b.paged_mqa_logits
        out = poison((4, 512), np.int32)
        self.check_all([
            ("no_tensor_maps", lambda: m(q, cache, w, ctx, bt, logits=lg, no_tensor_maps=np.array([1, 2]))),
            ("row_len", lambda: m(q, cache, w, ctx, bt)),
            ("logits", lambda: m(q, cache, w, ctx, bt, logits=lg[:, ::2])),
            ("kernel", lambda: m(q, cache, w, ctx, bt, logits=lg, kernel="topk_512")),
            ("context_lens", lambda: m(q, cache, w, np.full((2, 2), 10 ** 6, np.int32), bt, logits=lg,
                                       check_contents=True)),
            ("logits", lambda: b.topk(lg.astype(np.float64), ctx.reshape(4), out)),
            ("logits", lambda: b.topk(None, ctx.reshape(4))),
            ("check_contents", lambda: b.topk(lg, ctx.reshape(4), out, check_contents=np.array([1, 2]))),
            ("op", lambda: b.prepare("no_such_op")),
        ], lg, out)

    def test_compat(self):
        c = decode_case(rng(82), T=2)
        q4 = c["q"].reshape(1, 2, 8, 512)
        k4 = R.token_view(c["main"], c["bs"]).reshape(-1, c["bs"], 1, R.V4_TOKEN)
        meta, _ = compat.get_mla_metadata()
        f = compat.flash_mla_with_kvcache
        idx = c["idx"].reshape(1, 2, -1)
        self.check_all([
            ("causal", lambda: f(q4, k4, None, None, 512, meta, causal=True, indices=idx)),
            ("num_splits", lambda: f(q4, k4, None, None, 512, meta, num_splits=2, indices=idx)),
            ("extra_indices_in_kvcache", lambda: f(q4, k4, None, None, 512, meta, indices=idx, extra_k_cache=k4)),
            ("q", lambda: f(c["q"], k4, None, None, 512, meta, indices=idx)),
        ])


# ---- which kernel tuning chooses (issue 36, item 8) ----


class TestTunedKernel(Case):
    def test_tuned_kernel(self):
        """Bundle.tuned_kernel(op, dims) answers what a loaded lockfile chooses for a shape (None
        where no entry covers its bucket), and refuses a bad op or dims naming them."""
        import json
        import tempfile

        # two kv_insert kernels of one kind (op and layout: tuning chooses among such only)
        b = CTX.open_bundle(os.path.join(KERNELS, "insert.dsv4b"))
        self.assertIsNone(b.tuned_kernel("kv_insert", (5,)))
        code = {e["name"]: e for e in b.entries() if e["runs"]}
        model = CTX.device_name.split(" (")[0]  # the device model a lockfile records

        def entry(bucket, winner, loser):
            e = code[winner]
            return {"kernel": "ins", "op": "kv_insert", "target": e["target"], "arch": e["arch"], "device": model,
                    "toolchain": "test", "spec_hash": "test", "bucket": bucket, "shape": "", "seed": 0,
                    "winner": winner, "variants": [
                        {"name": n, "gate": "pass", "median_us": t, "min_us": t, "max_us": t, "samples": 3,
                         "code": code[n]["code"], "reason": ""} for n, t in ((winner, 1.0), (loser, 2.0))]}

        lock = {"format": "dsv4c-tune-lock 1", "tie_break": "lowest median_us",
                "entries": [entry("n=8", "kv_quant_insert_v4", "kv_insert_v4"),
                            entry("n=64", "kv_insert_v4", "kv_quant_insert_v4")]}
        with tempfile.NamedTemporaryFile("w", suffix=".lock", delete=False) as f:
            json.dump(lock, f)
        try:
            b.load_tuning(f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual(b.tuned_kernel("kv_insert", (5,)), "kv_quant_insert_v4")  # N 5: bucket n=8
        self.assertEqual(b.tuned_kernel("kv_insert", 8), "kv_quant_insert_v4")
        self.assertEqual(b.tuned_kernel("kv_insert", [40]), "kv_insert_v4")  # bucket n=64
        self.assertIsNone(b.tuned_kernel("kv_insert", (1000,)))
        self.assertIsNone(b.tuned_kernel("sparse_decode", (4, 64, 128, 0, 0)))
        for exc, name, fn in [(ValueError, "op", lambda: b.tuned_kernel("no_such_op", 1)),
                              (ValueError, "op", lambda: b.tuned_kernel(5, 1)),
                              (ValueError, "dims", lambda: b.tuned_kernel("topk", (1, 2))),
                              (ValueError, "dims", lambda: b.tuned_kernel("sparse_decode", (1, 2, 3))),
                              (ValueError, "dims", lambda: b.tuned_kernel("topk", (-1,))),
                              (TypeError, "dims", lambda: b.tuned_kernel("topk", None)),
                              (TypeError, "dims", lambda: b.tuned_kernel("topk", ("x",))),
                              (OverflowError, "dims", lambda: b.tuned_kernel("topk", (2 ** 70,)))]:
            with self.assertRaises(exc) as cm:
                fn()
            self.assertTrue(str(cm.exception).startswith(name + ":"), str(cm.exception))
        b.close()
        self.assertRaises(ValueError, lambda: b.tuned_kernel("topk", 5))


if __name__ == "__main__":
    argv = [sys.argv[0]] + [a for a in sys.argv[1:] if a != KERNELS]
    prog = unittest.main(argv=argv, exit=False, verbosity=2)
    r = prog.result
    if r.errors or r.failures or r.unexpectedSuccesses:
        sys.exit(1)
    if r.testsRun == 0 or len(r.skipped) >= r.testsRun:
        print("all tests skipped: reporting skipped (77)", file=sys.stderr)
        sys.exit(77)
    sys.exit(0)
