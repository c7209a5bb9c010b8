"""trial39 T9: ``--direct_running_mode=multi_threading`` is refused in one line, as the other Beam option
checks refuse a value (:func:`fair_forge_beam.options.beam_value_problem`): DESIGN.md records that it lost
0.3-1.1% of elements in 9 of 19 runs; the audit and the roll-up ran with it without a word."""
from __future__ import annotations

import pytest

from pipelines import audit


@pytest.mark.parametrize("spelled", [["--direct_running_mode=multi_threading"], ["--direct_running_mode", "multi_threading"],
                                     "config"])
def test_multi_threading_is_refused_in_one_line(spelled, capsys, tmp_path):
    from fair_forge_beam.rollup import run as rollup

    if spelled == "config":
        cfg = tmp_path / "b.toml"
        cfg.write_text('[beam]\ndirect_running_mode = "multi_threading"\n', encoding="utf-8")
        argv = ["--config", str(cfg)]
    else:
        argv = list(spelled)
    for run, rest in ((audit.run, ["--output", str(tmp_path / "o")]),
                      (rollup, ["--from", str(tmp_path), "--output", str(tmp_path / "r")])):
        if spelled == "config" and run is rollup:
            continue
        with pytest.raises(SystemExit) as exc:
            run(["--direct_num_workers=2"] + argv + rest)
        err = capsys.readouterr().err.strip().splitlines()
        assert exc.value.code == 2 and len(err) == 1, err
        assert "--direct_running_mode=multi_threading is refused" in err[0] and "multi_processing" in err[0], err
    assert not (tmp_path / "o").exists() and not (tmp_path / "r").exists()


def test_the_other_running_modes_pass():
    from fair_forge_beam.options import beam_value_problem

    for mode in ("in_memory", "multi_processing"):
        assert beam_value_problem([f"--direct_running_mode={mode}", "--direct_num_workers=2"]) is None
