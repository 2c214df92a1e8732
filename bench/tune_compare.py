#!/usr/bin/env python3
"""Tuned against the spec's default against the best hand-picked kernel, per shape, from one dsv4c-tune lockfile.

    python3 bench/tune_compare.py decode.lock [logits.lock ...]

Every figure comes from the lockfile, so all of a bucket's figures were measured in the same run, on the
same card, with the same inputs and timing (docs/tuning.md).  For each bucket:

  tuned       the lockfile's winner (what a bundle built with dsv4c --lock runs for the bucket);
  default     the sweep's own base variant: the tile the kernel declares before its sweep;
  rule        what an untuned call of the shipped spec runs (the runtime's default rule, rt.c's
              rt_default_rank: the CTA-pair form from 128 heads, else the warpgroup form; the logits'
              matrix form), as the equal variant of the sweep;
  hand-picked the fastest of the kernels shipped in specs/ (sparse_decode.lua, indexer.lua), each as the
              variant of the sweep with the same tile.

A shipped kernel is a point of the sweep; the table below names which.  The speedups are times over
the tuned time (> 1: the tuned choice is faster).
"""
import json
import math
import sys

# shipped kernel -> the sweep variant with the same tile (bench/decode_sweep.lua, bench/logits_sweep.lua)
SHIPPED = {
    "sparse_decode": {
        "sparse_decode_v4_mma": "sdp__h64_lf0_pair0_pf1",            # bf16 partials
        "sparse_decode_v4_mma_bf16x2": "sd__h64_i8_pbf16x2_pair0_pf1_v64",
        "sparse_decode_v4_mma_pair": "sdp__h64_lf1_pair1_pf1",       # longest first (54e2d17), bf16 partials
        "sparse_decode_v4_mma_pair_bf16x2": "sdl__i8_pbf16x2_v64",
        "sparse_decode_v4_mma_sm90": "sdw__h64_i8_pbf16_wbf16_v64",
        "sparse_decode_v4_mma_sm90_bf16x2": "sdw__h64_i8_pbf16x2_wf32_v64",
    },
    "paged_mqa_logits": {
        "mqa_logits_v4_mma": "lgm__c1024",
        "mqa_logits_v4_mma_sm89": "lgw__c1024",
        "mqa_logits_v4": "lgp__hpt64_c128",
    },
}
DEFAULT = {"sd": "sd__h64_i8_pbf16_pair0_pf0_v64", "sdw": "sdw__h64_i8_pbf16_wf32_v64", "lgm": "lgm__c1024",
           "lgw": "lgw__c1024", "lgp": "lgp__hpt64_c128"}


def rule(op, bucket):
    if op == "sparse_decode":
        heads = int(dict(kv.split("=") for kv in bucket.split(","))["H"])
        return "sparse_decode_v4_mma_pair" if heads >= 128 else "sparse_decode_v4_mma"
    return "mqa_logits_v4_mma"


def main(paths):
    rows = []
    for p in paths:
        with open(p) as f:
            lock = json.load(f)
        by = {}  # (op, bucket) -> {variant: (median, gate)}, the winner over the sweeps of the op
        for e in lock["entries"]:
            k = (e["op"], e["bucket"])
            d = by.setdefault(k, {"v": {}, "device": e["device"], "shape": e["shape"]})
            for v in e["variants"]:
                d["v"][v["name"]] = (v["median_us"] if v["gate"] == "pass" else None, v["gate"])
        for (op, bucket), d in by.items():
            ok = {n: t for n, (t, g) in d["v"].items() if t is not None}
            if not ok:
                continue
            win = min(ok, key=lambda n: (ok[n], n))
            picks = {k: ok.get(v) for k, v in SHIPPED[op].items()}
            best = min((n for n in picks if picks[n] is not None), key=lambda n: picks[n], default=None)
            dflt = DEFAULT.get("sd" if op == "sparse_decode" else "lgm")
            r = rule(op, bucket)
            rows.append((op, d["shape"], d["device"], win, ok[win], ok.get(dflt), picks.get(r), r, best,
                         picks.get(best) if best else None, len(ok), len(d["v"])))
    fmt = lambda t: "-" if t is None else "%.1f" % t
    ratio = lambda a, b: "-" if a is None or b is None else "%.3f" % (a / b)
    print("| op | shape | tuned (winner) | us | default us | x | rule (untuned spec) us | x "
          "| best hand-picked | us | x "
          "| passed gate |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    geo = {"default": [], "rule": [], "hand": []}
    for (op, shape, dev, win, tw, td, tr, rn, best, tb, npass, nall) in rows:
        print("| %s | %s | `%s` | %s | %s | %s | %s (`%s`) | %s | `%s` | %s | %s | %d of %d |" % (
            op, shape, win, fmt(tw), fmt(td), ratio(td, tw), fmt(tr), rn, ratio(tr, tw), best, fmt(tb), ratio(tb, tw),
            npass, nall))
        for k, t in (("default", td), ("rule", tr), ("hand", tb)):
            if t is not None:
                geo[k].append(t / tw)
    for k, v in geo.items():
        if v:
            print("geomean %s / tuned: %.3f over %d shapes; min %.3f" % (
                k, math.exp(sum(map(math.log, v)) / len(v)), len(v), min(v)))
    if rows:
        print("device: %s" % rows[0][2])
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
