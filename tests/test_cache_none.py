"""``none`` means no cache for every answer cache option (``--judge-cache``, ``--generator-cache``,
``--assistant-cache``), in every command: a re-run asks the endpoint again and no file named ``none``
appears (only ``optimize`` read ``none`` as no cache; the audit, ``generate``, ``run_assistant`` and the
loop created a SQLite file ``none`` in the working folder and answered the re-run from it)."""
from __future__ import annotations

import json

import pytest

from fair_forge_beam.components.judge.cache import DEFAULT_CACHE, NO_CACHE, cache_choice
from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer


def test_one_reading_of_a_cache_option():
    assert cache_choice(NO_CACHE) is None and cache_choice("none", None) is None
    assert cache_choice(None) == DEFAULT_CACHE and cache_choice("") == DEFAULT_CACHE
    assert cache_choice(None, None) is None  # an option whose default is no cache (--assistant-cache)
    assert cache_choice("/x/c.sqlite3") == "/x/c.sqlite3" and cache_choice("none.sqlite3") == "none.sqlite3"


def _context_data(path):
    sessions = [{"session_id": f"s{i}", "assistant_id": "a", "language": "english", "context": "We sell bread.",
                 "conversation": [{"qa_id": "q1", "query": "What do you sell?", "assistant": f"Bread, {i} kinds.",
                                   "ground_truth_assistant": "Bread."}]} for i in range(2)]
    path.write_text(json.dumps(sessions), encoding="utf-8")


@pytest.mark.slow  # two judged audits
def test_the_audit_s_judge_cache_none_asks_again_and_writes_no_file(tmp_path, monkeypatch):
    from pipelines import audit

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    _context_data(tmp_path / "in.json")
    reply = json.dumps({"score": 0.8, "insight": "on topic"})
    with ScriptedOpenAIServer(reply) as srv:
        for n in (1, 2):
            audit.run(["--quiet", "--no-report", "--input", "in.json", "--metrics", "context", "--judge-base-url",
                       srv.base_url, "--judge-model", "m", "--judge-cache", "none", "--output", f"out{n}"])
            assert srv.count() == 2 * n  # the second run asked again: nothing was cached
    assert not (tmp_path / "none").exists()
    assert not (tmp_path / "xdg" / "fair_forge_beam").exists()  # nor the default cache


@pytest.mark.slow  # two loops
def test_generate_run_assistant_and_the_loop_read_none_as_no_cache(tmp_path, monkeypatch):
    from pipelines import loop

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))

    def generator(req):
        return {"queries": [{"query": "How many bags can a gold member check?"}], "chunk_summary": "baggage"}

    with ScriptedOpenAIServer(generator) as gen, ScriptedOpenAIServer("I am glad to help, thank you.") as bot:
        counts = []
        for n in (1, 2):
            loop.run(["--quiet", "--corpus", "airline", "--num-samples", "1", "--chunks-per-sample", "1",
                      "--num-queries", "1", "--seed", "3", "--generator-base-url", gen.base_url, "--generator-model",
                      "gen", "--generator-cache", "none", "--assistant-url", bot.base_url, "--assistant-model", "bot",
                      "--assistant-cache", "none", "--metrics", "humanity", "--output", f"L{n}"])
            counts.append((gen.count(), bot.count()))
    (g1, b1), (g2, b2) = counts
    assert g1 > 0 and b1 > 0
    assert (g2, b2) == (2 * g1, 2 * b1), counts  # the same calls again: no answer came from a cache
    assert not (tmp_path / "none").exists()
    assert not (tmp_path / "xdg" / "fair_forge_beam").exists()


@pytest.mark.parametrize("option", ["--judge-cache", "--generator-cache", "--assistant-cache"])
def test_help_says_none_is_no_cache(option):
    from fair_forge_beam.options import TABLE

    opt = TABLE[option.lstrip("-").replace("-", "_")]
    assert "'none' (no cache" in opt.help and "none" in opt.names


def _named_path_options():
    """(option name, declared name) of every audit path option that declares names (``none``, a corpus…)."""
    from fair_forge_beam import options as O
    from pipelines import audit

    flags = {s for a in audit.build_parser()._actions for s in a.option_strings}
    return [(o.flag.lstrip("-"), n) for o in O.OPTIONS.values() if o.path and o.names and o.flag in flags
            for n in o.names]


@pytest.mark.parametrize("name, value", _named_path_options())
def test_a_declared_name_in_a_config_file_is_no_path(name, value, tmp_path):
    """trial49c B1: ``judge-cache = "none"`` in a ``--config`` file became ``<config folder>/none`` (a
    cache file there) before anything read it as no cache: a value its option declares a name is kept as
    written, as the command line and ``options.absolute_paths`` keep it; any other value is a path."""
    from fair_forge_beam.audit_config import config_to_argv
    from pipelines import audit

    parser = audit.build_parser()
    job, _, _ = config_to_argv(parser, {"options": {name: value}}, str(tmp_path / "conf" / "c.toml"))
    assert job == [f"--{name}={value}"]
    job, _, _ = config_to_argv(parser, {"options": {name: f"{value}.d"}}, str(tmp_path / "conf" / "c.toml"))
    assert job == [f"--{name}={tmp_path / 'conf' / (value + '.d')}"]


def test_named_path_options_are_found():
    assert ("judge-cache", "none") in _named_path_options()
