"""The mapping form of an LLM component's arguments — a judged metric's ``judge={...}``
(:func:`fair_forge_beam.metrics.judged.build_judge`) and a guardian's ``guardian={...}``
(:func:`fair_forge_beam.components.guardian.guardian_from_mapping`): every key and every value is
checked against what the class takes before the class sees it, so that a bad one is one
``ValueError`` naming the key and what it expects, never the value. A value in the wrong key may be
a secret (fix38a: ``{"model": "m", "temperature": "sk-live-…"}`` raised Python's own ``could not
convert string to float: 'sk-live-…'``; ``{"max_tokens": "many"}`` an ``invalid literal for int()``).

What a key expects is read from the class's own signature (its annotations), so a new argument is
checked without a table to keep. The class's own range checks (``max_tokens must be >= 1``) still
speak, with any text given in the mapping cut out of their message (:func:`construct`).
"""
from __future__ import annotations

import collections.abc as abc
import inspect
import types
import typing
from typing import Any, Callable, Mapping

from fair_forge_beam.blank import is_blank

__all__ = ["SECRET_KEYS", "key_hint", "keyword_annotations", "expects", "fits", "check_keys", "check_values", "check_arguments",
           "masked_key", "a_type", "SAMPLING_PARAMETERS", "check_sampling",
           "inference_arguments", "construct"]

#: mapping keys that would hold a secret: refused, the key's value never shown (it is read from the
#: environment variable ``api_key_env`` names)
SECRET_KEYS = ("api_key", "apikey", "key", "token", "password", "secret", "authorization")
_UNIONS = (typing.Union, types.UnionType)
_MAPPINGS = (dict, abc.Mapping, abc.MutableMapping)


def key_hint(key: Any, valid) -> str:
    """``"; did you mean 'api_key_env'?"`` (:func:`~fair_forge_beam.quoting.did_you_mean`), and for a key
    that would hold a secret where the key comes from instead."""
    from fair_forge_beam.quoting import did_you_mean

    hint = did_you_mean(key, valid) if isinstance(key, str) else ""
    if isinstance(key, str) and key.lower().replace("-", "_") in SECRET_KEYS:
        hint += " (an API key is never given as a value: it is read from the environment variable api_key_env names)"
    return hint


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
    """pydantic's ``TypeAdapter`` of ``annotation`` (NaN and infinities refused), or None."""
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
        words = [expects(a) for a in args if a is not type(None)]
        return " or ".join(dict.fromkeys(words + (["None"] if type(None) in args else [])))
    if origin in _MAPPINGS:
        if len(args) == 2 and args[1] is not Any:
            return f"a mapping of {_plural(args[0])} to {_plural(args[1])}"
        return "a mapping"
    if origin is type or annotation is type:
        return "a class"
    return {bool: "true or false", int: "a whole number", float: "a finite number", str: "a string"}.get(
        annotation, f"a {getattr(annotation, '__name__', 'value of its type')}")


def _plural(annotation: Any) -> str:
    return {str: "strings", int: "whole numbers", float: "numbers", bool: "true or false"}.get(annotation, "values")


def check_keys(what: str, kwargs: Mapping, takes: Mapping[str, Any], owner: str, also: tuple = ()) -> None:
    """Refuse a key of ``kwargs`` that ``takes`` (``{keyword: annotation}``, :func:`keyword_annotations`)
    has not.

    Args:
        what: the mapping's name in messages (``"judge mapping"``).
        owner: the class's name in messages.
        also: keys the mapping form takes besides ``owner``'s (``kind``): named in the list, not checked.

    Raises:
        ValueError: one line naming the key and the nearest that ``owner`` takes (never its value).
    """
    for key in kwargs:
        if key not in takes:
            shown = masked_key(key)
            raise ValueError(f"{what}: {shown} is not an argument of {owner}{key_hint(key, takes)} (it takes "
                             f"{', '.join([*also, *sorted(takes)])})")


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


#: the OpenAI chat-completions sampling parameters whose type is known: a judge's ``params``, an assistant's
#: ``params`` and a metric's ``inference_args`` give each as declared here (any other key is the server's to judge)
SAMPLING_PARAMETERS: dict = {
    "temperature": float, "top_p": float, "max_tokens": int, "max_completion_tokens": int, "seed": int,
    "presence_penalty": float, "frequency_penalty": float, "logprobs": bool, "top_logprobs": int,
    "stop": typing.Union[str, list[str], None], "logit_bias": typing.Optional[typing.Mapping[str, float]],
    "extra_body": typing.Optional[typing.Mapping[str, Any]], "user": str, "reasoning_effort": str,
}


def check_sampling(what: str, params: Any) -> None:
    """Refuse sampling parameters ``params`` (None or a mapping) whose known keys (:data:`SAMPLING_PARAMETERS`)
    hold a value of the wrong type — ``{"temperature": "sk-…"}`` was sent, and the server's HTTP 400, which
    may echo the value, went into the dead letter (trial38b B12) — naming the key, never the value.

    Raises:
        ValueError: ``params`` is no mapping, or a key of it is not a text, or a value does not fit.
    """
    if params is None:
        return
    if not isinstance(params, abc.Mapping):
        raise ValueError(f"{what} must be a mapping of sampling parameters, got {a_type(params)}")
    for key in params:
        if not isinstance(key, str):
            raise ValueError(f"{what}: {masked_key(key)} is not a parameter name (a text)")
    check_values(what, params, SAMPLING_PARAMETERS)


def inference_arguments(inference_args: Any) -> Any:
    """A metric's ``inference_args`` as it keeps them: checked (:func:`check_sampling`), a dict, or None for none."""
    check_sampling("inference_args", inference_args)
    return dict(inference_args) if inference_args else None


def check_values(what: str, kwargs: Mapping, takes: Mapping[str, Any]) -> None:
    """Refuse a value of ``kwargs`` that does not fit its key's annotation in ``takes`` (:func:`fits`).

    Raises:
        ValueError: one line naming the key and what it expects (:func:`expects`), never the value.
    """
    for key, value in kwargs.items():
        if key in takes and not fits(value, takes[key]):
            raise ValueError(f"{what}: {masked_key(key)} expects {expects(takes[key])}, got {a_type(value)} "
                             f"(its value is not shown: it may be a secret)")


def construct(factory: Callable, *args: Any, **kwargs: Any) -> Any:
    """``factory(*args, **kwargs)``; a ``ValueError`` / ``TypeError`` it raises (its own range
    checks: ``max_tokens must be >= 1``) becomes one ``ValueError`` with the same message, but every
    text given as a value (of three characters or more and not blank, in mappings and lists too) cut
    out of it (and the whole message left out if a long text's start is still in it: a value shown
    cut, ``'sk-…' (90 characters)``), and no chained traceback that would show it."""
    try:
        return factory(*args, **kwargs)
    except (ValueError, TypeError) as exc:
        message = str(exc)
        texts = sorted({t for t in _texts([args, list(kwargs.values())]) if not is_blank(t)}, key=len, reverse=True)
        for text in texts:
            for form in (repr(text), repr(text)[1:-1], text):
                if len(form) >= 3:
                    message = message.replace(form, "<a value given>")
        if any(len(t) >= 8 and t[:8] in message for t in texts):
            message = f"{type(exc).__name__}, its message not shown: it quoted a value given"
        raise ValueError(message) from None


def _texts(value: Any, depth: int = 0):
    """Every string value in ``value`` (mappings' values, sequences' items), a few levels deep."""
    if isinstance(value, str):
        yield value
    elif depth < 6 and isinstance(value, abc.Mapping):
        for v in value.values():
            yield from _texts(v, depth + 1)
    elif depth < 6 and isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            yield from _texts(v, depth + 1)
