"""NumPy references of docs/ops.md's operations and input generators, for tests/python.

Written from docs/ops.md (sections 1-5), independently of the C reference in
runtime/ref: bf16 and e4m3fn conversions, the DSv4 fp8_ds_mla layout and the
indexer layout, the UE8M0 quantizer, RoPE, sparse MLA decode, MQA logits and
the comparison rules of FlashMLA and DeepGEMM.
"""

import numpy as np

NOPE, ROPE, D = 448, 64, 512
V4_ROW, V4_SCALE_ROW = 576, 8  # DSv4: data row bytes, scale row bytes (block tail)
V4_TOKEN = V4_ROW + V4_SCALE_ROW
IDX_DIM, IDX_TOKEN = 128, 132  # indexer: 128 e4m3 values, one f32 scale (block tail)

# ---- number formats ----


def bf16_to_f32(h):
    return (np.asarray(h, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """Round to nearest even (NaN kept a NaN)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, np.uint16(0x7FC0), r)


def _e4m3_table():
    t = np.zeros(256, dtype=np.float32)
    for b in range(256):
        s, e, m = b >> 7, (b >> 3) & 15, b & 7
        if e == 15 and m == 7:
            v = np.nan
        elif e == 0:
            v = m / 8.0 * 2.0 ** -6
        else:
            v = (1 + m / 8.0) * 2.0 ** (e - 7)
        t[b] = -v if s else v
    return t


E4M3 = _e4m3_table()
_POS = E4M3[:127]  # codes 0..126: 0 .. 448 ascending


def e4m3_to_f32(b):
    return E4M3[np.asarray(b, dtype=np.uint8)]


def f32_to_e4m3(x):
    """OCP e4m3fn, round to nearest even, saturating to +-448 (finite inputs)."""
    x = np.asarray(x, dtype=np.float32)
    a = np.minimum(np.abs(x), 448.0)
    hi = np.clip(np.searchsorted(_POS, a, side="left"), 0, 126)
    lo = np.maximum(hi - 1, 0)
    dlo, dhi = a - _POS[lo], _POS[hi] - a
    pick = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    pick = np.where(_POS[hi] == a, hi, pick)
    return (pick.astype(np.uint8) | np.where(np.signbit(x), np.uint8(0x80), np.uint8(0))).astype(np.uint8)


# ---- RoPE (GPT-J interleaved, docs/ops.md 1) ----


def cos_sin_table(max_pos, dims=ROPE, theta=10000.0):
    half = dims // 2
    inv = theta ** (-np.arange(half, dtype=np.float64) * 2 / dims)
    ang = np.arange(max_pos, dtype=np.float64)[:, None] * inv[None, :]
    return np.concatenate([np.cos(ang), np.sin(ang)], axis=1).astype(np.float32)


def rope(x, pos, cos_sin):
    """x f32 [..., dims], rotated in fp32 pairs (d, d+1) at positions pos (one per row)."""
    half = x.shape[-1] // 2
    c = cos_sin[pos, :half].astype(np.float32)
    s = cos_sin[pos, half:].astype(np.float32)
    while c.ndim < x.ndim:
        c, s = c[:, None], s[:, None]
    ev, od = x[..., 0::2], x[..., 1::2]
    y = np.empty_like(x)
    y[..., 0::2] = ev * c - od * s
    y[..., 1::2] = ev * s + od * c
    return y


# ---- the DSv4 cache (docs/ops.md 1) ----


def quant_v4_token(x_bf16):
    """One token's 512 bf16 values (uint16) -> its 576 data bytes and 8 scale bytes (vLLM's rule)."""
    x = bf16_to_f32(x_bf16)
    data = np.zeros(V4_ROW, dtype=np.uint8)
    sc = np.zeros(V4_SCALE_ROW, dtype=np.uint8)
    for j in range(7):
        blk = x[64 * j:64 * j + 64]
        amax = np.float32(max(np.max(np.abs(blk)), np.float32(1e-4)))
        e = int(np.ceil(np.log2(np.float32(amax / np.float32(448.0)))))
        sc[j] = min(max(e + 127, 0), 255)
        data[64 * j:64 * j + 64] = f32_to_e4m3(np.clip(blk * np.float32(2.0 ** -e), -448, 448))
    data[NOPE:] = np.asarray(x_bf16[NOPE:], dtype=np.uint16).view(np.uint8)
    return data, sc


def v4_write(cache, bs, slot, x_bf16):
    """Write token x (bf16 bits) at a global slot of a cache viewed as [nb, S] bytes."""
    blk, row = divmod(int(slot), bs)
    data, sc = quant_v4_token(x_bf16)
    cache[blk, row * V4_ROW:(row + 1) * V4_ROW] = data
    cache[blk, bs * V4_ROW + row * V4_SCALE_ROW:bs * V4_ROW + (row + 1) * V4_SCALE_ROW] = sc


def v4_dequant(cache, bs, slots):
    """bf16 bits [n, 512] of global slots (negative: zeros) of a [nb, S] byte cache."""
    slots = np.asarray(slots).reshape(-1)
    out = np.zeros((len(slots), D), dtype=np.uint16)
    for i, s in enumerate(slots):
        if s < 0:
            continue
        blk, row = divmod(int(s), bs)
        data = cache[blk, row * V4_ROW:(row + 1) * V4_ROW]
        sc = cache[blk, bs * V4_ROW + row * V4_SCALE_ROW:bs * V4_ROW + row * V4_SCALE_ROW + 7]
        scale = bf16_to_f32(f32_to_bf16(np.exp2(sc.astype(np.float32) - 127)))
        v = bf16_to_f32(f32_to_bf16(e4m3_to_f32(data[:NOPE]))) * np.repeat(scale, 64)
        out[i, :NOPE] = f32_to_bf16(v)
        out[i, NOPE:] = data[NOPE:].view(np.uint16)
    return out


def v4_cache(rng, nb, bs, stride=None, scale=1.0, rows=None):
    """A [nb, S] byte cache (S = stride, at least bs * 584, rounded to 16) of random tokens
    written by the quantizer; also the bf16 values written, [nb * bs, 512] (or only `rows`)."""
    S = stride or (bs * V4_TOKEN + 15) // 16 * 16
    cache = np.zeros((nb, S), dtype=np.uint8)
    vals = f32_to_bf16((rng.standard_normal((nb * bs, D)) * scale).astype(np.float32))
    for s in range(nb * bs) if rows is None else rows:
        v4_write(cache, bs, s, vals[s])
    return cache, vals


def token_view(cache, bs, token=V4_TOKEN):
    """The [nb, bs, token] view vLLM takes of a [nb, S] cache (stride(0) = S)."""
    nb, S = cache.shape
    return np.lib.stride_tricks.as_strided(cache, shape=(nb, bs, token), strides=(S, token, 1))


# ---- sparse MLA decode (docs/ops.md 3) ----


def sparse_decode_ref(q_bf16, kv_main, idx, lens, scale, sink=None, kv_extra=None, xidx=None, xlens=None):
    """fp64 reference on dequantized K (kv_*: f32 [slots, 512], K = V).  Returns out [T, H, 512],
    lse [T, H] (natural log, +inf for empty rows) and sum_j p_j |V_j| for the error bound."""
    q = bf16_to_f32(q_bf16).astype(np.float64)
    T, H, _ = q.shape
    out = np.zeros((T, H, D))
    lse = np.full((T, H), np.inf)
    for t in range(T):
        rows = [kv_main[s] for j, s in enumerate(idx[t]) if j < lens[t] and s != -1]
        if kv_extra is not None:
            rows += [kv_extra[s] for j, s in enumerate(xidx[t]) if j < xlens[t] and s != -1]
        if not rows:
            continue
        K = np.asarray(rows, dtype=np.float64)
        s = scale * q[t] @ K.T  # [H, n]
        m = s.max(axis=1, keepdims=True)
        p = np.exp(s - m)
        l = p.sum(axis=1, keepdims=True)
        lse[t] = (np.log(l) + m)[:, 0]
        o = (p / l) @ K
        if sink is not None:
            with np.errstate(over="ignore"):
                o = o / (1 + np.exp(sink.astype(np.float64) - lse[t]))[:, None]
        out[t] = o
    return out, lse


def flashmla_check(name, got, ref, abs_tol, rel_tol, cos_tol=None):
    """FlashMLA's rule: an element fails only past max(abs, rel * |ref|); inf and NaN in the same
    places; the cosine difference within cos_tol.  Returns a list of failure messages."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    errs = []
    if not np.array_equal(np.isnan(got), np.isnan(ref)):
        errs.append("%s: NaN in different places" % name)
    gi, ri = np.isinf(got), np.isinf(ref)
    if not np.array_equal(gi, ri) or not np.array_equal(got[gi], ref[ri]):
        errs.append("%s: infinities differ" % name)
    fin = np.isfinite(got) & np.isfinite(ref)
    bad = np.abs(got[fin] - ref[fin]) > np.maximum(abs_tol, rel_tol * np.abs(ref[fin]))
    if bad.any():
        errs.append("%s: %d elements outside max(%g, %g |ref|) (worst %g)" % (
            name, bad.sum(), abs_tol, rel_tol, np.abs(got[fin] - ref[fin]).max()))
    if cos_tol is not None and fin.any():
        a, b = got[fin], ref[fin]
        den = (a * a + b * b).sum()
        cd = 1 - 2 * (a * b).sum() / den if den > 0 else 0.0
        if cd > cos_tol:
            errs.append("%s: cosine difference %g > %g" % (name, cd, cos_tol))
    return errs


# ---- indexer (docs/ops.md 4) ----


def idx_cache(rng, nb, bs, stride=None):
    """An indexer cache [nb, S] bytes: per block bs*128 e4m3 values, then bs f32 scales (powers of
    two); also the f32 values [nb*bs, 128] (e4m3 decoded) and scales [nb*bs]."""
    S = stride or (bs * IDX_TOKEN + 15) // 16 * 16
    cache = np.zeros((nb, S), dtype=np.uint8)
    codes = rng.integers(0, 256, size=(nb * bs, IDX_DIM)).astype(np.uint8)
    codes[(codes & 0x7F) == 0x7F] = 0x3C  # no NaN codes
    scales = np.exp2(rng.integers(-10, 3, size=nb * bs)).astype(np.float32)
    for s in range(nb * bs):
        blk, row = divmod(s, bs)
        cache[blk, row * IDX_DIM:(row + 1) * IDX_DIM] = codes[s]
        cache[blk, bs * IDX_DIM + 4 * row:bs * IDX_DIM + 4 * row + 4] = scales[s:s + 1].view(np.uint8)
    return cache, e4m3_to_f32(codes), scales


def logits_ref(q_codes, kvals, kscale, weights, ctx, block_table, bs, row_len):
    """fp64 logits [B*next_n, row_len] (-inf past ctx) of e4m3 q codes [B, next_n, H, 128]."""
    B, nn, H, _ = q_codes.shape
    q = e4m3_to_f32(q_codes).astype(np.float64)
    out = np.full((B * nn, row_len), -np.inf)
    for b in range(B):
        for j in range(nn):
            c = int(ctx[b, j])
            pos = np.arange(c)
            slots = block_table[b, pos // bs] * bs + pos % bs
            dots = q[b, j] @ kvals[slots].astype(np.float64).T  # [H, c]
            out[b * nn + j, :c] = kscale[slots] * (weights[b * nn + j].astype(np.float64) @ np.maximum(dots, 0))
    return out


def calc_diff(x, y):
    """DeepGEMM's 1 - 2 sum(xy) / sum(x^2 + y^2)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    den = (x * x + y * y).sum()
    return 0.0 if den == 0 else 1 - 2 * (x * y).sum() / den


def topk_check(out, logits, ctx, K):
    """Messages for rows of out [rows, K] that are not a valid top-K (as sets, ties tolerated)."""
    errs = []
    for r in range(out.shape[0]):
        c = int(min(max(ctx[r], 0), logits.shape[1]))
        row = out[r]
        sel = row[row >= 0]
        if c <= K:
            if sorted(sel.tolist()) != list(range(c)) or (row < 0).sum() != K - c or np.any(row[row < 0] != -1):
                errs.append("row %d (ctx %d <= K): %s" % (r, c, row[:8]))
            continue
        if len(sel) != K or len(set(sel.tolist())) != K or sel.max() >= c:
            errs.append("row %d: not K distinct positions below ctx %d" % (r, c))
            continue
        chosen = np.zeros(c, dtype=bool)
        chosen[sel] = True
        if logits[r, :c][chosen].min() < logits[r, :c][~chosen].max():
            errs.append("row %d: a position left out has a larger logit than one chosen" % r)
    return errs
