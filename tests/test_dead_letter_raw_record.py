"""A metric's dead letter of an interaction carries the interaction (docs/reliability.md: "A dead
letter is {stage, reason, element_id, raw, source} with the original record"), so an operator can
fix or replay it — trial47 B6: Role adherence's dead letter of a session without a role held the
query alone; Privacy's held the expected spans alone, or the scanned text alone; Agentic's
``agentic_tools`` held the two tool traces alone."""
from __future__ import annotations

import json

from test_role_adherence import sample as _interactions  # the shipped sample with roles (one session without)


def _dead(out) -> list:
    from fair_forge_beam.io.elements import DeadLetter

    return [getattr(o, "value", o) for o in out if isinstance(getattr(o, "value", o), DeadLetter)]


def _is_the_record(d, x) -> None:
    raw = json.loads(d.raw)
    assert isinstance(raw, dict), d.raw
    for field in ("element_id", "session_id", "assistant_id", "qa_id", "query", "assistant", "turn_index"):
        assert raw.get(field) == getattr(x, field), (d.stage, field, raw.get(field), getattr(x, field))


def test_role_adherence_dead_letter_of_a_session_without_a_role_is_its_interaction():
    from fair_forge_beam.metrics.role_adherence import StructuredJudgeStrategy, _BuildRequests, _turn

    xs = [x for x in _interactions() if not x.chatbot_role]
    assert xs, "the sample has a session without a role"
    skey = _turn(xs[0])[0]
    turns = [_turn(x)[1] for x in xs if _turn(x)[0] == skey]
    dead = _dead(_BuildRequests(StructuredJudgeStrategy()).process((skey, turns)))
    assert len(dead) == len(turns) and all("no chatbot_role" in d.reason for d in dead)
    by_id = {x.element_id: x for x in xs}
    for d in dead:
        _is_the_record(d, by_id[d.element_id])
    # a turn with a role carries no record into the grouping
    assert all(_turn(x)[1][-1] is None for x in _interactions() if x.chatbot_role)


def test_privacy_dead_letters_are_their_interactions():
    from fair_forge_beam.components.pii import PatternDetector
    from fair_forge_beam.metrics.privacy import Privacy, _ScorePrivacy

    def bad_span(data):
        data[0]["conversation"][0]["spans"] = [{"label": "blood_type", "start": 0, "end": 3}]

    m = Privacy()
    x = _interactions(bad_span)[0]
    [d] = _dead(_ScorePrivacy(m.detector, m.domain, m.text_field).process(x))
    assert "outside the domain" in d.reason
    _is_the_record(d, x)

    class Exploding(PatternDetector):
        name = "exploding"

        def predict(self, text):
            raise RuntimeError("backend down")

    x = _interactions()[1]
    [d] = _dead(_ScorePrivacy(Exploding(), m.domain, m.text_field).process(x))
    assert "backend down" in d.reason and f"on the {m.text_field}" in d.reason, d.reason
    _is_the_record(d, x)


def test_agentic_tools_dead_letter_is_its_interaction():
    from fair_forge_beam.metrics.agentic import TOOLS_STAGE, Agentic, _Score

    x = _interactions()[0]._replace(agentic={"tools_used": [{"tool_name": 5}], "reward": 1.0},
                                    ground_truth_agentic={"expected_tools": [{"tool_name": "search"}]})
    dead = _dead(_Score(Agentic(k=1, correctness_source="label")).process(x))
    assert [d.stage for d in dead] == [TOOLS_STAGE], dead
    _is_the_record(dead[0], x)
    assert json.loads(dead[0].raw)["agentic"] == x.agentic


def test_a_read_dead_letters_raw_is_as_docs_data_md_says(tmp_path):
    """docs/data.md's dead_letter row: a record parsed and then refused is written back as JSON (``1e999``
    reads ``Infinity``), and ``raw`` holds at most 100,000 characters, a longer one ending with the
    truncation note; a line that does not parse is kept as read."""
    from test_reader_hostile import _read_outputs

    long_answer = "a" * 150_000
    lines = [
        '{"session_id":1e999,"assistant_id":"a","conversation":[{"qa_id":"q","query":"h","assistant":"x"}]}',
        json.dumps({"assistant_id": "a", "conversation": [{"qa_id": "q", "query": "h", "assistant": long_answer}]}),
        '{"session_id": "s3", 1e999',
    ]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _, dead, _ = _read_outputs(str(tmp_path / "in.jsonl"), tmp_path)
    assert len(dead) == 3, dead
    by_source = sorted(dead, key=lambda d: int(d["source"].rsplit(":", 1)[1]))
    assert "Infinity" in by_source[0]["raw"] and "1e999" not in by_source[0]["raw"], by_source[0]["raw"]
    raw = by_source[1]["raw"]
    assert len(raw) < 100_100 and raw.endswith(f"... [truncated, {len(lines[1])} characters in all]"), raw[-80:]
    assert raw[:100_000] == lines[1][:100_000]
    assert by_source[2]["raw"].rstrip("\n") == lines[2], by_source[2]["raw"]
