"""The README's main job's graph (issue 26: README's job at most 5 CPU s): each transform costs graph
construction, type inference, translation and a bundle processor's set-up, so steps that exist only
for plumbing are not in it. The graph is built by ``pipelines.audit.run`` and captured when the
pipeline would run (nothing runs, nothing is published)."""
from __future__ import annotations

import pytest

from fair_forge_beam._beam import beam
from pipelines import audit

from helpers import FNAPI


class _Built(Exception):
    pass


@pytest.fixture(scope="module")
def leaves(tmp_path_factory):
    """The full labels of the leaf transforms of README's job (humanity + toxicity, Bayesian)."""
    out = str(tmp_path_factory.mktemp("graph") / "out")
    found = []

    def capture(self, *a, **k):
        def walk(node):
            if not node.parts:
                found.append(node.full_label)
            for part in node.parts:
                walk(part)

        walk(self._root_transform())
        raise _Built

    mp = pytest.MonkeyPatch()
    mp.setattr(beam.Pipeline, "run", capture)
    try:
        with pytest.raises(_Built):
            audit.run(["--quiet", "--metrics", "humanity,toxicity", "--mode", "bayesian", "--output", out,
                       f"--runner={FNAPI}"])
    finally:
        mp.undo()
    return found


def test_the_two_run_combines_have_no_default_step(leaves):
    """The manifest's counts and results.json's combine take a ("read", None, 0) that every run holds,
    not a default: a default is a DoOnce (3 transforms), an InjectDefault and a side-input stage each."""
    for combine in ("StatsCounts/", "CombineResults/"):
        steps = [leaf for leaf in leaves if leaf.startswith(combine)]
        assert steps, combine
        assert not [s for s in steps if "DoOnce" in s or "InjectDefault" in s], steps
    assert [leaf for leaf in leaves if leaf.startswith("ReadCountSeed/")]


def test_whole_files_are_one_step_each_group(leaves):
    """The four stats files (manifest, settings, run ids, quality counts) are written by one step, and
    results.json's text is made where it is written (a text step and a write step were two per file)."""
    assert [leaf for leaf in leaves if leaf.startswith("WriteStats") and "/" not in leaf] == ["WriteStats"]
    assert not [leaf for leaf in leaves if leaf.startswith("Stats") and leaf.endswith("Text")]
    assert "WriteResultsJson" in leaves and "ResultsJson" not in leaves


def test_reads_and_reads_per_slice_are_one_count(leaves):
    """The interactions read and those of each slice (results.json's coverage counts, the stored
    counts) are counted per key by one count: a count of all and a count per slice were 10 transforms
    and 2 shuffles."""
    assert not [leaf for leaf in leaves if "ReadSlices" in leaf or leaf.startswith("ReadSliceKeys")]
    assert len([leaf for leaf in leaves if leaf.startswith("CountRead/") and leaf.endswith("GroupByKey")]) == 1
    # one combine input per interaction: no step that makes a key per count and slice of each
    # interaction (three elements per interaction, each through two more steps)
    assert not [leaf for leaf in leaves if leaf.startswith("ReadCountKeys") or leaf.startswith("CountRead/CountRead:")]


def test_read_counts_are_the_former_per_key_counts():
    """ReadCountsFn, merged in any split, gives the counts the former per-key count gave: ("read",
    None, n) and one ("read_slice", "<dimension>=<value>", n) per slice of the dimensions."""
    import random
    from collections import Counter, namedtuple

    from fair_forge_beam.reports.results import ReadCountsFn

    X = namedtuple("X", "assistant_id language")
    rng = random.Random(3)
    for _ in range(200):
        xs = [X(rng.choice(["a", "b", None, 1, "1"]), rng.choice(["english", "es"])) for _ in range(rng.randint(0, 40))]
        dims = rng.choice([(), ("assistant_id",), ("language",), ("assistant_id", "language"), ("language", "assistant_id")])
        former = Counter(k for x in xs for k in [("read", None), *(("read_slice", f"{d}={getattr(x, d)}") for d in dims)])
        fn = ReadCountsFn(dims)
        cut = rng.randint(0, len(xs))
        parts = [fn.create_accumulator(), fn.create_accumulator()]
        for i, x in enumerate(xs):
            parts[i >= cut] = fn.add_input(parts[i >= cut], x)
        out = fn.extract_output(fn.merge_accumulators(parts))
        assert sorted(out, key=repr) == sorted(((k, v, n) for (k, v), n in former.items()), key=repr)
        assert len(out) == len({(k, v) for k, v, _ in out})


def test_slice_summaries_are_tagged_by_their_combine(leaves):
    """Each metric's slice summaries reach the results combine as ('slices', metric, pairs) from their
    own combine: a step that only tagged them was one transform per metric."""
    assert [leaf for leaf in leaves if leaf.startswith("SliceSummaries_")]
    assert not [leaf for leaf in leaves if leaf.startswith("TagSlices_")]


def test_interaction_rows_become_tables_before_they_meet(leaves):
    """Each metric's interaction records are batched into Arrow tables in their own stage and only the
    tables are flattened (with every other output's, into the one writer's input): a Flatten of the rows
    themselves (``FlattenInteractionRows``) made FnApiRunner write and read every row dict once more
    (docs/performance.md)."""
    assert not [leaf for leaf in leaves if "FlattenInteractionRows" in leaf]
    assert {"ParquetTable/0", "ParquetTable/1", "WriteOutputs/Flatten"} <= set(leaves)
    assert not [leaf for leaf in leaves if leaf.startswith(("ParquetBatch", "ParquetTable")) and "Flatten" in leaf]


def _writers(leaves) -> set:
    """The sharded writers of a graph: each ``WriteImpl`` (``WriteToText``, ``WriteToParquetBatched``)
    and ``WriteToFiles``, by the label of the transform that applied it."""
    found = set()
    for leaf in leaves:
        parts = leaf.split("/")
        for i, part in enumerate(parts):
            if part in ("WriteImpl", "WriteToFiles"):
                found.add("/".join(parts[:i + 1]))
                break
    return found


def test_the_sharded_outputs_are_written_by_one_writer(leaves):
    """README's job's nine sharded outputs (dead letters, data quality, results.parquet, each metric's
    sessions and slices, the stored statistics' two tables) go through one ``fileio.WriteToFiles``:
    a ``WriteImpl`` each (a DoOnce, a GroupByKey of its bundles' results, a pre-finalize and a
    finalize step) were 144 of the job's 301 transforms and 36 of its 62 bundles."""
    assert _writers(leaves) == {"WriteOutputs/WriteToFiles"}
    for name in ("DeadLetter", "Quality"):
        assert f"{name}ToJson" in leaves
    for name in ("ParquetTable/0", "Sessions_humanity", "Slices_toxicity", "Engine/Statssessions/Table", "Engine/Statsslices/Table"):
        assert [leaf for leaf in leaves if leaf.startswith(name)], name
    assert not [leaf for leaf in leaves if leaf.startswith(("Write", "DeadLetterWrite", "QualityWrite"))
                and leaf.split("/")[0] not in ("WriteOutputs", "WriteStats", "WriteResultsJson")]


def test_scored_counts_cross_the_results_flatten_once_per_bundle(leaves):
    """results.json's interactions scored per metric were one ("scored", metric, n) element per session
    through FlattenResultParts (written and read again by FnApiRunner); now one per bundle, the sum of
    its session records' n_interactions, and none for a bundle without a session record."""
    from fair_forge_beam.reports.results import _ScoredPerBundle

    assert {"TagScored_humanity", "TagScored_toxicity"} <= set(leaves)
    fn = _ScoredPerBundle("humanity")
    fn.start_bundle()
    for n in (3, None, 0, 4):
        assert list(fn.process({"n_interactions": n}) or ()) == []
    out = [wv.value for wv in fn.finish_bundle()]
    assert out == [("scored", "humanity", 7)]
    fn.start_bundle()
    assert list(fn.finish_bundle()) == []
