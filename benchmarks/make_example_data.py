#!/usr/bin/env python3
"""Build the example datasets shipped in ``fair_forge_beam/data/examples``.

Inputs (offline copies of public data, see ``<shared-data>/README.md``):

* ``fair_forge_examples/*.json`` -- Alquimia-ai/fair-forge @
  1b33a99666f361a46eee6618bde4a5d3a3dba358, MIT.  Already in the fair-forge
  ``Dataset`` shape; concatenated (sorted file-name order) into one JSON list,
  content unchanged.
* ``hh_rlhf/harmless-base_test.jsonl.gz`` -- anthropics/hh-rlhf @
  354e5c3cb8960630860dd5774a6ac2a58313bf4d, MIT.  The first N records
  (default 400) are converted to fair-forge sessions, one per line (JSONL):
  each record gives a ``-chosen`` and a ``-rejected`` session.

Outputs (in ``--out``): ``fair_forge_examples.json``,
``hh_rlhf_harmless_test_slice.jsonl`` and ``ATTRIBUTION.md``.

Usage (from the repository root)::

    python benchmarks/make_example_data.py
    python benchmarks/make_example_data.py --shared-data /path/to/data --out /tmp/x

The script is deterministic: re-running it on the same inputs produces
byte-identical outputs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SHARED_DATA = REPO_ROOT / ".." / "shared" / "data"
DEFAULT_OUT = REPO_ROOT / "fair_forge_beam" / "data" / "examples"

FF_REPO = "Alquimia-ai/fair-forge"
FF_COMMIT = "1b33a99666f361a46eee6618bde4a5d3a3dba358"
# Source paths inside Alquimia-ai/fair-forge (from the shared-data README).
FF_SOURCE_PATHS = {
    "dataset.json": "examples/data/dataset.json",
    "dataset_agentic.json": "examples/agentic/jupyter/dataset_agentic.json",
    "dataset_bestof.json": "examples/bestof/jupyter/dataset_bestof.json",
    "dataset_gepa_es.json": "examples/prompt_optimizer/gepa/data/dataset.json",
    "dataset_mipro_es.json": "examples/prompt_optimizer/mipro/data/dataset.json",
    "dataset_regulatory.json": "examples/regulatory/data/dataset.json",
    "dataset_sushi_es.json": "experiments/prompt_evaluator/datasets/sushi.json",
}

HH_REPO = "anthropics/hh-rlhf"
HH_COMMIT = "354e5c3cb8960630860dd5774a6ac2a58313bf4d"
HH_SOURCE_PATH = "harmless-base/test.jsonl.gz"
HH_LOCAL = Path("hh_rlhf") / "harmless-base_test.jsonl.gz"

FF_OUT_NAME = "fair_forge_examples.json"
HH_OUT_NAME = "hh_rlhf_harmless_test_slice.jsonl"
ATTRIBUTION_NAME = "ATTRIBUTION.md"

# Split on the speaker markers; the capture group keeps the speaker name.
_MARKER = re.compile(r"\n\n(Human|Assistant): ")


class TranscriptParseError(ValueError):
    """Raised when an hh-rlhf transcript cannot be parsed at all."""


# --------------------------------------------------------------------------
# fair-forge examples
# --------------------------------------------------------------------------
def load_fair_forge_examples(src_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Return (all sessions, per-file stats) in sorted file-name order."""
    files = sorted(src_dir.glob("*.json"), key=lambda p: p.name)
    if not files:
        raise SystemExit(f"no *.json files in {src_dir}")
    sessions: list[dict[str, Any]] = []
    per_file: list[dict[str, Any]] = []
    for path in files:
        with path.open(encoding="utf-8") as fh:
            data = json.load(fh)
        if not isinstance(data, list):
            raise SystemExit(f"{path}: expected a JSON list of sessions")
        per_file.append(
            {
                "name": path.name,
                "source_path": FF_SOURCE_PATHS.get(path.name, "(unknown)"),
                "sessions": len(data),
                "turns": sum(len(s.get("conversation") or []) for s in data),
            }
        )
        sessions.extend(data)
    return sessions, per_file


# --------------------------------------------------------------------------
# hh-rlhf
# --------------------------------------------------------------------------
def parse_transcript(text: str) -> list[tuple[str, str]]:
    """Parse ``"\\n\\nHuman: ...\\n\\nAssistant: ..."`` into (query, reply) turns.

    * Each Human segment starts a turn; the following Assistant segment is
      its reply (stripped).  A Human segment with no Assistant reply (another
      Human segment follows, or the transcript ends) gets reply ``""``.
    * Consecutive Assistant segments (a handful of upstream transcripts have
      them) are joined with ``"\\n\\n"`` into the reply of the current turn.
    * Raises :class:`TranscriptParseError` if there is no marker, if there is
      non-whitespace text before the first marker, or if the first marker is
      not ``Human``.
    """
    parts = _MARKER.split(text)
    if len(parts) < 3:
        raise TranscriptParseError("no Human/Assistant markers")
    if parts[0].strip():
        raise TranscriptParseError("text before the first marker")
    if parts[1] != "Human":
        raise TranscriptParseError("first marker is not Human")

    turns: list[list[Any]] = []  # [query, [reply segments]]
    for speaker, segment in zip(parts[1::2], parts[2::2]):
        segment = segment.strip()
        if speaker == "Human":
            turns.append([segment, []])
        else:
            turns[-1][1].append(segment)
    return [(q, "\n\n".join(r for r in replies if r)) for q, replies in turns]


def to_session(session_id: str, assistant_id: str, turns: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "assistant_id": assistant_id,
        "language": "english",
        "context": "",
        "conversation": [
            {
                "qa_id": f"q{n:02d}",
                "query": query,
                "assistant": reply,
                "ground_truth_assistant": None,
            }
            for n, (query, reply) in enumerate(turns)
        ],
    }


def convert_hh_rlhf(path: Path, max_records: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    sessions: list[dict[str, Any]] = []
    stats = {"records": 0, "skipped": 0, "turns_without_reply": 0, "merged_assistant_segments": 0}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if i >= max_records:
                break
            record = json.loads(line)
            stats["records"] += 1
            for variant in ("chosen", "rejected"):
                text = record.get(variant)
                try:
                    if not isinstance(text, str):
                        raise TranscriptParseError(f"missing {variant!r}")
                    turns = parse_transcript(text)
                except TranscriptParseError as exc:
                    stats["skipped"] += 1
                    print(f"  skip record {i} {variant}: {exc}", file=sys.stderr)
                    continue
                stats["turns_without_reply"] += sum(1 for _, r in turns if not r)
                roles = _MARKER.findall(text)
                stats["merged_assistant_segments"] += sum(
                    1 for a, b in zip(roles, roles[1:]) if a == b == "Assistant"
                )
                sessions.append(
                    to_session(f"hh-harmless-test-{i:04d}-{variant}", f"hh-{variant}", turns)
                )
    if stats["records"] < max_records:
        print(
            f"  note: source has only {stats['records']} records (< {max_records})",
            file=sys.stderr,
        )
    return sessions, stats


# --------------------------------------------------------------------------
# validation and reporting
# --------------------------------------------------------------------------
def validate_sessions(sessions: list[Any], label: str) -> None:
    problems = []
    for n, s in enumerate(sessions):
        if not isinstance(s, dict):
            problems.append(f"{label}[{n}]: not an object")
            continue
        for key in ("session_id", "assistant_id"):
            if not isinstance(s.get(key), str) or not s[key].strip():
                problems.append(f"{label}[{n}]: empty {key}")
        conv = s.get("conversation")
        if not isinstance(conv, list) or not conv:
            problems.append(f"{label}[{n}]: empty conversation")
    if problems:
        raise SystemExit("validation failed:\n" + "\n".join(problems[:50]))


def count_turns(sessions: list[dict[str, Any]]) -> int:
    return sum(len(s["conversation"]) for s in sessions)


MIT_BODY = """\
Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""


def mit_licence(holder_line: str) -> str:
    return f"MIT License\n\n{holder_line}\n\n{MIT_BODY}"


def render_attribution(
    ff_files: list[dict[str, Any]],
    ff_sessions: int,
    ff_turns: int,
    hh_sessions: int,
    hh_turns: int,
    hh_stats: dict[str, int],
    max_records: int,
) -> str:
    ff_rows = "\n".join(
        f"| `{f['name']}` | `{f['source_path']}` | {f['sessions']} | {f['turns']} |"
        for f in ff_files
    )
    n = hh_stats["records"]
    last = f"{n - 1:04d}" if n else "----"
    return f"""\
# Attribution for the example datasets

The files in this folder are derived from public data. They are produced by
`benchmarks/make_example_data.py` (deterministic; re-run it to rebuild them).
Both sources are under the MIT licence; its full text, as shipped by each
source, is reproduced below. **The original `LICENSE` files in the source
repositories are authoritative**; the copies below are for convenience.

## `{FF_OUT_NAME}`

- Source repository: <https://github.com/{FF_REPO}>
- Commit: `{FF_COMMIT}`
- Licence: MIT (`LICENSE` in that repository), copyright the fair-forge
  authors (Alquimia-ai).
- Source paths, concatenated in this order (sorted by local file name):

| Local file name | Source path in {FF_REPO} | Sessions | Turns |
| --- | --- | --- | --- |
{ff_rows}

- Changes: the 7 JSON lists were concatenated into a single JSON list, in the
  order above, and re-serialised (2-space indent, UTF-8). Every session and
  every field is otherwise unchanged. Note that `dataset_bestof.json`
  intentionally has the same `session_id` for 4 different `assistant_id`s
  (best-of comparison); `dataset_agentic.json` has `agentic` /
  `ground_truth_agentic` fields; the gepa/mipro/sushi sessions have empty
  `assistant` answers (generation inputs) and are in Spanish (`language` is
  `spanish` or `es`).
- Size: **{ff_sessions} sessions, {ff_turns} turns.**

## `{HH_OUT_NAME}`

- Source repository: <https://github.com/{HH_REPO}>
- Commit: `{HH_COMMIT}`
- Source path: `{HH_SOURCE_PATH}` (the harmless-base **test** split)
- Licence: MIT (`LICENSE` in that repository), copyright Anthropic.
- Changes (conversion):
  - only the first {max_records} records of the file were used (records 0 to
    {last}, in file order);
  - each record's `chosen` and `rejected` transcripts
    (`"\\n\\nHuman: ...\\n\\nAssistant: ..."`) were split on the
    `\\n\\nHuman: ` / `\\n\\nAssistant: ` markers; each Human→Assistant pair
    became one turn (`query`, `assistant`, whitespace stripped), with
    `qa_id` `q00`, `q01`, …; a Human turn without an Assistant reply keeps
    `assistant: ""`; consecutive Assistant segments (rare upstream quirk)
    are joined with a blank line into one reply;
  - each record became two sessions in the fair-forge `Dataset` shape:
    `hh-harmless-test-<i>-chosen` (`assistant_id` `hh-chosen`) and
    `hh-harmless-test-<i>-rejected` (`assistant_id` `hh-rejected`), `<i>`
    the 0-based record index (4 digits); `language` `english`, `context`
    `""`, `ground_truth_assistant` `null`. Chosen and rejected share all
    turns but (usually) the last assistant reply;
  - written as JSON Lines, one session per line, UTF-8.
- Conversion notes: {hh_stats['skipped']} transcript(s) skipped as unparseable;
  {hh_stats['turns_without_reply']} turn(s) have an empty `assistant` reply
  (empty in the source); {hh_stats['merged_assistant_segments']} consecutive
  Assistant segment(s) merged. Speaker markers that upstream left inline
  (not preceded by a blank line) are kept as text.
- Size: **{hh_sessions} sessions ({n} records × chosen/rejected), {hh_turns} turns.**

> **Content warning:** hh-rlhf "harmless" data contains offensive, harmful
> and disturbing requests *by design* (red-teaming for harmlessness), and
> some assistant replies (especially `rejected` ones) comply with them. It
> is included only to test evaluation metrics (toxicity, refusal, best-of).
> Do not use it as an example of desirable assistant behaviour.

## Licence texts

### Alquimia-ai/fair-forge (MIT)

Copyright holder: the fair-forge authors (Alquimia-ai). The copyright line
below is the one found in the repository's `LICENSE` file (a stored copy at
commit `aab1361e7cb2be6385b26fb2d588f7004bf112c1`, not verified at the data
commit `{FF_COMMIT}`); the `LICENSE` file in the repository is authoritative.

```
{mit_licence("Copyright (c) 2025 alquimia-ai")}```

### anthropics/hh-rlhf (MIT)

Copyright holder: Anthropic. The copyright line below is the one found in the
repository's `LICENSE` file (a stored copy at commit
`f95611684ee0c6471fa011987de2c2ef2f8ccb05`, not verified at the data commit
`{HH_COMMIT}`); the `LICENSE` file in the repository is authoritative.

```
{mit_licence("Copyright (c) 2022 Anthropic")}```
"""


def write_text(path: Path, text: str) -> None:
    # newline="\n" so the output is byte-identical on every platform.
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shared-data",
        type=Path,
        default=DEFAULT_SHARED_DATA,
        help="folder with the shared public data (default: ../shared/data relative to the repo root)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="output folder (default: fair_forge_beam/data/examples in the repo root)",
    )
    parser.add_argument(
        "--max-records",
        type=int,
        default=400,
        help="number of hh-rlhf records to convert, from the start of the file (default: 400)",
    )
    args = parser.parse_args(argv)

    shared = args.shared_data.resolve()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    # 1. fair-forge examples: concatenate, content unchanged.
    ff_sessions, ff_files = load_fair_forge_examples(shared / "fair_forge_examples")
    validate_sessions(ff_sessions, FF_OUT_NAME)
    ff_path = out / FF_OUT_NAME
    write_text(ff_path, json.dumps(ff_sessions, ensure_ascii=False, indent=2) + "\n")

    # 2. hh-rlhf harmless-base test slice.
    hh_sessions, hh_stats = convert_hh_rlhf(shared / HH_LOCAL, args.max_records)
    print(f"hh-rlhf: skipped {hh_stats['skipped']} unparseable transcript(s)")
    validate_sessions(hh_sessions, HH_OUT_NAME)
    hh_path = out / HH_OUT_NAME
    write_text(hh_path, "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in hh_sessions))

    # 3. attribution.
    write_text(
        out / ATTRIBUTION_NAME,
        render_attribution(
            ff_files,
            len(ff_sessions),
            count_turns(ff_sessions),
            len(hh_sessions),
            count_turns(hh_sessions),
            hh_stats,
            args.max_records,
        ),
    )

    # Re-read the written files with plain json and re-validate.
    with ff_path.open(encoding="utf-8") as fh:
        ff_back = json.load(fh)
    assert ff_back == ff_sessions, "fair_forge_examples.json round-trip mismatch"
    validate_sessions(ff_back, FF_OUT_NAME)
    with hh_path.open(encoding="utf-8") as fh:
        hh_back = [json.loads(line) for line in fh]
    validate_sessions(hh_back, HH_OUT_NAME)

    total = 0
    for name, sessions in ((FF_OUT_NAME, ff_back), (HH_OUT_NAME, hh_back), (ATTRIBUTION_NAME, None)):
        size = (out / name).stat().st_size
        total += size
        if sessions is None:
            print(f"{name}: {size:,} bytes")
        else:
            print(f"{name}: {len(sessions)} sessions, {count_turns(sessions)} turns, {size:,} bytes")
    print(f"total: {total:,} bytes in {out}")
    if total > 1_500_000:
        print("WARNING: examples exceed ~1.5 MB; lower --max-records", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
