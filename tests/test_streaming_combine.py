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


class _Sorted(beam.CombineFn):
    """Values as a sorted list (``setup`` must have run: the folds call it)."""

    def setup(self):
        self.ready = True

    def create_accumulator(self):
        assert self.ready
        return []

    def add_input(self, acc, v):
        acc.append(v)
        return acc

    def merge_accumulators(self, accs):
        return [v for a in accs for v in a]

    def extract_output(self, acc):
        return sorted(acc)


def _keyed_values(seed: int, keys: int, n: int, windowfn):
    """A pipeline and ``n`` random ``(key, value)`` of ``keys`` keys, timestamped in [0, 400) s, in ``windowfn``'s
    windows (``None``: the global window)."""
    rnd = random.Random(seed)
    data = [(f"k{rnd.randrange(keys)}", rnd.randrange(100), rnd.uniform(0, 400)) for _ in range(n)]
    p = beam.Pipeline(options=PipelineOptions([f"--runner={FNAPI}"]))
    kv = p | beam.Create(data) | beam.Map(lambda x: window.TimestampedValue((x[0], x[1]), x[2]))
    return p, kv if windowfn is None else kv | beam.WindowInto(windowfn)


@pytest.mark.parametrize("windowfn", [None, window.FixedWindows(60)], ids=["global", "fixed"])
@pytest.mark.parametrize("table_keys", [1, 3, 1000])
def test_a_small_table_gives_the_same_elements_and_no_lifting(tmp_path, windowfn, table_keys):
    """``table_keys`` on a bounded batch input: a pre-combine table of that many keys, a GroupByKey
    and a merge (no runner lifts it, so no worker keeps Beam's table of 100,000 keys), with the
    same keys, values, windows, timestamps and panes as Beam's CombinePerKey — a table smaller than
    the keys (1, 3) flushes keys before their last value."""
    from apache_beam.runners.portability.portable_runner import PortableRunner

    p, kv = _keyed_values(5, 40, 400, windowfn)
    folded = kv | "Folded" >> wcombine.combine_per_key(_Sorted(), kv, table_keys)
    assert folded.windowing.windowfn == kv.windowing.windowfn
    kv | "Lifted" >> beam.CombinePerKey(_Sorted()) | "DescLifted" >> beam.ParDo(_Describe(tmp_path / "lifted"))
    folded | "DescFolded" >> beam.ParDo(_Describe(tmp_path / "folded"))
    names = [t.unique_name for t in PortableRunner._optimize_pipeline(
        p.to_runner_api(), PipelineOptions([])).components.transforms.values()]
    assert not [n for n in names if n.startswith("Folded/") and "Precombine" in n]
    assert [n for n in names if n.startswith("Lifted/") and "Precombine" in n]  # what Beam does to a CombinePerKey
    p.run().wait_until_finish()
    lifted = _lines(tmp_path / "lifted")
    assert len(lifted) >= 40
    assert _lines(tmp_path / "folded") == lifted


def test_the_pre_combine_table_never_holds_more_than_its_keys():
    """The bound is what the fix is about: a bundle of 1,000 keys through a table of 3 holds at most
    3 accumulators at any time, flushing the oldest key first; every value reaches one output."""
    fn = wcombine._PreCombine(_Sorted(), 3)
    fn.setup()
    fn.start_bundle()
    out, largest = [], 0
    for i in range(3000):
        out += list(fn.process((f"k{i // 3}", i)))  # each key's values together, as a session's arrive
        largest = max(largest, len(fn.table))
    flushed_before_the_end = len(out)
    out += [wv.value for wv in fn.finish_bundle()]
    assert largest == 3 and flushed_before_the_end == 997 and len(out) == 1000
    assert sorted(v for _, acc in out for v in acc) == list(range(3000))
    assert [k for k, _ in out] == [f"k{i}" for i in range(1000)]  # oldest first


def test_a_small_table_only_in_batch():
    streaming = beam.Pipeline(options=PipelineOptions([f"--runner={FNAPI}", "--streaming"]))
    kv = streaming | beam.Create([("a", 1)])
    assert isinstance(wcombine.combine_per_key(sum, kv, table_keys=10), beam.CombinePerKey)
    unbounded = beam.Pipeline(options=PipelineOptions([f"--runner={FNAPI}"]))
    stream = unbounded | _TestStream().add_elements([("a", 1)])
    assert isinstance(wcombine.combine_per_key(sum, stream, table_keys=10), beam.CombinePerKey)
    batch = beam.Pipeline(options=PipelineOptions([f"--runner={FNAPI}"])) | beam.Create([("a", 1)])
    assert isinstance(wcombine.combine_per_key(sum, batch, table_keys=10), wcombine.SmallTableCombinePerKey)
    with pytest.raises(ValueError, match="max_keys"):
        wcombine.SmallTableCombinePerKey(sum, 0)


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


@pytest.mark.slow
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
