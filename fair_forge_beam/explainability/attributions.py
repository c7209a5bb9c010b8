"""Attribution explainer over ``interpreto`` and its Beam stage (spec §13).

``AttributionExplainer.explain(prompt, target)`` asks interpreto's method for the attributions
of every element (token / word / sentence) of ``prompt + target`` to the model's logits of the
``target`` tokens, reduces them to one score per element (sum over the target tokens, NaN entries as 0; the spec
leaves the reduction to interpreto's result shape), and min-max normalises them (spec §13: all
scores equal → 0.5). Random methods (Lime, KernelShap, Sobol, SmoothGrad, GradientShap,
VarGrad, SquareGrad, IntegratedGradients' noise-free path included) run after
``torch.manual_seed`` of a seed derived by BLAKE2b from ``(seed, prompt, target, method,
granularity)``, so one item gets the same numbers in any batch, order or worker.
"""
from __future__ import annotations

import hashlib
import time
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from fair_forge_beam._beam import beam
from fair_forge_beam.blank import blank_text_reason, is_blank
from fair_forge_beam.explainability.schemas import (AttributionBatchResult, AttributionMethod, AttributionResult, Granularity,
                                                    TokenAttribution)
from fair_forge_beam.quoting import quoted
from fair_forge_beam.plain import plain_reason
from fair_forge_beam.arguments import checks_arguments

__all__ = ["AttributionExplainer", "ModelFailure", "blank_text_reason", "InterpretoResultParser", "compute_attributions", "min_max_normalize",
           "ExplainAttributions", "require_interpreto", "item_seed", "read_item_id", "repeated_ids_warning"]

EXTRA_HINT = "pip install 'fair_forge_beam[explain]' (installs interpreto)"


def require_interpreto():
    """Import and return ``interpreto``; ``ImportError`` naming the ``[explain]`` extra when missing."""
    try:
        import interpreto
    except ImportError as exc:
        raise ImportError(f"explainability needs the optional interpreto library: {EXTRA_HINT}") from exc
    return interpreto


def min_max_normalize(scores: Sequence[float]) -> list[float]:
    """``(s - min) / (max - min)`` per score, in [0, 1]; every score 0.5 when all are equal (spec §13)."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [0.5] * len(scores)
    return [min(1.0, max(0.0, (s - lo) / (hi - lo))) for s in scores]


def item_seed(seed: int, prompt: str, target: str, method: str, granularity: str) -> int:
    """63-bit seed from BLAKE2b of the item's stable key (never Python's salted ``hash``)."""
    blob = "\x1f".join([str(int(seed)), prompt, target, method, granularity]).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "little") >> 1


def _floats(x: Any) -> list:
    if hasattr(x, "detach"):
        x = x.detach().to("cpu").double()
        if x.dim() >= 2:  # (target tokens, elements): sum over the target tokens; NaN (an element
            # that cannot influence that target token: itself or a later one) counts as 0
            x = x.reshape(-1, x.shape[-1]).nansum(dim=0)
        return [float(v) for v in x.tolist()]
    if hasattr(x, "tolist"):
        return _floats(__import__("torch").as_tensor(x))
    x = list(x)
    if x and isinstance(x[0], (list, tuple)):
        return [float(sum(v for v in col if v == v)) for col in zip(*x)]
    return [float(v) for v in x]


class InterpretoResultParser:
    """``parse(raw) -> (tokens, scores)`` for the shapes interpreto has returned (spec §13): an
    object or dict with ``elements``/``tokens``/``words``/``input_tokens`` and
    ``attributions``/``scores``/``attribution_scores``, a list whose first item is one of those,
    or a ``(tokens, scores)`` pair. 2-D scores (target tokens × elements) are summed over the
    target tokens. Raises ``ValueError`` on an unknown shape or mismatched lengths."""

    _TOKENS = ("elements", "tokens", "words", "input_tokens")
    _SCORES = ("attributions", "scores", "attribution_scores")

    def parse(self, raw: Any) -> tuple[list[str], list[float]]:
        if isinstance(raw, (list, tuple)) and len(raw) == 1:
            raw = raw[0]
        get = raw.get if isinstance(raw, Mapping) else (lambda k, d=None: getattr(raw, k, d))
        toks = next((get(k) for k in self._TOKENS if get(k) is not None), None)
        scores = next((get(k) for k in self._SCORES if get(k) is not None), None)
        if toks is None and isinstance(raw, (list, tuple)) and len(raw) == 2:
            toks, scores = raw
        if toks is None or scores is None:
            raise ValueError(f"unrecognised attribution result of type {type(raw).__name__}")
        tokens, values = [str(t) for t in toks], _floats(scores)
        if len(tokens) != len(values):
            raise ValueError(f"{len(tokens)} elements but {len(values)} scores")
        return tokens, values


def unattributed_text(text: str, elements: Sequence[str]) -> list[str]:
    """The pieces of ``text`` (whitespace-stripped, in order) that no element covers: the
    elements are matched left to right in ``text``; what lies between two matches (or before the
    first, after the last) and is not whitespace was dropped by the element split (e.g.
    interpreto's word split drops ``<script>alert(1)</script>``). An element not found verbatim
    (a tokenizer's normalisation) is skipped. Word and sentence granularity only: token pieces
    carry the tokenizer's markers."""
    pos, missing = 0, []
    for e in elements:
        e = str(e).strip()
        if not e:
            continue
        j = text.find(e, pos)
        if j < 0:
            continue
        if not is_blank(text[pos:j]):
            missing.append(text[pos:j].strip())
        pos = j + len(e)
    if not is_blank(text[pos:]):
        missing.append(text[pos:].strip())
    return missing


class ModelFailure(ValueError):
    """The model (or interpreto's method over it) failed on an item: the reason names the method and
    granularity and keeps the library's own words after them."""


def _method(m: Union[str, AttributionMethod]) -> AttributionMethod:
    if isinstance(m, AttributionMethod):
        return m
    for x in AttributionMethod:
        if str(m).lower() in (x.value.lower(), x.name.lower()):
            return x
    raise ValueError(f"unknown attribution method {quoted(m)}; one of {[x.value for x in AttributionMethod]}")


def _granularity(g: Union[str, Granularity]) -> Granularity:
    try:
        return g if isinstance(g, Granularity) else Granularity(str(g).lower())
    except ValueError:
        raise ValueError(f"unknown granularity {quoted(g)}; one of {[x.value for x in Granularity]}") from None


#: the token interpreto adds to a tokenizer without a mask token (``tokenizer.add_tokens``), the first
#: time a perturbation method is built on it: text holding it is refused whatever ran before (trial35b B8)
INTERPRETO_MASK = "[REPLACE]"


class AttributionExplainer:
    """Explains a causal LM's continuation of a prompt (spec §13).

    Args:
      model / tokenizer: a Hugging Face causal LM and its fast tokenizer (prompts are used as
        given: no chat template is applied). Perturbation methods may add a mask token to the
        tokenizer and resize the model's embeddings (interpreto does this).
      default_method / default_granularity: as the original (Lime, word).
      result_parser: turns interpreto's output into ``(tokens, scores)``.
      seed: base of the per-item seeds (:func:`item_seed`).
      batch_size: interpreto's batch size for perturbations / gradient samples.
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, model, tokenizer, default_method: Union[str, AttributionMethod] = AttributionMethod.LIME,
                 default_granularity: Union[str, Granularity] = Granularity.WORD, result_parser=None, seed: int = 0,
                 batch_size: int = 4, verbose: bool = False):
        self.model, self.tokenizer = model, tokenizer
        self.default_method, self.default_granularity = _method(default_method), _granularity(default_granularity)
        self.parser = result_parser or InterpretoResultParser()
        self.seed, self.batch_size, self.verbose = int(seed), int(batch_size), verbose
        self._cache: dict = {}

    @property
    def model_name(self) -> Optional[str]:
        cfg = getattr(self.model, "config", None)
        return getattr(cfg, "_name_or_path", None) or getattr(cfg, "model_type", None)

    def _instance(self, method: AttributionMethod, gran: Granularity, kwargs: Mapping[str, Any]):
        key = (method, gran)
        if not kwargs and key in self._cache:
            return self._cache[key]
        itp = require_interpreto()
        if method is AttributionMethod.INPUT_X_GRADIENT:  # interpreto 0.5: Saliency with input × gradient
            cls, extra = itp.Saliency, {"input_x_gradient": True}
        elif method is AttributionMethod.SALIENCY:  # plain gradient
            cls, extra = itp.Saliency, {"input_x_gradient": False}
        else:
            cls, extra = getattr(itp, method.value), {}
        import torch

        # Perturbation methods may add a mask token and resize the embeddings with random rows:
        # construction is seeded by the explainer's seed alone, so the new row does not depend
        # on which method (or item) came first.
        torch.manual_seed(item_seed(self.seed, "", "", "construct", ""))
        inst = cls(self.model, self.tokenizer, batch_size=self.batch_size, granularity=getattr(itp.Granularity, gran.name),
                   **{**extra, **kwargs})
        if not kwargs:
            self._cache[key] = inst
        return inst

    @staticmethod
    def _failure(what: str, exc: BaseException) -> BaseException:
        """The exception to raise for ``exc`` from the library: a machine's failure (a full disk, no
        memory) as it is; anything else a :class:`ModelFailure` naming ``what`` failed on the model."""
        from fair_forge_beam.console import environment_failure

        if environment_failure(exc) or isinstance(exc, MemoryError):
            return exc
        return ModelFailure(f"{what} failed on the model: {plain_reason(exc)}")

    def _special_pieces(self, text: str) -> tuple[int, int, list[str], list[str]]:
        """``(tokens, special, pieces, names)``: how many tokens the tokenizer makes of ``text`` alone,
        how many of them are special tokens, the names of those (``[UNK]``) and the pieces
        of ``text`` it reads as one of its special tokens (its unknown token: a word out of its
        vocabulary, markup such as ``<b>this</b>`` for a word-level one; a literal ``<|endoftext|>``),
        which interpreto leaves out of the elements it attributes. Without character offsets (a
        slow tokenizer) a piece is shown as its token."""
        tok = self.tokenizer
        special = set(getattr(tok, "all_special_ids", ()) or ())
        try:
            enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
            spans = enc["offset_mapping"]
        except Exception:  # noqa: BLE001 - a slow tokenizer has no offsets: the tokens name the pieces
            enc, spans = tok(text, add_special_tokens=False), None
        ids = list(enc["input_ids"])
        pieces: list[str] = []
        names: list[str] = []
        for k, i in enumerate(ids):
            if i in special:
                name = str(tok.convert_ids_to_tokens(i))
                if name not in names:
                    names.append(name)
                piece = text[spans[k][0]:spans[k][1]] if spans is not None else str(tok.convert_ids_to_tokens(i))
                if piece.strip() and piece.strip() not in pieces:
                    pieces.append(piece.strip())
        return len(ids), sum(1 for i in ids if i in special), pieces, names

    def _unreadable(self, prompt: str, target: str, m: AttributionMethod) -> Optional[str]:
        """Why the method cannot explain the item, found by the tokenizer before the model is called
        (trial35 T6: these failed inside the model as "cannot reshape tensor of 0 elements" and
        "index 2 is out of bounds", or "succeeded" with the whole target dropped): a target with a
        piece the tokenizer reads as a special token (what is explained would not be the target), or
        a prompt with no piece it reads as text. ``None`` when the item can be explained (a prompt
        with some pieces dropped is explained, and the dropped text is told: ``unattributed``)."""
        try:
            n_target, _, in_target, target_names = self._special_pieces(target)
            n_prompt, n_special, in_prompt, prompt_names = self._special_pieces(prompt)
        except Exception:  # noqa: BLE001 - the check is an aid; the model's own failure is told below
            return None

        def shown(pieces):
            return ", ".join(quoted(p[:80]) for p in pieces[:5]) + (", ..." if len(pieces) > 5 else "")

        def as_(names):  # "its unknown token '[UNK]'" for a word out of its vocabulary
            unk = getattr(self.tokenizer, "unk_token", None)
            what = "its unknown token" if names == [unk] else "its special token" + ("s" if len(names) > 1 else "")
            why = [w for w, held in (("a word out of its vocabulary, markup", unk in names),  # trial35b B8: '[PAD]'
                                     ("a control token of the model, not text", any(n != unk for n in names))) if held]
            return f"{what} {shown(names)} ({'; '.join(why)})"

        fix = "rephrase the item in words the model's tokenizer knows, or use another --model"
        if getattr(self.tokenizer, "mask_token", None) is None:  # interpreto's own then (trial35b B8)
            for field, text in (("target", target), ("prompt", prompt)):
                if INTERPRETO_MASK in text:
                    return (f"the {field} holds {quoted(INTERPRETO_MASK)}, the token interpreto adds to a tokenizer "
                            "without a mask token to mask words with: how the tokenizer reads it depends on the "
                            f"methods run before, and a perturbation cannot tell it from a masked word; {fix}")
        if n_target == 0:
            return f"the model's tokenizer makes no token of the target {quoted(target[:80])}: nothing to attribute; {fix}"
        if in_target:
            return (f"the model's tokenizer reads {shown(in_target)} of the target as {as_(target_names)}: {m.value} "
                    f"cannot attribute to it, so the target would be explained in part; {fix}")
        if n_prompt == n_special:  # no token, or only special ones
            return (f"the model's tokenizer reads none of the prompt as text ({shown(in_prompt) or 'no token'}"
                    + (f" as {as_(prompt_names)}" if prompt_names else "") + f"): {m.value} has nothing in it to attribute to; {fix}")
        return None

    def explain(self, prompt: str, target: str, method=None, granularity=None, max_length: int = 512, **kwargs) -> AttributionResult:
        """Attributions of ``prompt + target`` elements to the ``target`` tokens.

        Returns an :class:`AttributionResult` (elements in position order). Raises
        ``ValueError`` for a blank prompt or target (:func:`blank_text_reason`: "blank prompt: ..."),
        an unknown method / granularity, or more than ``max_length`` tokens; :class:`ModelFailure`
        when the tokenizer, the model or interpreto fails on the item (its reason names the method);
        ``ImportError`` when interpreto is missing."""
        import torch

        for field, text in (("prompt", prompt), ("target", target)):
            blank = blank_text_reason(field, text)
            if blank:
                raise ValueError(blank)
        m, g = _method(method or self.default_method), _granularity(granularity or self.default_granularity)
        try:
            n_tokens = len(self.tokenizer(prompt + " " + target)["input_ids"])
        except Exception as exc:  # noqa: BLE001 - the library's failure, told as ours (below)
            raise self._failure("the tokenizer", exc) from exc
        if n_tokens > int(max_length):
            raise ValueError(f"{n_tokens} tokens exceed max_length={max_length}")
        unreadable = self._unreadable(prompt, target, m)
        if unreadable:
            raise ValueError(unreadable)
        seed = item_seed(self.seed, prompt, target, m.value, g.value)
        start = time.perf_counter()
        try:
            inst = self._instance(m, g, kwargs)
            torch.manual_seed(seed)
            raw = inst.explain(prompt, targets=target)
            tokens, scores = self.parser.parse(raw)
        except ImportError:
            raise
        except Exception as exc:  # noqa: BLE001 - a library's words alone do not say what failed
            raise self._failure(f"{m.value} ({g.value} granularity)", exc) from exc
        norm = min_max_normalize(scores)
        atts = [TokenAttribution(text=t, score=s, position=i, normalized_score=n) for i, (t, s, n) in enumerate(zip(tokens, scores, norm))]
        meta = {"compute_time_seconds": time.perf_counter() - start, "max_length": int(max_length), "seed": seed}
        if g.value in ("word", "sentence"):
            missing = unattributed_text(prompt + " " + target, tokens)
            if missing:  # never silent: the result says which text got no attribution (the Beam stage dead-letters it too)
                meta["unattributed"] = missing
        return AttributionResult(prompt=prompt, target=target, method=m, granularity=g, attributions=atts, metadata=meta)

    def explain_batch(self, items: Iterable[Union[Mapping[str, Any], Sequence[str]]], **kwargs) -> AttributionBatchResult:
        """Explain ``(prompt, target)`` pairs or dicts with ``prompt``, ``target`` and optional
        ``method`` / ``granularity``, one after another, in order."""
        start, results = time.perf_counter(), []
        for it in items:
            d = dict(it) if isinstance(it, Mapping) else {"prompt": it[0], "target": it[1]}
            results.append(self.explain(d.pop("prompt"), d.pop("target"), **{**kwargs, **d}))
        return AttributionBatchResult(results=results, model_name=self.model_name, total_compute_time_seconds=time.perf_counter() - start)


def compute_attributions(model, tokenizer, prompt: str, target: str, method=AttributionMethod.LIME, granularity=Granularity.WORD,
                         **kwargs) -> AttributionResult:
    """One-shot :meth:`AttributionExplainer.explain`."""
    return AttributionExplainer(model, tokenizer).explain(prompt, target, method, granularity, **kwargs)


def read_item_id(item: Any) -> tuple[Optional[str], Optional[str]]:
    """``(id, None)``: an item's ``id`` as its attributions carry it, text, read as the audit reads an id
    (:func:`~fair_forge_beam.schemas.common.id_text`: ``3`` and ``3.0`` are ``"3"``), or ``(None, why)``
    for an item with none to carry: no ``id``, a null or blank one, one that is not text or a number,
    or a number that is no id (NaN: a float column's missing value; infinite; not whole). Such an item
    is a dead letter: an attribution row with ``id`` null cannot be joined back to its item (trial40
    J7: one was written without a word)."""
    if not isinstance(item, Mapping):
        return None, None  # not an item at all: the item check says so
    value = item.get("id")
    if value is None or (isinstance(value, str) and is_blank(value)):
        said = "no 'id'" if "id" not in item else ("a null 'id'" if value is None else "a blank 'id'")
        return None, (f"the item has {said}: its attributions could not be joined back to it; give every item "
                      "its own 'id' (text or a number)")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        from fair_forge_beam.plain import json_kind

        return None, f"the item's 'id' is {json_kind(value)}, not text or a number; give every item its own 'id'"
    from fair_forge_beam.schemas.common import id_text

    try:  # as the audit reads an id (fix50b: NaN was the id "nan", 3.0 the id "3.0" where the audit reads "3")
        return id_text(value), None
    except ValueError as exc:
        return None, f"the item's 'id' {exc}"


def repeated_ids_warning(counts: Mapping[str, int], where: str) -> Optional[str]:
    """One warning line naming the ids ``counts`` (id → items given it) holds more than once, or
    ``None``: every item is explained, and the attributions of a repeated id share it, so a join
    by id cannot tell them apart (trial40 J7; the audit warns of a repeated ``qa_id`` alike)."""
    from fair_forge_beam.io.elements import repeats_named

    named = repeats_named(counts, quoted)
    if named is None:
        return None
    n, text = named
    return (f"{n} item id{'s' if n > 1 else ''} given more than once in {where}: {text}; every item is explained, "
            "and their attributions share the id (a join by id cannot tell them apart): give each item its own id")


@beam.typehints.with_output_types(Any)
class _ExplainFn(beam.DoFn):
    DEAD = "dead_letters"

    def __init__(self, loader: Callable[[], tuple], method, granularity, seed: int, max_length: int):
        self._loader, self._method, self._gran, self._seed, self._max_length = loader, method, granularity, seed, max_length

    def setup(self):
        model, tokenizer = self._loader()
        self._explainer = AttributionExplainer(model, tokenizer, self._method, self._gran, seed=self._seed)

    def process(self, item):
        from fair_forge_beam.io.elements import dead_letter

        item_id, no_id = read_item_id(item)
        if no_id is not None:  # before the model: its attributions would carry no id to join them by
            yield beam.pvalue.TaggedOutput(self.DEAD, dead_letter("explain", no_id, item))
            return
        try:
            if not isinstance(item, Mapping) or not isinstance(item.get("prompt"), str) or not isinstance(item.get("target"), str):
                raise ValueError("an item needs text 'prompt' and 'target'")
            res = self._explainer.explain(item["prompt"], item["target"], item.get("method"), item.get("granularity"),
                                          max_length=self._max_length)
        except ImportError:
            raise
        except Exception as exc:  # a bad item never stops the batch
            from fair_forge_beam.console import environment_failure

            if environment_failure(exc):  # a full disk is the machine's failure, never the data's (issue 28 B3)
                raise
            reason = plain_reason(exc)
            if isinstance(exc, ModelFailure):  # names the stage and the item, then the library's words
                reason = f"explain: item {quoted(item_id) if item_id is not None else '(no id)'}: {reason}"
            yield beam.pvalue.TaggedOutput(self.DEAD, dead_letter("explain", reason[:500], item,
                                                                  element_id=item_id))
            return
        out = res.model_dump(mode="json")
        out["metadata"].pop("compute_time_seconds", None)  # timing is not part of the reproducible record
        out["id"] = item_id
        missing = out["metadata"].get("unattributed")
        if missing:  # the result keeps what was attributed; the dropped text is told, never lost silently
            shown = ", ".join(repr(m[:80]) for m in missing[:5]) + (", ..." if len(missing) > 5 else "")
            yield beam.pvalue.TaggedOutput(self.DEAD, dead_letter(
                "explain", f"{len(missing)} piece(s) of the text got no attribution (dropped by the {res.granularity.value} "
                f"split): {shown}; the other elements are in the results", item, element_id=item_id))
        yield out


class ExplainAttributions(beam.PTransform):
    """Batch explanation as a Beam stage: ``PCollection[dict(id, prompt, target[, method,
    granularity])]`` → ``{"results": PCollection[dict], "dead_letter": PCollection[DeadLetter]}``.

    ``loader``: a picklable zero-argument callable returning ``(model, tokenizer)``, called once
    per worker in ``setup()``. Items that cannot be explained (bad fields, too long) become dead
    letters with stage ``"explain"``; a missing interpreto fails the pipeline with the extra's name.
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, loader: Callable[[], tuple], method=AttributionMethod.LIME, granularity=Granularity.WORD, seed: int = 0,
                 max_length: int = 512):
        super().__init__()
        _method(method), _granularity(granularity)
        self._fn = _ExplainFn(loader, method, granularity, int(seed), int(max_length))

    def expand(self, items):
        out = items | "Explain" >> beam.ParDo(self._fn).with_outputs(_ExplainFn.DEAD, main="results")
        return {"results": out.results, "dead_letter": out[_ExplainFn.DEAD]}
