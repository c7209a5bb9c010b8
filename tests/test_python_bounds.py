"""The Python API refuses what the command line refuses, from the same declarations (trial47 B3, B4, B5):
``BayesianMode(mc_samples=50_000_000)`` was taken and ran out of memory deep in Beam (the CLI: "--mc-samples: must
be between 100 and 1,000,000"), ``pipeline_args=["--direct_num_workers=abc"]`` printed Beam's 130-line usage and
raised ``SystemExit(2)``, and ``slices=["overall", 5]`` said "expects a Sequence or a Set, got a list"."""
from __future__ import annotations

import importlib
import re

import pytest

from fair_forge_beam import options as O
from fair_forge_beam.io.retriever import Retriever
from fair_forge_beam.metrics.humanity import Humanity
from fair_forge_beam.statistical import BayesianMode, FrequentistMode


class Sessions(Retriever):
    def load_dataset(self):
        return [{"session_id": f"s{i}", "assistant_id": "bot", "language": "english", "context": "",
                 "conversation": [{"qa_id": f"q{i}", "query": "hi", "assistant": "happy to help"}]}
                for i in range(self.kwargs.get("n", 2))]


@pytest.mark.parametrize("kwargs, said", [
    ({"mc_samples": 50_000_000}, "BayesianMode: mc_samples must be between 100 and 1,000,000 (the command line's "
                                 "--mc-samples takes the same), got 50,000,000"),
    ({"ci_level": 1e-300}, "BayesianMode: ci_level must be between 0.5 and 0.9999 (the command line's --ci-level "
                           "takes the same), got 1e-300"),
    ({"rng_seed": 2**64}, "BayesianMode: rng_seed must be between 0 and 9,223,372,036,854,775,807 (the command line's "
                          "--seed takes the same), got 18,446,744,073,709,551,616"),
    ({"rng_seed": -1}, "BayesianMode: rng_seed must be between 0 and 9,223,372,036,854,775,807 (the command line's "
                       "--seed takes the same), got -1"),
])
def test_a_mode_refuses_what_the_command_line_refuses_in_one_line(kwargs, said):
    with pytest.raises(ValueError) as exc:
        BayesianMode(**kwargs)
    assert str(exc.value) == said
    assert exc.value.__traceback__ is not None and len(str(exc.value).splitlines()) == 1


def test_the_frequentist_mode_checks_its_level_too():
    with pytest.raises(ValueError, match=r"^FrequentistMode: ci_level must be between 0.5 and 0.9999 "):
        FrequentistMode(ci_level=1e-300)
    assert FrequentistMode(ci_level=0.5).ci_level == 0.5 and BayesianMode(mc_samples=1_000_000).mc_samples == 1_000_000


def test_a_beam_option_python_gives_is_one_value_error_naming_it(capsys):
    with pytest.raises(ValueError) as exc:
        Humanity.run(Sessions, pipeline_args=["--direct_num_workers=abc"])
    assert str(exc.value).startswith("pipeline_args: Beam pipeline option --direct_num_workers: invalid int value")
    err = capsys.readouterr().err
    assert "usage:" not in err and "--spark_rest_url" not in err, err[:300]
    with pytest.raises(ValueError, match="--direct_num_workers must be between 0 and 1024, got -3"):
        Humanity.run(Sessions, pipeline_args=["--direct_num_workers=-3"])


def test_a_wrong_item_of_a_list_is_named_by_its_index():
    with pytest.raises(ValueError) as exc:
        Humanity.run(Sessions, slices=["overall", 5])
    assert str(exc.value).startswith("Humanity: 'slices'[1] expects a string, got an int (its value is not shown"), \
        str(exc.value)
    with pytest.raises(ValueError, match=r"'slices' expects a sequence or a set of strings, got an int"):
        Humanity(slices=5)


def _bounded() -> list:
    """``(option, "module:Class", argument)`` of every Python parameter the table bounds."""
    return [(o, *t.rsplit(".", 1)) for o in O.TABLE.values() if o.valid is not None or o.choices
            for t in (*o.feeds, *getattr(o, "python", ()))]


def _refused(o: O.Option) -> list:
    """Values the command line refuses for option ``o``: just past each end of its range, or a text not a choice."""
    if o.choices:
        return ["sk-not-a-choice-0123456789"]
    r = o.valid
    step = 1 if o.type is int else 0.5
    return [r.lo if r.lo_open else r.lo - step, r.hi if r.hi_open else r.hi + step]


def test_every_bounded_option_bounds_python_parameters_or_says_why_not():
    """A new option with a range or choices must name the Python parameters that take its value
    (``feeds`` / ``python``), or why Python has none (``BOUNDS_NOT_IN_PYTHON``)."""
    for dest, o in O.TABLE.items():
        if o.valid is None and not o.choices:
            assert dest not in O.BOUNDS_NOT_IN_PYTHON, dest
            continue
        assert bool(o.feeds or o.python) != (dest in O.BOUNDS_NOT_IN_PYTHON), dest
    # where the reason names another option's range, the two ranges are one
    for dest, other in (("guardian_max_reply_bytes", "judge_max_reply_bytes"), ("generator_max_reply_bytes",
                        "judge_max_reply_bytes"), ("generator_timeout", "judge_timeout"),
                        ("generator_retries", "judge_retries"), ("generator_max_concurrency", "judge_max_concurrency")):
        assert O.TABLE[dest].valid == O.TABLE[other].valid, dest


@pytest.mark.parametrize("o, owner, arg", _bounded(), ids=lambda x: getattr(x, "name", x))
def test_every_bounded_python_parameter_refuses_what_the_command_line_refuses(o, owner, arg):
    from fair_forge_beam.arguments import declared_bounds

    module, _, name = owner.partition(":")
    cls = getattr(importlib.import_module(module), name)
    assert getattr(cls.__init__, "__checks_arguments__", False), f"{owner}.__init__ is not @checks_arguments"
    bounding = O.python_bounds(owner)[arg]  # the first option that names it
    assert arg in declared_bounds(cls.__init__), owner
    for bad in _refused(o):
        with pytest.raises(ValueError) as exc:
            cls(**{arg: bad})
        said = str(exc.value)
        assert "sk-not" not in said, said  # a text given is never shown
        if said.startswith(f"{name}: {arg} must be "):  # the check's line
            what = bounding.valid.text() if bounding.valid is not None else ", ".join(map(repr, bounding.choices))
            assert f"{what} (the command line's {bounding.flag} takes the same)" in said, said
        else:  # a number the constructor refuses itself, naming the parameter (``k must be a positive integer``)
            assert bounding.valid is not None and re.search(rf"(?<!\w){arg}(?!\w)", said), said


def test_a_function_argument_the_table_bounds_is_checked_there():
    from fair_forge_beam.generators.generate import query_messages
    from fair_forge_beam.generators.schemas import Chunk

    chunk = Chunk(chunk_id="c", content="text")
    with pytest.raises(ValueError, match=r"^num_queries must be between 1 and 1000 \(the command line's "
                                         r"--num-queries takes the same\), got 1,001$"):
        query_messages(chunk, 1001)


def test_every_python_entry_point_that_takes_pipeline_args_checks_them():
    from fair_forge_beam.generators.generate import Generator
    from fair_forge_beam.optimizer.evaluation import run_structured

    for build in (lambda a: Generator(model="m", base_url="http://127.0.0.1:9/v1", pipeline_args=a),
                  lambda a: run_structured(None, (), dict, "k", pipeline_args=a)):
        with pytest.raises(ValueError, match=r"^pipeline_args: Beam pipeline option --direct_num_workers: invalid int"):
            build(["--direct_num_workers=abc"])


def test_pipeline_args_must_be_a_list_of_known_beam_options():
    """trial47b: ``pipeline_args="--direct_num_workers=abc"`` (a str) was split into its characters (~20 "Unparseable
    argument" warnings, then Beam's "dest= is required"); ``[b"--x"]`` raised a TypeError from inside the check;
    ``["--no_such_flag=1"]`` ran with a Beam warning where the command line refuses an unknown option."""
    from fair_forge_beam.options import checked_pipeline_args

    with pytest.raises(TypeError, match=r"^pipeline_args must be a list of strings .*got a str$"):
        checked_pipeline_args("--direct_num_workers=2")
    with pytest.raises(TypeError, match=r"^pipeline_args\[1\] must be a string, got a bytes$"):
        checked_pipeline_args(["--direct_num_workers=2", b"--x"])
    with pytest.raises(ValueError, match=r"^pipeline_args: 1 argument no Beam pipeline option takes "
                                         r"\(--no_such_flag\): Beam would ignore it$"):
        checked_pipeline_args(["--no_such_flag=1"])
    assert checked_pipeline_args(["--direct_num_workers=2", "--direct_running_mode=in_memory"]) == [
        "--direct_num_workers=2", "--direct_running_mode=in_memory"]
    assert checked_pipeline_args(None) == []


def test_a_callers_own_pipeline_options_class_is_known_in_pipeline_args():
    """A PipelineOptions subclass the caller defines after the first check still names its options."""
    from apache_beam.options.pipeline_options import PipelineOptions

    from fair_forge_beam.options import checked_pipeline_args

    checked_pipeline_args(["--direct_num_workers=2"])  # the parser made and kept

    class _CallersOptions(PipelineOptions):
        @classmethod
        def _add_argparse_args(cls, parser):
            parser.add_argument("--callers_own_option_47", default=None)

    assert checked_pipeline_args(["--callers_own_option_47=x"]) == ["--callers_own_option_47=x"]
