"""Metric names usable from the main job (``--metrics``) and how to build each transform.

Each builder takes the main job's options by ``dest`` and passes the metric constructor the
arguments its options feed (:func:`fair_forge_beam.options.constructor_kwargs`: one declared
default per option, none here). How to read a metric's results — estimates, labels, ranges,
directions, reference lines, gate fields, per-interaction Parquet columns — is its class's
``info`` (:class:`~fair_forge_beam.schemas.metric_info.MetricInfo`), read with :func:`metric_info`.
"""
from __future__ import annotations

if __name__ == "__main__":  # the command is the process: a Ctrl-C while it still imports is one line (trial46 B2)
    from fair_forge_beam.console import starting

    starting("python -m fair_forge_beam.metrics.registry", "template metadata")

import functools
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence, Union

import pyarrow as pa

from fair_forge_beam.blank import is_blank
from fair_forge_beam.extras import CLUSTERING_MODULES, MINILM_MODULES, require
from fair_forge_beam.io.edge import read_side_text, side_json_loads
from fair_forge_beam.options import constructor_kwargs, validate, value
from fair_forge_beam.plain import plain_reason, side_file_error
from fair_forge_beam.quoting import choice_text, did_you_mean, quoted
from fair_forge_beam.schemas.metric_info import (COLUMN_TYPES, PARQUET_HEADER, MetricInfo, agreeing_name, check_metric_name,
                                                 declared_names)
from fair_forge_beam.statistical.base import StatisticalMode

__all__ = ["METRICS", "Registered", "registered", "ENTRY_POINTS", "build_metric", "metric_info", "session_model", "interaction_parquet_fields",
           "statistical_mode"]

_M = "fair_forge_beam.metrics"
_JUDGE = "fair_forge_beam.components.judge.handler:OpenAIJudgeHandler"
_GUARDIAN = "fair_forge_beam.components.guardian:LLMGuardian"


def _require_minilm(purpose: str, alternative: str) -> None:
    """Raises :class:`~fair_forge_beam.extras.MissingExtraError` when the MiniLM embedder's modules are missing."""
    require("embeddings", purpose, MINILM_MODULES, alternative=alternative)


def preflight_side_file(read, option: str, path: str):
    """``read()`` (the reading of a side file that workers would otherwise read first) run in the
    launcher, before any pipeline: a file too large, a directory, unreadable, not UTF-8 or not
    parseable is one usage error naming the option and the file, not a traceback on every worker.

    Returns what ``read`` returns. Raises:
        ValueError: ``"<option>: cannot read <path>: <why>"`` (one line)."""
    import csv

    try:
        return read()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{option}: cannot read {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except (OSError, ValueError, csv.Error, RecursionError) as exc:
        why = plain_reason(exc)  # plain words, no class name; a reason that names the option already is given alone
        raise ValueError(why if why.startswith(f"{option}:") else f"{option}: cannot read {path}: {why}") from None


def _humanity(mode: StatisticalMode, options: dict):
    from fair_forge_beam.components.emotion_lexicon import NRCCsvLexicon
    from fair_forge_beam.metrics.humanity import Humanity

    lexicon = NRCCsvLexicon(options["emotion_lexicon_csv"]) if options.get("emotion_lexicon_csv") else None
    if lexicon is not None:
        preflight_side_file(lexicon.load, "--emotion-lexicon-csv", options["emotion_lexicon_csv"])
    return Humanity(statistical_mode=mode, lexicon=lexicon, **constructor_kwargs(f"{_M}.humanity:Humanity", options))



def _toxicity(mode: StatisticalMode, options: dict):
    from fair_forge_beam.components.toxicity_lexicon import HurtLexLoader
    from fair_forge_beam.metrics.toxicity import Toxicity

    kwargs = {}
    if value(options, "group_extractor") == "keyword":
        from fair_forge_beam.components.group_extractor import KeywordGroupExtractor, default_group_keywords

        kwargs["group_extractor"] = KeywordGroupExtractor(default_group_keywords())
    else:  # fail before the pipeline starts, naming the extra and the flag that does without it
        _require_minilm("Toxicity's group detection (--group-extractor embedding: MiniLM)",
                        "pass --group-extractor keyword")
        if options.get("clustering") is not False:
            require("embeddings", "Toxicity's cluster profiling (UMAP + HDBSCAN)", CLUSTERING_MODULES,
                    alternative="pass --no-clustering")
    loader = HurtLexLoader(**constructor_kwargs("fair_forge_beam.components.toxicity_lexicon:HurtLexLoader", options))
    if value(options, "toxicity_scorer") != "hurtlex":  # a trained classifier decides is_toxic
        from fair_forge_beam.components.toxicity_classifier import make_classifier

        kwargs["toxicity_classifier"] = make_classifier(value(options, "toxicity_scorer"),
                                                        value(options, "toxicity_classifier_threshold"))
    return Toxicity(
        statistical_mode=mode,
        toxicity_loader=loader,
        clustering=options.get("clustering"),  # computed by the main job (--no-clustering, keyword groups, windows)
        **constructor_kwargs(f"{_M}.toxicity:Toxicity", options),
        **kwargs,
    )



def _judge_config(options: dict, metric: str) -> dict:
    """The judge handler's arguments from the main job's ``--judge-*`` options (the transport
    arguments from :func:`fair_forge_beam.options.constructor_kwargs`, declared defaults included).

    Raises:
        ValueError: no ``--judge-base-url`` / ``--judge-model``, or a ``--judge-timeout`` /
            ``--judge-retries`` out of range (before any pipeline is built).
    """
    from fair_forge_beam.components.judge.cache import cache_choice

    base_url, model = options.get("judge_base_url"), options.get("judge_model")
    if not base_url or not model:
        raise ValueError(
            f"metric {quoted(metric)} needs an LLM judge: pass --judge-base-url and --judge-model (any OpenAI-compatible "
            "endpoint: OpenAI, vLLM, Ollama, llama.cpp server, Groq); the API key is read from the environment "
            "variable named by --judge-api-key-env (default OPENAI_API_KEY)"
        )
    validate({k: options.get(k) for k in ("judge_timeout", "judge_retries")})  # also when built without the CLI
    return {
        "model": model,
        "base_url": base_url,
        "cache_path": cache_choice(options.get("judge_cache")),  # "default": the handler's cache folder on the worker
        **constructor_kwargs(_JUDGE, options),
        "max_reply_option": "--judge-max-reply-bytes",
        "max_prompt_option": "--judge-max-prompt-chars",
    }


def _context(mode: StatisticalMode, options: dict):
    from fair_forge_beam.metrics.context import Context

    return Context(judge=_judge_config(options, "context"), statistical_mode=mode)



def _conversational(mode: StatisticalMode, options: dict):
    from fair_forge_beam.metrics.conversational import Conversational

    return Conversational(judge=_judge_config(options, "conversational"), statistical_mode=mode)



def _bias(mode: StatisticalMode, options: dict):
    from fair_forge_beam.components.guardian import make_guardian
    from fair_forge_beam.metrics.bias import Bias

    base_url, model = options.get("guardian_base_url"), options.get("guardian_model")
    if not base_url or not model:
        raise ValueError(
            "metric 'bias' needs a guardian endpoint: pass --guardian-base-url (e.g. http://localhost:8000/v1) and "
            "--guardian-model (e.g. llama-guard3:8b); the API key is read from the environment variable named by "
            "--guardian-api-key-env (default OPENAI_API_KEY)"
        )
    # --judge-timeout / --judge-retries bound the guardian's HTTP calls too
    cfg = _judge_config({**options, "judge_base_url": base_url, "judge_model": model}, "bias")
    limits = {k: v for k, v in cfg.items() if k in ("request_timeout", "client_retries", "endpoint_down_after")}
    guardian = make_guardian(
        value(options, "guardian_kind"),
        model,
        base_url,
        cache_path=cfg["cache_path"],
        **constructor_kwargs(_GUARDIAN, options),
        **limits,
        max_reply_bytes=value(options, "guardian_max_reply_bytes"),
        max_reply_option="--guardian-max-reply-bytes",
    )
    return Bias(guardian=guardian, statistical_mode=mode)



def _regulatory(mode: StatisticalMode, options: dict):
    from fair_forge_beam.components.corpus import PACKAGED_CORPORA, packaged_corpus
    from fair_forge_beam.components.embedder import HashingEmbedder
    from fair_forge_beam.metrics.regulatory import Regulatory

    corpus = value(options, "regulatory_corpus")
    connector = packaged_corpus(corpus) if corpus in PACKAGED_CORPORA else corpus
    kwargs = constructor_kwargs(f"{_M}.regulatory:Regulatory", options)
    if value(options, "regulatory_embedder") == "hashing":
        kwargs["embedder"] = HashingEmbedder(dim=256)
    else:
        _require_minilm("--regulatory-embedder minilm", "pass --regulatory-embedder hashing")
    try:
        return Regulatory(corpus=connector, judge=_judge_config(options, "regulatory"), statistical_mode=mode, **kwargs)
    except OSError as exc:  # not found, a directory where a file is named, denied, damaged compressed data
        raise ValueError(side_file_error("--regulatory-corpus", corpus, exc)) from None



def _agentic(mode: StatisticalMode, options: dict):
    from fair_forge_beam.metrics.agentic import Agentic

    # unset --agentic-correctness: the judge when an endpoint is given, else the data's label
    source = options.get("agentic_correctness") or ("judge" if options.get("judge_base_url") else "label")
    return Agentic(
        judge=_judge_config(options, "agentic") if source == "judge" else None,
        statistical_mode=mode,
        **{**constructor_kwargs(f"{_M}.agentic:Agentic", options), "correctness_source": source},
    )



def _bestof(mode: StatisticalMode, options: dict):
    from fair_forge_beam.metrics.best_of import BestOf

    return BestOf(judge=_judge_config(options, "bestof"), statistical_mode=mode,
                  **constructor_kwargs(f"{_M}.best_of:BestOf", options))



def _similarity_embedder(options: dict):
    """``--similarity-embedder``: all-MiniLM-L6-v2 (default) or the hashing embedder (no model)."""
    if value(options, "similarity_embedder") == "hashing":
        from fair_forge_beam.components.embedder import HashingEmbedder

        return HashingEmbedder(dim=1024)
    from fair_forge_beam.components.embedder import SentenceTransformerEmbedder

    _require_minilm("--similarity-embedder minilm", "pass --similarity-embedder hashing")
    return SentenceTransformerEmbedder()


def _vision(mode: StatisticalMode, options: dict):
    from fair_forge_beam.components.similarity import EmbeddingSimilarityScorer
    from fair_forge_beam.metrics.vision import Vision

    return Vision(scorer=EmbeddingSimilarityScorer(_similarity_embedder(options)), statistical_mode=mode,
                  **constructor_kwargs(f"{_M}.vision:Vision", options))



def _prompt_evaluator(mode: StatisticalMode, options: dict):
    """PromptEvaluator from ``--seed-prompt``/``--seed-prompt-file``, ``--prompt-*`` and the
    generator endpoint (``--generator-*``, each defaulting to the matching ``--judge-*`` flag).

    Raises:
        ValueError: no seed prompt, no generator endpoint, bad k / tau (before any pipeline).
    """
    from fair_forge_beam.metrics.prompt_evaluator import PromptEvaluator

    seed_prompt = options.get("seed_prompt")
    if options.get("seed_prompt_file"):
        try:
            seed_prompt = read_side_text(options["seed_prompt_file"], "--seed-prompt-file")
        except OSError as exc:
            raise ValueError(side_file_error("--seed-prompt-file", options["seed_prompt_file"], exc)) from None
    if is_blank(seed_prompt):
        raise ValueError("metric 'prompt_evaluator' needs the system prompt under test: pass --seed-prompt TEXT or --seed-prompt-file PATH")
    gen = {k: options.get(k) for k in ("judge_max_concurrency", "judge_requests_per_minute", "judge_timeout", "judge_retries",
                                       "endpoint_down_after")}
    for k in ("base_url", "model", "api_key_env"):  # each --generator-* defaults to its --judge-* (declared default_from)
        gen[f"judge_{k}"] = value(options, f"generator_{k}")
    gen["judge_cache"] = options.get("judge_cache")
    if not gen["judge_base_url"] or not gen["judge_model"]:
        raise ValueError("metric 'prompt_evaluator' needs a generator: pass --generator-base-url and --generator-model "
                         "(or the --judge-* flags, which they default to)")
    gen["judge_max_reply_bytes"] = value(options, "generator_max_reply_bytes")
    generator = dict(_judge_config(gen, "prompt_evaluator"), output_schema=None, max_reply_option="--generator-max-reply-bytes")
    objective = options.get("prompt_jq_objective")
    judge = None
    if objective and options.get("judge_base_url") and options.get("judge_model"):
        judge = _judge_config(options, "prompt_evaluator")
    kwargs = constructor_kwargs(f"{_M}.prompt_evaluator:PromptEvaluator", options)
    kwargs.update(seed_prompt=seed_prompt, objective=objective or "")  # --seed-prompt-file read above
    return PromptEvaluator(model=generator, embedder=_similarity_embedder(options), jq_enabled=bool(objective), judge=judge,
                           statistical_mode=mode, **kwargs)



def _privacy(mode: StatisticalMode, options: dict):
    """Privacy from ``--privacy-detector``, ``--privacy-domain`` (JSON file) and ``--privacy-text``.

    Raises:
        ValueError: unreadable or invalid domain file, or presidio chosen but not installed.
    """
    import json

    from fair_forge_beam.components.pii import build_detector
    from fair_forge_beam.metrics.privacy import Privacy

    domain, fits = None, {}
    path = options.get("privacy_domain")
    if path:
        try:
            domain = side_json_loads(read_side_text(path, "--privacy-domain"), f"--privacy-domain {path}")
        except (OSError, ValueError) as exc:
            raise ValueError(side_file_error("--privacy-domain", path, exc)) from None
        if not isinstance(domain, dict):
            raise ValueError(f"--privacy-domain: {path} must hold a JSON object")
        fits = {k: domain.pop(k) for k in ("domain_fit", "regulatory_fit") if k in domain}
        for k, v in fits.items():  # a number as a number: the detector's float() read "0.5" and true (trial38 T2's class)
            if type(v) not in (int, float):
                from fair_forge_beam.plain import json_kind

                raise ValueError(f"--privacy-domain: {path}: {k} should be a number in [0, 1], not {json_kind(v)}")
    try:
        detector = build_detector(value(options, "privacy_detector") or "patterns", **fits)
    except ImportError as exc:  # presidio chosen but not installed: a configuration error, before any pipeline
        raise ValueError(plain_reason(exc)) from None
    try:
        return Privacy(statistical_mode=mode, detector=detector, domain=domain,
                       **constructor_kwargs(f"{_M}.privacy:Privacy", options))
    except Exception as exc:  # pydantic's ValidationError of the domain: a one-line configuration error
        raise ValueError(f"--privacy-domain: {path}: {plain_reason(exc)}") from None



def _role_adherence(mode: StatisticalMode, options: dict):
    from fair_forge_beam.metrics.role_adherence import RoleAdherence

    return RoleAdherence(judge=_judge_config(options, "role_adherence"), statistical_mode=mode,
                         **constructor_kwargs(f"{_M}.role_adherence:RoleAdherence", options))



class Registered(NamedTuple):
    """A metric of the main job: how to build its transform from the options, and its class — the
    class itself or ``"module:Class"`` (imported only when its :class:`MetricInfo` is read)."""

    factory: Callable
    cls: Union[str, type]


def _registration_fix(key: Any) -> str:
    return (f"register the class under its name (METRICS[<Class>.name] = ...), or give the class name = {quoted(key)} "
            f"and info = dataclasses.replace(<parent>.info, name={quoted(key)})")


def check_registered_names(key: Any, metric: Any) -> None:
    """Refuse metric ``metric`` (a class or a built transform) registered under ``key`` when the key, its
    class's ``name`` and its info's name are not one name (:func:`~fair_forge_beam.schemas.metric_info.agreeing_name`):
    the rule entry points follow (:func:`_installed_class`), for every way a metric is registered or built.

    Raises:
        ValueError: one line saying which differ and how to make them agree.
    """
    agreeing_name([("the registered key", key), *declared_names(metric)], _registration_fix(key))


class _Registry(dict):
    """:data:`METRICS`: a registration whose class is given as a class (``METRICS["words"] =
    Registered(factory, Words)``, docs/engine.md) is checked as it is made: the key, the class's
    ``name`` and its info's name agree (a ``"module:Class"`` is checked when it is built)."""

    def __setitem__(self, key, entry):
        check_metric_name(key, "the registered key")
        cls = _class_of(entry)
        if isinstance(cls, type):
            check_registered_names(key, cls)
        super().__setitem__(key, entry)

    def update(self, *args, **kwargs):
        for key, entry in dict(*args, **kwargs).items():
            self[key] = entry

    def setdefault(self, key, entry=None):
        if key not in self:
            self[key] = entry
        return self[key]


#: name -> the metric's factory ``(mode, options) -> MetricTransform`` and class. (A plain
#: ``(factory, parquet fields function)`` pair, the registration of earlier versions, still works:
#: such a metric has no info and is read generically.)
METRICS: dict[str, Registered] = _Registry({
    "humanity": Registered(_humanity, f"{_M}.humanity:Humanity"),
    "toxicity": Registered(_toxicity, f"{_M}.toxicity:Toxicity"),
    "bias": Registered(_bias, f"{_M}.bias:Bias"),
    "context": Registered(_context, f"{_M}.context:Context"),
    "conversational": Registered(_conversational, f"{_M}.conversational:Conversational"),
    "regulatory": Registered(_regulatory, f"{_M}.regulatory:Regulatory"),
    "agentic": Registered(_agentic, f"{_M}.agentic:Agentic"),
    "bestof": Registered(_bestof, f"{_M}.best_of:BestOf"),
    "vision": Registered(_vision, f"{_M}.vision:Vision"),
    "prompt_evaluator": Registered(_prompt_evaluator, f"{_M}.prompt_evaluator:PromptEvaluator"),
    "privacy": Registered(_privacy, f"{_M}.privacy:Privacy"),
    "role_adherence": Registered(_role_adherence, f"{_M}.role_adherence:RoleAdherence"),
})


#: the entry-point group through which an installed distribution registers metrics of its own
#: (docs/engine.md): each entry point's name is the metric's name, its value the metric's class
#: (``words = "mypkg.words:Words"``), built as ``Class(statistical_mode=mode)``
ENTRY_POINTS = "fair_forge_beam.metrics"
_installed_read = False
#: metric name -> the entry point that declared it (read by :func:`registered`)
_installed: dict = {}


def _entry_point_text(ep) -> str:
    """How a line names entry point ``ep``: ``entry point 'words = mywords.words:Words' of distribution
    'mywords' (group fair_forge_beam.metrics)``."""
    dist = getattr(getattr(ep, "dist", None), "name", None)
    return (f"entry point {quoted(f'{ep.name} = {ep.value}')} of "
            f"{f'distribution {quoted(dist)}' if dist else 'an unnamed distribution'} (group {ENTRY_POINTS})")


@functools.lru_cache(maxsize=None)
def _installed_class(name: str) -> type:
    """The class entry point ``name`` declares, imported once.

    Raises:
        ValueError: one line naming the entry point, its distribution and why (trial35b B5: a
            40-line traceback, exit 1): the import fails (any error of the distribution's code), or
            the class's ``name`` or its info's name is not the entry point's (B6: the outputs were
            split between the two names).
    """
    ep = _installed[name]
    try:
        cls = ep.load()
    except Exception as exc:  # the distribution's own code: whatever it raises is one line
        raise ValueError(f"{_entry_point_text(ep)} cannot be imported: {type(exc).__name__}: "
                         f"{plain_reason(exc)}") from exc
    if not isinstance(cls, type):
        raise ValueError(f"{_entry_point_text(ep)} names {quoted(cls)}, not a metric class")
    info = getattr(cls, "info", None)
    for what, declared in ((f"its class's name ({cls.__name__}.name)", getattr(cls, "name", None)),
                           (f"its info's name ({cls.__name__}.info.name)", getattr(info, "name", name))):
        if declared != name:
            raise ValueError(f"{_entry_point_text(ep)}: {what} is {quoted(declared)}, not the entry point's "
                             f"{quoted(name)}: one name names a metric's outputs, --metrics and gates; give "
                             "both the same")
    return cls


def _build_installed(name: str, mode: StatisticalMode, options: dict):
    return _installed_class(name)(statistical_mode=mode)


def registered() -> dict[str, Registered]:
    """:data:`METRICS` with the metrics installed distributions declare under :data:`ENTRY_POINTS`,
    read once per process, on the first call (a name already in :data:`METRICS` keeps its entry,
    saying so; a name that cannot name a metric is left out, saying so). Every command reads a name
    it does not know through this, so an installed metric is known to each (trial35 T10: a metric
    registered in one process only was compared by another method in ``fair-forge-beam compare``).
    An entry point's class is imported when the metric is built or its info read
    (:func:`_installed_class`: one line, never a traceback, when it fails)."""
    global _installed_read
    if not _installed_read:
        _installed_read = True
        _installed_class.cache_clear()  # read again (a test's new distribution): its classes imported again
        import importlib.metadata
        import logging

        for ep in importlib.metadata.entry_points(group=ENTRY_POINTS):
            if ep.name in METRICS:  # trial35b B7: was left out without a word
                logging.getLogger(__name__).warning(
                    "%s is not used: the metric %s is %s", _entry_point_text(ep), quoted(ep.name),
                    f"built in ({_class_path(METRICS[ep.name])})" if ep.name not in _installed
                    else f"declared by {_entry_point_text(_installed[ep.name])}")
                continue
            try:
                check_metric_name(ep.name, f"entry point {quoted(ep.value)} of group {ENTRY_POINTS}:")
            except ValueError as exc:
                logging.getLogger(__name__).warning("%s", exc)
                continue
            _installed[ep.name] = ep
            METRICS[ep.name] = Registered(functools.partial(_build_installed, ep.name), ep.value)
    return METRICS


def _class_path(entry) -> str:
    cls = _class_of(entry)
    return cls if isinstance(cls, str) else f"{getattr(cls, '__module__', '?')}:{getattr(cls, '__qualname__', cls)}"


def _class_of(entry) -> Optional[Union[str, type]]:
    cls = entry[1] if isinstance(entry, tuple) and len(entry) > 1 else None
    return cls if isinstance(cls, (str, type)) else None


def metric_info(name: str) -> Optional[MetricInfo]:
    """The :class:`~fair_forge_beam.schemas.metric_info.MetricInfo` of metric ``name`` (its class's
    ``info``), or ``None`` for a name this version does not know (a ``results.json`` of a newer
    version or of a metric of your own: readers then use the generic reading). Imports the
    metric's module (no model, lexicon or judge is loaded); cached per class."""
    return _class_attribute(name, "info")


def session_model(name: str):
    """The pydantic model of metric ``name``'s session records (its class's ``session_schema``):
    the typed columns of ``sessions/<name>/``; ``None`` for a name this version does not know or a
    class without one. Imports the metric's module only."""
    return _class_attribute(name, "session_schema")


def _class_attribute(name: str, attribute: str):
    """``attribute`` of metric ``name``'s class (imported from its ``"module:Class"`` on first use),
    or ``None`` for an unknown name or a class without it."""
    cls = _class_of(METRICS.get(name) or registered().get(name))
    if cls is None:
        return None
    ep = _installed.get(name)
    if ep is not None and cls == ep.value:  # an entry point: imported and checked as the run builds it
        return getattr(_installed_class(name), attribute, None)
    return getattr(cls if isinstance(cls, type) else _class(cls), attribute, None)


@functools.lru_cache(maxsize=None)
def _class(cls_path: str) -> type:
    import importlib

    module, cls = cls_path.split(":")
    return getattr(importlib.import_module(module), cls)


BASE_FIELDS = [pa.field(name, getattr(pa, COLUMN_TYPES[typ])()) for name, typ in PARQUET_HEADER]


def build_metric(name: str, mode: StatisticalMode, options: Optional[dict] = None):
    """Build the transform of metric ``name``.

    Raises:
        ValueError: unknown metric name (lists the known ones), or a bad option value.
        fair_forge_beam.extras.MissingExtraError: the options need the ``embeddings`` extra (MiniLM,
            clustering) and it is not installed; the message names the flag that does without it.
    """
    if name not in METRICS and name not in registered():
        raise ValueError(f"unknown metric {choice_text(name, METRICS)}; available: {', '.join(sorted(METRICS))}"
                         + did_you_mean(name, METRICS))
    check_metric_name(name, "the registered name")
    transform = METRICS[name][0](mode, options or {})
    check_registered_names(name, transform)  # the key, the built transform's class and info: one name
    if (options or {}).get("slices"):  # --slices of the main job (validated there; "overall" always kept)
        transform.slices = tuple(options["slices"])
    return transform


def interaction_parquet_fields(names) -> pa.Schema:
    """Union Parquet schema of the per-interaction rows of the given metrics."""
    fields = list(BASE_FIELDS)
    seen = {f.name for f in fields}
    for n in names:
        info = metric_info(n)
        entry = METRICS[n]
        for f in (info.parquet_fields() if info is not None
                  else entry[1]() if _class_of(entry) is None and callable(entry[1]) else []):
            if f.name not in seen:  # e.g. "insight" of both Context and Conversational
                seen.add(f.name)
                fields.append(f)
    return pa.schema(fields)


def statistical_mode(options: Any) -> StatisticalMode:
    """The run's :class:`~fair_forge_beam.statistical.base.StatisticalMode` from its options
    (``mode``, ``seed``, ``mc_samples``, ``ci_level``, the Beta prior; an ``argparse.Namespace``
    or a mapping by ``dest``). The Bayesian mode is built in both modes, so a bad
    ``--mc-samples`` / ``--ci-level`` / ``--seed`` is a usage error in either; the frequentist
    mode takes ``--ci-level`` (its Wald and comparison intervals).

    Raises:
        ValueError: an option out of range.
    """
    from fair_forge_beam.statistical import BayesianMode, FrequentistMode

    opts = vars(options) if not isinstance(options, Mapping) else options
    bayesian = BayesianMode(**constructor_kwargs("fair_forge_beam.statistical.bayesian:BayesianMode", opts))
    if opts.get("mode") == "bayesian":
        return bayesian
    return FrequentistMode(**constructor_kwargs("fair_forge_beam.statistical.frequentist:FrequentistMode", opts))


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m fair_forge_beam.metrics.registry --write-template-metadata templates/metadata.json``:
    the Flex Template metadata of the main job, from the option declarations and the registered metrics."""
    from fair_forge_beam.options import OneLineErrorParser, template_metadata_text

    p = OneLineErrorParser(prog="python -m fair_forge_beam.metrics.registry")
    p.add_argument("--write-template-metadata", metavar="PATH", required=True)
    args = p.parse_args(argv)
    from fair_forge_beam.io.write import replace_files

    from fair_forge_beam.console import OutputWriteError

    try:  # whole, or the old file kept (a kill mid-write truncated it)
        replace_files([(args.write_template_metadata, template_metadata_text(METRICS))])
    except OutputWriteError:  # the machine's (a full disk): exit code 1, one line (console.guarded)
        raise
    except OSError as exc:  # one line, as every command (trial 28f B10's class)
        p.error(plain_reason(exc))
    return 0


if __name__ == "__main__":
    from fair_forge_beam.console import entry_point

    raise SystemExit(entry_point(main, "template metadata", prog="python -m fair_forge_beam.metrics.registry"))
