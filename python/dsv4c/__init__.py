"""dsv4c: the DeepSeek-V4 decode kernels of a dsv4c bundle, called from Python.

    import numpy as np, dsv4c
    ctx = dsv4c.Context("opencl")                  # or "cuda", "hip", or "auto"
    b = ctx.open_bundle("build/kernels/decode.dsv4b")
    out = b.dequant_gather(cache, indices)        # cache [nb, 64, 584] uint8, indices [n] int32

Tensors are any object with ``__dlpack__`` or ``__cuda_array_interface__``
(PyTorch, CuPy, JAX, ...; torch tensors are read through their own accessors,
which costs a tenth of their ``__dlpack__``) on a CUDA context, and NumPy arrays (buffer
protocol, ``__array_interface__``, or CPU ``__dlpack__``) on an OpenCL
context, which copies them to the device and the outputs back.  bfloat16
data may be given as raw ``uint16`` bits and float8 e4m3 as ``uint8``
(NumPy has neither type).  Every argument is checked against the kernel the
call runs before anything is launched: a wrong dtype is a ``TypeError``; a
wrong shape, stride, device or layout a ``ValueError``; a refusal by the
runtime (range, alignment, aliasing, contents) a ``dsv4c.ArgumentError``
(both a ``dsv4c.Error`` and a ``ValueError``); any other runtime status a
``dsv4c.Error`` with ``.status``, ``.status_name`` and the runtime's message.
Outputs a call is not given are allocated like the inputs (NumPy arrays, or
torch tensors on the inputs' device) and returned.

``stream=`` (an int ``CUstream`` handle, or an object with ``.cuda_stream``
such as ``torch.cuda.Stream``) puts a call's launches on that stream;
without it a call on torch CUDA tensors goes on torch's current stream of
their device (as a torch op would), and any other call on
``Context.stream`` (0, the legacy default stream, unless set).  ``dsv4c.compat``
has drop-in versions of FlashMLA's, vLLM's and DeepGEMM's entry points.
docs/python.md says how and why.
"""

import operator as _operator
import sys as _sys

from . import _dsv4c
from ._dsv4c import ArgumentError, Error, Prepared

__all__ = ["Context", "Bundle", "Prepared", "Error", "ArgumentError", "OPS"]
__version__ = "0.1.0"

OPS = ("dequant_gather", "paged_gather", "kv_insert", "sparse_decode", "paged_mqa_logits", "topk",
       "paged_mqa_logits_topk")

# status codes (dsv4rt_status), for comparing with Error.status
for _n in dir(_dsv4c):
    if _n == "OK" or _n.startswith("ERR_"):
        globals()[_n] = getattr(_dsv4c, _n)
del _n

_BACKENDS = {"auto": _dsv4c.BACKEND_AUTO, "cuda": _dsv4c.BACKEND_CUDA, "opencl": _dsv4c.BACKEND_OPENCL,
             "hip": _dsv4c.BACKEND_HIP}


class Context:
    """A device: ``Context(backend="auto"|"cuda"|"hip"|"opencl", device=0)``.

    "auto" takes CUDA where a CUDA device is present, else HIP where an AMD
    one is, else OpenCL.  A HIP context takes ROCm device tensors (DLPack
    device ROCm, ``__cuda_array_interface__``, or torch's ROCm tensors,
    which torch calls "cuda").  A missing
    driver or device raises dsv4c.Error (status ERR_NO_BACKEND).  Calls on one
    context from several threads are serialised by a lock; each call
    releases the GIL while it runs on the device."""

    def __init__(self, backend="auto", device=0):
        if backend not in _BACKENDS:
            raise ValueError("backend: expected one of %s, got %r" % (", ".join(map(repr, _BACKENDS)), backend))
        self._c = _dsv4c.Context(_BACKENDS[backend], int(device))

    backend = property(lambda self: self._c.backend, doc="'cuda', 'hip' or 'opencl'")
    device = property(lambda self: self._c.device, doc="the device index")
    device_name = property(lambda self: self._c.device_name, doc="the device's description")

    @property
    def stream(self):
        """The CUstream (HIP: hipStream_t) handle calls without ``stream=`` launch on (0: the legacy default stream).
        Settable with an int or an object with ``.cuda_stream``; OpenCL takes only 0."""
        return self._c.stream

    @stream.setter
    def stream(self, s):
        self._c.stream = s

    def synchronize(self):
        """Wait for all work queued on the device."""
        self._c.synchronize()

    def open_bundle(self, path):
        """Open a bundle file that dsv4c wrote (``<spec>.dsv4b``)."""
        return Bundle(self, self._c.open_bundle(path))

    def open_bundle_bytes(self, data):
        """Open a bundle from bytes (copied)."""
        return Bundle(self, self._c.open_bundle_bytes(data))

    def __repr__(self):
        return "dsv4c.Context(%r, device=%d: %s)" % (self.backend, self.device, self.device_name)


# ---- tensors ----

_PLAIN = set()  # dtypes seen that are passed as they are


_TT = ()  # torch.Tensor once a torch tensor was seen: the extension reads its every dtype itself


def _raw(x):
    """x, or a view of it as raw bits where its dtype has no DLPack or
    buffer-protocol code the extension reads (NumPy's ml_dtypes bfloat16 and
    float8; other exporters' float8).  torch tensors pass as they are: the
    extension reads them through torch's own accessors, float8 included."""
    global _TT
    if x is None or type(x) is _TT:
        return x
    dt = getattr(x, "dtype", None)
    if dt is None or dt in _PLAIN:
        return x
    name = str(dt)
    short = name.rsplit(".", 1)[-1]
    torch = name.startswith("torch.")
    if torch and type(x) is _sys.modules["torch"].Tensor:
        _TT = type(x)
        return x
    if short.startswith("float8_"):
        return x.view(_sys.modules["torch"].uint8 if torch else _np().uint8)
    if short == "bfloat16" and not torch:
        return x.view(_np().uint16)
    try:
        _PLAIN.add(dt)
    except TypeError:
        pass
    return x


_NO_TF = []  # [torch._C.DisableTorchFunction or None], once torch is imported


def _quiet(x):
    """A context in which torch calls skip the process's torch function modes, when x is a torch
    tensor and torch has torch._C.DisableTorchFunction; else a no-op.  torch.set_default_device
    (FlashMLA's and DeepGEMM's tests, some engines) installs such a mode, and it turns each of the
    extension's tensor accessor calls into a Python call: 70 a decode call, 100 us of host time
    measured on an H200 host (bench/RESULTS.md).  The extension passes devices explicitly, so the
    mode changes nothing it does."""
    if not _NO_TF:
        if not _is_torch(x):
            return _NULL
        _NO_TF.append(getattr(_sys.modules["torch"]._C, "DisableTorchFunction", None))
    return _NO_TF[0]() if _NO_TF[0] is not None and _is_torch(x) else _NULL


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NULL = _Null()


def _np():
    import numpy

    return numpy


def _is_torch(x):
    return type(x).__module__.split(".", 1)[0] == "torch"


def _is_numpy(x):
    return type(x).__module__ == "numpy"


_KINDS = ("bf16", "f32", "i32")


def _shape(x, name):
    """x.shape, or a TypeError naming the argument (a list, None)."""
    try:
        return tuple(x.shape)
    except AttributeError:
        raise TypeError("%s: expected a tensor (an object with .shape), got %s" % (name, type(x).__name__)) from None


def _empty(like, shape, kind, bf16_like=None, name="out"):
    """An output of `shape` allocated like `like`: a NumPy array (bf16 as
    uint16 bits, or bf16_like's dtype) or a torch tensor on like's device.
    name: the output's argument, for the error when it cannot be made."""
    shape = tuple(int(s) for s in shape)
    if _is_torch(like):
        torch = _sys.modules["torch"]
        dt = {"bf16": torch.bfloat16, "f32": torch.float32, "i32": torch.int32}[kind]
        if kind == "bf16" and bf16_like is not None and _is_torch(bf16_like):
            dt = bf16_like.dtype
        return torch.empty(shape, dtype=dt, device=like.device)
    if _is_numpy(like):
        np = _np()
        dt = {"bf16": np.uint16, "f32": np.float32, "i32": np.int32}[kind]
        if kind == "bf16" and bf16_like is not None and _is_numpy(bf16_like) and bf16_like.dtype.itemsize == 2:
            dt = bf16_like.dtype
        return np.empty(shape, dtype=dt)
    raise TypeError("%s: cannot allocate it like a %s: pass it (%s=...)" % (name, type(like).__name__, name))


class Bundle:
    """The kernels of one bundle on a context; one method per op.

    Every op takes ``kernel=`` (a kernel name of the bundle; default: the
    first kernel of the op that runs on the device, or the warp-matrix form
    of the same layout where the device runs one), ``check_contents=``
    (also read the lengths and indices in device memory back and refuse bad
    ones, status ERR_BAD_CONTENTS) and ``stream=``.  A paged cache is
    ``[num_blocks, block_size, <token bytes>...]`` (e.g. [nb, 64, 584] or
    FlashMLA's [nb, 64, 1, 584]), its block stride taken from stride(0) (it
    must own num_blocks * stride(0) bytes), or ``[num_blocks, block_bytes]``
    with ``block_size=``."""

    def __init__(self, ctx, raw):
        self.context = ctx
        self._b = raw
        self._infos = {}

    def close(self):
        self._b.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def load_tuning(self, path):
        """Load a dsv4c-tune lockfile (docs/tuning.md): calls that name no kernel then run its winner for
        their shape bucket, else the runtime's default rule.  Stale entries raise dsv4c.Error
        (ERR_STALE_TUNING), naming them, after the fresh ones were loaded."""
        self._b.load_tuning(str(path))

    def tuned_kernel(self, op, dims):
        """The kernel tuning chooses (load_tuning's lockfile, or the bundle's own choice records: dsv4c
        --lock) for a call of `op` that names no kernel, with these dims: sparse_decode (T, H, topk,
        extra_topk, extra_block_size: 0, 0 without the extra cache), paged_mqa_logits (B, next_n,
        row_len), the other ops their one count (dequant_gather n = indices.size, paged_gather R =
        len(seq_lens), kv_insert N = kv.shape[0], topk rows = logits.shape[0]).  None when no tuning
        entry covers their bucket: the default rule then chooses (``op_info(op)``)."""
        return self._b.tuned_kernel(op, dims)

    def entries(self):
        """One dict per (kernel, target) entry of the bundle (with "code", the SHA-256 of its code as a
        tuning lockfile records it)."""
        return self._b.entries()

    def kernels(self):
        """One dict per kernel: name, op, layout, targets ['spirv', 'ptx:sm_90a', ...], runs (on this
        device), and the parameters (dim, token_bytes, v_dim, heads, topk, q_dim, rope_dims, ...) of
        the entry that runs here (else the first)."""
        out, by = [], {}
        for e in self._b.entries():
            k = by.get(e["name"])
            tgt = e["target"] if e["target"] == "spirv" else "%s:%s" % (e["target"], e["arch"])
            if k is None:
                k = dict(e)
                del k["target"], k["arch"], k["code"]
                k["targets"] = []
                by[e["name"]] = k
                out.append(k)
            elif e["runs"] and not k["runs"]:
                k.update((f, v) for f, v in e.items() if f not in ("target", "arch", "code"))
            k["targets"].append(tgt)
        return out

    def op_info(self, op, kernel=None):
        """The parameters of the kernel a call of `op` (with `kernel=`) checks its arguments against."""
        key = (op, kernel)
        info = self._infos.get(key)
        if info is None:
            info = self._infos[key] = self._b.op_info(op, kernel)
        return info

    # ---- calls prepared once, launched many times ----

    def prepare(self, op, *args, **kwargs):
        """A call of `op` (one of OPS; the op method's arguments) checked and bound once: returns a
        ``dsv4c.Prepared``; calling it (``p()`` or ``p(stream=s)``) launches and returns the op's
        outputs (``p.outputs``, the same objects each time).  Outputs not given are allocated here.
        A launch costs the runtime's own call plus the stream's lookup (docs/python.md): what a
        serving engine that keeps its buffers in place (as CUDA graphs require) calls each step.
        Without ``stream=`` (here or at the launch), a launch on torch CUDA tensors goes on torch's
        current stream at the time of the launch.  The prepared call holds its tensors; their memory
        must stay where it is (no ``resize_`` / ``set_``).  On OpenCL each launch copies the arrays'
        current contents in and the outputs back.  ``p.close()`` lets them go."""
        if op not in OPS:
            raise ValueError("op: unknown op %r (one of %s)" % (op, ", ".join(OPS)))
        return getattr(self, op)(*args, _prepare=True, **kwargs)

    def _run(self, op, kw, result, x, stream, prepare):
        """Call the extension's `op` with kw, or prepare it.  stream None: the extension's rule
        (torch's current stream for torch CUDA tensors, else Context.stream)."""
        kw["stream"] = stream
        with _quiet(x):
            if prepare:
                return self._b._prepare(op, kw, result)
            getattr(self._b, op)(**kw)
        return result

    # ---- the ops (docs/ops.md sections 2-5) ----

    def dequant_gather(self, cache, indices, out=None, *, block_size=None, tensor_scale=1.0, kernel=None,
                       check_contents=False, stream=None, _prepare=False):
        """out[i, :] = the dequantized cache slot indices[i] (a negative index: zeros), docs/ops.md 2a.
        indices: int32, any shape; out: bf16 indices.shape + (dim,).  Returns out."""
        cache, indices = _raw(cache), _raw(indices)
        if out is None:
            out = _empty(indices, _shape(indices, "indices") + (self.op_info("dequant_gather", kernel)["dim"],), "bf16")
        return self._run("dequant_gather", dict(out=_raw(out), cache=cache, indices=indices, block_size=block_size,
                                                tensor_scale=tensor_scale, kernel=kernel,
                                                check_contents=check_contents), out, indices, stream, _prepare)

    def paged_gather(self, out, cache, seq_lens, block_table, gather_lens=None, offset=0, *, block_size=None,
                     tensor_scale=1.0, kernel=None, check_contents=False, stream=None, _prepare=False):
        """vLLM's dequantize_and_gather_k_cache, docs/ops.md 2b: for request r < R = len(seq_lens) and
        i < g_r, out[r, offset + i] = dequant(position seq_lens[r] - g_r + i through block_table).
        out: bf16 [>= R, rows, dim], any row strides (multiples of 8 elements), last dim contiguous;
        other rows untouched.  Returns out."""
        return self._run("paged_gather", dict(out=_raw(out), cache=_raw(cache), seq_lens=_raw(seq_lens),
                                              block_table=_raw(block_table), gather_lens=_raw(gather_lens),
                                              offset=offset, block_size=block_size, tensor_scale=tensor_scale,
                                              kernel=kernel, check_contents=check_contents), out, out, stream,
                         _prepare)

    def kv_insert(self, cache, kv, slot_mapping, positions=None, cos_sin=None, q=None, q_out=None, *,
                  padded_heads=None, eps=1e-6, block_size=None, kernel=None, check_contents=False, stream=None,
                  _prepare=False):
        """The cache writer, docs/ops.md 5: RoPE (kernels with RoPE: positions int64 [N], cos_sin f32
        [max_pos, rope_dims]), quantize and write kv (bf16 [N, dim]) rows n < len(slot_mapping) with
        slot_mapping[n] >= 0 (int64) into the cache.  Kernels with a q branch also write q_out [N,
        padded_heads, q_dim] = RoPE(RMSNorm(q [N, H, q_dim])), zeros past H; q_out is allocated when
        not given (padded_heads defaults to H) and returned (None without a q branch)."""
        if q is not None and q_out is None:
            q = _raw(q)
            info = self.op_info("kv_insert", kernel)
            qs = _shape(q, "q")
            if len(qs) != 3:
                raise ValueError("q: expected shape [N, heads, %d], got %s" % (info["q_dim"], qs))
            try:
                hp = qs[1] if padded_heads is None else _operator.index(padded_heads)
            except TypeError:
                raise TypeError("padded_heads: expected an int, got %s" % type(padded_heads).__name__) from None
            if hp < qs[1]:
                raise ValueError("padded_heads: %d is below q's %d heads" % (hp, qs[1]))
            q_out = _empty(q, (qs[0], hp, info["q_dim"]), "bf16", q, "q_out")
        return self._run("kv_insert", dict(cache=_raw(cache), kv=_raw(kv), slot_mapping=_raw(slot_mapping),
                                           positions=_raw(positions), cos_sin=_raw(cos_sin), q=_raw(q),
                                           q_out=_raw(q_out), eps=eps, block_size=block_size, kernel=kernel,
                                           check_contents=check_contents), q_out, kv, stream, _prepare)

    def sparse_decode(self, q, cache, indices, lens, *, softmax_scale=None, extra_cache=None, extra_indices=None,
                      extra_lens=None, attn_sink=None, out=None, lse=None, tensor_scale=1.0, block_size=None,
                      extra_block_size=None, splits=0, kernel=None, check_contents=False, stream=None,
                      _prepare=False):
        """Sparse MLA decode with FlashMLA's semantics, docs/ops.md 3: q bf16 [T, H, dim]; indices int32
        [T, topk] (-1 skipped) with lens int32 [T]; optionally the extra (compressed) cache with its
        own indices and lens, one joint softmax; attn_sink f32 [H] in the denominator only.
        softmax_scale defaults to dim ** -0.5.  Returns (out bf16 [T, H, v_dim], lse f32 [T, H]).
        Batched, as FlashMLA takes them: q [B, s_q, H, dim], indices [B, s_q, topk], lens [B] (one a
        batch entry) or [B, s_q]; then out is [B, s_q, H, v_dim] and lse [B, H, s_q].  Every tensor
        but the cache and the sink may be a strided view (its last dim contiguous; q's and out's
        strides multiples of 8): the kernels read and write them where they lie, no copy made."""
        q = _raw(q)
        qs = _shape(q, "q")
        if len(qs) not in (3, 4):
            raise ValueError("q: expected shape [T, H, dim] or [B, s_q, H, dim], got %s" % (qs,))
        if softmax_scale is None:
            softmax_scale = qs[-1] ** -0.5
        if out is None or lse is None:
            H = qs[-2]
            if out is None:
                out = _empty(q, qs[:-1] + (self.op_info("sparse_decode", kernel)["v_dim"],), "bf16", q)
            if lse is None:
                lse = _empty(q, (qs[0], H, qs[1]) if len(qs) == 4 else (qs[0], H), "f32", name="lse")
        return self._run("sparse_decode", dict(out=_raw(out), lse=lse, q=q, cache=_raw(cache),
                                               indices=_raw(indices), lens=_raw(lens), softmax_scale=softmax_scale,
                                               extra_cache=_raw(extra_cache), extra_indices=_raw(extra_indices),
                                               extra_lens=_raw(extra_lens), attn_sink=_raw(attn_sink),
                                               tensor_scale=tensor_scale, block_size=block_size,
                                               extra_block_size=extra_block_size, splits=splits, kernel=kernel,
                                               check_contents=check_contents), (out, lse), q, stream, _prepare)

    def paged_mqa_logits(self, q, cache, weights, context_lens, block_table, *, row_len=None, logits=None,
                         block_size=None, kernel=None, check_contents=False, stream=None, no_tensor_maps=False,
                         _prepare=False):
        """The indexer's logits, docs/ops.md 4: q e4m3 [B, next_n, heads, dim] (uint8 bits or float8_e4m3fn),
        weights f32 [B * next_n, heads], context_lens int32 [B, next_n], block_table int32 [B, max_blocks];
        logits f32 [B * next_n, row_len] (row stride from stride(0)), -inf past each row's context.
        Allocated [B * next_n, row_len] when not given.  Returns logits."""
        q = _raw(q)
        if logits is None:
            if row_len is None:
                raise TypeError("row_len: pass logits= or row_len=")
            qs = _shape(q, "q")
            if len(qs) != 4:
                raise ValueError("q: expected shape [B, next_n, heads, dim], got %s" % (qs,))
            logits = _empty(weights, (qs[0] * qs[1], row_len), "f32", name="logits")
        return self._run("paged_mqa_logits", dict(logits=_raw(logits), q=q, cache=_raw(cache), weights=_raw(weights),
                                                  context_lens=_raw(context_lens), block_table=_raw(block_table),
                                                  block_size=block_size, kernel=kernel, check_contents=check_contents,
                                                  no_tensor_maps=no_tensor_maps), logits, q, stream, _prepare)

    def topk(self, logits, context_lens, out=None, *, splits=0, kernel=None, check_contents=False, stream=None,
             _prepare=False):
        """out[r, :K] = the positions of the K largest logits[r, k], k < context_lens[r] (any order);
        rows with context <= K get 0..ctx-1 then -1.  K is the kernel's (op_info('topk')['topk']).
        splits: CTAs a row (then a merge kernel; 1: whole rows; 0: the runtime's choice).
        Returns out (int32 [rows, K])."""
        logits = _raw(logits)
        if out is None:
            out = _empty(logits, (_shape(logits, "logits")[0], self.op_info("topk", kernel)["topk"]), "i32")
        return self._run("topk", dict(out=_raw(out), logits=logits, context_lens=_raw(context_lens), splits=splits,
                                      kernel=kernel, check_contents=check_contents), out, logits, stream, _prepare)

    def paged_mqa_logits_topk(self, q, cache, weights, context_lens, block_table, row_len, *, k=None, out=None,
                              block_size=None, kernel=None, check_contents=False, stream=None, no_tensor_maps=False,
                              _prepare=False):
        """The indexer's logits and top-k in one op, the logits never written (docs/ops.md 4): the inputs of
        paged_mqa_logits, and out int32 [B * next_n, K] = each row's K largest positions below
        min(context, row_len), in no order, rows with context <= K as 0..ctx-1 then -1 -- the decode's
        compressed list as it reads it.  K: k, the runtime's rule then choosing among the kernels of that K
        (by their chunk); else the named kernel's, or the first kernel's.  out allocated when not given.
        Returns out."""
        q = _raw(q)
        if out is None:
            qs = _shape(q, "q")
            if len(qs) != 4:
                raise ValueError("q: expected shape [B, next_n, heads, dim], got %s" % (qs,))
            K = k if k else self.op_info("paged_mqa_logits_topk", kernel)["topk"]
            out = _empty(weights, (qs[0] * qs[1], K), "i32", name="out")
        return self._run("paged_mqa_logits_topk", dict(out=_raw(out), q=q, cache=_raw(cache), weights=_raw(weights),
                                                       context_lens=_raw(context_lens),
                                                       block_table=_raw(block_table), row_len=row_len,
                                                       block_size=block_size, kernel=kernel, k=k or 0,
                                                       check_contents=check_contents,
                                                       no_tensor_maps=no_tensor_maps), out, q, stream, _prepare)

    def _bench_c_loop(self, op, iters, **kwargs):
        """Host seconds per runtime call of `op` in a C loop (arguments taken once): the C side of
        bench/bench_python_overhead.py.  kwargs as the extension's op (every output passed)."""
        return self._b._bench_c_loop(op, int(iters), {k: _raw(v) for k, v in kwargs.items()})

    def __repr__(self):
        return "dsv4c.Bundle(%d kernels on %s)" % (len(self.kernels()), self.context.backend)
