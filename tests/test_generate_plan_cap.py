"""Issue 28 (trial 28f B13): a generate whose options are each in range but whose plan is huge
(``--num-samples 100000 --chunks-per-sample 10000 --with-replacement``: 1e9 generator calls) held
5 GB after 150 s without a word. The plan's size is computed before it is built; above
``--max-generator-calls`` the generate is a one-line usage error naming the product and the option."""
from __future__ import annotations

import pytest

from fair_forge_beam.generators.strategies import RandomSamplingStrategy, SequentialStrategy


def _chunks(n):
    from fair_forge_beam.generators.loader import LocalMarkdownLoader

    text = "\n\n".join(f"# S{i}\n\nSection number {i} has its own words." for i in range(n))
    return LocalMarkdownLoader(2000, 0, 0, [1]).chunk_text(text, "doc", "doc.md")


@pytest.mark.parametrize("strategy", [SequentialStrategy(), RandomSamplingStrategy(7, 3, 1),
                                      RandomSamplingStrategy(4, 50, 2), RandomSamplingStrategy(4, 50, 2, True)])
def test_the_planned_size_is_what_the_strategy_yields(strategy):
    chunks = _chunks(12)
    assert len(chunks) == 12
    for n in (0, 1, 12):
        assert strategy.planned_calls(n)[0] == sum(len(g) for g in strategy.select(chunks[:n])), (strategy, n)


def test_a_plan_over_the_cap_is_refused_before_it_is_built(tmp_path, capsys, monkeypatch):
    from fair_forge_beam.generators import generate as gen_module
    from pipelines import generate

    def built(*a, **k):
        raise AssertionError("the plan was built")

    monkeypatch.setattr(gen_module, "plan_requests", built)
    corpus = tmp_path / "c.md"
    corpus.write_text("# A\n\nSome text about things.\n\n# B\n\nOther text.\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        generate.main(["--corpus", str(corpus), "--strategy", "random", "--num-samples", "20", "--chunks-per-sample",
                       "10", "--with-replacement", "--max-generator-calls", "100", "--generator-base-url",
                       "http://127.0.0.1:9/v1", "--generator-model", "m", "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1, err
    assert "200 generator calls" in err[0] and "--num-samples 20 x 10" in err[0] and "--max-generator-calls 100" in err[0], err
    assert not (tmp_path / "o").exists()
