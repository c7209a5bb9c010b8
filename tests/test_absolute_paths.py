"""trial39 T2: a local path reaches a worker absolute, whatever the worker's folder. The options that
name a local file, folder or glob are discovered from the options table (``path`` / ``file``) and
from a command's own path arguments (rollup's ``--from``), so a new one is covered; the launchers
make them absolute in one place (:func:`fair_forge_beam.options.absolute_paths`). Before, a Flink
worker read rollup's ``--from audits/…`` and wrote ``--judge-cache jcache/c.sqlite`` in the
cluster's folder."""
from __future__ import annotations

import argparse
import os

import pytest

from fair_forge_beam import options as O


def _rel(o) -> object:
    return ["rel/a*.jsonl", "./rel/b"] if o.repeatable else "rel/x"


def test_every_path_option_of_the_table_comes_out_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    declared = {d: o for d, o in O.TABLE.items() if o.path or o.file}
    assert {"input", "output", "judge_cache", "generator_cache", "assistant_cache", "watch"} <= set(declared)
    assert set(declared) <= O.path_dests()
    args = argparse.Namespace(**{d: _rel(o) for d, o in declared.items()})
    out = O.absolute_paths(args)
    for d, o in declared.items():
        got = getattr(out, d)
        for v in (got if o.repeatable else [got]):
            assert os.path.isabs(v) and v.startswith(str(tmp_path)), (d, v)
    assert vars(args) == {d: _rel(o) for d, o in declared.items()}  # as typed, for the messages
    assert vars(O.absolute_paths(argparse.Namespace(output="o"))) == {"output": str(tmp_path / "o")}  # adds nothing


def test_names_urls_and_unset_values_are_kept(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    declared = {d: o for d, o in O.TABLE.items() if o.path or o.file}
    for d, o in declared.items():
        for keep in (None, "", "gs://b/x", *o.names):
            value = [keep] if o.repeatable and keep is not None else keep
            assert getattr(O.absolute_paths(argparse.Namespace(**{d: value})), d) == value, (d, keep)
    assert {"airline", "callcenter"} <= set(O.TABLE["corpus"].names) & set(O.TABLE["regulatory_corpus"].names)
    from fair_forge_beam.components.corpus import PACKAGED_CORPORA

    assert set(PACKAGED_CORPORA) == set(O.TABLE["corpus"].names) == set(O.TABLE["regulatory_corpus"].names)


def test_a_commands_own_path_arguments_are_found(tmp_path, monkeypatch):
    from fair_forge_beam.rollup import build_parser

    monkeypatch.chdir(tmp_path)
    parser = build_parser()
    assert "runs" in O.path_dests(parser)
    args = parser.parse_known_args(["--from", "audits/2026-12-0[1-3]", "--output", "week"])[0]
    assert O.absolute_paths(args, parser).runs == [str(tmp_path / "audits/2026-12-0[1-3]")]


class _Stop(Exception):
    pass


def test_the_audit_builds_its_metrics_with_absolute_paths(tmp_path, monkeypatch):
    """The judge's cache path the handlers are built with (the Flink worker opens it)."""
    from fair_forge_beam.metrics import registry
    from pipelines import audit

    monkeypatch.chdir(tmp_path)
    seen = {}

    def build_metric(name, mode, options):
        seen.update(options)
        raise _Stop()

    monkeypatch.setattr(registry, "build_metric", build_metric)
    with pytest.raises(_Stop):
        audit.run(["--metrics", "context", "--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m",
                   "--judge-cache", "jcache/c.sqlite", "--output", "out"])
    assert seen["judge_cache"] == str(tmp_path / "jcache/c.sqlite")


def test_rollup_resolves_from_absolute(tmp_path, monkeypatch):
    """The runs a roll-up's workers read are absolute (trial39 T2); its messages and run_info.json name them as
    given (``rollup.runs``: ``audits/2026-12-01``)."""
    from fair_forge_beam import rollup

    monkeypatch.chdir(tmp_path)
    seen = {}

    def fake_rollup(args, beam_args, runs, *rest):
        seen["runs"], seen["shown"] = list(runs), list(args.runs_shown)
        raise _Stop()

    monkeypatch.setattr(rollup, "resolve_runs", lambda patterns: ["audits/2026-12-01", "gs://b/audits/2026-12-02"])
    monkeypatch.setattr(rollup, "load_manifests", lambda runs: [{}, {}])
    monkeypatch.setattr(rollup, "check_no_overlap", lambda runs, manifests: [])
    monkeypatch.setattr(rollup, "_rollup", fake_rollup)
    with pytest.raises(_Stop):
        rollup.run(["--from", "audits/2026-12-0[1-3]", "--output", "week"])
    assert seen["runs"] == [str(tmp_path / "audits/2026-12-01"), "gs://b/audits/2026-12-02"]
    assert seen["shown"] == ["audits/2026-12-01", "gs://b/audits/2026-12-02"]
