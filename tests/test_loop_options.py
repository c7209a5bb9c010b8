"""Options of the generate / run / loop commands: declared once, --help shows the defaults, the
declared validations are usage errors, Flex Template parameters come from the declarations."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from helpers import REPO
from fair_forge_beam import loop_options


@pytest.mark.parametrize("module,command", [("pipelines.generate", "generate"), ("pipelines.run_assistant", "run"),
                                            ("pipelines.loop", "loop")])
def test_help_lists_every_declared_option_with_its_default(module, command):
    out = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO), "COLUMNS": "400"}).stdout
    for g in loop_options.groups_for(command):
        for o in g.options:
            m = re.search(r"\n  " + re.escape(o.flag) + r"\b(.*?)(?=\n  -|\Z)", out, re.S)  # its entry in the option list
            assert m, o.flag
            if o.default is not None and o.type is not bool:
                assert f"(default: {o.default})" in " ".join(m.group(1).split()), o.flag


def test_declared_validation_is_a_usage_error():
    from pipelines import generate

    with pytest.raises(SystemExit) as exc:
        generate.run(["--num-queries", "0", "--generator-base-url", "http://127.0.0.1:9/v1", "--generator-model", "m"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        generate.run(["--corpus", "no-such-corpus-folder", "--generator-base-url", "http://127.0.0.1:9/v1", "--generator-model", "m"])


def test_template_metadata_from_the_declarations():
    meta = loop_options.template_metadata("loop")
    names = [p["name"] for p in meta["parameters"]]
    assert len(names) == len(set(names)) and {"corpus", "assistant_url", "output"} <= set(names)
    for p in meta["parameters"]:
        assert re.compile(p["regexes"][0])
        example = p["helpText"].rsplit("Example: ", 1)[-1]
        assert re.fullmatch(p["regexes"][0], example), (p["name"], example)
