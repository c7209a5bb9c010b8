"""Issue 28, "What users read" (fresh-user trial of README's first command): the surfaces a new user
reads agree with each other — the findings count interactions as the summary does, the progress
line counts what the summary counts, one function labels an estimate inconclusive, the console
marks a value resting on one observation as the report does, and a mistyped option value is
answered with the closest valid one."""
from __future__ import annotations

import json

from fair_forge_beam.reports import load
from fair_forge_beam.reports.html import unscored_assistants


def _dead(folder, rows) -> None:
    d = folder / "dead_letter"
    d.mkdir(parents=True)
    lines = []
    for i, (stage, who) in enumerate(rows):
        raw = json.dumps({"session_id": f"s{i}", "assistant_id": who, "query": "q", "assistant": "a"})
        lines.append(json.dumps({"stage": stage, "reason": f"no emotion lexicon for language 'spanish' ({stage})",
                                 "element_id": f"s{i}/{who}/0", "raw": raw, "source": None}))
    (d / "part-00000-of-00001.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_unscored_assistants_are_counted_in_interactions_with_their_metrics_named(tmp_path):
    """The trial's findings said "support-bot (32 dead letters …)" for 16 interactions (one dead
    letter per interaction and metric) while the summary said "26 not scored" (16 + 10): the
    findings now count interactions and name the metrics."""
    rows = [(m, "support-bot") for m in ("humanity", "toxicity") for _ in range(16)]
    rows += [(m, "sushi_bot") for m in ("humanity", "toxicity") for _ in range(10)]
    rows += [("read", "rejected-bot")] * 3 + [("humanity", "half-bot")] * 4 + [("toxicity", "half-bot")] * 2
    _dead(tmp_path, rows)
    summary = load.dead_letter_summary(str(tmp_path))
    doc = {"metrics": {"humanity": {"slices": []}, "toxicity": {"slices": []}}}
    got = {u["assistant"]: u for u in unscored_assistants(doc, summary)}
    assert got["support-bot"]["what"] == "16 interactions not scored by humanity or toxicity"
    assert got["support-bot"]["interactions"] == 16 and got["support-bot"]["dead_letters"] == 32
    assert got["sushi_bot"]["what"] == "10 interactions not scored by humanity or toxicity"
    assert got["rejected-bot"]["what"] == "3 records rejected at read" and got["rejected-bot"]["interactions"] is None
    assert got["half-bot"]["what"] == "interactions not scored: humanity 4, toxicity 2"
