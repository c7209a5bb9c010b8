"""Dataflow Flex Template (issue 6 item 5): ``templates/metadata.json`` matches the main job's options.

The option list comes from ``pipelines.audit.build_parser()``, so an option added to the main job
(e.g. streaming flags) fails this test until it is a template parameter or is listed, with its
reason, in ``fair_forge_beam.audit_config.TEMPLATE_EXCLUDED``. Every parameter's regexes accept
the example in its help text and reject garbage; the entry point parses the template-style
``--name=value`` arguments Dataflow passes.
"""
from __future__ import annotations

import argparse
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import REPO
from fair_forge_beam.audit_config import TEMPLATE_EXCLUDED, expand_argv
from fair_forge_beam.metrics.registry import METRICS
from fair_forge_beam.options import number_type, unknown_beam_options
from pipelines import audit

TEMPLATES = REPO / "templates"
META = json.loads((TEMPLATES / "metadata.json").read_text(encoding="utf-8"))
PARAMS = {p["name"]: p for p in META["parameters"]}
PARSER = audit.build_parser()
ACTIONS = {a.dest: a for a in PARSER._actions if a.option_strings}
EXAMPLE = re.compile(r"Example: (\S+)")
GARBAGE = ["", " ", "two words", "new\nline", "tab\tsep", "$(rm -rf /)", "a;b"]
PARAM_TYPES = {"TEXT", "NUMBER", "BOOLEAN", "ENUM", "GCS_READ_FILE", "GCS_WRITE_FILE", "GCS_WRITE_FOLDER"}


def _accepts(param: dict, value: str) -> bool:
    return all(re.fullmatch(rx, value) for rx in param["regexes"])


def _example(param: dict) -> str:
    m = EXAMPLE.search(param["helpText"])
    assert m, f"{param['name']}: help text without 'Example: <value>'"
    return m.group(1)


def test_no_parameter_missing_or_unknown():
    options = set(ACTIONS) - set(TEMPLATE_EXCLUDED)
    assert not options - set(PARAMS), f"main-job options missing from templates/metadata.json: {sorted(options - set(PARAMS))}"
    assert not set(PARAMS) - options, f"template parameters the main job does not know: {sorted(set(PARAMS) - options)}"
    assert set(TEMPLATE_EXCLUDED) <= set(ACTIONS), "an exclusion names an option that no longer exists"
    assert len(PARAMS) == len(META["parameters"]), "duplicate parameter names"


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_parameter_metadata(name):
    p, action = PARAMS[name], ACTIONS[name]
    assert re.fullmatch(r"[a-z][a-z0-9_]*", name)
    assert p["label"].strip() and len(p["helpText"]) > 20
    assert p["paramType"] in PARAM_TYPES
    assert p["regexes"] and all(re.compile(rx) for rx in p["regexes"])
    assert p["isOptional"] is (name != "output")
    example = _example(p)
    assert _accepts(p, example), (name, example)
    for bad in GARBAGE:
        assert not _accepts(p, bad), (name, bad)
    if action.choices:
        assert p["paramType"] == "ENUM"
        assert [o["value"] for o in p["enumOptions"]] == list(action.choices)
        assert all(_accepts(p, c) for c in action.choices)
        assert not _accepts(p, "not-a-choice")
    if action.nargs == 0:  # store_true flags: booleans
        assert p["paramType"] == "BOOLEAN"
        assert _accepts(p, "true") and _accepts(p, "false") and not _accepts(p, "maybe")
    if action.type is int:
        assert action.type(example) >= 0
        for bad in ("12abc", "-1", "1.5", "0x10"):
            assert not _accepts(p, bad), (name, bad)
    if action.type is float:
        float(example)
        assert not _accepts(p, "abc") and not _accepts(p, "1e")
    if "defaultValue" in p:
        default = action.default if action.nargs != 0 else str(action.default).lower()
        assert p["defaultValue"] == str(default), name
    if p["paramType"].startswith("GCS_"):
        assert example.startswith("gs://")
        assert not _accepts(p, "/local/file.jsonl") and not _accepts(p, "http://example.com/x")


def test_value_regexes_follow_the_job():
    metrics = PARAMS["metrics"]
    assert all(_accepts(metrics, m) for m in METRICS)  # a metric added to the registry must be accepted
    assert _accepts(metrics, "humanity,toxicity,bias")
    assert not any(_accepts(metrics, v) for v in ("nope", "humanity,", ",toxicity", "humanity,,toxicity"))
    assert _accepts(PARAMS["slices"], "overall,assistant_id,language")
    # any other field name is a session metadata field (issue 14); the job checks the names further
    assert _accepts(PARAMS["slices"], "overall,assistant_id,region,model.version")
    assert not any(_accepts(PARAMS["slices"], v) for v in ("overall,,region", ",region", "overall,re gion", "1x"))
    ci = PARAMS["ci_level"]
    assert _accepts(ci, "0.9") and _accepts(ci, ".99")
    assert not any(_accepts(ci, v) for v in ("1", "1.5", "0", "0.0", "-0.5"))


def test_entry_point_accepts_every_template_parameter(monkeypatch):
    """What the launcher passes (``--name=value`` for every parameter, its example value) is parsed
    by the main job into the right options, with nothing left over for Beam to reject."""
    for name, p in PARAMS.items():  # a given --*-api-key-env must name a set variable (issue 28)
        if name.endswith("api_key_env"):
            monkeypatch.setenv(_example(p), "sk-test-not-a-real-key")
    argv = [f"--{n}={_example(p)}" for n, p in PARAMS.items() if n != "config"]  # config: read from GCS
    expanded, gates = expand_argv(PARSER, argv)
    args, rest = PARSER.parse_known_args(expanded)
    assert rest == [] and gates == []
    assert unknown_beam_options(rest) == []
    for name, p in PARAMS.items():
        if name == "config":
            continue
        action, example = ACTIONS[name], _example(p)
        value = getattr(args, name)
        if action.nargs == 0:
            assert value is (example == "true"), name
        elif isinstance(action, argparse._AppendAction):
            assert value == [example], name
        else:
            assert value == (action.type or str)(example), name
    # Beam options Dataflow adds are left to Beam, untouched
    expanded, _ = expand_argv(PARSER, ["--temp_location=gs://b/tmp", "--no_clustering=false", "--mc_samples=7"])
    assert expanded == ["--temp_location=gs://b/tmp", "--mc-samples=7"]


def test_launcher_image_and_gcloud_commands():
    docker = (TEMPLATES / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^FROM gcr\.io/dataflow-templates-base/python311-template-launcher-base\b", docker, re.M)
    py_file = re.search(r'FLEX_TEMPLATE_PYTHON_PY_FILE="\$\{WORKDIR\}/([^"]+)"', docker).group(1)
    assert py_file == "pipelines/audit.py" and (REPO / py_file).is_file()
    assert 'FLEX_TEMPLATE_PYTHON_SETUP_FILE="${WORKDIR}/setup.py"' in docker
    assert "apache-beam[gcp]==$(sed -n 's/^apache-beam==//p' requirements.txt)" in docker  # Dataflow client, gs://
    for dockerfile in ("Dockerfile", "Dockerfile.worker"):
        text = (TEMPLATES / dockerfile).read_text(encoding="utf-8")
        assert "pip install --no-cache-dir -r requirements.txt" in text
        for src in re.findall(r"^COPY (.+) \./?\S*$", text, re.M):
            for part in src.split():  # a path or a glob (requirements*.txt); tests/test_packaging.py builds the context
                assert any(REPO.glob(part)), (dockerfile, part)
    beam_pin = re.search(r"^apache-beam==(\S+)$", (REPO / "requirements.txt").read_text(), re.M).group(1)
    worker = (TEMPLATES / "Dockerfile.worker").read_text(encoding="utf-8")
    assert f"FROM apache/beam_python3.11_sdk:{beam_pin}" in worker  # workers run the same Beam as the launcher
    readme = (TEMPLATES / "README.md").read_text(encoding="utf-8")
    assert "gcloud dataflow flex-template build" in readme and "--metadata-file templates/metadata.json" in readme
    run = readme.split("gcloud dataflow flex-template run", 1)[1].split("```", 1)[0]
    pairs = re.search(r'--parameters "\^~\^([^"]+)"', run).group(1).split("~")
    beam_options = {"sdk_container_image"}
    for pair in pairs:
        name, _, value = pair.partition("=")
        assert name in PARAMS or name in beam_options, name
        if name in PARAMS:
            assert _accepts(PARAMS[name], value), pair


def _number_parameters():
    """``(command, parameter, option)`` of every NUMBER parameter of every command's template."""
    from fair_forge_beam.options import COMMANDS, command_options, template_metadata

    out = []
    for command in ("audit", *COMMANDS):
        declared = command_options(command)
        for p in template_metadata(sorted(METRICS), command)["parameters"]:
            if p["paramType"] == "NUMBER":
                out.append((command, p, declared[p["name"]]))
    return out


NUMBER_PARAMETERS = _number_parameters()


def test_every_number_parameter_has_its_option_s_range():
    assert {p["name"] for c, p, o in NUMBER_PARAMETERS if c == "audit"} == {
        n for n, p in PARAMS.items() if p["paramType"] == "NUMBER"}
    for command, p, o in NUMBER_PARAMETERS:
        assert o.valid is not None and o.type in (int, float), (command, p["name"])


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_value_the_template_accepts_is_one_the_job_accepts(data):
    """trial36 T10: the declared regexes accepted 22 of 23 values the job refused (``mc_samples=5``:
    the job wants 100 to 1,000,000; thresholds above 1, counts of 0, 12-digit byte limits). Values
    drawn from each NUMBER parameter's regex are parsed by the option's own parser (its type and
    range: what the job's argument parser runs)."""
    command, p, o = data.draw(st.sampled_from(NUMBER_PARAMETERS))
    text = data.draw(st.from_regex(p["regexes"][0], fullmatch=True), label=p["name"])
    parse = ACTIONS[p["name"]].type if command == "audit" else number_type(o.type, o.valid)
    try:
        parse(text)
    except (argparse.ArgumentTypeError, ValueError) as exc:
        raise AssertionError(f"{command} {p['name']}: the template accepts {text!r}, the job refuses it: {exc}")


@pytest.mark.parametrize("command, name", [(c, p["name"]) for c, p, o in NUMBER_PARAMETERS])
def test_number_parameter_takes_the_range_s_ends_and_refuses_beyond(command, name):
    """The ends of the option's range are accepted when the range holds them, the values just beyond
    are refused; the values of trial36's template_bounds.sh that the job refused are refused."""
    p, o = next((p, o) for c, p, o in NUMBER_PARAMETERS if (c, p["name"]) == (command, name))
    valid, accepts = o.valid, (lambda v: re.fullmatch(p["regexes"][0], v) is not None)
    def text(x):
        return str(int(x)) if o.type is int else format(Decimal(str(x)).normalize(), "f")
    assert accepts(text(valid.lo)) is (not valid.lo_open), (name, valid)
    assert accepts(text(valid.hi)) is (not valid.hi_open), (name, valid)
    step = Decimal(1) if o.type is int else Decimal("0.001")
    assert not accepts(text(Decimal(str(valid.hi)) + step)) and not accepts(text(Decimal(str(valid.hi)) * 10 + 1))
    assert not accepts(text(Decimal(str(valid.lo)) - step))
    assert accepts(_example(p)), name


REFUSED_BY_THE_JOB = {"mc_samples": ["1", "99", "5"], "seed": ["99999999999999999999"], "ci_level": [".000001", "0.9999999999"],
                      "toxicity_classifier_threshold": ["7", "0"], "agentic_k": ["0"], "agentic_threshold": ["3.5"],
                      "judge_timeout": ["0"], "judge_retries": ["999999999"], "chunk_size": ["0"], "regulatory_top_k": ["0"],
                      "regulatory_threshold": ["9", "-1.5"], "vision_threshold": ["2"], "prompt_k": ["0"], "prompt_tau": ["5"],
                      "role_threshold": ["4"], "inconclusive_width": ["0"], "judge_requests_per_minute": ["0"],
                      "max_id_chars": ["99999999"], "max_record_bytes": ["999999999999"]}


@pytest.mark.parametrize("name", sorted(REFUSED_BY_THE_JOB))
def test_trial36_values_the_job_refuses_are_refused_by_the_template(name):
    for value in REFUSED_BY_THE_JOB[name]:
        with pytest.raises(argparse.ArgumentTypeError):
            ACTIONS[name].type(value)
        if name in TEMPLATE_EXCLUDED:  # no parameter takes it at all (inconclusive_width: trial39 T3)
            assert name not in PARAMS, name
        else:
            assert not _accepts(PARAMS[name], value), (name, value)


def test_readme_lists_every_option_left_out():
    """templates/README.md's list of left-out options is :data:`TEMPLATE_EXCLUDED`, reasons included
    (trial36 T10: it named help, gate and baseline; the generator left out 10)."""
    from fair_forge_beam.options import template_excluded_markdown

    readme = (TEMPLATES / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- template-excluded: begin -->\n(.*?)<!-- template-excluded: end -->", readme, re.S)
    assert block, "templates/README.md: the generated list of left-out options is missing"
    assert block.group(1) == template_excluded_markdown(), (
        "templates/README.md's left-out options differ from options.TEMPLATE_EXCLUDED: paste "
        "fair_forge_beam.options.template_excluded_markdown() between its markers")


# ---- trial39 T11: the template's URL parameters take the URLs the job takes, and refuse those it refuses ----

def _test_url_literals() -> set:
    """Every http(s)-like URL written as a literal in the test modules (endpoints the job's tests
    use, good and bad), plus trial39's: an Azure OpenAI query string, an IPv6 host."""
    found = {"https://x.openai.azure.com/openai/deployments/gpt4o?api-version=2024-06-01", "http://[::1]:8000/v1",
             "http://h/v1#frag", "http://h:/v1", "http://h/a b", "http://bücher.example/v1", "http://h/a<b", "http://[zz]/v1",
             "http://h:65536/v1", "http://h:65535/v1", "http://h:0/v1", "http://h/v1?a=1&b=%20?c"}
    for path in Path(__file__).parent.glob("*.py"):
        found |= {m.group(2) for m in re.finditer(r"""(["'])((?:https?|HTTPS?|htp|file|ftp)://[^"'\n{}]*)\1""",
                                                  path.read_text(encoding="utf-8"))}
    return found


def test_every_url_parameter_agrees_with_the_jobs_url_check():
    """T11: the template's regex refused ``?api-version=…`` (which reliability.md says is sent as is)
    and ``http://[::1]:8000/v1``, both taken by the job: an Azure OpenAI judge could not be set from
    the template. Each endpoint parameter's regex now accepts exactly what --judge-base-url's check
    accepts, on every URL the tests write."""
    from fair_forge_beam import options as O

    urls = _test_url_literals()
    url_params = [n for n in ("judge_base_url", "guardian_base_url", "generator_base_url") if n in PARAMS]
    assert len(url_params) == 3
    taken = refused = 0
    for url in sorted(urls):
        try:
            O.validate({"judge_base_url": url})
            job = True
        except ValueError:
            job = False
        taken, refused = taken + job, refused + (not job)
        for name in url_params:
            assert _accepts(PARAMS[name], url) is job, (name, url, job)
    assert taken >= 20 and refused >= 10, (taken, refused)
