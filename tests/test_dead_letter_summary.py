"""``reports.load.dead_letter_summary`` (what report.html shows of the dead letters) depends on the
dead letters only, never on the order a runner wrote them in (outputs-identity tool: report.html
differed between two runs of one tree in 4 of 5 pairs, because the records shown and the assistants
counted followed file order)."""
from __future__ import annotations

import json
import random

import pytest

from fair_forge_beam.reports import load


def _records(n: int = 40) -> list[dict]:
    out = []
    for i in range(n):
        who = f"bot-{i % 7}"
        raw = json.dumps({"session_id": f"s{i}", "assistant_id": who, "conversation": [{"qa_id": str(i)}]})
        out.append({"stage": ["read", "humanity", "toxicity"][i % 3], "reason": f"bad thing {i % 4} at byte {i}",
                    "element_id": f"s{i}/{who}/0", "raw": raw, "source": None})
    return out


def _write(folder, records, shards: int) -> None:
    d = folder / "dead_letter"
    d.mkdir(parents=True)
    for k in range(shards):
        part = records[k::shards]
        (d / f"part-{k:05d}-of-{shards:05d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part),
                                                                 encoding="utf-8")


@pytest.mark.parametrize("seed", range(5))
def test_the_summary_is_the_same_for_any_order_and_sharding_of_the_records(tmp_path, seed, monkeypatch):
    monkeypatch.setattr(load, "MAX_DEAD_ASSISTANTS", 3)  # the cap keeps the smallest ids, whatever comes first
    records = _records()
    _write(tmp_path / "a", records, 1)
    shuffled = records[:]
    random.Random(seed).shuffle(shuffled)
    _write(tmp_path / "b", shuffled, 1 + seed % 3)
    a, b = load.dead_letter_summary(str(tmp_path / "a")), load.dead_letter_summary(str(tmp_path / "b"))
    assert a == b
    assert sorted(a["by_assistant"]) == ["bot-0", "bot-1", "bot-2"] and a["total"] == 40 and len(a["first"]) == 5
    # one record of each of the most frequent kinds first, the smallest of its kind
    assert [(x["stage"], x["element_id"]) for x in a["first"][:3]] == [("read", "s0/bot-0/0"), ("humanity", "s1/bot-1/0"),
                                                                      ("toxicity", "s11/bot-4/0")]
