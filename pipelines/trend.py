"""``fair-forge-beam trend PATTERN [PATTERN ...] [--output DIR]``: the trend report over many runs.

Writes ``DIR/trend.html`` and ``DIR/trend.json`` (default ``DIR``: ``trend``, a folder in the current one) from the
run folders the patterns name (audits or roll-ups: folders holding ``results.json``). The logic is
in :mod:`fair_forge_beam.reports.trend`; docs/report.md describes the report and ``trend.json``.
Usage errors (no run matched, a match that is not a run folder, an unreadable results.json) are one
line on stderr and exit code 2.
"""
from __future__ import annotations

if __name__ == "__main__":  # the command is the process: an interrupt while it still imports is one line
    from fair_forge_beam.console import starting

    starting("fair-forge-beam trend")

from fair_forge_beam.console import say  # console output never fails a run

import sys
from typing import Optional, Sequence

__all__ = ["build_parser", "main"]

PROG = "fair-forge-beam trend"


def build_parser():
    from fair_forge_beam.options import OneLineErrorParser, user_path
    from fair_forge_beam.reports.trend import DEFAULT_OUTPUT, DEFAULT_SLICES

    p = OneLineErrorParser(
        prog=PROG, allow_abbrev=False,
        description="The trend report over many runs: per assistant and headline estimate, each run's value and "
                    "interval over time, the credible changes between consecutive runs, coverage per run. "
                    "Writes trend.html and trend.json.")
    p.add_argument("patterns", nargs="+", metavar="PATTERN", type=user_path,
                   help="run folders (audits or roll-ups: folders holding results.json), their results.json, or "
                        "glob patterns of either; quote globs ('audits/*') or let the shell expand them")
    p.add_argument("--output", default=DEFAULT_OUTPUT, metavar="DIR", type=user_path,
                   help=f"folder for trend.html and trend.json, created when missing (default: {DEFAULT_OUTPUT}, a folder "
                        "in the current one); skipped when a pattern matches it")
    p.add_argument("--slices", default=",".join(DEFAULT_SLICES), metavar="DIMS",
                   help="slice dimensions followed, comma-separated: overall, assistant_id, language or a metadata "
                        f"field of the runs (default: {','.join(DEFAULT_SLICES)})")
    p.add_argument("--no-plots", action="store_true", help="tables only in trend.html (faster; default: off)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors (default: off)")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    slices = [s.strip() for s in args.slices.split(",") if s.strip()]
    if not slices:
        parser.error("--slices is empty: name at least one dimension, e.g. overall,assistant_id")
    from fair_forge_beam.reports.summary import printable
    from fair_forge_beam.reports.output_folder import output_option
    from fair_forge_beam.reports.trend import DEFAULT_OUTPUT, TrendUsageError, write_trend

    def note(line: str) -> None:
        if not args.quiet:
            say(f"trend: {printable(line)}", file=sys.stderr)

    try:
        json_path, html_path = write_trend(args.patterns, args.output, slices, with_plots=not args.no_plots, log=note,
                                           option=output_option(args.output != DEFAULT_OUTPUT))
    except TrendUsageError as exc:
        parser.error(printable(str(exc)))
    if not args.quiet:
        say(html_path)
    return 0


if __name__ == "__main__":
    from fair_forge_beam.console import entry_point

    sys.exit(entry_point(main, "trend"))
