"""Loaders of public agent benchmarks into sessions of our schema (for the Agentic metric).

Two sources (mapping of ``../shared/data/README.md``):

**τ-bench historical trajectories** (Yao et al. 2024; e.g. ``gpt-4o-airline.json``, ``.gz``
allowed): a JSON list of ``{task_id, trial, reward, info{task{actions, ...}}, traj}``.

* one session per trajectory: ``session_id = "tau_bench-task<task_id>-trial<trial>"``,
  ``assistant_id`` given (default ``"gpt-4o"``: all trials of one agent share it, so per-task
  trials meet in every slice), ``context`` = the system message;
* each ``user`` message opens a turn (``query``); the assistant's ``tool_calls`` up to the next
  user message become ``agentic.tools_used`` (``tool_name``, ``parameters`` = the parsed JSON
  arguments — unparsable arguments are kept as ``{"__unparsed_arguments__": text}`` so they
  never match —, ``result`` = the first unanswered ``tool`` message with the call's id (ids repeat inside
  some trajectories), ``step`` = 1-based
  position in the turn); the last assistant text of the turn is ``assistant``;
  ``final_answer_uses_tools`` is true when that text comes after the turn's last tool result;
* every turn carries ``agentic.task_id`` (string), ``agentic.trial`` and ``agentic.reward``
  (the trajectory's reward, repeated on each turn: use ``label_field="agentic.reward"``);
* ``info.task.actions`` → ``ground_truth_agentic = {"expected_tools": [{tool_name, parameters,
  step}], "tool_sequence_matters": False}`` on the **last** turn (τ-bench grades the final
  database state, not the order of calls; ``[]`` is a task that expects no action). A record
  without actions gives no expectation (``ground_truth_agentic = {}``: tool correctness not
  applicable), never an empty list that an empty trace would match. No reference answers
  (``ground_truth_assistant`` is ``None``).
* a record that cannot be mapped whole is a dead letter, never a session with a part left out or
  filled in: a field :class:`~fair_forge_beam.schemas.agent_benchmarks.TauRecord` refuses (every
  field is checked before any is mapped, no value is made text; the model says what each field must
  be: a message's role is one of ``system``/``user``/``assistant``/``tool``, a ``reward`` a finite
  number or true/false, absent: ``None``, no label), a second trajectory of the same task and trial,
  a ``traj`` without a user message, a system message after the first user message, an assistant or
  tool message before it (it belongs to no turn), a tool result that no call awaits (trial49b B5:
  ``"cancel_everything"``, ``null`` and ``42`` were left out of ``expected_tools`` and the task scored
  1.0; trial49c B4: ``content: 5`` / ``null`` was mapped).

**BFCL multi-turn** (Berkeley Function-Calling Leaderboard, e.g. ``BFCL_v4_multi_turn_base.json``):
JSON lines ``{id, question: [[{role, content}], ...], involved_classes, ...}`` and the answer
file ``possible_answer_<same name>`` (or ``answers_path``) with ``{id, ground_truth: [[
"func(arg=...)", ...], ...]}``.

* one session per ``id`` (``assistant_id`` = ``"ground_truth"``, ``"none"`` or the result file's
  name), one turn per ``question`` element (``query`` = its user messages joined);
* ``ground_truth[i]`` parsed with :mod:`ast` (never evaluated): keyword arguments by name,
  positional ones named after the function's parameters from ``multi_turn_func_doc/`` when that
  folder is next to the file (else ``arg0``, ``arg1`` …) → ``ground_truth_agentic =
  {"expected_tools": [...], "tool_sequence_matters": True}``; ``[]`` is a turn that expects no
  call; a question without an entry in the answer file gets no expectation (``{}``);
* a question that cannot be mapped whole is a dead letter with its record (trial49c B3): a field
  :class:`~fair_forge_beam.schemas.agent_benchmarks.BfclQuestion` refuses (a turn is a non-empty list
  of ``{role: "user", content: text}``: another role would be left out of the query, an empty turn
  would be an empty one; in a ``multi_turn_miss_func`` question, ``BfclMissFuncQuestion``, a turn
  whose index ``missed_function`` names is ``[]``, and its query :data:`MISSED_FUNCTION_QUERY`, what
  BFCL sends there), a ground truth or result that
  :class:`~fair_forge_beam.schemas.agent_benchmarks.BfclAnswer` (``BfclResult``) refuses (``null`` is
  not "no call") or of another number of turns than the question has — a turn past its end would have
  no expectation, or no trace —, an id the answer (result) file gives two different values, a result
  file without the id (a missing result is not an empty trace), an id given by an earlier question.
  Each repeated id of the answer or result file is a dead letter with its own record (the first stands
  when the repeats are the same; when they differ, the question is scored with neither), as is a record
  there without an id (trial49b B4: turns past the ground truth's end were given ``expected_tools: []``
  and scored 1.0 against an empty trace, and of two answers of one id the last silently won);
* there are no model answers: ``tools_used="ground_truth"`` copies the ground truth (a
  perfect-score fixture), ``"none"`` leaves tools empty, or a path to a BFCL-style result file
  (JSON lines ``{id, result}``, one list of call strings — or of steps of them — per turn);
  ``assistant`` is ``""``; ``agentic.task_id`` = ``id``.

Records a loader cannot map are never dropped silently nor mapped in part: each is a
:class:`~fair_forge_beam.io.read.ReadError` whose reason names the part (a record another one repeats
is named by its position, ``the record at 74``),
and whose ``raw`` is the benchmark's record as it was read (a dead letter at read, counted in the
summary's ``rejected_at_read``), its ``source`` the file and position (``ReadError.at``: a JSON
Lines line's byte offset, a JSON array element's index), as the audit's reader names its own; a
record that is not an object is one too (``record is a list, not an object``). An unparsable call becomes a call named ``"<unparsed>"`` with its text in
``parameters``, so it counts as a mismatch.

Usable three ways: as functions (:func:`tau_bench_sessions`, :func:`bfcl_sessions`), as
retrievers (``Agentic.run(TauBenchRetriever, k=4, path=..., correctness_source="label")``) and
from the main job (``--input-format tau_bench|bfcl``); ``python -m
fair_forge_beam.io.agentic_sources tau_bench IN OUT.jsonl`` writes our JSONL.
"""
from __future__ import annotations

if __name__ == "__main__":  # the command is the process: a Ctrl-C while it still imports is one line (trial46 B2)
    from fair_forge_beam.console import starting

    starting("python -m fair_forge_beam.io.agentic_sources", "conversion")

import ast
import functools
import json
import os
import sys
from typing import Any, Callable, NamedTuple, Optional, Sequence, Union

from fair_forge_beam._beam import beam  # noqa: F401 - Beam first through the guarded import (case-006)
from fair_forge_beam.blank import is_blank, is_blank_line
from fair_forge_beam.io import edge
from fair_forge_beam.io.retriever import Retriever
from fair_forge_beam.quoting import quoted
from fair_forge_beam.plain import json_kind, plain_reason
from fair_forge_beam.schemas.agent_benchmarks import (BfclAnswer, BfclMissFuncQuestion, BfclQuestion, BfclResult,
                                                      TauRecord, validated)

__all__ = [
    "tau_bench_sessions",
    "bfcl_sessions",
    "parse_call",
    "TauBenchRetriever",
    "BfclRetriever",
    "AGENTIC_INPUT_FORMATS",
    "agentic_retriever",
]

UNPARSED = "<unparsed>"


def _file_records(path: str, limit: Optional[int] = None) -> list:
    """The records of one file (:func:`_positioned_records` without their positions)."""
    return [rec for _, rec in _positioned_records(path, limit)]


def _positioned_records(path: str, limit: Optional[int] = None) -> list:
    """The records of one file, read in pieces (compressed ones decompressed in bounded pieces by
    :func:`~fair_forge_beam.io.edge.open_input`: ``.gz``, ``.bz2``, ``.xz``, ``.zst``; any encoding
    :func:`~fair_forge_beam.io.edge.text_encoding` tells): a JSON list, one JSON object, or JSON
    lines. No record over ``limit`` bytes (default ``--max-record-bytes``' default) is held whole:
    it becomes a :class:`~fair_forge_beam.io.read.ReadError` naming its size and the limit, and the
    records after it are read (:func:`~fair_forge_beam.io.read.file_lines`,
    :func:`~fair_forge_beam.io.edge.json_values`). What cannot be parsed is a ``ReadError`` too:
    each invalid line of JSON lines, the rest of a list from where its structure breaks, an empty
    file, a file that cannot be read or decoded (missing, truncated ``.gz``, not its encoding).

    ``(position, record)`` pairs: the position as docs/data.md's ``source`` rule has it (a JSON Lines
    line's byte offset in the decompressed file, a JSON array element's index, 0 for the file's own
    failures); each ``ReadError`` carries it (``at``), so its dead letter's ``source`` names the file
    and position, as the audit's reader's do."""
    import zlib

    from fair_forge_beam.io.read import (MAX_RECORD_BYTES, OVERSIZED_RAW_BYTES, READ_CHUNK, ReadError, _json_element,
                                         file_lines, utf8_reader)

    limit = int(limit or MAX_RECORD_BYTES)

    def values(f, head: bytes) -> list:  # a JSON list or one JSON value (it may span lines)
        read = utf8_reader(f, edge.text_encoding(head), head)
        out = []
        for v in edge.json_values(read, limit, OVERSIZED_RAW_BYTES, READ_CHUNK):
            text = _json_element(path, v, limit)
            try:
                out.append((v.index, edge.loads(text, limit=limit) if isinstance(text, str) else text))
            except ValueError as exc:
                out.append((v.index, ReadError(f"element is not valid JSON ({plain_reason(exc)})", text,
                                               (path, v.index))))
        return out

    def lines(f, head: bytes):  # JSON lines; None when the first line is not JSON (one value over several lines)
        out = []
        for n, (_, at, line) in enumerate(file_lines(path, f, limit, head), start=1):
            if isinstance(line, ReadError):
                out.append((at, ReadError(line.reason, line.raw, (path, at))))
                continue
            text = line.decode("utf-8") if isinstance(line, bytes) else line
            if is_blank_line(text):  # a blank line (blank.is_blank_line: U+200B alike NBSP and U+2028) is not a record
                continue
            try:
                out.append((at, edge.loads(text, limit=limit)))
            except edge.RecordRejected as exc:
                if not out and n == 1:
                    return None
                out.append((at, ReadError(plain_reason(exc), text, (path, at))))
            except ValueError as exc:
                if not out and n == 1:
                    return None
                out.append((at, ReadError(edge.json_error_reason(exc, text), text, (path, at))))
        return out

    try:
        edge.refuse_damaged(path)  # no record of a file whose compressed data fails its check
        with edge.open_input(path) as f:
            head = f.read(edge.ENCODING_PROBE_BYTES)
            reason = edge.not_text_reason(path, head)
            if reason is not None:
                return [(0, ReadError(reason, "", (path, 0)))]
            start = head.decode(edge.text_encoding(head), "ignore").lstrip("\ufeff \t\r\n")[:1]
            records = values(f, head) if start == "[" else lines(f, head)
        if records is None:
            with edge.open_input(path) as f:
                records = values(f, f.read(edge.ENCODING_PROBE_BYTES))
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        return [(0, ReadError(f"{path}: cannot read the file ({plain_reason(exc)}); no record of it was read", "", (path, 0)))]
    except ValueError as exc:  # a value that breaks the depth bound or is not JSON
        return [(0, ReadError(f"{path}: invalid JSON file ({plain_reason(exc)}); no record of it was read", "", (path, 0)))]
    return records or [(0, ReadError(f"{path}: empty file, no records", "", (path, 0)))]


def _raw(rec: Any) -> str:
    """The record as it was read (JSON text): a dead letter's ``raw``."""
    try:
        return json.dumps(rec, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(rec)


def _record_error(what: str, path: str, at: int, rec: Any, exc: Exception):
    """The dead letter of the record at position ``at`` of ``path`` (its ``source``; the reason does not repeat it)."""
    from fair_forge_beam.io.read import ReadError

    return ReadError(f"{what} record cannot be mapped to a session ({plain_reason(exc)})", _raw(rec), (path, at))


def _expand(patterns: Union[str, Sequence[str]]) -> list[str]:
    from fair_forge_beam.io.read import warn_repeated_inputs, distinct_inputs
    from fair_forge_beam.plain import first_path_name_problem

    found = distinct_inputs(patterns)  # a file several patterns reach (a link, a glob and its name) is read once
    files = []
    for p, matched, new in found.patterns:
        if not matched:
            raise ValueError(f"no input file matches {quoted(p)}")
        bad_name = first_path_name_problem([m.path for m in matched], "--input")
        if bad_name:  # a name that is not UTF-8 text (issue 28 B7)
            raise ValueError(bad_name)
        files.extend(sorted(m.path for m in new))
    if found.warning():
        warn_repeated_inputs(found.warning())
    return files


# ------------------------------------------------------------------ τ-bench
def _arguments(text: Any) -> dict:
    if isinstance(text, dict):
        return text
    try:  # strict JSON, as every JSON file the package writes: NaN, Infinity or 1e999 leave them unparsed
        value = edge.side_json_loads(text, "a tool call's arguments", finite=True) if isinstance(text, str) else None
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"__unparsed_arguments__": text}


def _tau_session(rec: TauRecord, assistant_id: str) -> dict:
    """One τ-bench record (validated: every field of its type) → a session. Raises ``ValueError`` for a
    record that cannot be mapped whole (the caller's dead letter, with the record): no user message in
    the trajectory, a system message after the first user message, an assistant or tool message before
    it (it belongs to no turn), a tool result no call awaits."""
    session_id = f"tau_bench-task{rec.task_id}-trial{rec.trial}"
    context = None
    pending: dict = {}  # call id -> calls still waiting for their result (ids repeat inside a trajectory)
    turns: list[dict] = []
    for n, m in enumerate(rec.traj):
        where = f"traj[{n}]"
        if m.role == "system":
            if turns or context is not None:
                raise ValueError(f"{where} is a system message after the first {'user' if turns else 'system'} message")
            context = m.content
            continue
        if m.role == "user":
            turns.append({"query": m.content, "tools": [], "answer": "", "answer_pos": -1, "last_tool": -1, "pos": 0})
            continue
        if not turns:
            raise ValueError(f"{where} is an {m.role} message before the first user message: it belongs to no turn")
        t = turns[-1]
        t["pos"] += 1
        if m.role == "assistant":
            for call in m.tool_calls or ():
                entry = {"tool_name": call.function.name, "parameters": _arguments(call.function.arguments),
                         "result": None, "step": len(t["tools"]) + 1}
                t["tools"].append(entry)
                if call.id is not None:  # a call without an id: no tool result can name it
                    pending.setdefault(call.id, []).append(entry)
            if m.content:
                t["answer"], t["answer_pos"] = m.content, t["pos"]
        else:  # a tool result
            t["last_tool"] = t["pos"]
            waiting = pending.get(m.tool_call_id) or []
            if not waiting:
                raise ValueError(f"{where} is the result of tool call {quoted(m.tool_call_id)}, which no earlier "
                                 "call awaits")
            waiting.pop(0)["result"] = m.content
    if not turns:
        raise ValueError("traj has no user message: no turn to score")
    task = rec.info.task if rec.info is not None else None
    expected = None if task is None or task.actions is None else [  # no actions: no expectation, never []
        {"tool_name": a.name, "parameters": a.kwargs, "step": i + 1} for i, a in enumerate(task.actions)]
    context = "" if context is None else context  # no system message: no context
    conversation = []
    for i, t in enumerate(turns):
        conversation.append({
            "qa_id": f"{session_id}-turn{i}",
            "query": t["query"],
            "assistant": t["answer"],
            "ground_truth_assistant": None,
            "agentic": {
                "task_id": str(rec.task_id),
                "trial": rec.trial,
                "reward": rec.reward,
                "tools_used": t["tools"],
                "final_answer_uses_tools": bool(t["tools"]) and t["answer_pos"] > t["last_tool"],
            },
            "ground_truth_agentic": (
                {"expected_tools": expected, "tool_sequence_matters": False}
                if i == len(turns) - 1 and expected is not None else {}
            ),
        })
    return {"session_id": session_id, "assistant_id": assistant_id, "language": "english", "context": context, "conversation": conversation}


def tau_bench_sessions(path: Union[str, Sequence[str]], assistant_id: str = "gpt-4o",
                       max_record_bytes: Optional[int] = None) -> list[dict]:
    """Sessions (dicts of our schema) of τ-bench trajectory files (globs; ``.gz`` allowed), in
    file then record order. A record that is not an object, an unreadable file or line (truncated, not UTF-8, invalid JSON, empty)
    and a record that cannot be mapped whole (a field :class:`~fair_forge_beam.schemas.agent_benchmarks.TauRecord`
    refuses, :func:`_tau_session`'s checks, a task and trial given by an earlier record) are returned as
    :class:`~fair_forge_beam.io.read.ReadError` (a dead letter naming the file and record, with the record as ``raw``).
    Raises ``ValueError`` for a pattern matching no file."""
    out: list = []
    seen: dict = {}  # session id -> (file, record) of the trajectory that made it
    for f in _expand(path):
        _map_records(f, functools.partial(validated, TauRecord), "τ-bench",
                     lambda tau: _tau_session(tau, assistant_id), lambda tau, where: (
                         f"task_id {quoted(str(tau.task_id))} and trial {quoted(str(tau.trial))} repeat those of "
                         f"{where}: a second trajectory of the same task and trial"), max_record_bytes, seen, out)
    return out


def _map_records(f: str, read: Callable, what: str, to_session: Callable, repeated: Callable,
                 max_record_bytes: Optional[int], seen: dict, out: list) -> None:
    """Each record of the file ``f`` → ``out``: its session (``to_session`` of the model ``read`` gives), or a
    :class:`~fair_forge_beam.io.read.ReadError` with the record as ``raw`` for a record that cannot be mapped
    whole: an unreadable one, one that is not an object (``record is a list, not an object``, as the
    audit's reader says it), one ``read`` or ``to_session`` raises ``ValueError`` for, and one whose
    session id an earlier record of ``seen`` gave (``repeated(record, where)`` says why: never merged into the
    first one's session)."""
    from fair_forge_beam.io.read import ReadError

    for at, rec in _positioned_records(f, max_record_bytes):
        if isinstance(rec, ReadError):
            out.append(rec)
            continue
        if not isinstance(rec, dict):  # named at its file and position, with the reason the audit's reader gives
            out.append(ReadError(f"record is {json_kind(rec)}, not an object", _raw(rec), (f, at)))
            continue
        try:
            record = read(rec)
            session = to_session(record)
            first = seen.setdefault(session["session_id"], (f, at))
            if first != (f, at):
                raise ValueError(repeated(record, _where(first, f)))
            out.append(session)
        except ValueError as exc:
            out.append(_record_error(what, f, at, rec, exc))


def _where(first: tuple, f: str) -> str:
    """``the record at 3`` (in the file ``f``) or ``the record at FILE:3`` (another file): the position as a
    dead letter's ``source`` gives it."""
    return f"the record at {first[1]}" if first[0] == f else f"the record at {first[0]}:{first[1]}"


# ------------------------------------------------------------------ BFCL
def _func_name(node: ast.AST) -> str:
    return ast.unparse(node)


def parse_call(text: str, signatures: Optional[dict] = None) -> dict:
    """``"f(a, b=2)"`` → ``{"tool_name": "f", "parameters": {...}}`` with :mod:`ast` (literals
    only, nothing evaluated). Positional arguments take their names from ``signatures[f]`` (list
    of parameter names), else ``arg0``, ``arg1``…. Unparsable text → ``{"tool_name":
    "<unparsed>", "parameters": {"text": text}}``."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
        if not isinstance(node, ast.Call):
            raise ValueError("not a call")
        name = _func_name(node.func)
        names = (signatures or {}).get(name.rsplit(".", 1)[-1], [])
        params = {}
        for i, a in enumerate(node.args):
            params[names[i] if i < len(names) else f"arg{i}"] = ast.literal_eval(a)
        for kw in node.keywords:
            if kw.arg is None:
                raise ValueError("**kwargs")
            params[kw.arg] = ast.literal_eval(kw.value)
        return {"tool_name": name, "parameters": params}
    except (SyntaxError, ValueError, TypeError, AttributeError, MemoryError, RecursionError):
        return {"tool_name": UNPARSED, "parameters": {"text": text}}


def _signatures(folder: str) -> dict:
    from apache_beam.io.filesystems import FileSystems

    docs = os.path.join(folder, "multi_turn_func_doc")
    if not FileSystems.exists(docs):
        return {}
    out = {}
    for f in _expand(os.path.join(docs, "*.json")):
        for d in _file_records(f):  # an unreadable doc only costs parameter names (arg0, arg1, ...)
            if isinstance(d, dict) and isinstance(d.get("name"), str) and isinstance(d.get("parameters"), dict):
                out.setdefault(d.get("name"), list((d["parameters"].get("properties") or {}).keys()))
    return out


def _calls(turn: list, signatures: dict) -> list[dict]:
    """The calls of one turn (a list of call strings, ``{name: {arguments}}`` objects, or lists of
    them: steps), numbered by ``step``; anything else is a call named ``<unparsed>`` with its text."""
    flat: list = []

    def walk(x):
        if isinstance(x, list):
            for y in x:
                walk(y)
        else:
            flat.append(x)

    walk(turn)
    calls = []
    for x in flat:
        if isinstance(x, str):
            c = parse_call(x, signatures)
        elif isinstance(x, dict) and len(x) == 1 and not is_blank(next(iter(x))) and isinstance(next(iter(x.values())), dict):
            name, args = next(iter(x.items()))  # {"func": {arg: value}}
            c = {"tool_name": name, "parameters": args}
        else:  # not a call: unparsed, its JSON text kept (never its arguments made {"value": ...})
            c = {"tool_name": UNPARSED, "parameters": {"text": json.dumps(x, default=str)}}
        c["step"] = len(calls) + 1
        calls.append(c)
    return calls


def _bfcl_answer_file(question_file: str, answers_path: Optional[str] = None) -> str:
    """The ground-truth file of a BFCL question file. Raises ``ValueError`` when there is none."""
    from apache_beam.io.filesystems import FileSystems

    if answers_path is not None:
        if not FileSystems.exists(answers_path):
            raise ValueError(f"BFCL answer file not found: {answers_path}")
        return answers_path
    folder, name = os.path.split(question_file)
    cands = [os.path.join(folder, f"possible_answer_{name}"), os.path.join(folder, "possible_answer", name)]
    ans = next((c for c in cands if FileSystems.exists(c)), None)
    if ans is None:
        raise ValueError(f"no BFCL answer file for {question_file}: looked for {cands}; pass answers_path")
    return ans


def bfcl_sessions(
    path: Union[str, Sequence[str]], answers_path: Optional[str] = None, tools_used: str = "ground_truth",
    max_record_bytes: Optional[int] = None,
) -> list[dict]:
    """Sessions of BFCL multi-turn question files (see the module docstring).

    Args:
        path: question file(s) (globs).
        answers_path: the ground-truth file; default ``possible_answer_<name>`` next to the
            question file, else ``possible_answer/<name>``.
        tools_used: ``"ground_truth"``, ``"none"`` or a result file path.
        max_record_bytes: the largest record read from any of the files (:func:`_file_records`).

    Unreadable files and lines (truncated, not UTF-8, invalid JSON), questions that cannot be
    mapped whole (a field :class:`~fair_forge_beam.schemas.agent_benchmarks.BfclQuestion` refuses,
    :func:`_bfcl_session`'s checks, an id given by an earlier question) and the answer and
    result files' records without an id or repeating one (:func:`_by_id`) are returned as
    :class:`~fair_forge_beam.io.read.ReadError` (dead letters, with the record as ``raw``); a
    question whose ground truth is missing gets no ``expected_tools``.

    Raises ``ValueError`` for a missing question or answer file.
    """
    out: list = []
    seen: dict = {}  # session id -> (file, record) of the question that made it
    for f in _expand(path):
        folder, name = os.path.split(f)
        truth = _by_id(_bfcl_answer_file(f, answers_path), BfclAnswer, "answer", max_record_bytes, out)
        signatures = _signatures(folder)
        if tools_used in ("ground_truth", "none"):
            results, assistant_id = None, tools_used
        else:
            results = _by_id(tools_used, BfclResult, "result", max_record_bytes, out)
            assistant_id = os.path.splitext(os.path.basename(tools_used))[0]
        _map_records(f, _bfcl_question, "BFCL",
                     lambda q: _bfcl_session(q, truth, results, tools_used, assistant_id, signatures),  # noqa: B023
                     lambda q, where: f"id {quoted(str(q.id))} repeats that of question {where}",
                     max_record_bytes, seen, out)
    return out


#: the query BFCL's model handler sends at a turn where it adds the functions ``missed_function`` held back
#: (a function-calling model's; a prompting model's has the functions' docs first): that turn has no message
MISSED_FUNCTION_QUERY = "I have updated some more functions you can choose from. What about now?"


def _bfcl_question(rec: dict) -> BfclQuestion:
    """A question record read by its model (:class:`~fair_forge_beam.schemas.agent_benchmarks.BfclMissFuncQuestion`
    with ``missed_function``, else ``BfclQuestion``); raises ``ValueError`` naming what it refuses."""
    return validated(BfclMissFuncQuestion if "missed_function" in rec else BfclQuestion, rec)


class _Entries(NamedTuple):
    """An answer or result file's records by id: ``first`` (the first record of each id), ``records``
    (``[[record positions], whether a repeat differs from the first]`` of each id), the file and the records' model."""

    first: dict
    records: dict
    path: str
    model: type

    def turns(self, key: Any, sid: str) -> Optional[list]:
        """The turns (lists of calls) the file gives the id ``key``, ``None`` when it gives none. Raises
        ``ValueError`` when the file gives it several that differ, or turns its model refuses."""
        if key not in self.first:
            return None
        nums, differ = self.records[key]
        if differ:
            raise ValueError(f"{self.path} gives it {len(nums)} different {self.model.TURNS.replace('_', ' ')}s "
                             f"(the records at {', '.join(str(i) for i in nums)}): which one holds is not known")
        return getattr(validated(self.model, self.first[key], f" of {quoted(sid)}"), self.model.TURNS)


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def _by_id(path: str, model: type, what: str, max_record_bytes: Optional[int], out: list) -> _Entries:
    """The records of each id of a BFCL answer (``model`` :class:`BfclAnswer`) or result file (:class:`BfclResult`).
    What is not one entry is a dead letter in ``out``, with its record: an unreadable file or line, a record that
    is not an object or has no id (a string or an integer), and each repeat of an id (the first record stands when
    every repeat holds the same; when they differ, the id's question is a dead letter too: :meth:`_Entries.turns`)."""
    from fair_forge_beam.io.read import ReadError

    field = model.TURNS
    first: dict = {}
    records: dict = {}  # id -> [[record positions], whether a repeat differs]
    for at, r in _positioned_records(path, max_record_bytes):
        if isinstance(r, ReadError):  # an unreadable line or file: its question gets no ground truth
            out.append(r)
            continue
        key = r.get("id") if isinstance(r, dict) else None
        if isinstance(key, bool) or not isinstance(key, (str, int)):
            why = "not an object" if not isinstance(r, dict) else ("no id" if key is None else f"its id is {json_kind(key)}")
            out.append(ReadError(f"{what} record is not used ({why}; an id is a string or an integer)", _raw(r), (path, at)))
            continue
        if key in first:
            entry = records[key]
            same = _same(r.get(field), first[key].get(field))
            out.append(ReadError(
                f"{what} record repeats id {quoted(str(key))} of the record at {entry[0][0]} "
                + (f"with the same {field}: read once" if same else
                   f"with another {field}: the question {quoted(str(key))} is scored with neither"), _raw(r), (path, at)))
            entry[0].append(at)
            entry[1] = entry[1] or not same
            continue
        first[key] = r
        records[key] = [[at], False]
    return _Entries(first, records, path, model)


def _bfcl_session(question: BfclQuestion, truth: _Entries, results: Optional[_Entries], tools_used: str,
                  assistant_id: str, signatures: dict) -> dict:
    """One BFCL question (validated: every field of its type) → a session. A question without a ground-truth
    entry gets no ``expected_tools`` (tool correctness not applicable), never an empty expectation that an
    empty trace would match perfectly. Raises ``ValueError`` for a question that cannot be mapped whole: a
    ground truth (or result) that is not a list of turns, each a list of calls, or whose number of turns is
    not the question's (a turn past its end would have none), one the answer (result) file gives differently
    in two records (:meth:`_Entries.turns`), a result file without the question's id."""
    sid, n_turns = str(question.id), len(question.question)
    gt = truth.turns(question.id, sid)
    if gt is not None and len(gt) != n_turns:
        raise ValueError(f"ground_truth of {quoted(sid)} has {len(gt)} turn(s) for its {n_turns} question turn(s): "
                         "a turn past its end would have no expectation")
    res = None
    if results is not None:
        res = results.turns(question.id, sid)
        if res is None:
            raise ValueError(f"no result for it in {results.path} (a missing result is not an empty trace)")
        if len(res) != n_turns:
            raise ValueError(f"result of {quoted(sid)} has {len(res)} turn(s) for its {n_turns} question turn(s): "
                             "a turn past its end would have no trace")
    conversation = []
    for i, msgs in enumerate(question.question):
        expected = _calls(gt[i] if gt is not None else [], signatures)
        if tools_used == "ground_truth":
            used = [dict(c) for c in expected]
        elif tools_used == "none":
            used = []
        else:
            used = _calls(res[i], signatures)
        conversation.append({
            "qa_id": f"{sid}-turn{i}",
            "query": "\n".join(m.content for m in msgs) if msgs else MISSED_FUNCTION_QUERY,
            "assistant": "",
            "ground_truth_assistant": None,
            "agentic": {"task_id": sid, "tools_used": used, "final_answer_uses_tools": bool(used)},
            "ground_truth_agentic": ({"expected_tools": expected, "tool_sequence_matters": True}
                                     if gt is not None else {}),
        })
    return {
        "session_id": sid,
        "assistant_id": assistant_id,
        "language": "english",
        "context": "BFCL multi-turn task; APIs: " + ", ".join(question.involved_classes or ()),
        "conversation": conversation,
    }


# ------------------------------------------------------------------ retrievers
class TauBenchRetriever(Retriever):
    """Retriever over τ-bench trajectory files: kwargs ``path`` (glob or list of globs),
    ``assistant_id`` (default ``"gpt-4o"``) and ``max_record_bytes`` (the largest record read)."""

    def load_dataset(self):
        return tau_bench_sessions(self.kwargs["path"], self.kwargs.get("assistant_id", "gpt-4o"),
                                  self.kwargs.get("max_record_bytes"))


class BfclRetriever(Retriever):
    """Retriever over BFCL multi-turn files: kwargs ``path``, ``answers_path``, ``tools_used``,
    ``max_record_bytes``."""

    def load_dataset(self):
        return bfcl_sessions(self.kwargs["path"], self.kwargs.get("answers_path"), self.kwargs.get("tools_used", "ground_truth"),
                             self.kwargs.get("max_record_bytes"))


AGENTIC_INPUT_FORMATS = {"tau_bench": TauBenchRetriever, "bfcl": BfclRetriever}


def agentic_retriever(fmt: str, inputs: Sequence[str], max_record_bytes: Optional[int] = None):
    """``(retriever class, kwargs)`` of the main job's ``--input-format tau_bench|bfcl``.

    Raises ``ValueError`` for an unknown format, inputs matching no file or (BFCL) a question file
    without its answer file — before the pipeline."""
    if fmt not in AGENTIC_INPUT_FORMATS:
        raise ValueError(f"unknown agentic input format {quoted(fmt)}; choose from {sorted(AGENTIC_INPUT_FORMATS)}")
    files = _expand(inputs)
    if fmt == "bfcl":
        for f in files:
            _bfcl_answer_file(f)
    return AGENTIC_INPUT_FORMATS[fmt], {"path": list(inputs), **({"max_record_bytes": int(max_record_bytes)}
                                                                 if max_record_bytes else {})}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Converter: ``python -m fair_forge_beam.io.agentic_sources {tau_bench,bfcl} INPUT OUTPUT.jsonl``."""
    from fair_forge_beam.options import OneLineErrorParser, user_path

    p = OneLineErrorParser(prog="python -m fair_forge_beam.io.agentic_sources", description=main.__doc__)
    p.add_argument("format", choices=sorted(AGENTIC_INPUT_FORMATS))
    p.add_argument("input", type=user_path, help="input file or glob")
    p.add_argument("output", type=user_path, help="JSONL file of sessions in our schema ('-' = stdout)")
    p.add_argument("--assistant-id", default="gpt-4o", help="τ-bench: assistant_id of every session")
    p.add_argument("--answers", type=user_path, help="BFCL: ground-truth file (default possible_answer_<name> next to the input)")
    p.add_argument("--tools-used", default="ground_truth", type=user_path, help="BFCL: ground_truth, none or a result file")
    args = p.parse_args(argv)
    from fair_forge_beam.io.paths import check_output_file

    try:  # never over the files it reads (B9's class: the converter truncated its own input)
        check_output_file(args.output, [args.input] + [f for f in (args.answers, args.tools_used)
                                                       if f and f not in ("ground_truth", "none")], "output")
    except ValueError as exc:
        p.error(str(exc))
    from fair_forge_beam.console import OutputWriteError
    from fair_forge_beam.io.read import ReadError
    from fair_forge_beam.io.paths import write_text_output

    # a missing input, a BFCL file without its answers, an output that cannot be written: one line
    # and exit 2 (trial 28f B10: 15-line tracebacks); the output appears whole or not at all
    try:
        if args.format == "tau_bench":
            sessions = tau_bench_sessions(args.input, args.assistant_id)
        else:
            sessions = bfcl_sessions(args.input, args.answers, args.tools_used)
        lines = []
        for s in sessions:
            if isinstance(s, ReadError):
                where = f"{s.at[0]}:{s.at[1]}: " if s.at is not None else ""
                sys.stderr.write(f"skipped (unreadable): {where}{s.reason}\n")
                continue
            try:  # strict JSON (docs/data.md): a value NaN or Infinity is never written
                lines.append(json.dumps(s, ensure_ascii=False, allow_nan=False) + "\n")
            except ValueError:
                sys.stderr.write(f"skipped (not strict JSON): session {quoted(str(s.get('session_id')))} holds a number "
                                 "that is not finite (NaN or Infinity)\n")
        text = "".join(lines)
        write_text_output(args.output, text)  # '-' or /dev/stdout: standard output
    except OutputWriteError:  # the machine's (a full disk): exit code 1, one line (console.guarded)
        raise
    except (ValueError, OSError) as exc:
        p.error(plain_reason(exc))
    return 0


if __name__ == "__main__":  # pragma: no cover
    from fair_forge_beam.console import entry_point

    sys.exit(entry_point(main, "conversion", prog="python -m fair_forge_beam.io.agentic_sources"))
