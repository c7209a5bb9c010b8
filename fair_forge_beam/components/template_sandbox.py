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
* every filter: wrapped when the environment is made (``center``, ``indent``, ``join``, ``sum``,
  ``replace``, ``format``, …);
* every ``{% for %}``: the code generator wraps the iterable, so each iteration is counted (with
  the literal text of the loop body it writes again);
* every printed ``{{ … }}``: the environment's ``finalize``.

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
from typing import Any, Callable, Optional

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
_LONG_NUMBER = re.compile(r"\d{7,}")


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
        for x in v:
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


def _ints(values) -> list:
    out = []
    for v in values:
        if isinstance(v, int) and not isinstance(v, bool):
            out.append(v)
        elif isinstance(v, (list, tuple)) and len(v) <= 64:
            out += [x for x in v if isinstance(x, int) and not isinstance(x, bool)]
    return out


def _format_widths_ok(fmt: Any) -> bool:
    """False when the format text ``fmt`` (``%`` or ``str.format``) asks for a width or precision
    over :data:`MAX_TEMPLATE_VALUE` (``"%400000000s"``, ``"{:>400000000}"``)."""
    return not isinstance(fmt, str) or all(int(m) <= MAX_TEMPLATE_VALUE for m in _LONG_NUMBER.findall(fmt))


def _estimate(name: str, value: Any, args: tuple, kwargs: dict) -> Optional[int]:
    """The size of what the string operation or filter ``name`` would build from ``value`` and
    its arguments, worked out before it runs; None when it cannot grow past its inputs."""
    ints = _ints(list(args) + list(kwargs.values()))
    if any(abs(i) > MAX_TEMPLATE_VALUE for i in ints):
        return MAX_TEMPLATE_WORK + 1  # a width, count or size argument over the limit
    text = value if isinstance(value, str) else None
    if name in ("center", "ljust", "rjust", "zfill"):
        return max([_size(value)] + ints)
    if name == "indent" and text is not None:
        width = args[0] if args else kwargs.get("width", 4)
        width = len(width) if isinstance(width, str) else int(width) if isinstance(width, int) else 4
        return len(text) + (text.count("\n") + 1) * max(width, 0)
    if name == "expandtabs" and text is not None:
        return len(text) + text.count("\t") * max(ints + [8])
    if name == "replace" and text is not None and len(args) >= 2 and isinstance(args[0], str):
        old, new = args[0], args[1]
        hits = text.count(old) if old else len(text) + 1
        return len(text) + hits * _size(new)
    if name in ("join", "sum", "format", "format_map", "list", "batch", "slice", "map", "string", "pprint", "tojson",
                "urlize", "xmlattr", "wordwrap", "striptags", "title", "capitalize", "upper", "lower", "trim", "safe",
                "forceescape", "escape", "e", "unique", "sort", "reverse", "dictsort", "items", "select", "reject",
                "selectattr", "rejectattr", "groupby"):
        return _size(value) + sum(_size(a) for a in args) + sum(_size(a) for a in kwargs.values()) \
            + (_size(value) if name in ("join", "sum") else 0)
    return None


def bounded_sandbox(base=None):
    """A subclass of jinja2's ``base`` sandbox (default ``ImmutableSandboxedEnvironment``) with
    the limits of this module. Its ``finalize`` (if given) runs after the count of the printed
    value. Every render starts a budget of its own (kept on the render's evaluation context), so
    one environment may render in many threads."""
    from jinja2 import nodes, pass_context
    from jinja2.compiler import CodeGenerator
    from jinja2.runtime import LoopContext, markup_join, str_join
    from jinja2.sandbox import ImmutableSandboxedEnvironment, safe_range
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

    def spend(context, amount: int, what: str) -> None:
        work = budget(context)
        if amount > work[1]:
            raise TemplateLimitError(f"{what} would build a value over the template limit ({work[1]:,} characters "
                                     "or items)")
        work[0] += max(int(amount), 0)
        if work[0] > work[2]:
            raise TemplateLimitError(f"{what}: the render went over the template limit of work ({work[2]:,} "
                                     "characters and items built or printed, loop steps)")

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

    def bound_filter(name: str, fn: Callable) -> Callable:
        kind = _PassArg.from_obj(fn)

        @pass_context
        def wrapper(context, value, *args, **kwargs):
            est = _estimate(name, value, args, kwargs)
            if name == "format" and not (_format_widths_ok(value)):
                est = MAX_TEMPLATE_WORK + 1
            if est is not None:
                spend(context, est, f"the filter {name!r}")
            first = {None: (), _PassArg.context: (context,), _PassArg.eval_context: (context.eval_ctx,),
                     _PassArg.environment: (context.environment,)}[kind]
            out = fn(*first, value, *args, **kwargs)
            if est is None and isinstance(out, (str, list, tuple, dict)):
                spend(context, sized(context, out), f"the filter {name!r}")
            return out

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
            self.globals.pop("lipsum", None)  # text of any length from one number, and of no use to a request
            self.globals[_LOOP_NAME] = budgeted_loop

        def _generate(self, source, name, filename, defer_init=False):
            count_loops(source)
            return super()._generate(source, name, filename, defer_init)

        def add_filter(self, name: str, fn: Callable) -> None:
            """Register ``fn`` as the filter ``name``, under the same limits as jinja2's own."""
            self.filters[name] = bound_filter(name, fn)

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
            elif operator == "%" and isinstance(left, str):
                if not _format_widths_ok(left) or any(abs(i) > MAX_TEMPLATE_VALUE for i in _ints([right])):
                    spend(context, MAX_TEMPLATE_WORK + 1, "'%'")
                spend(context, len(left) + sized(context, right), "'%'")
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
            est = _estimate(name, owner, args, kwargs) if isinstance(owner, str) else None
            if isinstance(owner, str) and name in ("format", "format_map") and not _format_widths_ok(owner):
                est = MAX_TEMPLATE_WORK + 1
            if est is None and any(abs(i) > MAX_TEMPLATE_VALUE for i in _ints(list(args) + list(kwargs.values()))) \
                    and not isinstance(__obj, LoopContext) and __obj is not safe_range:
                est = MAX_TEMPLATE_WORK + 1  # a size, count or width over the limit (range aside: bounded by jinja2)
            label = "range" if name == "safe_range" else (name or type(__obj).__name__)
            if est is not None:
                spend(__context, est, f"calling {label}")
            out = super().call(__context, __obj, *args, **kwargs)
            if est is None and isinstance(out, (str, list, tuple, dict)):
                spend(__context, sized(__context, out), f"calling {label}")
            return out

    return BoundedSandbox
