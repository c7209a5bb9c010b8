"""docs/data.md's Options table against the declared options (``fair_forge_beam/options.py`` via the
main job's parser) and the metric registry: a renamed or removed flag, or a metric missing from the
``--metrics`` row, fails here."""
from __future__ import annotations

import re

from helpers import REPO
from fair_forge_beam.metrics.registry import METRICS
from pipelines import audit


def _rows() -> list[tuple[list[str], str]]:
    text = (REPO / "docs" / "data.md").read_text(encoding="utf-8")
    table = text[text.index("## Options"):text.index("## Input formats")]
    rows = []
    for line in table.splitlines():
        if line.startswith("| `--"):
            first, rest = line[2:].split(" | ", 1)
            rows.append((re.findall(r"`(--[a-z0-9-]+)", first), rest))
    return rows


def test_every_flag_of_the_options_table_is_declared():
    declared = {s for a in audit.build_parser()._actions for s in a.option_strings}
    flags = [f for names, _ in _rows() for f in names]
    assert len(flags) > 30
    assert sorted(set(flags) - declared) == []


def test_metrics_row_lists_every_registered_metric():
    row = next(rest for names, rest in _rows() if names == ["--metrics"])
    listed = set(re.findall(r"`([a-z_]+)`", row))
    assert listed == set(METRICS) | {"humanity"}  # (`humanity`) is the default, also in the list


def test_choice_defaults_in_the_options_table_match_the_parser():
    """A row of one option with choices names the parser's default, marked as the default."""
    actions = {s: a for a in audit.build_parser()._actions for s in a.option_strings}
    checked = 0
    for names, rest in _rows():
        if len(names) != 1 or not actions[names[0]].choices:
            continue
        default = actions[names[0]].default
        marked = (f"`{default}` (default" in rest or f"`{default}` ({default}" in rest or f"(`{default}`)" in rest
                  or re.search(rf"`{re.escape(str(default))}`[^|`]*default", rest) is not None)
        assert marked, (names[0], default, rest)
        checked += 1
    assert checked >= 5


def test_no_table_of_the_docs_has_two_rows_for_one_flag():
    """trial48 B8: docs/cli.md's table held two ``--endpoint-down-after`` rows that said different things."""
    twice = []
    for doc in sorted((REPO / "docs").rglob("*.md")):
        table: list[str] = []
        for line in [*doc.read_text(encoding="utf-8").splitlines(), ""]:
            if line.startswith("|"):
                m = re.match(r"\|\s*`(--[a-z0-9-]+)", line)
                table += [m.group(1)] if m else []
                continue
            twice += [f"{doc.name}: {f}" for f in sorted(set(table)) if table.count(f) > 1]
            table = []
    assert twice == []
