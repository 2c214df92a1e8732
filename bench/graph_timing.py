"""Host, CUDA-graph and kineto timing shared by the benches that time a call beside a peer's in one process
(peer_flashmla_graph.py, peer_flashmla_tp.py, decode_step_graph.py)."""
import time

import torch


def host_us(fn, chunks, per):
    """Host microseconds to issue one call of fn, best of `chunks` runs of `per` calls back to back
    (synchronised between runs, untimed)."""
    best = float("inf")
    for _ in range(chunks):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(per):
            fn()
        best = min(best, (time.perf_counter() - t0) / per * 1e6)
    torch.cuda.synchronize()
    return best


def graph_us(fn, reps, warm):
    """fn captured once in a CUDA graph (after a warm-up call on the capture stream), replayed `warm` times,
    then `reps` times back to back between CUDA events: (device microseconds a replay, the graph, what the
    captured call returned)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        res = fn()
    torch.cuda.synchronize()
    for _ in range(warm):
        g.replay()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    e0.record()
    for _ in range(reps):
        g.replay()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) * 1e3 / reps, g, res


def kineto_us(kk, run, want, n=30):
    """Kernel time of run by FlashMLA's timer (kk: its kernelkit; bench_kineto flushes the L2 before each run):
    the first kernel whose name contains one of `want` to the last one's end, a run, averaged over n runs
    (nan where no kernel matched)."""
    res = kk.bench_kineto(run, n)
    names = [k for k in res.get_kernel_names() if any(w in k for w in want)]
    if not names:
        return float("nan")
    spans = []
    for i in range(n):
        starts, ends = [], []
        for k in names:
            r = res.time_ranges[k]
            per = len(r) // n
            starts.append(r[i * per][0])
            ends.append(r[(i + 1) * per - 1][1])
        spans.append(max(ends) - min(starts))
    return sum(spans) / n * 1e6


def flashmla_ok(kk, out, lse, o_ref, l_ref):
    """FlashMLA's own check of a decode's out and lse against its reference (kk.check_is_allclose with its
    tests' tolerances)."""
    return bool(kk.check_is_allclose("out", out, o_ref, abs_tol=1e-3, rel_tol=2.01 / 128, cos_diff_tol=5e-6)) and \
        bool(kk.check_is_allclose("lse", lse, l_ref, abs_tol=1e-6, rel_tol=8.01 / 65536))
