"""A jinja2 sandbox with a size and work budget per render, for every template a user hands us
(request templates of the assistant runner, judge / generator prompt templates).

jinja2's sandbox stops attribute tricks and bounds ``range`` (100,000 items), but a template can
still build a value of any size or loop for hours from a few characters (issue 28, hostile trial
2): ``{{ ("a"|center(400000000))|length }}`` took 1.5 GB each turn, ``~`` and ``+`` built
100 MB strings and lists, and two nested ``range(99999)`` loops hung the runner. Here every way
a template builds a value or repeats work goes through a jinja2 hook that checks it *before* the
work is done:

* binary operators (``+ - * / // % **``): the sandbox's ``call_binop`` intercept;
* ``~`` (concatenation): the code generator emits a call to :meth:`BoundedSandbox.concat_parts`
  in place of jinja2's own join;
* every call (functions, methods, ``range``, ``loop(…)`` of a recursive loop): the sandbox's
  ``call`` intercept;
* every filter: wrapped when the environment is made (``center``, ``indent``, ``join``,
  ``replace``, ``format``, …); ``sum`` adds one item at a time through the ``+`` intercept, so
  a sum of lists counts every partial list it copies;
* every ``{% for %}``: the code generator wraps the iterable, so each iteration is counted (with
  the literal text of the loop body it writes again);
* every printed ``{{ … }}``: the environment's ``finalize``;
* work that reads a long value without building one: comparisons (``in``, ``==``, ``<`` …: the
  code generator emits a call to :meth:`BoundedSandbox.compare`), the tests ``in`` / ``eq`` …,
  slices (:meth:`BoundedSandbox.sliced`), filters that read their whole input (``max``,
  ``min``, ``wordcount`` …) and methods of a text or container (``count``, ``find``, ``index``
  …, ``loop.changed``) count what they read, so a loop cannot search a long list 100,000 times
  (about 800 s before).

Per method, what is checked before the value is built (issue 28, hostile trial 3: a nested format
spec given as text, ``"{:{}}".format("a", "1999999999")``, a float width, a long separator in a
``join`` method call, a repeated field ``("{0}" * 9999).format(…)`` and ``translate`` were built
first, up to 2.6 GB):

* ``str.format`` / ``format_map``: formatted by jinja2's sandboxed formatter whose every field is
  bounded before it is formatted (its value's text plus every number of its spec, nested specs
  expanded first: :func:`_field_bound`; ``!r`` / ``!a`` ten times the value), and the fields built
  so far are counted, so a repeated field stops at the limit;
* ``%`` and the ``format`` filter: the conversions are walked as Python does (:func:`_printf_bound`:
  widths and precisions, ``*`` read from the arguments, a ``%(key)s`` its value, repeats counted);
* ``join`` (method and filter): the items are taken one at a time and counted with the separator
  (:func:`_joined_bound`), a generator too, before the join;
* ``center`` / ``ljust`` / ``rjust`` / ``zfill``: the width; ``expandtabs``: tabs × tab size;
  ``replace``: hits × the new text; ``translate``: length × the longest replacement of a dict or
  list table (any other table refused); ``*``: size × count; ``indent``, ``wordwrap``, ``batch``,
  ``slice``: lines × their insert, rows × the fill;
* case mappings and ``encode`` (a text may grow: ``"ß".upper()`` is ``"SS"``): 3 (encode: 10) times
  the text, 1 (4) for ASCII text;
* filters that escape (``tojson``, ``escape``, ``urlize``, ``xmlattr``, ``urlencode``, ``pprint``,
  ``string``) are estimated at their input's size and counted again once built: at most about 12
  times a value already within the limit;
* any other call (functions, methods that do not grow a text) is counted once its result is built.

Limits (per render): one value holds at most :data:`MAX_TEMPLATE_VALUE` characters or items
(nested values counted in full, as ``str()`` would write them), an integer at most 4,300 digits,
and the characters and items built and printed plus the loop iterations (:data:`LOOP_STEP_COST`
each) of the whole render add up to at most :data:`MAX_TEMPLATE_WORK`. Both limits grow by the
size of the values the render is given (once for a value, ten times for the work): a template
may print a long answer it was handed, never build much more than it was given. Over a limit, rendering stops with :class:`TemplateLimitError`
(a ``jinja2.sandbox.SecurityError``) naming the limit, in one line.
"""
from __future__ import annotations

import math
import re
from itertools import islice
from typing import Any, Callable, Optional

from fair_forge_beam.quoting import quoted

__all__ = ["MAX_TEMPLATE_VALUE", "MAX_TEMPLATE_WORK", "MAX_INT_DIGITS", "LOOP_STEP_COST", "TemplateLimitError", "bounded_sandbox"]

#: the most characters (or items, nested ones counted) one value built by a template may hold
MAX_TEMPLATE_VALUE = 1_000_000
#: the most characters and items built plus loop iterations in one render of a template
MAX_TEMPLATE_WORK = 10_000_000
#: the most digits of an integer a template may build (Python's own limit for printing one)
MAX_INT_DIGITS = 4300

#: what one loop iteration costs in the work budget: 100,000 steps of loops (about 0.02 s) in a
#: render given little, more with long inputs
LOOP_STEP_COST = 100
#: the most of a render's given values counted into its limits
_INPUT_CAP = 10**9
_BUDGET_ATTR = "_ffb_template_work"
_LOOP_NAME = "__ffb_budgeted_loop__"
_FORMAT_ATTR = "_ffb_str_format"


def _error_class():
    from jinja2.sandbox import SecurityError

    class TemplateLimitError(SecurityError):
        """A template went over :data:`MAX_TEMPLATE_VALUE`, :data:`MAX_TEMPLATE_WORK` or
        :data:`MAX_INT_DIGITS`."""

    return TemplateLimitError


TemplateLimitError = _error_class()


def _size(v: Any, cap: int = 2 * 10**9) -> int:
    """Characters and items of ``v`` as its text would hold them (nested values in full, shared
    ones counted each time), counted up to ``cap``."""
    if isinstance(v, (str, bytes)):
        return len(v)
    if isinstance(v, bool) or v is None:
        return 1
    if isinstance(v, int):
        return 1 if -10**18 < v < 10**18 else int(math.log10(abs(v))) + 1
    if isinstance(v, float):
        return 1
    if isinstance(v, dict):
        total = 0
        for k, x in v.items():
            total += 1 + _size(k, cap - total) + _size(x, cap - total)
            if total >= cap:
                return total
        return total
    if isinstance(v, (list, tuple, set, frozenset)):
        total = 0
        items = iter(v)
        while chunk := list(islice(items, _CHUNK)):
            more = _chunk_size(chunk)
            if more is not None and total + more < cap:
                total += more
                continue
            for x in chunk:
                t = type(x)
                if t is str:
                    total += 1 + len(x)
                elif t is int:
                    total += 2 if -10**18 < x < 10**18 else 1 + _size(x)
                elif t in _SCALARS:
                    total += 2
                else:
                    total += 1 + _size(x, cap - total)
                if total >= cap:
                    return total
        return total
    return 1


_SCALARS = frozenset({int, float, bool, type(None)})
_OTHER_SCALARS = frozenset({float, bool, type(None)})
#: items of a collection counted at once by :func:`_chunk_size`
_CHUNK = 4096


def _chunk_size(chunk: list) -> Optional[int]:
    """What :func:`_size` counts for the items of ``chunk`` (a piece of a collection), in one step
    when they are all texts or all scalars (no nested values, no integers of 19 digits or more),
    else ``None`` (counted item by item). The same sum as item by item, without a new integer
    object per item: tracing allocations (``tracemalloc``) made a count of a long list ten times
    slower."""
    kinds = set(map(type, chunk))
    if kinds == {str}:
        return len(chunk) + sum(map(len, chunk))
    if kinds == {int}:
        return 2 * len(chunk) if -10**18 < min(chunk) and max(chunk) < 10**18 else None
    if kinds <= _OTHER_SCALARS:
        return 2 * len(chunk)
    return None


def _ints(values) -> list:
    out = []
    for v in values:
        if isinstance(v, int) and not isinstance(v, bool):
            out.append(v)
        elif isinstance(v, (list, tuple)) and len(v) <= 64:
            out += [x for x in v if isinstance(x, int) and not isinstance(x, bool)]
    return out


_DIGITS = re.compile(r"\d+")
#: a number of more digits than this in a format spec or ``%`` conversion counts as over every limit
_MAX_SPEC_DIGITS = 12


def _spec_number(digits: str) -> int:
    return int(digits) if len(digits) <= _MAX_SPEC_DIGITS else 10**(_MAX_SPEC_DIGITS + 1)


def _text_bound(v: Any) -> int:
    """The most characters ``str(v)`` can hold, worked out without building it: a text's length,
    an integer's digits, 32 for a float, else ten times :func:`_size` (``repr`` of a nested value
    escapes a character in at most ten: ``\\U0001f600``)."""
    if isinstance(v, str):
        return len(v)
    if isinstance(v, bool) or v is None:
        return 5
    if isinstance(v, int):
        return v.bit_length() // 3 + 2
    if isinstance(v, float):
        return 32
    if isinstance(v, bytes):
        return 4 * len(v) + 3
    return 10 * _size(v) + 16


def _field_bound(value: Any, spec: str) -> int:
    """The most characters ``format(value, spec)`` (one ``str.format`` field) can hold: the value's
    text (an integer in binary: its bits; a float in fixed point: 330) plus every number of the spec
    (width, precision — a nested ``{}`` spec already expanded, so ``"{:{}}".format("a", "1999999999")``
    counts its width), with grouping separators."""
    extra = sum(_spec_number(d) for d in _DIGITS.findall(spec or ""))
    if isinstance(value, bool) or value is None:
        base = 5
    elif isinstance(value, int):
        base = 2 * max(value.bit_length(), 1) + 8  # binary with '_' every 4 digits
    elif isinstance(value, float):
        base = 440  # 'f' of 1.8e308 with ',' grouping
    else:
        base = _text_bound(value)
    return base + extra


def _printf_bound(fmt: Any, right: Any) -> int:
    """The most characters ``fmt % right`` (printf-style, a text or bytes ``fmt``) can hold, worked
    out by walking ``fmt``'s conversions as Python does: its literal text, plus per conversion its
    width and precision (``*`` read from ``right``) and the text of the value it takes (a
    ``%(key)s`` the mapping's value, repeats counted each time)."""
    text = fmt.decode("latin-1") if isinstance(fmt, (bytes, bytearray)) else str(fmt)
    seq = list(right) if isinstance(right, tuple) else [right]
    mapping = right if isinstance(right, dict) else None
    total, i, n, k = 0, 0, len(text), 0

    def star() -> int:
        nonlocal k
        v = seq[k] if k < len(seq) else 0
        k += 1
        return abs(v) if isinstance(v, int) and not isinstance(v, bool) else 0

    def number() -> int:
        nonlocal i
        start = i
        while i < n and text[i].isdigit():
            i += 1
        return _spec_number(text[start:i]) if i > start else 0

    while i < n:
        j = text.find("%", i)
        if j < 0:
            total += n - i
            break
        total += j - i
        i = j + 1
        key = None
        if i < n and text[i] == "(":
            depth, start = 1, i + 1
            i += 1
            while i < n and depth:
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            key = text[start:i - 1]
        while i < n and text[i] in "-+ #0":
            i += 1
        width = star() if i < n and text[i] == "*" else number()
        if i < n and text[i] == "*":
            i += 1
        prec = 0
        if i < n and text[i] == ".":
            i += 1
            prec = star() if i < n and text[i] == "*" else number()
            if i < n and text[i] == "*":
                i += 1
        while i < n and text[i] in "hlL":
            i += 1
        if i >= n:
            break
        conv = text[i]
        i += 1
        if conv == "%":
            total += 1
            continue
        if key is not None and mapping is not None:
            value = mapping.get(key)
        else:
            value = seq[k] if k < len(seq) else None
            k += 1
        if conv in "ra":
            body = 10 * _size(value) + 16
        elif conv == "c":
            body = 1
        elif conv in "diouxXeEfFgG":
            body = value.bit_length() + 8 if isinstance(value, int) else 330
        else:
            body = len(value) if isinstance(value, (bytes, bytearray)) else _text_bound(value)
        total += width + prec + body
    return total


def _table_bound(text: str, table: Any) -> int:
    """The most characters ``text.translate(table)`` can hold (a dict or list table: each
    character becomes at most the longest replacement); over every limit for any other table."""
    values = table.values() if isinstance(table, dict) else table if isinstance(table, (list, tuple)) else None
    if values is None:
        return 10**(_MAX_SPEC_DIGITS + 1)
    longest = max((len(v) if isinstance(v, str) else 1 for v in values), default=1)
    return len(text) * max(longest, 1)


def _joined_bound(sep: Any, items: list) -> int:
    """The most characters ``sep.join(items)`` (or the ``join`` filter) can hold."""
    return sum(_text_bound(x) for x in items) + _text_bound(sep) * max(len(items) - 1, 0)


#: string methods whose result may be longer than the text by at most this factor (Unicode case
#: mappings: "ß".upper() == "SS", "ΐ".upper() has 3 characters; an encoding's escapes: 10)
_GROWTH = {"upper": 3, "lower": 3, "casefold": 3, "swapcase": 3, "title": 3, "capitalize": 3, "encode": 10,
           "split": 2, "rsplit": 2, "splitlines": 2, "partition": 2, "rpartition": 2, "hex": 3}


def _estimate(name: str, value: Any, args: tuple, kwargs: dict) -> Optional[int]:
    """The size of what the string operation or filter ``name`` would build from ``value`` and
    its arguments, worked out before it runs; None when it cannot grow past its inputs."""
    ints = _ints(list(args) + list(kwargs.values()))
    if any(abs(i) > MAX_TEMPLATE_VALUE for i in ints):
        return MAX_TEMPLATE_WORK + 1  # a width, count or size argument over the limit
    text = value if isinstance(value, (str, bytes, bytearray)) else None
    if name in ("center", "ljust", "rjust", "zfill"):
        return max([_size(value)] + ints)
    if name == "indent" and isinstance(text, str):
        width = args[0] if args else kwargs.get("width", 4)
        width = len(width) if isinstance(width, str) else int(width) if isinstance(width, int) else 4
        return len(text) + (text.count("\n") + 1) * max(width, 0)
    if name == "expandtabs" and text is not None:
        return len(text) + text.count(b"\t" if isinstance(text, (bytes, bytearray)) else "\t") * max(ints + [8])
    if name == "replace" and text is not None and len(args) >= 2 and isinstance(args[0], (str, bytes, bytearray)):
        old, new = args[0], args[1]
        try:
            hits = text.count(old) if old else len(text) + 1
        except TypeError:  # bytes and text mixed: Python refuses the call itself
            return None
        return len(text) + hits * _size(new)
    if name == "translate" and isinstance(value, (str, bytes)):
        return _table_bound(value, args[0]) if isinstance(value, str) and args else len(value)
    if name in _GROWTH and isinstance(value, (str, bytes)):
        ascii_text = value.isascii()  # one pass in C: ASCII text keeps its length in every case mapping
        factor = (1 if name not in ("encode", "split", "rsplit", "splitlines", "partition", "rpartition", "hex")
                  else 4 if name == "encode" else _GROWTH[name]) if ascii_text else _GROWTH[name]
        return factor * len(value) + 4
    if name == "format" and isinstance(value, str):  # the format filter: value % (kwargs or args)
        return _printf_bound(value, kwargs or tuple(args))
    if name in ("batch", "slice"):  # rows of a list, the last padded with fill_with
        fill = args[1] if len(args) > 1 else kwargs.get("fill_with")
        n = args[0] if args and isinstance(args[0], int) else 0
        return 2 * _size(value) + 2 * abs(n) + (abs(n) * _size(fill) if fill is not None else 0)
    if name == "wordwrap" and isinstance(text, str):  # a wrap string per line, lines of at least one character
        wrap = args[2] if len(args) > 2 else kwargs.get("wrapstring") or "\n"
        return len(text) + (len(text) + 1) * _size(wrap)
    if name in ("sum", "list", "map", "string", "pprint", "tojson",
                "urlize", "xmlattr", "wordwrap", "striptags", "title", "capitalize", "upper", "lower", "trim", "safe",
                "forceescape", "escape", "e", "unique", "sort", "reverse", "dictsort", "items", "select", "reject",
                "selectattr", "rejectattr", "groupby"):
        return _size(value) + sum(_size(a) for a in args) + sum(_size(a) for a in kwargs.values()) \
            + (_size(value) if name == "sum" else 0)
    return None


#: filters whose text may be a few times longer than their estimate above (escapes: ``<`` is
#: ``&lt;`` or ``\\u003c``, a character ``\\ud83d\\ude00``): their result is counted again once built
#: (at most 12 times a value already within the limit)
#: what a call may build that is counted once built (texts and bytes, containers)
_BUILT = (str, bytes, bytearray, list, tuple, dict, set, frozenset)
#: filters and methods that take the same time whatever the size of the value they are given
_CONSTANT_TIME_FILTERS = frozenset({"length", "count", "first", "last", "default", "d", "attr", "abs", "int", "float",
                                    "round", "random", "filesizeformat", "safe", "bool"})
_CONSTANT_TIME_METHODS = frozenset({"get", "keys", "values", "items", "startswith", "endswith", "__len__"})
#: jinja2's tests that compare two values (their time grows with the smaller one)
_COMPARING_TESTS = frozenset({"eq", "equalto", "==", "ne", "!=", "lt", "<", "lessthan", "le", "<=", "gt", ">",
                              "greaterthan", "ge", ">="})
_COMPARE = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "gt": lambda a, b: a > b, "gteq": lambda a, b: a >= b,
            "lt": lambda a, b: a < b, "lteq": lambda a, b: a <= b, "in": lambda a, b: a in b,
            "notin": lambda a, b: a not in b}
_RECOUNT_SLACK = 64  # characters a recounted filter may add uncounted (quotes, a few escapes)
_RECOUNTED = frozenset({"tojson", "escape", "e", "forceescape", "urlize", "xmlattr", "urlencode", "pprint", "string"})


def bounded_sandbox(base=None):
    """A subclass of jinja2's ``base`` sandbox (default ``ImmutableSandboxedEnvironment``) with
    the limits of this module. Its ``finalize`` (if given) runs after the count of the printed
    value. Every render starts a budget of its own (kept on the render's evaluation context), so
    one environment may render in many threads."""
    from jinja2 import nodes, pass_context
    from jinja2.compiler import CodeGenerator
    from jinja2.filters import FILTERS as JINJA_FILTERS, make_attrgetter
    from jinja2.runtime import LoopContext, markup_join, str_join
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEscapeFormatter, SandboxedFormatter, safe_range
    from markupsafe import Markup
    from jinja2.utils import _PassArg

    base = base or ImmutableSandboxedEnvironment

    def budget(context) -> list:
        """``[work spent, largest value, work limit]`` of this render: the limits grow by the size
        of the values the render was given (a long answer may be printed; a template may not build
        more than that from it)."""
        ctx = context.eval_ctx
        work = getattr(ctx, _BUDGET_ATTR, None)
        if work is None:
            given = sum(_size(v, _INPUT_CAP) for k, v in context.get_all().items() if not callable(v))
            given = min(given, _INPUT_CAP)
            work = [0, MAX_TEMPLATE_VALUE + given, MAX_TEMPLATE_WORK + 10 * given]
            setattr(ctx, _BUDGET_ATTR, work)
        return work

    def sized(context, v: Any) -> int:
        """:func:`_size` of ``v``, counted no further than this render's value limit."""
        return _size(v, budget(context)[1] + 1)

    def spend(context, amount: int, what: str, builds: bool = True) -> None:
        """Count ``amount`` characters or items into the render's work; ``builds``: a value of
        that size is about to be built, so it must also be within the value limit (``False``: a
        value only read, e.g. searched or compared)."""
        work = budget(context)
        if builds and amount > work[1]:
            raise TemplateLimitError(f"{what} would build a value over the template limit ({work[1]:,} characters "
                                     "or items)")
        work[0] += max(int(amount), 0)
        if work[0] > work[2]:
            raise TemplateLimitError(f"{what}: the render went over the template limit of work ({work[2]:,} "
                                     "characters and items built or printed, loop steps)")

    def bounded_items(context, iterable, sep, what: str) -> list:
        """The items of ``iterable`` as a list, each counted (with ``sep``) as it comes: over the
        value limit, :class:`TemplateLimitError` before the join is built."""
        if isinstance(iterable, (str, bytes)):
            return iterable
        limit, step, total, items = budget(context)[1], _text_bound(sep), 0, []
        for x in iterable:
            total += _text_bound(x) + step
            if total > limit + step:
                raise TemplateLimitError(f"{what} would build a value over the template limit ({limit:,} characters "
                                         "or items)")
            items.append(x)
        return items

    class _FieldBounds:
        """A formatter mixin: each field bounded before it is formatted, the fields built counted
        (``built``, ``limit``: set per call)."""

        built = limit = 0

        def _check(self, more: int) -> None:
            if self.built + more > self.limit:
                raise TemplateLimitError(f"calling format would build a value over the template limit ({self.limit:,} "
                                         "characters or items)")

        def convert_field(self, value, conversion):
            if conversion in ("r", "a"):
                self._check(10 * _size(value) + 16)
            return super().convert_field(value, conversion)

        def format_field(self, value, format_spec):
            self._check(_field_bound(value, format_spec))
            out = super().format_field(value, format_spec)
            self.built += len(out)
            return out

    class _BoundedFormatter(_FieldBounds, SandboxedFormatter):
        pass

    class _BoundedEscapeFormatter(_FieldBounds, SandboxedEscapeFormatter):
        pass

    def bounded_format(context, fmt: str, args: tuple, kwargs: dict, format_map: bool) -> str:
        """``fmt.format(*args, **kwargs)`` (or ``format_map``) through jinja2's sandboxed formatter,
        each field's size worked out before it is formatted (:func:`_field_bound`: nested specs
        expanded first) and the fields built so far counted: over the value limit,
        :class:`TemplateLimitError` before the text is built."""
        if format_map:
            if kwargs or len(args) != 1:
                raise TypeError("format_map() takes exactly one argument")
            args, kwargs = (), args[0]
        limit = budget(context)[1] if context is not None else MAX_TEMPLATE_VALUE
        env = context.environment if context is not None else None
        if isinstance(fmt, Markup):
            formatter = _BoundedEscapeFormatter(env, escape=fmt.escape)
        else:
            formatter = _BoundedFormatter(env)
        formatter.built, formatter.limit = len(fmt), limit
        out = type(fmt)(formatter.vformat(fmt, args, kwargs))
        if context is not None:
            spend(context, len(out), "calling format")
        return out

    class _Loop:
        """An iterable whose every step is counted (``weight``: literal text the loop body writes)."""

        __slots__ = ("it", "context", "weight")

        def __init__(self, it, context, weight: int):
            self.it, self.context, self.weight = it, context, weight

        def __iter__(self):
            for x in self.it:
                spend(self.context, LOOP_STEP_COST + self.weight, "a {% for %} loop")
                yield x

        def __len__(self):  # loop.length and friends
            return len(self.it)

    @pass_context
    def budgeted_loop(context, iterable, weight=0):
        if isinstance(iterable, (str, list, tuple, dict, range)) or hasattr(iterable, "__iter__"):
            return _Loop(iterable, context, int(weight))
        return iterable

    class _Generator(CodeGenerator):
        def visit_Compare(self, node, frame):
            """``a < b in c`` as ``environment.compare(context, a, "lt", b, "in", c)``: counted."""
            self.write("environment.compare(context, ")
            self.visit(node.expr, frame)
            for op in node.ops:
                self.write(f", {op.op!r}, ")
                self.visit(op.expr, frame)
            self.write(")")

        def visit_Getitem(self, node, frame):
            """A slice ``a[i:j:k]`` (jinja2 writes it as Python's own) as
            ``environment.sliced(context, a, slice(i, j, k))``: its items counted before the copy."""
            if not isinstance(node.arg, nodes.Slice):
                return super().visit_Getitem(node, frame)
            self.write("environment.sliced(context, ")
            self.visit(node.node, frame)
            self.write(", slice(")
            for i, part in enumerate((node.arg.start, node.arg.stop, node.arg.step)):
                self.write(", " if i else "")
                if part is None:
                    self.write("None")
                else:
                    self.visit(part, frame)
            self.write("))")

        def visit_Concat(self, node, frame):
            self.write("environment.concat_parts(context, (")
            for arg in node.nodes:
                self.visit(arg, frame)
                self.write(", ")
            self.write("))")

    def count_loops(tree) -> None:
        """Every ``{% for %}`` of ``tree`` iterates over ``budgeted_loop(iterable, weight)``."""
        for node in tree.find_all(nodes.For):
            it = node.iter
            if isinstance(it, nodes.Call) and isinstance(it.node, nodes.Name) and it.node.name == _LOOP_NAME:
                continue
            weight = sum(len(d.data) for d in node.find_all(nodes.TemplateData))
            node.iter = nodes.Call(nodes.Name(_LOOP_NAME, "load", lineno=node.lineno), [it, nodes.Const(weight)], [], None, None,
                                   lineno=node.lineno)

    def bounded_sum(context, iterable, attribute=None, start=0):
        """jinja2's ``sum`` filter added up one item at a time through :meth:`call_binop`, so each
        partial result is counted before it is built: a sum of lists (``[[1]] * n | sum(start=[])``)
        copies its partial list n times, quadratic time from a value within the limit (~1,000 s
        for n = 10**6) that the value's own size never shows. Texts are refused as Python's
        ``sum`` refuses them."""
        if isinstance(start, (str, bytes)):
            raise TypeError("sum() can't sum strings [use ''.join(seq) instead]")
        if attribute is not None:
            iterable = map(make_attrgetter(context.environment, attribute), iterable)
        total = start
        for item in iterable:
            total = context.environment.call_binop(context, "+", total, item)
        return total

    def bound_filter(name: str, fn: Callable) -> Callable:
        kind = _PassArg.from_obj(fn)

        @pass_context
        def wrapper(context, value, *args, **kwargs):
            if name == "sum" and fn is JINJA_FILTERS["sum"]:
                return bounded_sum(context, value, *args, **kwargs)
            if name == "join":  # counted item by item before it is joined (a generator too)
                sep = args[0] if args else kwargs.get("d", "")
                value = bounded_items(context, value, sep, "the filter 'join'")
                est = _joined_bound(sep, value)
            else:
                est = _estimate(name, value, args, kwargs)
            if est is not None:
                spend(context, est, f"the filter {quoted(name)}")
            elif name not in _CONSTANT_TIME_FILTERS:  # reads its whole input (max, min, wordcount, …)
                spend(context, sized(context, value), f"the filter {quoted(name)}", builds=False)
            first = {None: (), _PassArg.context: (context,), _PassArg.eval_context: (context.eval_ctx,),
                     _PassArg.environment: (context.environment,)}[kind]
            out = fn(*first, value, *args, **kwargs)
            if est is None and isinstance(out, _BUILT):
                spend(context, sized(context, out), f"the filter {quoted(name)}")
            elif name in _RECOUNTED and isinstance(out, str) and len(out) > est + _RECOUNT_SLACK:
                spend(context, len(out), f"the filter {quoted(name)}")
            return out

        wrapper.__name__ = getattr(fn, "__name__", name)
        return wrapper

    def bound_test(name: str, fn: Callable) -> Callable:
        """jinja2's test ``name`` with the values it reads counted first (``in``: the container;
        a comparison: the smaller side); other tests look at a value's type only."""
        kind = _PassArg.from_obj(fn)

        @pass_context
        def wrapper(context, value, *args, **kwargs):
            other = args[0] if args else next(iter(kwargs.values()), None)
            if name == "in":
                spend(context, sized(context, other), f"the test {quoted(name)}", builds=False)
            elif name in _COMPARING_TESTS:
                spend(context, min(sized(context, value), sized(context, other)), f"the test {quoted(name)}", builds=False)
            first = {None: (), _PassArg.context: (context,), _PassArg.eval_context: (context.eval_ctx,),
                     _PassArg.environment: (context.environment,)}[kind]
            return fn(*first, value, *args, **kwargs)

        wrapper.__name__ = getattr(fn, "__name__", name)
        return wrapper

    class BoundedSandbox(base):
        intercepted_binops = frozenset(["+", "-", "*", "/", "//", "%", "**"])
        code_generator_class = _Generator

        def __init__(self, *args, finalize: Optional[Callable] = None, **kwargs):
            user_finalize = finalize

            @pass_context
            def counted(context, value):
                spend(context, sized(context, value), "a printed value")
                return user_finalize(value) if user_finalize is not None else value

            super().__init__(*args, finalize=counted, **kwargs)
            self.filters = {n: bound_filter(n, f) for n, f in self.filters.items()}
            self.tests = {n: bound_test(n, f) for n, f in self.tests.items()}
            self.globals.pop("lipsum", None)  # text of any length from one number, and of no use to a request
            self.globals[_LOOP_NAME] = budgeted_loop

        def _generate(self, source, name, filename, defer_init=False):
            count_loops(source)
            return super()._generate(source, name, filename, defer_init)

        def wrap_str_format(self, value):
            """jinja2's wrapper of a text's ``format`` / ``format_map``, marked so that :meth:`call`
            formats through :func:`bounded_format` (with the render's limits); called without
            :meth:`call`, it is bounded by :data:`MAX_TEMPLATE_VALUE`."""
            wrapped = super().wrap_str_format(value)
            if wrapped is None:
                return None
            fmt, is_map = value.__self__, value.__name__ == "format_map"

            def bounded(*args, **kwargs):
                return bounded_format(None, fmt, args, kwargs, is_map)

            bounded.__wrapped__, bounded.__name__ = value, value.__name__
            setattr(bounded, _FORMAT_ATTR, (fmt, is_map))
            return bounded

        def add_filter(self, name: str, fn: Callable) -> None:
            """Register ``fn`` as the filter ``name``, under the same limits as jinja2's own."""
            self.filters[name] = bound_filter(name, fn)

        def compare(self, context, left, *ops_and_values):
            """A chain of comparisons as Python runs it (stops at the first false one), the values
            each reads counted first: ``in`` / ``not in`` the container, the others the smaller side
            (two long lists compare item by item)."""
            result = True
            for op, right in zip(ops_and_values[::2], ops_and_values[1::2]):
                cost = sized(context, right) if op in ("in", "notin") \
                    else min(sized(context, left), sized(context, right))
                spend(context, cost, f"the comparison {quoted(op)}", builds=False)
                result = _COMPARE[op](left, right)
                if not result:
                    return result
                left = right
            return result

        def sliced(self, context, value, index: slice):
            """``value[index]``, its items counted before the copy is made."""
            try:
                n = len(range(*index.indices(len(value))))
            except TypeError:  # not a sequence, or an index that is not a number: Python's own error
                return value[index]
            spend(context, n, "a slice", builds=False)  # a copy of n characters or item references
            return value[index]

        def concat_parts(self, context, parts):
            spend(context, sum(sized(context, p) for p in parts), "'~'")
            return (markup_join if context.eval_ctx.autoescape else str_join)(parts)

        def call_binop(self, context, operator, left, right):
            ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (left, right))
            if operator == "**" and ints:
                if right > 0 and abs(left) > 1 and right * math.log10(abs(left)) > MAX_INT_DIGITS:
                    raise TemplateLimitError(f"'**' would build an integer over the template limit ({MAX_INT_DIGITS:,} "
                                             "digits)")
            elif operator == "*" and not ints:
                for seq, n in ((left, right), (right, left)):
                    if isinstance(n, int) and not isinstance(n, bool) and not isinstance(seq, (int, float)):
                        spend(context, sized(context, seq) * max(n, 0) if n <= MAX_TEMPLATE_VALUE
                              else MAX_TEMPLATE_WORK + 1, "'*'")
            elif operator == "+" and not ints and not (isinstance(left, (int, float)) and isinstance(right, (int, float))):
                spend(context, sized(context, left) + sized(context, right), "'+'")
            elif operator == "%" and isinstance(left, (str, bytes)):
                spend(context, _printf_bound(left, right), "'%'")
            elif operator == "*" and ints and max(abs(left), abs(right)) > 1 \
                    and math.log10(max(abs(left), 1)) + math.log10(max(abs(right), 1)) > MAX_INT_DIGITS:
                raise TemplateLimitError(f"'*' would build an integer over the template limit ({MAX_INT_DIGITS:,} digits)")
            return super().call_binop(context, operator, left, right)

        def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 - jinja2's own signature
            if __obj is budgeted_loop:
                return super().call(__context, __obj, *args, **kwargs)
            target = getattr(__obj, "__wrapped__", __obj)
            owner, name = getattr(target, "__self__", None), getattr(target, "__name__", "")
            if isinstance(__obj, LoopContext) and args:  # loop(children) of a recursive loop: counted too
                args = (_Loop(args[0], __context, 0), *args[1:])
            fmt = getattr(__obj, _FORMAT_ATTR, None)
            if fmt is not None:  # str.format / format_map, as wrap_str_format gave it
                return bounded_format(__context, fmt[0], args, kwargs, fmt[1])
            if isinstance(owner, (str, bytes)) and name == "join" and args:
                args = (bounded_items(__context, args[0], owner, "calling join"), *args[1:])
                est = _joined_bound(owner, args[0])
            else:
                est = _estimate(name, owner, args, kwargs) if isinstance(owner, (str, bytes)) else None
            if est is None and name not in _CONSTANT_TIME_METHODS and (
                    isinstance(owner, (str, bytes, list, tuple, dict, set, frozenset)) or isinstance(owner, LoopContext)):
                # reads its owner (count, index, find, …) or, for loop.changed / loop.cycle, its arguments
                read = sum(sized(__context, a) for a in args) if isinstance(owner, LoopContext) else sized(__context, owner)
                spend(__context, read, f"calling {name}", builds=False)
            if est is None and any(abs(i) > MAX_TEMPLATE_VALUE for i in _ints(list(args) + list(kwargs.values()))) \
                    and not isinstance(__obj, LoopContext) and __obj is not safe_range:
                est = MAX_TEMPLATE_WORK + 1  # a size, count or width over the limit (range aside: bounded by jinja2)
            label = "range" if name == "safe_range" else (name or type(__obj).__name__)
            if est is not None:
                spend(__context, est, f"calling {label}")
            out = super().call(__context, __obj, *args, **kwargs)
            if est is None and isinstance(out, _BUILT):
                spend(__context, sized(__context, out), f"calling {label}")
            return out

    return BoundedSandbox
