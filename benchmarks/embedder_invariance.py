"""Batch invariance and speed of the MiniLM embedder on the shipped answers.

Compares, in one run on the same texts (interleaved repetitions, best time kept):

* ``per-window`` — today's ``SentenceTransformerEmbedder`` (one forward pass per text/window,
  1 torch thread);
* ``length-grouped`` — the previous scheme (texts of one token count encoded together, no
  padding, 1 thread), kept here only as the baseline;
* ``padded`` — plain ``SentenceTransformer.encode`` in batches (1 thread).

and reports, for each scheme, how many vectors change bits when the same texts are encoded in
random batches of 7 and 64 instead of one call, and (per-window only) with 2 torch threads.

    python benchmarks/embedder_invariance.py [--n 400] [--reps 2]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def shipped_answers() -> list[str]:
    out = []
    for f in sorted((ROOT / "fair_forge_beam" / "data" / "examples").glob("*.json*")):
        text = f.read_text(encoding="utf-8")
        recs = json.loads(text) if f.suffix == ".json" else [json.loads(x) for x in text.splitlines() if x.strip()]
        for r in recs:
            for q in r.get("conversation", []):
                if isinstance(q.get("assistant"), str) and q["assistant"].strip():
                    out.append(q["assistant"])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=400, help="texts sampled from the shipped answers (0 = all)")
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args(argv)

    import torch

    from fair_forge_beam.components.embedder import SentenceTransformerEmbedder, _torch_threads

    texts = shipped_answers()
    if a.n:
        rng = np.random.default_rng(0)
        texts = [texts[i] for i in rng.choice(len(texts), min(a.n, len(texts)), replace=False)]
    emb = SentenceTransformerEmbedder()
    emb.load()
    model = emb.model

    def length_grouped(batch):
        with _torch_threads(1):
            lengths = emb.token_lengths(batch)
            out = np.empty((len(batch), emb.dim), np.float32)
            groups: dict = {}
            for i, n in enumerate(lengths):
                groups.setdefault(n, []).append(i)
            for n in sorted(groups):
                idx = groups[n]
                out[idx] = model.encode([batch[i] for i in idx], batch_size=64, convert_to_numpy=True, show_progress_bar=False)
        return out

    def padded(batch):
        with _torch_threads(1):
            return model.encode(batch, batch_size=64, convert_to_numpy=True, show_progress_bar=False)

    schemes = {"per-window (now)": emb.encode, "length-grouped (before)": length_grouped, "padded": padded}
    times: dict = {k: [] for k in schemes}
    ref: dict = {}
    for _ in range(a.reps):
        for name, f in schemes.items():
            t0 = time.perf_counter()
            ref[name] = np.asarray(f(texts))
            times[name].append(time.perf_counter() - t0)
    base = min(times["length-grouped (before)"])
    for name in schemes:
        best = min(times[name])
        print(f"{name:26s} {len(texts) / best:6.1f} texts/s  time ratio to length-grouped {best / base:.2f}")

    def in_batches(f, size, seed):
        order = np.random.default_rng(seed).permutation(len(texts))
        out = np.empty_like(ref["padded"])
        for s in range(0, len(texts), size):
            idx = order[s:s + size]
            out[idx] = f([texts[i] for i in idx])
        return out

    for name, f in schemes.items():
        diffs = [int((in_batches(f, size, size) != ref[name]).any(axis=1).sum()) for size in (7, 64)]
        print(f"{name:26s} vectors with other bits in random batches of 7 / 64 vs one call: {diffs[0]} / {diffs[1]} of {len(texts)}")
    two = SentenceTransformerEmbedder(num_threads=2)
    two._model, two._dim = emb._model, emb._dim
    d2 = int((two.encode(texts) != ref["per-window (now)"]).any(axis=1).sum())
    print(f"per-window, 2 torch threads vs 1: {d2} of {len(texts)} vectors with other bits (torch {torch.__version__})")


if __name__ == "__main__":
    main()
