"""Audit config files (TOML) and template-style arguments for the main job.

``fair-forge-beam --config audit.toml [flags]`` reads a TOML file (Python's ``tomllib``) that
holds what the command line would, plus gates (:mod:`fair_forge_beam.reports.gates`)::

    inputs = ["logs/*.jsonl"]                 # --input, repeated; relative to this file's folder
    metrics = ["humanity", "toxicity"]        # --metrics
    mode = "bayesian"                         # --mode
    seed = 42                                 # --seed
    slices = ["overall", "assistant_id"]      # --slices (overall is always computed)
    output = "out/nightly"                    # --output; relative to this file's folder
    gates = ["toxicity DIDT ci_high <= 0.2", "bias rate ci_high <= 0.1 for every attribute"]
    # or [[gates]] tables (metric, field, stat, op, threshold, slices, key, for_every, if_undefined)

    [options]                                 # any other option of the main job, by long name
    group-extractor = "keyword"
    mc-samples = 2000
    no-clustering = true

    [beam]                                    # Beam pipeline options
    runner = "FlinkRunner"

Precedence: command-line flags override the file (``--input`` on the command line replaces the
file's inputs); ``--gate`` adds gates to the file's. Every value is checked by the main job's own
argument parser (types, choices), so a bad value fails as it would on the command line, with the
config file named in the message. Local relative paths in the file are relative to the file's
folder (so a cron job can run from any directory); the file itself may be on any Beam filesystem
(``gs://...``).

Template-style arguments: Dataflow Flex Templates pass every parameter as ``--name=value`` with
the parameter's name as given in ``templates/metadata.json`` (underscores, e.g.
``--mc_samples=2000``) and booleans as ``--no_clustering=true``; :func:`expand_argv` rewrites
them to the main job's spelling (``--mc-samples=2000``, ``--no-clustering``).
"""
from __future__ import annotations

import argparse
import os
import re
import tomllib
from typing import Any, Optional, Sequence

__all__ = ["ConfigError", "expand_argv", "load_config", "parse_slices", "is_template_launch", "TEMPLATE_EXCLUDED"]

from fair_forge_beam.options import (OPTIONS, TEMPLATE_EXCLUDED, OneLineErrorParser, config_keys, config_value_problem,
                                     user_path)
from fair_forge_beam.quoting import choice_text, did_you_mean, quoted
from fair_forge_beam.plain import int_digits_reason, plain_reason
from fair_forge_beam.slices import SLICE_DIMENSIONS, slice_name_problems

#: top-level keys of an audit config (besides ``options``, ``beam`` and ``gates``) -> main-job option;
#: options whose local relative paths are taken relative to the config file's folder; options that
#: cannot be set from a config file (``config``: no nesting; ``gate``: use ``gates``) — all three
#: from the declarations in :mod:`fair_forge_beam.options` (``TEMPLATE_EXCLUDED`` too)
TOP_LEVEL, PATH_OPTIONS, NOT_IN_CONFIG = config_keys()
_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off", ""}


class ConfigError(ValueError):
    """A config file that cannot be used (message names the file and the key)."""


def parse_slices(text: str) -> tuple[str, ...]:
    """``"assistant_id,language,region"`` → ``("overall", "assistant_id", "language", "region")``:
    overall first (always), then the built-in dimensions (:data:`SLICE_DIMENSIONS`), then any
    other names in the order given — session metadata fields (a session header field, or a
    top-level field of a flat record), whose values the reader keeps for slicing.

    Raises:
        ConfigError: a name that is not a field name, a per-interaction or reserved field, or a
            near miss of a built-in dimension (``langauge``): :func:`fair_forge_beam.slices.slice_name_problems`.
    """
    dims = list(dict.fromkeys(s.strip() for s in str(text).split(",") if s.strip()))
    problems = slice_name_problems(dims)
    if problems:
        raise ConfigError(f"--slices: {'; '.join(problems)}. Dimensions: {', '.join(SLICE_DIMENSIONS)}, or the name "
                          "of a session metadata field (e.g. region)")
    return tuple(d for d in SLICE_DIMENSIONS if d == "overall" or d in dims) + tuple(
        d for d in dims if d not in SLICE_DIMENSIONS)


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Long option name without dashes (``mc-samples``) → its argparse action."""
    out = {}
    for a in parser._actions:  # argparse has no public accessor for its actions
        for s in a.option_strings:
            if s.startswith("--"):
                out[s[2:]] = a
    return out


def _is_flag(action: argparse.Action) -> bool:
    return action.nargs == 0  # store_true / store_false / store_const


def _to_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"--{name}: expected true or false, got {choice_text(value, (*_TRUE, *_FALSE))}")


def normalise_template_args(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """Rewrite template-style ``--mc_samples=2000`` / ``--no_clustering=true`` to the main job's
    spelling; other arguments (Beam options such as ``--temp_location``) are left as they are.

    Raises:
        ConfigError: a boolean option with a value that is not true/false.
    """
    actions = _actions(parser)
    out = []
    for arg in argv:
        if not arg.startswith("--") or arg == "--":
            out.append(arg)
            continue
        name, eq, value = arg[2:].partition("=")
        canon = name if name in actions else name.replace("_", "-")
        action = actions.get(canon)
        if action is None:  # a Beam option (underscored by Beam's convention): untouched
            out.append(arg)
            continue
        if _is_flag(action) and eq:
            if _to_bool(canon, value):
                out.append(f"--{canon}")
            continue
        out.append(f"--{canon}" + (f"={value}" if eq else ""))
    return out


def _resolve(path: str, base: Optional[str]) -> str:
    """A config file's path value: ``~`` expanded (:func:`~fair_forge_beam.options.user_path`), then a
    local relative path taken relative to the file's folder ``base``.

    Raises:
        argparse.ArgumentTypeError: ``~user`` of an unknown user."""
    path = user_path(path)
    if base is None or "://" in path or os.path.isabs(path):
        return path
    return os.path.normpath(os.path.join(base, path))


#: what the scan of a config's text reads: strings (whose dots and brackets are text), comments, and
#: the characters that nest (``[`` ``{`` and a dot between key parts) or end a key
_TOML_TOKEN = re.compile(r'"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""' r"|'''[^']*(?:'(?!'')[^']*)*'''"
                         r'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"' r"|'[^'\n]*'|#[^\n]*|[\[\]{}=,.\n]", re.S)


def toml_nesting_bound(text: str, limit: int) -> bool:
    """Whether ``text`` (a TOML document) may nest at most ``limit`` + 1 levels, told by one scan of
    the raw text before ``tomllib`` parses it: ``tomllib`` builds every level of a dotted key
    (``a.a.a…= 1``), a table header (``[a.a.a…]``) and an array or inline table before any check of
    the parsed value can run — a 200 KB file of 100,000 key parts took 11.4 GB. The levels of a
    place in the file are bounded by 1 (the document) + the parts of the current table header (+ 1
    for an ``[[array of tables]]``) + for each open ``[`` / ``{``, one level and the parts of the
    key whose value it opens + the dots of the current key; a
    float's or a time's dot counts one level too much, hence the slack of one level (the exact
    check of the parsed value, :func:`~fair_forge_beam.io.edge.check_side_nesting`, follows).
    Strings and comments are skipped; the scan stops at the first place over the bound."""
    top = 1  # the levels of the current table: the document, its header's parts
    level, dots, opened = top, 0, []  # the level of what is read now, the current key's dots, the open [ {
    in_header, skip, at_line_start = False, 0, True
    for m in _TOML_TOKEN.finditer(text):
        tok = m.group()
        if len(tok) != 1 or tok in "#\"\'":  # a string or a comment
            at_line_start = at_line_start and tok[0] == "#"
            continue
        if skip and tok in "[]":  # the second bracket of [[array of tables]]
            skip -= 1
            continue
        if in_header:
            if tok == ".":
                level += 1
            elif tok == "]":
                in_header, top, skip = False, level, skip_after
                level = top
            if level > limit + 1:
                return False
            continue
        if tok == "\n":
            at_line_start = True
            if not opened:
                level, dots = top, 0
            continue
        if tok == "[" and at_line_start and not opened:  # a table header
            skip_after = int(text[m.end():m.end() + 1] == "[")
            in_header, skip, level, dots = True, skip_after, 1 + skip_after + 1, 0
        elif tok in "[{":
            opened.append(level)
            level, dots = level + dots + 1, 0
        elif tok in "]}":
            level, dots = (opened.pop() if opened else top), 0
        elif tok == ".":
            dots += 1
        elif tok == ",":
            dots = 0
        at_line_start = False
        if level + dots > limit + 1:
            return False
    return True


class _NoNumber(str):
    """A TOML float that means no number (``1e400``, ``1e-400``): kept in the parsed file with
    :func:`~fair_forge_beam.options.exact_float`'s reason, which :func:`load_config` then gives with
    the value's key (tomllib's ``parse_float`` is called without it: trial30 T6)."""


def _lenient_float(text: str):
    from fair_forge_beam.options import exact_float

    try:
        return exact_float(text)
    except ValueError as exc:
        return _NoNumber(str(exc))


def _key_path(keys: Sequence) -> str:
    """A parsed TOML value's key path, as TOML writes it: ``gates[0].threshold``, ``options.seed``."""
    out = ""
    for k in keys:
        out += f"[{k}]" if isinstance(k, int) else ("." if out else "") + (
            k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else quoted(k))
    return out


def _no_number(value: Any, keys: tuple = ()) -> Optional[str]:
    """``<key path>: <reason>`` of the first :class:`_NoNumber` in a parsed config, or ``None``."""
    if isinstance(value, _NoNumber):
        return f"{_key_path(keys)}: {value}"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return next((w for k, v in items if (w := _no_number(v, (*keys, k)))), None)


def load_config(path: str) -> dict:
    """Read a TOML audit config from any Beam filesystem.

    Raises:
        ConfigError: missing file or invalid TOML (with line and column).
    """
    from fair_forge_beam._beam import beam  # noqa: F401 - guarded Beam import first
    from fair_forge_beam.io.edge import NotARegularFile, SideFileTooLarge, read_side_file  # read whole, bounded, any filesystem

    try:  # --config <(...): the shell's pipe is read; a named FIFO, socket or device is refused before it is opened
        raw = read_side_file(path, "--config", pipe=True)
    except NotARegularFile as exc:
        raise ConfigError(f"{exc} (a FIFO nobody writes to would be waited on for ever; --config <(...) is read)") from None
    except SideFileTooLarge as exc:
        raise ConfigError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - any filesystem's "not found"/"denied"
        raise ConfigError(f"--config {path}: cannot read the file ({plain_reason(exc)})") from None
    from fair_forge_beam.io.edge import MAX_NESTING, SideFileTooDeep, check_side_nesting

    too_deep = (f"--config {path}: nested more than {MAX_NESTING} levels deep (dotted keys, table headers, "
                f"arrays and inline tables); a config, as input records, is limited to {MAX_NESTING} levels")
    import codecs

    if raw.startswith(codecs.BOM_UTF8):  # accepted: TOML is UTF-8, and editors may write a BOM before it
        raw = raw[len(codecs.BOM_UTF8):]
    elif raw.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        enc = "UTF-32" if raw.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)) else "UTF-16"
        raise ConfigError(f"--config {path}: not valid TOML: the file is {enc} text (it starts with a {enc} byte "
                          f"order mark); TOML is UTF-8: save the file as UTF-8")
    try:
        text = raw.decode("utf-8")
        if not toml_nesting_bound(text, MAX_NESTING):  # before tomllib builds every level
            raise ConfigError(too_deep)
        # nesting bounded as input records are: tomllib recurses per level (RecursionError), and so
        # does what reads the config
        doc = check_side_nesting(tomllib.loads(text, parse_float=_lenient_float),  # 1e-400 is no silent 0
                                 "the file")
        bad = _no_number(doc)
        if bad:  # the value's key named (trial30 T6: "'1e400' is too large for a number" said no key)
            raise ConfigError(f"--config {path}: {bad}")
        return doc
    except ConfigError:
        raise
    except SideFileTooDeep:
        raise ConfigError(too_deep) from None
    except RecursionError:
        raise ConfigError(f"--config {path}: nested deeper than the TOML parser can follow; a config is limited "
                          f"to {MAX_NESTING} levels") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        hint = ""
        if re.search(rb"\r(?!\n)", raw):  # what the JSONL reader says of CR-only line ends
            hint = ("; its lines end with CR alone (classic Mac line ends), which TOML does not allow: save it "
                    "with LF or CRLF line ends")
        raise ConfigError(f"--config {path}: not valid TOML: {plain_reason(exc)}{hint}") from None
    except ValueError as exc:  # plain words: a TOML integer of 5,000 digits is Python's refusal with Python's advice
        import sys

        # tomllib's int() says neither key nor line: the line and column told, as TOML's syntax errors do
        limit = sys.get_int_max_str_digits()
        long = re.search(r"(?<![\w.])[0-9][0-9_]{%d,}" % limit, text) if int_digits_reason(exc) else None
        where = ""
        if long:
            at = long.start()
            line, column = text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)
            where = f"line {line}, column {column}: "
        raise ConfigError(f"--config {path}: {where}{plain_reason(exc)}") from None


def config_to_argv(parser: argparse.ArgumentParser, config: dict, path: str) -> tuple[list[str], list[str], list]:
    """A config's content as ``(job_argv, beam_argv, gates)``.

    Raises:
        ConfigError: unknown keys, options that cannot be set from a file, values of the wrong kind.
    """
    actions = _actions(parser)
    base = None if "://" in path else os.path.dirname(os.path.abspath(path))
    unknown = sorted(set(config) - set(TOP_LEVEL) - {"options", "beam", "gates"})
    if unknown:
        known = [*TOP_LEVEL, "options", "beam", "gates"]
        hint = did_you_mean(unknown[0], known) if len(unknown) == 1 else ""
        raise ConfigError(f"--config {path}: unknown key(s) {', '.join(map(quoted, unknown))}{hint}; top-level keys are "
                          f"{', '.join(sorted(TOP_LEVEL))}, [options], [beam] and gates")
    items: list[tuple[str, Any]] = [(TOP_LEVEL[k], v) for k, v in config.items() if k in TOP_LEVEL]
    options = config.get("options", {})
    if not isinstance(options, dict):
        raise ConfigError(f"--config {path}: [options] must be a table")
    for k, v in options.items():
        name = k if k in actions else k.replace("_", "-")
        if k in TOP_LEVEL or k == "gates":
            raise ConfigError(f"--config {path}: {quoted(k)} is inside [options]; in TOML, top-level keys (inputs, "
                              "metrics, mode, seed, slices, output, gates) must come before the first [table]")
        if name not in actions or name in NOT_IN_CONFIG:
            raise ConfigError(f"--config {path}: [options] {quoted(k)} is not an option of the main job that a config "
                              "file can set (see fair-forge-beam --help)")
        items.append((name, v))
    job: list[str] = []
    for name, value in items:
        action = actions[name]
        where = f"--config {path}: {name}"
        # the one check of a value's type against its option's declaration (issue 28/27: output = 5,
        # true, a date or a list was taken as its text)
        problem = config_value_problem(OPTIONS[action.dest], value)
        if problem:
            raise ConfigError(f"{where}: {problem}")
        if _is_flag(action):
            if value:
                job.append(f"--{name}")
            continue
        if isinstance(value, list) and not isinstance(action, argparse._AppendAction):
            value = ",".join(value)  # a comma-separated text option (Option.listed): its texts joined
        for v in (value if isinstance(value, list) else [value]):
            v = str(v)
            if name in PATH_OPTIONS and v not in OPTIONS[action.dest].names:  # a declared name is no path
                try:
                    v = _resolve(v, base)
                except argparse.ArgumentTypeError as exc:
                    raise ConfigError(f"{where}: {exc}") from None
            job.append(f"--{name}={v}")
    beam_opts = config.get("beam", {})
    if not isinstance(beam_opts, dict):
        raise ConfigError(f"--config {path}: [beam] must be a table of Beam pipeline options")
    beam_argv = []
    for k, v in beam_opts.items():
        if isinstance(v, bool):
            if v:
                beam_argv.append(f"--{k}")
        elif isinstance(v, list):
            beam_argv.extend(f"--{k}={x}" for x in v)
        else:
            beam_argv.append(f"--{k}={v}")
    gates = config.get("gates", [])
    if not isinstance(gates, list):
        raise ConfigError(f"--config {path}: gates must be a list of gate texts or [[gates]] tables")
    return job, beam_argv, gates


def expand_argv(parser: argparse.ArgumentParser, argv: Sequence[str]) -> tuple[list[str], list]:
    """The effective arguments of a run: template-style spellings normalised and the ``--config``
    file's content put before the command line's flags. An option (or a ``[beam]`` option) that
    the command line also gives overrides the file: the file's value of it is left out (a list
    one, such as ``inputs``, too), so an option given twice can only be the command line's own,
    a usage error (:func:`fair_forge_beam.options.given_twice`).

    Returns:
        ``(argv, config_gates)``: arguments for ``parser.parse_known_args`` and the file's gates
        (texts or tables, for :func:`fair_forge_beam.reports.gates.make_gate`).

    Raises:
        ConfigError: unreadable or invalid config file (the main job exits 2).
    """
    argv = normalise_template_args(parser, argv)
    # the command's own name and one-line error ("--config" without a value), not "audit.py: error";
    # every other option is the command parser's to check
    pre = OneLineErrorParser(prog=parser.prog, add_help=False, allow_abbrev=False, passes_on=lambda flag: True)
    pre.add_argument("--config", type=user_path)
    pre.add_argument("--input", action="append")
    known, _ = pre.parse_known_args(argv)
    if not known.config:
        return argv, []
    job, beam_argv, gates = config_to_argv(parser, load_config(known.config), known.config)
    # an option the command line gives replaces the file's value (the command line's inputs replace
    # the file's inputs): the file's entries of it are dropped, so that the command line's own
    # arguments, which the parser checks for an option given twice, are the only ones of it
    from fair_forge_beam.options import _beam_parser, beam_option, options_given

    def beam_action(flag):
        return _beam_parser()._option_string_actions.get(flag) if beam_option(flag) else None

    given = {a.dest for a, _, _ in options_given(parser, argv)}
    job = [a for a in job if not {x.dest for x, _, _ in options_given(parser, [a])} & given]
    if beam_argv and any(a.startswith("--") and a.split("=", 1)[0] not in parser._option_string_actions for a in argv):
        given_beam = {a.dest for a, _, _ in options_given(parser, argv, beam_action) if a not in parser._actions}
        beam_argv = [a for a in beam_argv if not {x.dest for x, _, _ in options_given(_beam_parser(), [a])} & given_beam]
    # check the file's values on their own first, so an error names the file
    from fair_forge_beam.options import ChoiceHintParser

    check = ChoiceHintParser(add_help=False, allow_abbrev=False, parents=[], exit_on_error=False)
    for a in parser._actions:
        if a.option_strings and a.dest != "help":
            check._add_action(a)
    try:
        values, rest = check.parse_known_args(job)
    except argparse.ArgumentError as exc:
        raise ConfigError(f"--config {known.config}: {exc}") from None
    if rest:
        raise ConfigError(f"--config {known.config}: not understood: {', '.join(choice_text(a, ()) for a in rest)}")
    check_file_values(values, job, gates, known.config, beam_argv)
    return job + beam_argv + argv, gates


def check_file_values(values: argparse.Namespace, job: Sequence[str], gates: Sequence, path: str,
                      beam_argv: Sequence[str] = ()) -> None:
    """The checks a run makes of its options after parsing (metric names, slice dimensions, the
    declared validations, each gate's syntax), made of a ``--config`` file's own values first, so
    that an error names the file and the key (issue 28: ``unknown metric 'bogus'`` from a file named
    neither). ``values``: the file's options parsed alone (``job``: their arguments); ``gates``: its
    gates; ``beam_argv``: its ``[beam]`` table as arguments (their values, unknown options and the
    runner's name are checked as the command line's are). A gate's fit to the audit (its metric run, its slices computed) is checked by the audit
    once the command line is merged (:func:`check_file_gates`).

    Raises:
        ConfigError: ``--config <file>: <key>: <the run's own message>``.
    """
    from fair_forge_beam.metrics.registry import METRICS, registered
    from fair_forge_beam.options import metric_names, validate
    from fair_forge_beam.reports.gates import GateConfigError, make_gate

    given = {a.split("=", 1)[0][2:] for a in job}
    if "metrics" in given:
        for name in metric_names(values.metrics):
            if name not in METRICS and name not in registered():
                raise ConfigError(f"--config {path}: metrics: unknown metric {choice_text(name, METRICS)}; available: "
                                  f"{', '.join(sorted(METRICS))}{did_you_mean(name, METRICS)}")
    if "slices" in given:
        try:
            parse_slices(values.slices)
        except ConfigError as exc:
            raise ConfigError(f"--config {path}: slices: {str(exc).removeprefix('--slices: ')}") from None
    try:
        validate(values)
    except ValueError as exc:  # names the option (its flag): the key
        raise ConfigError(f"--config {path}: {exc}") from None
    for i, gate in enumerate(gates):
        try:
            make_gate(gate, where=f"gate #{i + 1}")
        except GateConfigError as exc:
            raise ConfigError(f"--config {path}: gates[{i}]: {exc}") from None
    if beam_argv:
        from fair_forge_beam.options import beam_value_problem, unknown_beam_options

        problem = beam_value_problem(beam_argv)
        if problem:
            raise ConfigError(f"--config {path}: [beam] {problem}")
        unknown = unknown_beam_options(beam_argv)
        if unknown:
            names = [a.split("=", 1)[0].lstrip("-") for a in unknown]
            raise ConfigError(f"--config {path}: [beam] {', '.join(map(quoted, dict.fromkeys(names)))}: not a Beam "
                              "pipeline option")
        runners = [a.split("=", 1)[1] for a in beam_argv if a.startswith("--runner=")]
        if runners:
            from fair_forge_beam.options import check_runner

            try:
                check_runner(runners[-1])
            except ValueError as exc:
                raise ConfigError(f"--config {path}: [beam] runner: {exc}") from None


def check_file_gates(path: str, gates: Sequence, resolve) -> None:
    """``resolve(gates)`` (:func:`fair_forge_beam.reports.gates.resolve_gates` with the audit's
    metrics, mode and slices) of a ``--config`` file's gates alone, so that a gate that does not fit
    the audit names the file and the key.

    Raises:
        ConfigError: ``--config <file>: gates: <the gates' message>``.
    """
    from fair_forge_beam.reports.gates import GateConfigError

    if not gates:
        return
    try:
        resolve(list(gates))
    except GateConfigError as exc:
        raise ConfigError(f"--config {path}: gates: {exc}") from None


def is_template_launch(options) -> bool:
    """Whether the run only writes a Dataflow job graph (``--template_location``, as the Flex
    Template launcher does) instead of running the job: then the driver has no results to
    assemble and no gates to evaluate."""
    import fair_forge_beam._beam  # noqa: F401 - Beam's first import under the logging guard (case-006)
    from apache_beam.options.pipeline_options import GoogleCloudOptions

    return bool(options.view_as(GoogleCloudOptions).template_location)
