"""trial48b M1: the Python API's ``pipeline_args`` are refused where the command line refuses the same Beam
arguments, in the same words, by the one check both call (:func:`fair_forge_beam.options.beam_arguments_problem`).
Before, ``checked_pipeline_args`` returned ``--save_main_session --no_save_main_session``, a worker count given
twice and ``--template_location=/tmp/x`` unchanged (``Humanity.run`` ran them silently), a Flink address that is no
host:port (the run fetched a job-server jar from the network: HTTP 404), Dataflow without its project (Beam's
multi-line ValueError) and ``--job_endpoint=no-live-flink-cluster`` (5 s, then JobEndpointUnanswered), where the
command line refuses each in one line, exit 2, before anything runs. No network: a connection fails the test."""
from __future__ import annotations

import pytest

from fair_forge_beam.io.retriever import Retriever
from fair_forge_beam.options import checked_pipeline_args

from test_cli_beam_validation import BEAM_SHAPES  # the command line's cases of Beam's own validation

#: every refusal the command line makes of the arguments it passes to Beam, one case per check
#: (options.beam_arguments_problem's, in its order; then beam_options_problem's), plus the trial's
CASES = {
    "an argument the OS gave undecoded": ["--temp_location=/tmp/caf\udce9"],
    "an option given twice": ["--direct_num_workers=2", "--direct_num_workers=3"],
    "an option given twice, two spellings": ["--runner", "DirectRunner", "--runner=FnApiRunner"],
    "two flags setting one value in opposite ways": ["--save_main_session", "--no_save_main_session"],
    "a number that is no number": ["--direct_num_workers=abc"],
    "a number out of its range": ["--direct_num_workers=-3"],
    "a port out of its range": ["--job_port=70000"],
    "a value Beam takes and this package refuses": ["--direct_running_mode=multi_threading"],
    "a template location off Dataflow": ["--template_location=/tmp/x"],
    "flink_cluster args found no cluster": ["--job_endpoint=no-live-flink-cluster"],
    "a Flink address that is no host:port": ["--runner=FlinkRunner", "--flink_master=not_a_host:::"],
    "Dataflow alone": ["--runner=DataflowRunner"],
    "Dataflow with a region only": ["--runner=DataflowRunner", "--region=europe-west1"],
    **{f"validation: {name}": list(beam) for name, (beam, _) in BEAM_SHAPES.items()},
}
#: what the trial ran or sent to Beam through the Python API (the entries' cases; Dataflow with its region, so that
#: Beam does not ask gcloud for one, 0.5-1.4 s a call)
TRIAL = ["two flags setting one value in opposite ways", "an option given twice", "a template location off Dataflow",
         "a Flink address that is no host:port", "Dataflow with a region only", "flink_cluster args found no cluster"]


@pytest.fixture
def nothing_runs(monkeypatch):
    import apache_beam as beam

    monkeypatch.setattr(beam.Pipeline, "run", lambda self, *a, **kw: pytest.fail("a pipeline was run"))


def _cli_line(beam: list, tmp_path, capsys) -> str:
    """The command line's one line for ``beam`` (exit 2), without its prefix and --help hint."""
    from pipelines.audit import parse_args

    with pytest.raises(SystemExit) as exc:
        parse_args(["--output", str(tmp_path / "out"), *beam])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1, err
    head, tail = "fair-forge-beam: error: ", " (every option: fair-forge-beam --help)"
    assert err[0].startswith(head) and err[0].endswith(tail), err
    return err[0][len(head):-len(tail)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_python_refuses_what_the_command_line_refuses_in_its_words(case, tmp_path, capsys, no_network):
    line = _cli_line(CASES[case], tmp_path, capsys)
    with pytest.raises(ValueError) as exc:
        checked_pipeline_args(CASES[case])
    assert str(exc.value) == f"pipeline_args: {line}"
    assert not list(tmp_path.iterdir())


def test_what_no_beam_option_takes_is_refused_by_both(tmp_path, capsys, no_network):
    """The words differ only here: the command line names its own options too (a flag of neither)."""
    for beam, python in ((["--no_such_flag=1"], "1 argument no Beam pipeline option takes (--no_such_flag)"),
                         (["--direct_num_workers=2", "stray"], "1 argument no Beam pipeline option takes (stray)")):
        assert _cli_line(beam, tmp_path, capsys)
        with pytest.raises(ValueError, match=rf"^pipeline_args: {python.replace('(', '[(]').replace(')', '[)]')}: "
                                             "Beam would ignore it$"):
            checked_pipeline_args(beam)


class Sessions(Retriever):
    def load_dataset(self):
        return [{"session_id": "s0", "assistant_id": "bot", "language": "english", "context": "",
                 "conversation": [{"qa_id": "q0", "query": "hi", "assistant": "happy to help"}]}]


def _metric_classes() -> list:
    import importlib

    from fair_forge_beam.metrics.registry import METRICS

    out = []
    for entry in METRICS.values():
        cls = entry.cls
        if isinstance(cls, str):
            module, _, name = cls.partition(":")
            cls = getattr(importlib.import_module(module), name)
        out.append(cls)
    return out


def _entries(tmp_path) -> dict:
    """Every Python entry that takes ``pipeline_args``: each metric's ``run``, the generator, the optimizers and
    the optimizer's evaluation (a judge handler on a port nobody listens on: nothing is asked)."""
    from fair_forge_beam.components.judge import OpenAIJudgeHandler
    from fair_forge_beam.generators.generate import Generator
    from fair_forge_beam.optimizer.evaluation import evaluate_prompts, run_structured
    from fair_forge_beam.optimizer.optimizers import GEPAOptimizer, MIPROv2Optimizer

    model = OpenAIJudgeHandler("m", "http://127.0.0.1:9/v1", cache_path=str(tmp_path / "c.sqlite3"),
                               api_key_env="FFB_TEST_UNSET_KEY", num_retries=0)
    entries = {f"{cls.__name__}.run": (lambda a, cls=cls: cls.run(Sessions, pipeline_args=a)) for cls in _metric_classes()}
    entries.update({
        "Generator": lambda a: Generator(model="m", base_url="http://127.0.0.1:9/v1", pipeline_args=a),
        "GEPAOptimizer": lambda a: GEPAOptimizer([], model, "SEED prompt", pipeline_args=a),
        "MIPROv2Optimizer": lambda a: MIPROv2Optimizer([], model, "SEED prompt", pipeline_args=a),
        "evaluate_prompts": lambda a: evaluate_prompts(["SEED prompt"], [], model, model, "", pipeline_args=a),
        "run_structured": lambda a: run_structured(model, (("user", "x"),), dict, "k", pipeline_args=a),
    })
    return entries


@pytest.mark.parametrize("case", TRIAL)
def test_every_python_entry_refuses_before_anything_runs(case, tmp_path, no_network, nothing_runs):
    said = None
    entries = _entries(tmp_path)
    assert len(entries) >= 17, sorted(entries)  # 12 metrics, 5 others
    for name, entry in entries.items():
        with pytest.raises(ValueError) as exc:
            entry(CASES[case])
        said = said or str(exc.value)
        assert str(exc.value) == said and said.startswith("pipeline_args: "), (name, str(exc.value))


def test_every_beam_option_given_twice_is_worded_by_both_alike(tmp_path, capsys, no_network):
    """trial48c B: ``--service_account_email`` given twice (also ``--dataflow_kms_key``, ``--temp_location``,
    ``--runner``) named both values through the Python API, "given twice: 'hunter2pass', then 'Passw0rd!x'", while
    the command line showed their lengths only (docs/cli.md: any option passed to Beam shows each value's length
    only). Every single-valued option of Beam's, given twice: the same line from both."""
    from fair_forge_beam.options import SINGLE_VALUED_ACTIONS, _beam_parser

    flags = sorted({a.option_strings[0] for a in _beam_parser()._actions
                    if a.option_strings and a.nargs != 0 and isinstance(a, SINGLE_VALUED_ACTIONS)})
    assert len(flags) > 50 and "--service_account_email" in flags, flags
    differ = []
    for flag in flags:
        beam = [f"{flag}=hunter2pass", f"{flag}=Passw0rd!x"]
        line = _cli_line(beam, tmp_path, capsys)
        with pytest.raises(ValueError) as exc:
            checked_pipeline_args(beam)
        if str(exc.value) != f"pipeline_args: {line}":
            differ.append((flag, line, str(exc.value)))
    assert not differ, (len(differ), differ[:3])
    assert "hunter2pass" not in line and "a text of 11 characters (not shown" in line, line
