"""Masking cost on prose: this tree's :mod:`fair_forge_beam.io.secrets` against a baseline copy
of the module (default: ``/work/main``'s), in one process, on the same texts and key.

    python benchmarks/bench_secret_masking.py [--baseline PATH/TO/secrets.py] [--repeat 5]

Texts: the hh-rlhf test slice of the shared data (``../shared``: English, some non-ASCII), plus the
same texts with a non-ASCII word (``café``) so that every text takes the non-ASCII path (the one the
invisible characters change). Prints seconds per pass (best of ``--repeat``) and the ratio new/baseline.
"""
from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
KEY = "sk-bench-ABCDEFGHIJKLMNOPQRSTUVWX0123456789"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _texts(shared: Path) -> list[str]:
    out = []
    with gzip.open(shared / "data" / "hh_rlhf" / "harmless-base_test.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            out.extend(v for v in rec.values() if isinstance(v, str))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default="/work/main/fair_forge_beam/io/secrets.py")
    ap.add_argument("--shared", default=str(REPO.parent / "shared"))
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--copies", type=int, default=20)
    a = ap.parse_args()
    mods = {"baseline": _load(Path(a.baseline), "secrets_baseline"),
            "new": _load(REPO / "fair_forge_beam" / "io" / "secrets.py", "secrets_new")}
    texts = _texts(Path(a.shared))
    texts = texts * a.copies  # passes long enough to time on a loaded machine
    # a text with every character of the key (a loose spelling must be looked for: compacting)
    near = [t + " -0123456789 café" for t in texts[: len(texts) // 10]]
    corpora = {"prose": texts, "prose+café": [t + " café" for t in texts], "near-key": near}
    print(f"{len(texts)} texts, {sum(map(len, texts)) / 1e6:.1f} M characters")
    for label, corpus in corpora.items():
        best = {}
        for name, mod in (list(mods.items()) * 2)[:: -1 if label == "prose+café" else 1]:  # each twice, both orders
            t0 = time.perf_counter()
            mod.scrub("warm-up " + KEY, [KEY])  # the pattern compiled once (cached), outside the timing
            compile_s = time.perf_counter() - t0
            times = []
            for _ in range(a.repeat):
                t0 = time.perf_counter()
                masked = mod.scrub(corpus, [KEY])
                times.append(time.perf_counter() - t0)
            assert masked == corpus  # no key in the texts: nothing changes
            best[name] = min(times + ([best[name]] if name in best else []))
            print(f"{label:11s} {name:8s} {best[name]:.4f} s per pass (first call incl. compile {compile_s:.3f} s)")
        print(f"{label:11s} ratio new/baseline {best['new'] / best['baseline']:.2f}")


if __name__ == "__main__":
    main()
