#!/usr/bin/env python3
# sweep-plans.py: the fidelity sweep's plans beyond the named strategies and uniform slicings, written as plan
# files for one model shape, so that the model is also judged on plans nobody tuned it on: per-layer mixed
# plans, 8 row slices, 4 column chunks, intra-block and no overlap, the backward overlap off. Each plan takes
# the model identity (name, fingerprint, tp) from a plan already made for that shape (the tuner's pick) and
# keeps only the variants whose slice counts divide the shape (the rest are named and left out).
#   scripts/sweep-plans.py TUNED.yaml --batch B --seq S --hidden H --out DIR
# Prints one "LABEL PATH" line per plan written.
import argparse
import os
import re
import sys


def block(split, p, q, overlap, bwd=True):
    return {"split": split, "p": p, "q": q, "overlap": overlap, "bwd": bwd}


def block_yaml(b):
    return (f"{{split: {b['split']}, p: {b['p']}, q: {b['q']}, overlap: {b['overlap']}, "
            f"bwd_overlap: {'true' if b['bwd'] else 'false'}}}")


def variants(layers):
    """label -> one (attn, mlp) pair per layer."""
    plain = block("batch", 1, 1, "none")
    uniform = lambda attn, mlp: [(attn, mlp)] * layers
    mixed = [(block("batch", 2, 1, "intra"), block("sequence", 4, 2, "inter")) if i % 2 == 0
             else (plain, block("batch", 2, 2, "inter")) for i in range(layers)]
    return {
        "mixed-layers": mixed,
        "p8-sequence": uniform(block("sequence", 8, 1, "inter"), block("sequence", 8, 1, "inter")),
        "p2q4-batch": uniform(block("batch", 2, 4, "inter"), block("batch", 2, 4, "inter")),
        "intra-2x1-batch": uniform(block("batch", 2, 1, "intra"), block("batch", 2, 1, "intra")),
        "none-2x2-sequence": uniform(block("sequence", 2, 2, "none"), block("sequence", 2, 2, "none")),
        "bwd-off-2x2-sequence": uniform(block("sequence", 2, 2, "inter", False),
                                        block("sequence", 2, 2, "inter", False)),
    }


def fits(pairs, a):
    """Why the plan does not fit the shape, or None."""
    for attn, mlp in pairs:
        for b in (attn, mlp):
            rows = a.batch if b["split"] == "batch" else a.seq
            if rows % b["p"]:
                return f"{b['p']} {b['split']} slices do not divide {rows}"
            if a.hidden % b["q"]:  # the row-parallel GEMM's output is the full hidden width
                return f"{b['q']} column chunks do not divide the hidden width {a.hidden}"
    return None


def header(tuned_text, label):
    head = tuned_text.split("\nlayers:", 1)[0]
    head = re.sub(r'^strategy: .*$', f'strategy: "{label}"', head, flags=re.M)
    return head + "\nlayers:\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tuned")
    for key in ("batch", "seq", "hidden"):
        ap.add_argument("--" + key, type=int, required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    text = open(a.tuned, encoding="utf-8").read()
    ranges = re.findall(r"^\s*- layers: (\d+)(?:-(\d+))?\s*$", text, flags=re.M)
    if not ranges:
        sys.exit(f"sweep-plans: {a.tuned} lists no layers")
    layers = max(int(hi or lo) for lo, hi in ranges) + 1
    os.makedirs(a.out, exist_ok=True)
    for label, pairs in variants(layers).items():
        why = fits(pairs, a)
        if why:
            print(f"# {label}: left out ({why})")
            continue
        body = "".join(f"  - layers: {i}\n    attn: {block_yaml(at)}\n    mlp: {block_yaml(ml)}\n"
                       for i, (at, ml) in enumerate(pairs))
        path = os.path.join(a.out, label + ".yaml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(header(text, label) + body + "provenance: {}\n")
        print(f"{label} {path}")


if __name__ == "__main__":
    main()
