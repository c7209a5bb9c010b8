"""Group detection on the ToxiGen seed sentences, and throughput of the pluggable components.

ToxiGen (microsoft/TOXIGEN, MIT; 722 seed sentences, 16 target groups, derived file described in
``shared/data/README.md``) labels every sentence with the group it targets. For each extractor
this prints:

* **hit** — share of sentences whose detected groups include one of the groups
  ``TOXIGEN_GROUP_MAP[target_group]`` maps to (a recall-like figure: a sentence may also
  mention other groups, which is not an error);
* **none** — share of sentences with no group detected;
* **groups/text** — mean number of groups detected per sentence;
* then the hit rate per ToxiGen target group.

Extractors: ``KeywordGroupExtractor(default_group_keywords())`` and
``EmbeddingGroupExtractor(SentenceTransformerEmbedder(), default_group_prototypes())`` (MiniLM)
at several thresholds (each sentence is encoded once; the thresholds reuse the similarities).

``--speed`` also measures texts/s of the keyword extractor (~200-character texts), VADER
sentiment, and MiniLM encoding with and without the batch-invariant mode, on ~2,000 real
sentences (the ToxiGen seeds plus hh-rlhf assistant turns).

Usage::

    python benchmarks/toxigen_groups.py [--shared ../shared] [--thresholds 0.4 0.5 0.6] [--speed]
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fair_forge_beam.components.group_extractor import (  # noqa: E402
    TOXIGEN_GROUP_MAP,
    EmbeddingGroupExtractor,
    KeywordGroupExtractor,
    default_group_keywords,
    default_group_prototypes,
)


def load_toxigen(shared: Path) -> list[dict]:
    with open(shared / "data" / "toxigen" / "seed_sentences.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def real_sentences(shared: Path, n: int = 2000) -> list[str]:
    """ToxiGen seed texts, then hh-rlhf (harmless-base test) assistant turns, up to ``n``."""
    out = [r["text"] for r in load_toxigen(shared)]
    with gzip.open(shared / "data" / "hh_rlhf" / "harmless-base_test.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            for part in json.loads(line)["chosen"].split("\n\nAssistant: ")[1:]:
                answer = part.split("\n\nHuman: ")[0].strip()
                if answer:
                    out.append(answer)
            if len(out) >= n:
                break
    return out[:n]


def score(rows: list[dict], detected: list[set[str]]) -> dict:
    n = len(rows)
    hits = [bool(set(TOXIGEN_GROUP_MAP[r["target_group"]]) & d) for r, d in zip(rows, detected)]
    per = defaultdict(list)
    for r, h in zip(rows, hits):
        per[r["target_group"]].append(h)
    return {
        "hit": sum(hits) / n,
        "none": sum(1 for d in detected if not d) / n,
        "groups_per_text": sum(len(d) for d in detected) / n,
        "per_target": {g: (sum(v) / len(v), len(v)) for g, v in sorted(per.items())},
        "by_label": {
            lab: sum(h for r, h in zip(rows, hits) if r["label"] == lab) / max(1, sum(1 for r in rows if r["label"] == lab))
            for lab in ("hate", "neutral")
        },
    }


def print_table(results: dict[str, dict]) -> None:
    names = list(results)
    print(f"{'extractor':34s} {'hit':>6s} {'hit(hate)':>9s} {'hit(neut)':>9s} {'none':>6s} {'groups/text':>11s}")
    for name in names:
        r = results[name]
        print(f"{name:34s} {r['hit']:6.1%} {r['by_label']['hate']:9.1%} {r['by_label']['neutral']:9.1%} {r['none']:6.1%} {r['groups_per_text']:11.2f}")
    print()
    targets = list(next(iter(results.values()))["per_target"])
    print(f"{'hit by target (n)':26s} " + " ".join(f"{n[:14]:>14s}" for n in names))
    for t in targets:
        n = next(iter(results.values()))["per_target"][t][1]
        print(f"{t + f' ({n})':26s} " + " ".join(f"{results[x]['per_target'][t][0]:14.0%}" for x in names))


def speed(shared: Path) -> None:
    texts = real_sentences(shared)
    long_texts = [(t + " ") * (200 // max(1, len(t)) + 1) for t in texts]
    long_texts = [t[:200] for t in long_texts]

    kw = KeywordGroupExtractor(default_group_keywords())
    kw.detect_batch(long_texts[:100])
    best = min(_timed(lambda: kw.detect_batch(long_texts)) for _ in range(7))
    print(f"KeywordGroupExtractor (18 groups), {len(long_texts)} texts of 200 chars: {len(long_texts) / best:,.0f} texts/s")

    from fair_forge_beam.components.sentiment import VaderSentimentAnalyzer

    va = VaderSentimentAnalyzer()
    va.setup()
    best = min(_timed(lambda: va.infer_batch(texts)) for _ in range(5))
    mean_len = sum(map(len, texts)) / len(texts)
    print(f"VaderSentimentAnalyzer, {len(texts)} texts (mean {mean_len:.0f} chars): {len(texts) / best:,.0f} texts/s")

    from fair_forge_beam.components.embedder import SentenceTransformerEmbedder

    import torch

    class _PlainOneThread(SentenceTransformerEmbedder):
        def _encode(self, texts):
            prev = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                return super()._encode(texts)
            finally:
                torch.set_num_threads(prev)

    configs = {
        f"MiniLM plain encode (padded, {torch.get_num_threads()} threads)": SentenceTransformerEmbedder(batch_invariant=False),
        "MiniLM plain encode (padded, 1 thread)": _PlainOneThread(batch_invariant=False),
        "MiniLM batch-invariant (default: grouped, 1 thread)": SentenceTransformerEmbedder(),
        "MiniLM grouped by length, 2 threads": SentenceTransformerEmbedder(num_threads=2),
    }
    for e in configs.values():
        e.encode(texts[:16])
    runs: dict[tuple[str, int], list[float]] = defaultdict(list)
    for _ in range(3):  # interleaved, so machine load affects every configuration alike
        for name, e in configs.items():
            for chunk in (256, len(texts)):
                runs[name, chunk].append(len(texts) / _timed(lambda: [e.encode(texts[s:s + chunk]) for s in range(0, len(texts), chunk)]))
    for (name, chunk), v in runs.items():
        print(f"{name:52s} batches of {chunk:5d}: best {max(v):6.1f} texts/s (runs: {', '.join(f'{x:.1f}' for x in v)})")
    print("(the MiniLM figures depend heavily on other load on the machine: compare configurations within one run)")


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    ap.add_argument("--thresholds", type=float, nargs="*", default=[0.4, 0.5, 0.6])
    ap.add_argument("--no-embedding", action="store_true", help="keywords only (no torch needed)")
    ap.add_argument("--speed", action="store_true")
    args = ap.parse_args(argv)

    rows = load_toxigen(args.shared)
    texts = [r["text"] for r in rows]
    results: dict[str, dict] = {}
    kw = KeywordGroupExtractor(default_group_keywords())
    other = real_sentences(args.shared)[len(rows):]  # hh-rlhf assistant turns
    background: dict[str, list[set[str]]] = {}

    def present(dets):
        return [{g for g, d in x.items() if d.present} for x in dets]

    results["keywords"] = score(rows, present(kw.detect_batch(texts)))
    background["keywords"] = present(kw.detect_batch(other))
    if not args.no_embedding:
        from fair_forge_beam.components.embedder import SentenceTransformerEmbedder

        emb = SentenceTransformerEmbedder()
        vectors, other_vectors = emb.encode(texts), emb.encode(other)
        for thr in args.thresholds:
            ex = EmbeddingGroupExtractor(emb, default_group_prototypes(), default_threshold=thr)
            results[f"MiniLM@{thr:.2f}"] = score(rows, present(ex.detect_batch(texts, vectors)))
            background[f"MiniLM@{thr:.2f}"] = present(ex.detect_batch(other, other_vectors))
    print(f"ToxiGen seed sentences: {len(rows)} ({sum(r['label'] == 'hate' for r in rows)} hate)\n")
    print_table(results)
    print(f"\nhh-rlhf harmless-base test assistant turns (n={len(other)}; mostly no group, some real mentions):")
    print(f"{'extractor':34s} {'any group':>9s} {'groups/text':>11s}")
    for name, dets in background.items():
        print(f"{name:34s} {sum(1 for d in dets if d) / len(dets):9.1%} {sum(map(len, dets)) / len(dets):11.2f}")
    if args.speed:
        print()
        speed(args.shared)


if __name__ == "__main__":
    main()
