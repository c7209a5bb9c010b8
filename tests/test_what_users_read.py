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


def test_progress_counts_what_the_summary_counts_and_its_last_line_is_the_final_count():
    """The trial's console: "progress: 2,042 interactions read, scored: humanity 1,792, …" above
    "humanity: interactions: 2016 scored, 26 not scored": the line counted interactions the scorer
    took (dead letters included) and its last line was sampled mid-run. Now "scored" counts
    scores out of the scorer (results.json's interactions_scored), the dead-lettered ones are
    labelled "not scored", and the reporter's exit writes the final count."""
    import io
    import types

    from apache_beam.pvalue import TaggedOutput

    from fair_forge_beam import progress as P
    from fair_forge_beam.engine import _ScoreAndRoute

    class Scorer:  # a DoFn-like scorer: odd elements are dead letters
        def process(self, x):
            yield TaggedOutput("dead_letter", x) if x % 2 else x

    import apache_beam as beam

    class DoFnScorer(Scorer, beam.DoFn):
        pass

    spec = types.SimpleNamespace(name="m", scorer=DoFnScorer(), interaction_record=None, session_value=None,
                                 cell_value=None)
    now = [0.0]
    out = io.StringIO()
    rep = P.ProgressReporter(interval=1000, stream=out, clock=lambda: now[0])
    with rep:
        fn = _ScoreAndRoute(spec, 0)
        fn.setup()
        fn.start_bundle()
        P.ProgressCounter("read", beam_counter=_Null()).inc(10)
        for x in range(10):
            list(fn.process(x))
        rep.tick()  # a line mid-run (nothing flushed yet: counted in steps)
        fn.finish_bundle()
    lines = out.getvalue().splitlines()
    assert lines[-1].startswith("progress: 10 interactions read, scored: m 5 (5 not scored);"), lines
    assert P.format_progress({(P.NAMESPACE, "read"): 3, (P.NAMESPACE, "taken.m"): 3, (P.NAMESPACE, "scored.m"): 3},
                             1, 0.0).startswith("progress: 3 interactions read, scored: m 3;")
    P.reset()


class _Null:
    def inc(self, n=1):
        pass
