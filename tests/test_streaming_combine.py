"""The windowed per-key combine that groups in the global window (bounded input, non-merging
windows, default trigger): same keys, values, windows, timestamps and panes as Beam's windowed
CombinePerKey; metric results unchanged; everything else falls back to Beam's CombinePerKey."""
from __future__ import annotations

import json
import random

import pytest

from fair_forge_beam._beam import beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_stream import TestStream as _TestStream
from apache_beam.transforms import trigger, window

from fair_forge_beam.io.elements import Interaction, make_element_id
from fair_forge_beam.streaming import combine as wcombine
from fair_forge_beam.streaming.windows import AddWindowFields, WindowSpec

from helpers import FNAPI, append_line_sink


class _Describe(beam.DoFn):
    """Test sink: key, value, window, timestamp and pane of every element, as a JSON line."""

    def __init__(self, path):
        self.path = str(path)

    def process(self, kv, w=beam.DoFn.WindowParam, ts=beam.DoFn.TimestampParam, pane=beam.DoFn.PaneInfoParam):
        rec = {"kv": kv, "window": [w.start.micros, w.end.micros], "ts": ts.micros,
               "pane": [pane.is_first, pane.is_last, pane.timing, pane.index, pane.nonspeculative_index]}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec, sort_keys=True) + "\n")


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return sorted(f.read().splitlines())


@pytest.mark.parametrize("windowfn", [window.FixedWindows(60), window.SlidingWindows(120, 40)], ids=["fixed", "sliding"])
def test_same_elements_as_windowed_combine(tmp_path, windowfn):
    rnd = random.Random(3)
    data = [(f"k{rnd.randrange(7)}", rnd.randrange(100), rnd.uniform(0, 400)) for _ in range(300)]
    p = beam.Pipeline(options=PipelineOptions([f"--runner={FNAPI}"]))
    windowed = (p | beam.Create(data) | beam.Map(lambda x: window.TimestampedValue((x[0], x[1]), x[2]))
                | beam.WindowInto(windowfn))
    assert wcombine.can_group_in_global_window(windowed)
    slow = windowed | "Slow" >> beam.CombinePerKey(sum)
    fast = windowed | "Fast" >> wcombine.GlobalKeyedWindowCombine(sum)
    assert fast.windowing.windowfn == windowfn  # the declared windowing is restored
    slow | "DescSlow" >> beam.ParDo(_Describe(tmp_path / "slow"))
    fast | "DescFast" >> beam.ParDo(_Describe(tmp_path / "fast"))
    # downstream windowed grouping still works on the restored windows
    fast | "Again" >> beam.CombinePerKey(sum) | "DescAgain" >> beam.ParDo(_Describe(tmp_path / "again"))
    p.run().wait_until_finish()
    slow_lines = _lines(tmp_path / "slow")
    assert len(slow_lines) > 7
    assert _lines(tmp_path / "fast") == slow_lines
    assert _lines(tmp_path / "again") == slow_lines


def test_falls_back_where_not_exact():
    p = beam.Pipeline(options=PipelineOptions([f"--runner={FNAPI}"]))
    kv = p | beam.Create([("a", 1)])
    assert not wcombine.can_group_in_global_window(kv)  # global window (batch): Beam's CombinePerKey
    assert isinstance(wcombine.combine_per_key(sum, kv), beam.CombinePerKey)
    assert isinstance(wcombine.combine_per_key(sum, kv | "F" >> beam.WindowInto(window.FixedWindows(60))),
                      wcombine.GlobalKeyedWindowCombine)
    assert not wcombine.can_group_in_global_window(kv | "S" >> beam.WindowInto(window.Sessions(60)))
    early = kv | "E" >> beam.WindowInto(window.FixedWindows(60), trigger=trigger.AfterWatermark(early=trigger.AfterCount(1)),
                                        accumulation_mode=trigger.AccumulationMode.DISCARDING)
    assert not wcombine.can_group_in_global_window(early)
    late = kv | "L" >> beam.WindowInto(window.FixedWindows(60), allowed_lateness=600)
    assert not wcombine.can_group_in_global_window(late)
    with pytest.raises(ValueError, match="bounded"):
        late | "G" >> wcombine.GlobalKeyedWindowCombine(sum)
    for spec in (WindowSpec.parse("fixed:1m", "30s"), WindowSpec.parse("fixed:1m", None, "10m")):
        assert not wcombine.can_group_in_global_window(kv | f"W{spec}" >> spec.window_into(f"W{spec}"))

    unbounded = beam.Pipeline(options=PipelineOptions([f"--runner={FNAPI}"]))
    stream = unbounded | _TestStream().add_elements([("a", 1)]) | beam.WindowInto(window.FixedWindows(60))
    assert not stream.is_bounded and not wcombine.can_group_in_global_window(stream)
    streaming = beam.Pipeline(options=PipelineOptions([f"--runner={FNAPI}", "--streaming"]))
    assert not wcombine.can_group_in_global_window(streaming | beam.Create([("a", 1)]) | beam.WindowInto(window.FixedWindows(60)))


def _interactions(n):
    words = ["happy", "sad", "idiot", "women", "men", "trust", "fear", "joy", "the", "calm", "angry", "muslim"]
    out = []
    for i in range(n):
        sid = f"s{i // 4}"
        text = " ".join(words[(i * k) % len(words)] for k in range(1, 7))
        out.append(Interaction(make_element_id(sid, "a", i % 4), sid, f"a{i % 3}", "english", "", i % 4, f"q{i}", "q",
                               text, "a happy calm answer" if i % 2 else None, None, None, None, None, None,
                               7.0 * i))
    return out


_AppendLine = append_line_sink  # one JSON line per record, appended to a local file


def _run_metrics(out, spec):
    from fair_forge_beam.components.group_extractor import KeywordGroupExtractor, default_group_keywords
    from fair_forge_beam.metrics.humanity import Humanity
    from fair_forge_beam.metrics.toxicity import Toxicity
    from fair_forge_beam.statistical import BayesianMode

    mode = BayesianMode(mc_samples=200, rng_seed=11)
    metrics = {"humanity": Humanity(statistical_mode=mode),
               "toxicity": Toxicity(statistical_mode=mode, clustering=False,
                                    group_extractor=KeywordGroupExtractor(default_group_keywords()))}
    out.mkdir()
    p = beam.Pipeline(options=PipelineOptions([f"--runner={FNAPI}"]))
    windowed = (p | beam.Create(_interactions(160)) | beam.Map(lambda x: window.TimestampedValue(x, x.event_time))
                | spec.window_into())
    for name, m in metrics.items():
        res = windowed | f"M_{name}" >> m
        for part in ("slices", "sessions"):
            (res[part] | f"W_{name}_{part}" >> beam.ParDo(AddWindowFields())
             | f"A_{name}_{part}" >> beam.ParDo(_AppendLine(out / f"{name}-{part}")))
    p.run().wait_until_finish()
    return {f.name: _lines(f) for f in sorted(out.iterdir())}


@pytest.mark.parametrize("window_spec", ["fixed:5m", "sliding:10m,5m"])
def test_metric_results_unchanged(tmp_path, monkeypatch, window_spec):
    """Humanity and Toxicity (Bayesian) per window: slice and session records, window and pane
    fields included, are the same line for line with the global-window grouping and without it."""
    spec = WindowSpec.parse(window_spec)
    fast = _run_metrics(tmp_path / "fast", spec)
    monkeypatch.setattr(wcombine, "can_group_in_global_window", lambda pcoll: False)
    slow = _run_metrics(tmp_path / "slow", spec)
    assert set(fast) == {"humanity-slices", "humanity-sessions", "toxicity-slices", "toxicity-sessions"}
    n_windows = len({json.loads(line)["window_start_s"] for line in fast["humanity-slices"]})
    assert n_windows >= 4
    for name in fast:
        assert fast[name] == slow[name], name
