#!/usr/bin/env python3
"""Merge one `gpu_run.sh indexer` run's outputs into one table (markdown): DeepGEMM's fp8_paged_mqa_logits
(peer_deepgemm.py, before and after ours: the faster of its two runs) beside bench_indexer's logits, each as us
and as % of the device-to-device copy its own process measured in that run, and the time ratio.

usage: python3 indexer_compare.py DG_BEFORE.txt OURS.txt [DG_AFTER.txt]
"""
import re
import sys

KEY = r"B (\d+), ctx (\d+), next_n (\d+), (test|equal)"


def copy_of(text):
    m = re.search(r"d2d copy: (\d+) GB/s", text)
    return int(m.group(1)) if m else None


def peer_rows(path, tag):
    rows, text = {}, open(path).read()
    for m in re.finditer(r"^" + tag + " " + KEY + r" +us +([\d.]+) kineto_us +([\d.na]+) .*?pct +([\d.]+) .*?"
                         r"diff (\S+) sim_diff (\S+) (PASS|FAIL|-)(?: exact_diff (\S+))?", text, re.M):
        k = tuple(int(x) for x in m.group(1, 2, 3)) + (m.group(4),)
        rows[k] = dict(us=float(m.group(5)), kin=float(m.group(6)), pct=float(m.group(7)), diff=m.group(8),
                       sim=m.group(9), check=m.group(10), exact=m.group(11) or "-")
    return rows, copy_of(text)


def our_rows(path):
    rows, text = {}, open(path).read()
    # logits us, GB/s, % of copy, TFLOP/s, top-k us, fused us, (logits + top-k) / fused, calc_diff
    for m in re.finditer(r"^" + KEY + r" +([\d.]+) +\d+ +([\d.]+)% +[\d.]+ +(\S+) +(\S+) +(\S+) +(\S+)$", text,
                         re.M):
        k = tuple(int(x) for x in m.group(1, 2, 3)) + (m.group(4),)
        num = lambda x: float(x) if x != "-" else None
        rows.setdefault(k, dict(us=float(m.group(5)), pct=float(m.group(6)), topk=num(m.group(7)),
                                fused=num(m.group(8)), diff=m.group(10)))
    return rows, copy_of(text)


def f(x, fmt="%.1f"):
    return "-" if x is None or x != x else fmt % x


dg1, c1 = peer_rows(sys.argv[1], "DG")
py, _ = peer_rows(sys.argv[1], "OURS")
ours, co = our_rows(sys.argv[2])
dg2, c2 = peer_rows(sys.argv[3], "DG") if len(sys.argv) > 3 else ({}, None)
print(f"d2d copy (GB/s, read + write): DeepGEMM's process {c1} (before), {c2} (after); bench_indexer's {co}")
print("| B | context | next_n | lengths | DeepGEMM us | DeepGEMM % of copy | dsv4c us | dsv4c % of copy | "
      "DeepGEMM / dsv4c time | DeepGEMM kernel us | dsv4c kernel us | kernel time ratio | "
      "calc_diff DeepGEMM (vs bf16 / vs FP8 ref; vs exact) | dsv4c same tensors | dsv4c bench_indexer | "
      "dsv4c top-k us | dsv4c fused us | (DeepGEMM + best top-k) / fused |")
print("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|")
for k in sorted(set(dg1) | set(ours), key=lambda k: (k[1], k[0], k[2], k[3] != "test")):
    d = [r for r in (dg1.get(k), dg2.get(k)) if r]
    best = min(d, key=lambda r: r["us"]) if d else None
    o, p = ours.get(k), py.get(k)
    ctx = f"{k[1] // 1024}K" if k[1] < 1 << 20 else f"{k[1] >> 20}M"
    dk = dg1[k]["kin"] if k in dg1 else None
    pk = p["kin"] if p else None
    cells = [str(k[0]), ctx, str(k[2]), k[3],
             f(best and best["us"]), f(best and best["pct"]) + "%" if best else "-",
             f(o and o["us"]), f(o and o["pct"]) + "%" if o else "-",
             f(best["us"] / o["us"], "%.2f") if best and o else "-",
             f(dk), f(pk), f(dk / pk, "%.2f") if dk and pk and dk == dk and pk == pk else "-",
             f"{dg1[k]['check']} ({dg1[k]['diff']} / {dg1[k]['sim']}; {dg1[k]['exact']})" if k in dg1 else "-",
             f"{p['check']} ({p['diff']} / {p['sim']}; {p['exact']})" if p else "-",
             o["diff"] if o else "-",
             f(o and o["topk"]), f(o and o["fused"]),
             # the peers' pair: DeepGEMM's logits and the fastest top-k of this run (ours; torch.topk's is
             # slower at every shape: bench/RESULTS.md, gpu_run.sh topk)
             f((best["us"] + o["topk"]) / o["fused"], "%.2f") if best and o and o["topk"] and o["fused"] else "-"]
    print("| " + " | ".join(cells) + " |")
