"""A constructor's check of its arguments, and the words it says: every value given for a parameter must fit the
parameter's annotation (:func:`fits`), else one ``ValueError`` naming the owner, the parameter and what it expects,
never the value (it may be a secret given in the wrong place). The one mechanism behind the judge's and guardian's
mapping forms (:mod:`fair_forge_beam.components.judge.arguments`) and every public constructor
(:func:`checks_arguments`, fix39a: ``VaderSentimentAnalyzer(threshold="sk-…")`` and forty other public classes raised
Python's or a library's own error quoting the value, or took it).

What a parameter expects is read from the function's own signature (its annotations), so a new argument is checked
without a table to keep.
"""
from __future__ import annotations

import collections.abc as abc
import functools
import inspect
import os
import re
import types
import typing
from typing import Any, Callable, Mapping, Optional

from fair_forge_beam.blank import is_blank

__all__ = ["keyword_annotations", "expects", "fits", "check_values", "check_arguments", "checks_arguments",
           "data_annotations", "is_data_annotation", "declared_bounds", "masked_key", "a_type", "KEY_LIMIT"]


_UNIONS = (typing.Union, types.UnionType)


_MAPPINGS = (dict, abc.Mapping, abc.MutableMapping)
_SEQUENCES = (list, abc.Sequence, abc.MutableSequence)
_SETS = (set, frozenset, abc.Set, abc.MutableSet)


def keyword_annotations(*functions: Callable, leave_out: tuple = ()) -> dict:
    """``{keyword: annotation}`` of the named parameters of ``functions`` (the first that names one
    wins; ``*args`` / ``**kwargs``, ``self`` and ``leave_out`` left out; no annotation: ``Any``)."""
    takes: dict = {}
    for fn in functions:
        hints = _hints(fn)
        for name, p in inspect.signature(fn).parameters.items():
            if name == "self" or name in leave_out or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            takes.setdefault(name, hints.get(name, Any))
    return takes


def _hints(fn: Callable) -> dict:
    try:
        return typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: taken as Any
        return {}


def fits(value: Any, annotation: Any) -> bool:
    """Whether ``value`` is what ``annotation`` declares, by pydantic's strict validation (no
    conversion: a bool is not a number, ``"5"`` not an int, a float not an int; a float must be
    finite; ``Optional`` / ``Union`` / ``Mapping[K, V]`` followed; ``Any`` takes anything). An
    annotation pydantic cannot build a validator for takes anything, as the class will judge it."""
    import pydantic

    check = _validator(annotation)
    if check is None:
        return True
    try:
        check.validate_python(value, strict=True)
    except pydantic.ValidationError:
        return False
    return True


def _validator(annotation: Any):
    """pydantic's ``TypeAdapter`` of ``annotation`` (NaN and infinities refused), or None; built once per
    annotation (a constructor's check runs on every construction)."""
    try:
        return _cached_validator(annotation)
    except TypeError:  # an annotation that is not hashable
        return _built_validator(annotation)


@functools.lru_cache(maxsize=1024)
def _cached_validator(annotation: Any):
    return _built_validator(annotation)


def _built_validator(annotation: Any):
    import pydantic

    try:
        return pydantic.TypeAdapter(annotation, config=pydantic.ConfigDict(allow_inf_nan=False,
                                                                           arbitrary_types_allowed=True))
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError):
        return None


def expects(annotation: Any) -> str:
    """What ``annotation`` asks for, in words: ``a number``, ``a whole number or None``, ..."""
    if annotation is type(None) or annotation is None:
        return "None"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return expects(args[0])
    if origin in _UNIONS:
        inner = {typing.get_args(a)[0] if typing.get_origin(a) in _SEQUENCES + _SETS and len(typing.get_args(a)) == 1
                 else None for a in args if a is not type(None)}
        if len(inner) == 1 and None not in inner and len(args) - (type(None) in args) == 2:  # a list, tuple or set
            return f"a sequence or a set of {_plural(inner.pop())}" + (" or None" if type(None) in args else "")
        words = [expects(a) for a in args if a is not type(None)]
        return " or ".join(dict.fromkeys(words + (["None"] if type(None) in args else [])))
    if origin in _MAPPINGS:
        if len(args) == 2 and args[1] is not Any:
            return f"a mapping of {_plural(args[0])} to {_plural(args[1])}"
        return "a mapping"
    if origin in _SEQUENCES + _SETS and len(args) == 1:
        return f"a {'sequence' if origin in _SEQUENCES else 'set'} of {_plural(args[0])}"
    if origin is type or annotation is type:
        return "a class"
    return {bool: "true or false", int: "a whole number", float: "a finite number", str: "a string"}.get(
        annotation, f"a {getattr(annotation, '__name__', 'value of its type')}")


def _plural(annotation: Any) -> str:
    return {str: "strings", int: "whole numbers", float: "numbers", bool: "true or false"}.get(annotation, "values")


#: most characters of a key a message shows (after masking: :func:`masked_key`)
KEY_LIMIT = 40


def masked_key(key: Any) -> str:
    """A mapping's key as a message shows it: a text through the package's masking of what is shown to a
    person (:func:`fair_forge_beam.urls.mask_line`: secret-shaped strings and URL credentials become
    ``***``), then cut to :data:`KEY_LIMIT` characters (:func:`~fair_forge_beam.quoting.quoted`: a key
    may be a secret put where a key goes, trial38b B13); any other key by its type only. Never raises."""
    from fair_forge_beam.quoting import quoted
    from fair_forge_beam.urls import mask_line

    if not isinstance(key, str):
        return f"a key of type {type(key).__name__}"
    return quoted(mask_line(key), KEY_LIMIT)


def check_arguments(owner: str, function: Callable, given: Mapping[str, Any]) -> None:
    """A constructor's check of its own arguments, called first in its body as
    ``check_arguments("LlamaGuard", LLMGuardian.__init__, locals())``: every value of ``given`` (its
    ``locals()``: the parameters) that is not the parameter's default object must fit the parameter's
    annotation (:func:`check_values`), so that a keyword argument (``LlamaGuard("m", url,
    temperature="sk-…")``) is one ``ValueError`` naming the key and what it expects, as the mapping
    forms are — never Python's own ``could not convert string to float: 'sk-…'`` (trial38b B2).
    ``self``, ``*args`` and ``**kwargs`` are not checked (the class they go to checks them)."""
    takes = _annotations(function)
    defaults = _defaults(function)
    values = {k: v for k, v in given.items() if k in takes and not (k in defaults and v is defaults[k])}
    check_values(owner, values, takes)


def checks_arguments(init: Callable) -> Callable:
    """Decorator of a public class's ``__init__``: every argument given for a parameter declared as data
    (:func:`is_data_annotation`: numbers, texts, flags, paths, choices and their containers) must fit its
    annotation (:func:`fits`), else one ``ValueError`` (``TypeError`` for a component) naming the class, the
    parameter and what it expects, never the value (fix39a: ``VaderSentimentAnalyzer(threshold="sk-…")`` and forty
    other constructors raised Python's or a library's own error quoting it, or took it). When every value fits, the
    constructor runs as it is. **Decision** (trial39b B5: a container, a key, a path or an object given let the
    constructor's refusal quote it): only a wrong number, flag or None lets the constructor's own refusal speak, when
    it names that parameter and shows no text given (``k must be a positive integer``); any other wrong value (a text,
    bytes, a container at any depth, an object) is this check's line before the constructor sees it. A parameter
    declared as a component (an embedder, a mode, a handler, a callable) is checked when given a text, bytes, a path or
    a number (``statistical_mode="sk-…"``); any other object is the class's to judge (duck-typed stand-ins are
    welcome), but when the class refuses one that is not of the declared type, the refusal is this check's line (its
    ``repr`` may hold a secret, or raise). A
    path-like value is checked as its text (a refusal quoting one given where a text is declared is this check's
    line too) and a numpy scalar as the Python number it holds."""
    known: list = []  # its _Plan: read at the first call, once the module is whole

    @functools.wraps(init)
    def checked(self, *args, **kwargs):
        if not known:
            known.append(_Plan(init))
        plan = known[0]
        if not plan.checks and not plan.bounds:
            return init(self, *args, **kwargs)
        bound = plan.bind(self, args, kwargs)
        data, parts, defaults, takes = plan.data, plan.parts, plan.defaults, plan.takes
        given = {}
        for k, quick, is_data in plan.checks:
            if k not in bound:
                continue
            v = bound[k]
            if type(v) in quick or k in defaults and v is defaults[k]:
                continue  # of a type its annotation takes whatever it holds (a str where a str is declared), or the default
            plain = _plain_value(v)
            if is_data or isinstance(plain, _SCALARS):  # a path-like is its text, a numpy scalar its number
                given[k] = plain
        wrong = next((k for k, v in given.items() if not fits(v, takes[k])), None)
        if wrong is None and plan.bounds:
            out_of_bounds = plan.bounds_problem(type(self).__name__, bound)
            if out_of_bounds is not None:  # a value the command line refuses (trial47 B3)
                name, refusal = out_of_bounds
                if not isinstance(_plain_value(bound[name]), _SPEAKS):
                    raise ValueError(refusal)  # a text not among the choices: never shown, the constructor never sees it
                _own_refusal_or(init, self, args, kwargs, name, bound, ValueError(refusal))
        if wrong is None:  # every value of its declared type and in its declared bounds: the constructor as it is
            try:
                return init(self, *args, **kwargs)
            except Exception:
                # a component given as an object of another class (a duck-typed stand-in) that the constructor refused
                # showing it (its repr may hold a secret) or with its repr raising: this check's line
                stray = next((k for k, v in bound.items() if k in parts and k not in given and k != "self"
                              and not isinstance(v, abc.Mapping)  # a mapping form: its own check's words
                              and not (k in defaults and v is defaults[k]) and not fits(v, parts[k])
                              and _refusal_shows(v)), None)
                if stray is not None:
                    raise TypeError(_refusal(type(self).__name__, stray, parts[stray], bound[stray])) from None
                # a path given where a text is declared, taken as its text: a refusal quoting it is this check's line
                # (``level must be one of (…), got PosixPath('/tmp/…')``); a file's own error (OSError) speaks
                path = next((k for k, v in bound.items() if k in data and isinstance(v, os.PathLike)
                             and not isinstance(v, str) and _refusal_shows(v, refusals_only=True)), None)
                if path is None:
                    raise
                raise ValueError(_refusal(type(self).__name__, path, data[path], bound[path])) from None
        value = given[wrong]
        # a component's wrong value is a TypeError (Python's word for an object of the wrong kind), data's a ValueError
        error = ValueError if wrong in data else TypeError
        refusal = _refusal(type(self).__name__, wrong, takes[wrong], value)
        if not isinstance(value, _SPEAKS):
            raise error(refusal)  # a text, a path, a container, an object: the constructor never sees it
        # a number or a flag of the wrong type: the constructor's own refusal speaks when it names that parameter and
        # shows no text given (``k must be a positive integer``); anything else (another error, or taking it) is this
        # check's one line
        _own_refusal_or(init, self, args, kwargs, wrong, bound, error(refusal))

    checked.__checks_arguments__ = True
    return checked


def _own_refusal_or(init: Callable, obj: Any, args: tuple, kwargs: dict, name: str, bound: Mapping, refusal: Exception):
    """Run ``init`` with a number or a flag that :func:`checks_arguments` refuses for parameter ``name``: the
    constructor's own refusal is raised as it is when it names ``name`` and shows no text given (``k must be a positive
    integer (the number of attempts …)``); anything else (another error, or taking the value) raises ``refusal``."""
    try:
        init(obj, *args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - judged below; re-raised as it is when it may speak
        try:
            said = str(exc)
        except Exception:  # noqa: BLE001 - a message that cannot be read: this check's line
            said = ""
        if re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", said) and not _shows(said, bound.values()):
            raise
    raise refusal from None


class _Plan:
    """What :func:`checks_arguments` reads of a constructor once: its parameters declared as data and as components
    (their annotations as the check reads them), their defaults, and for each the types a value of which fits at a
    glance (``str`` where ``str`` or ``Optional[str]`` is declared: no validator is called). Binding a call to the
    parameters by position and name is done here (a signature's ``bind_partial`` cost 10 µs a call, trial39b B6: the
    check of ``Question``, built per request, cost 65 µs against 1.9 µs); an unusual call (too many positional
    arguments, a name given twice, ``*args``) is bound by the signature."""

    __slots__ = ("signature", "data", "parts", "takes", "defaults", "checks", "positional", "simple", "bounds")

    def __init__(self, init: Callable):
        self.signature = inspect.signature(init)
        self.data = data_annotations(init)
        self.parts = {k: _lenient(a) for k, a in keyword_annotations(init).items() if a is not Any and k not in self.data}
        self.takes = {**self.data, **self.parts}
        self.defaults = _defaults(init)
        self.checks = tuple((k, _glance_types(a), k in self.data) for k, a in self.takes.items())
        params = list(self.signature.parameters.values())
        self.positional = tuple(p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD)
        self.simple = not any(p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL) for p in params)
        self.bounds = declared_bounds(init)

    def bounds_problem(self, owner: str, bound: Mapping[str, Any]) -> Optional[tuple]:
        """``(parameter, line)`` of the first value given (not the default) for a parameter that an option's range or
        choices bound (:func:`declared_bounds`) that the command line refuses, the line naming the class, the
        parameter, the range or choices and the option (trial47 B3); ``None``: every such value is taken."""
        from fair_forge_beam.options import bound_problem

        for k, o in self.bounds.items():
            if k not in bound or k in self.defaults and bound[k] is self.defaults[k]:
                continue
            problem = bound_problem(o, _plain_value(bound[k]))
            if problem:
                return k, f"{owner}: {k} {problem}"
        return None

    def bind(self, obj: Any, args: tuple, kwargs: dict) -> dict:
        """``{parameter: value}`` of a call (an unknown keyword under its own name; ``{}`` when the call is wrong:
        Python's own error of the call follows)."""
        if self.simple and len(args) < len(self.positional):
            bound = dict(zip(self.positional, (obj,) + args))
            for k, v in kwargs.items():
                if k in bound:
                    break  # a name given twice: Python's own error
                bound[k] = v
            else:
                return bound
        try:
            return self.signature.bind_partial(obj, *args, **kwargs).arguments
        except TypeError:  # Python's own error of the call (an unknown keyword, too many arguments) follows
            return {}


def declared_bounds(init: Callable) -> dict:
    """``{parameter: option}`` of the parameters of ``init`` (a class's ``__init__``) that an option of the command
    line bounds (:func:`fair_forge_beam.options.python_bounds`: the option's range or choices, declared once), so
    that the Python API refuses what the command line refuses (trial47 B3: ``BayesianMode(mc_samples=50_000_000)``,
    ``ci_level=1e-300`` and ``rng_seed=2**64`` were taken; ``rng_seed=-1`` was numpy's bare "expected non-negative
    integer")."""
    from fair_forge_beam.options import python_bounds

    owner = init.__qualname__.rpartition(".")[0]
    params = inspect.signature(init).parameters
    return {k: o for k, o in python_bounds(f"{init.__module__}:{owner}").items() if k in params}


def _glance_types(annotation: Any) -> frozenset:
    """The types of which any value fits ``annotation`` (:func:`fits`): ``str``, ``int`` and ``bool`` where declared
    (alone, in an ``Optional`` or a ``Union``), ``NoneType`` where None is taken; a float is left to the validator
    (it must be finite)."""
    args = typing.get_args(annotation) if typing.get_origin(annotation) in _UNIONS else (annotation,)
    return frozenset(a for a in args if a in (str, int, bool, type(None)))


#: a text given that a message holds this many of its first characters of is shown there (:func:`_shows`)
SHOWN_PREFIX = 8

#: the wrong values whose constructor's own refusal may speak (:func:`checks_arguments`): a number, a flag, None
_SPEAKS = (bool, int, float, type(None))


def _refusal_shows(value: Any, refusals_only: bool = False) -> bool:
    """Whether the exception being handled may show ``value``: a message that cannot be read, or that holds a text
    of ``value`` (:func:`_shows`) or the start of its ``str`` / ``repr`` (or these raise); any exception other than a
    refusal (``ValueError`` / ``TypeError``) too, unless ``refusals_only`` (then it speaks: a file's own error)."""
    import sys

    exc = sys.exc_info()[1]
    if not isinstance(exc, (ValueError, TypeError)):
        return not refusals_only
    try:
        said = str(exc)
        if _shows(said, [value], keys=False):  # a mapping form's keys are shown masked (:func:`masked_key`)
            return True
        return any(len(t) >= SHOWN_PREFIX and t[:SHOWN_PREFIX] in said for t in (str(value), repr(value)))
    except Exception:  # noqa: BLE001 - a message or a value that cannot be read: shown for all we know
        return True


def _refusal(owner: str, name: str, annotation: Any, value: Any) -> str:
    """The check's line: the class, the parameter and what it expects, the value's type only; in a container that is
    what the parameter takes, the first item that is not, by its index (by its key in a mapping, masked) and what it
    expects (trial47 B5: ``slices=["overall", 5]`` said "'slices' expects a Sequence or a Set, got a list")."""
    item = _wrong_item(value, annotation)
    if item is not None:
        where, inner, wrong = item
        return (f"{owner}: {masked_key(name)}{where} expects {expects(inner)}, got {a_type(wrong)} (its value is not "
                f"shown: it may be a secret); {masked_key(name)} expects {expects(annotation)}")
    return (f"{owner}: {masked_key(name)} expects {expects(annotation)}, got {a_type(value)} "
            f"(its value is not shown: it may be a secret)")


def _wrong_item(value: Any, annotation: Any, depth: int = 0) -> Optional[tuple]:
    """``(where, annotation, item)`` of the first item of ``value`` that does not fit what ``annotation`` declares of
    its items (``"[1]"``, a whole number; in a mapping ``" (a key)"`` or ``" (a value)"``, never the key), following
    nested containers (``"[0][2]"``); ``None`` when ``value`` is not a
    container ``annotation`` takes (its type is the fault) or every item fits."""
    if depth > 20 or isinstance(value, (str, bytes, bytearray)):
        return None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _wrong_item(value, args[0], depth)
    if origin in _UNIONS:
        return next((w for a in args if (w := _wrong_item(value, a, depth)) is not None), None)
    if origin in _MAPPINGS and len(args) == 2 and isinstance(value, abc.Mapping):
        # a mapping's key is not shown, not even masked: a secret may be put where a key goes
        items = [(" (a key)", args[0], k, "key") for k in value] + [(" (a value)", args[1], v, "") for v in value.values()]
    elif (origin in _SEQUENCES and len(args) == 1 or origin is tuple and len(args) == 2 and args[1] is Ellipsis) \
            and isinstance(value, (list, tuple)):
        items = [(f"[{i}]", args[0], v, "") for i, v in enumerate(value)]
    elif origin in _SETS and len(args) == 1 and isinstance(value, (set, frozenset)):
        items = [(" (an item)", args[0], v, "") for v in value]
    else:
        return None
    for where, inner, v, key in items:
        if not fits(_plain_value(v), inner):
            deeper = None if key else _wrong_item(v, inner, depth + 1)
            if deeper is not None:
                return where + deeper[0], deeper[1], deeper[2]
            return where, inner, v
    return None


def _shows(message: str, values, depth: int = 0, keys: bool = True) -> bool:
    """Whether ``message`` shows a text among ``values`` (its first :data:`SHOWN_PREFIX` characters; the keys and
    values of mappings (the keys only if ``keys``) and the items of sequences and sets, all the way down; bytes and
    paths as their text)."""
    if depth > 20:
        return False
    for t in values:
        if isinstance(t, abc.Mapping):
            if _shows(message, (list(t.keys()) if keys else []) + list(t.values()), depth + 1, keys):
                return True
            continue
        if isinstance(t, (list, tuple, set, frozenset)):
            if _shows(message, t, depth + 1, keys):
                return True
            continue
        if isinstance(t, (bytes, bytearray)):
            t = t.decode("utf-8", "replace")
        elif isinstance(t, os.PathLike):
            t = str(t)
        if isinstance(t, str) and len(t) >= SHOWN_PREFIX and t[:SHOWN_PREFIX] in message:
            return True
    return False


def _plain_value(value: Any) -> Any:
    """``value`` as :func:`checks_arguments` checks it: a path-like as its text, a numpy scalar as its Python value."""

    if isinstance(value, os.PathLike):
        try:
            return os.fspath(value)
        except TypeError:
            return value
    if type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        return value.item()
    return value


#: values that are data wherever they are given: checked against a component's annotation too (:func:`checks_arguments`)
_SCALARS = (str, bytes, bytearray, bool, int, float)

#: the annotations of data (what a person types in a config or a call): checked by :func:`checks_arguments`
_DATA = (bool, int, float, str, bytes, type(None))


def is_data_annotation(annotation: Any) -> bool:
    """Whether ``annotation`` declares data — ``bool``, ``int``, ``float``, ``str``, a ``Literal``, an ``Enum``,
    a path, or an ``Optional`` / ``Union`` / sequence / set / mapping / ``Annotated`` of only these — rather than a
    component (a class of the package, a callable, ``Any``)."""
    import enum
    import pathlib

    if annotation in _DATA or annotation is None:
        return True
    if isinstance(annotation, type):  # a bare container (``dict``, ``list``) holds data too
        return issubclass(annotation, (enum.Enum, pathlib.PurePath, list, tuple, set, frozenset, dict)) or annotation in (
            abc.Sequence, abc.Mapping, abc.MutableMapping, abc.Set, abc.Collection, abc.Iterable)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return True
    if origin is typing.Annotated:
        return is_data_annotation(args[0])
    if origin in _UNIONS or origin in (list, tuple, set, frozenset, dict, abc.Sequence, abc.Set, abc.Mapping,
                                       abc.MutableMapping, abc.Collection, abc.Iterable):
        return bool(args) and all(a is Ellipsis or is_data_annotation(a) for a in args)
    return False


def data_annotations(function: Callable) -> dict:
    """``{parameter: annotation}`` of the parameters of ``function`` declared as data (:func:`is_data_annotation`),
    each as :func:`checks_arguments` checks it (:func:`_lenient`)."""
    return {k: _lenient(a) for k, a in keyword_annotations(function).items() if is_data_annotation(a)}


def _lenient(annotation: Any) -> Any:
    """``annotation`` as a constructor's check reads it: a path also as its text (``str`` where a ``Path`` is
    declared), a ``list[X]`` / ``Sequence[X]`` / ``tuple[X, ...]`` as any sequence or set of X."""
    import pathlib

    if isinstance(annotation, type) and issubclass(annotation, pathlib.PurePath):
        return typing.Union[str, annotation]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _lenient(args[0])
    if origin in _UNIONS:
        return typing.Union[tuple(_lenient(a) for a in args)]
    if origin in (list, abc.Sequence) and len(args) == 1 or origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        inner = _lenient(args[0])
        return typing.Union[abc.Sequence[inner], abc.Set[inner]]  # a tuple or a set where a list is declared
    return annotation


def _annotations(function: Callable) -> dict:
    try:
        return _ANNOTATIONS[function]
    except KeyError:
        return _ANNOTATIONS.setdefault(function, keyword_annotations(function))
    except TypeError:  # not hashable: not kept
        return keyword_annotations(function)


def _defaults(function: Callable) -> dict:
    return {name: p.default for name, p in inspect.signature(function).parameters.items() if p.default is not p.empty}


_ANNOTATIONS: dict = {}


def a_type(value: Any) -> str:
    """``"a str"``, ``"an int"``, ``"a blank str"``: what a message says of a value it does not show."""
    name = type(value).__name__
    blank = "blank " if isinstance(value, str) and is_blank(value) else ""
    return f"{'an' if (blank or name)[:1] in 'aeiou' else 'a'} {blank}{name}"


def check_values(what: str, kwargs: Mapping, takes: Mapping[str, Any]) -> None:
    """Refuse a value of ``kwargs`` that does not fit its key's annotation in ``takes`` (:func:`fits`).

    Raises:
        ValueError: one line naming the key and what it expects (:func:`expects`), never the value.
    """
    for key, value in kwargs.items():
        if key in takes and not fits(value, takes[key]):
            raise ValueError(f"{what}: {masked_key(key)} expects {expects(takes[key])}, got {a_type(value)} "
                             f"(its value is not shown: it may be a secret)")
