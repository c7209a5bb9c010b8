"""Import Apache Beam without changing the host application's logging (case-006).

When the optional ``apitools`` package is missing, ``import apache_beam`` logs a warning
through the *root* logger; with no handler configured yet, Python's ``logging.warning`` then
calls ``basicConfig()`` and installs a stderr handler, so an application that configures
logging after importing us would find its ``basicConfig`` silently ignored. Every module of
this package imports Beam through here: a temporary ``NullHandler`` keeps the root logger
untouched during that first import.
"""
import logging
import threading
import types
import weakref

_root = logging.getLogger()
_guard = None
if not _root.handlers:
    _guard = logging.NullHandler()
    _root.addHandler(_guard)
try:
    import apache_beam as beam  # noqa: E402
finally:
    if _guard is not None:
        _root.removeHandler(_guard)

__all__ = ["beam"]

# the collector threshold (defined beside, without Beam: the commands raise it before their imports)
from fair_forge_beam._gc import GC_THRESHOLD0, tune_gc  # noqa: E402
# glibc's mmap threshold, fixed where the threshold is raised (beside, without Beam, as well)
from fair_forge_beam._malloc import MMAP_THRESHOLD, tune_malloc  # noqa: E402

__all__ += ["tune_gc", "GC_THRESHOLD0", "tune_malloc", "MMAP_THRESHOLD"]


def inference_base():
    """Beam's ``apache_beam.ml.inference.base`` (``RunInference``, the model handlers), imported with
    its ``resource`` module bound. Beam imports the standard library's ``resource`` in one ``try``
    with its ``ModelManager``, which needs torch: without torch (this package's base install) it
    sets ``resource`` to None, and every model load then logs "WARNING root: Resource module is not
    available for current platform, memory usage cannot be fetched" and measures no memory (trial47
    B8: every judged audit on Linux printed it). The module is bound again here, where the platform
    has it; on one without it (Windows) Beam's line is true and stays. Each module that imports
    ``apache_beam.ml.inference.base`` calls this."""
    import apache_beam.ml.inference.base as base

    if getattr(base, "resource", True) is None:
        try:
            import resource
        except ImportError:
            return base
        base.resource = resource
    return base


__all__ += ["inference_base"]


_ARGS: "weakref.WeakKeyDictionary" = None  # function -> {bound: (args, defaults)}, see cache_dofn_signatures
_ARGS_LOCK = threading.Lock()


def _remember(module, name: str, make) -> None:
    """Replace ``module.name`` (one of Beam's functions) with ``make(original)``, once per process:
    the replacement is marked (``_ffb_cached``) and keeps Beam's function as ``__wrapped_original__``
    and its docstring. ``make`` runs under ``_ARGS_LOCK`` and must not take it."""
    with _ARGS_LOCK:
        original = getattr(module, name)
        if getattr(original, "_ffb_cached", False):
            return
        memo = make(original)
        memo._ffb_cached = True
        memo.__wrapped_original__ = original
        memo.__doc__ = original.__doc__
        setattr(module, name, memo)


def cache_dofn_signatures() -> None:
    """Make Beam's ``core.get_function_args_defaults`` (the argument names and default values of a
    function, from ``inspect.signature``) remember its answer per Python function, in this
    process, once; every other callable goes to Beam's function as before.

    Why: Beam asks it again for every method of a ``DoFn`` each time it checks the ``DoFn`` for
    state and timers (``userstate.get_dofn_specs``: ``dir(dofn)``, then every method), and it
    checks each ``DoFn`` several times while building the graph, translating it and creating
    every bundle's processor: about 37,000 calls for one small audit, the answer never changing
    (it depends on the function's code and defaults only, and for a bound method not on the
    object it is bound to). Measured on a Bayesian audit of 18 sessions in one process
    (in-memory runner, 3 rounds, interleaved): 3.0 -> 2.35 CPU s per audit, ``results.json``
    byte-identical. Answers are kept per function object (weakly: a function that goes away
    takes its entry with it) and handed out as new lists. Called by
    :func:`fair_forge_beam.beam_pipeline.run_pipeline`, beside :func:`tune_gc`."""
    global _ARGS
    from apache_beam.transforms import core

    with _ARGS_LOCK:
        if getattr(core.get_function_args_defaults, "_ffb_cached", False):
            return
        original = core.get_function_args_defaults
        _ARGS = weakref.WeakKeyDictionary()

        def get_function_args_defaults(f):
            bound = isinstance(f, types.MethodType)
            func = f.__func__ if bound else f
            if type(func) is not types.FunctionType:
                return original(f)
            per = _ARGS.get(func)
            hit = None if per is None else per.get(bound)
            if hit is None:
                args, defaults = original(f)
                hit = (tuple(args), tuple(defaults))
                with _ARGS_LOCK:
                    _ARGS.setdefault(func, {})[bound] = hit
            return list(hit[0]), list(hit[1])

        get_function_args_defaults._ffb_cached = True
        get_function_args_defaults.__wrapped_original__ = original
        core.get_function_args_defaults = get_function_args_defaults


__all__ += ["cache_dofn_signatures"]


class _MemoBz2:
    """The ``bz2`` module as Beam's pickler sees it (:func:`cache_pickle_compression`): ``compress``
    and ``decompress`` answer the same bytes again from memory; everything else is ``bz2``'s."""

    def __init__(self, module, max_bytes: int):
        import collections

        self._bz2, self._max, self._held = module, max_bytes, 0
        self._memo: "collections.OrderedDict" = collections.OrderedDict()  # (op, level, in) -> out, oldest first
        self._lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self._bz2, name)

    def _answer(self, key: tuple, make):
        with self._lock:
            hit = self._memo.get(key)
            if hit is not None:
                self._memo.move_to_end(key)
                return hit
        out = make()
        size = len(key[2]) + len(out)
        if size <= self._max // 16:  # a very large payload is not kept
            with self._lock:
                if key not in self._memo:
                    self._memo[key] = out
                    self._held += size
                    while self._held > self._max:
                        (_, _, old), gone = self._memo.popitem(last=False)
                        self._held -= len(old) + len(gone)
        return out

    def compress(self, data, compresslevel=9):
        if type(data) is not bytes:
            return self._bz2.compress(data, compresslevel)
        return self._answer(("c", compresslevel, data), lambda: self._bz2.compress(data, compresslevel))

    def decompress(self, data):
        if type(data) is not bytes:
            return self._bz2.decompress(data)
        return self._answer(("d", None, data), lambda: self._bz2.decompress(data))


#: bytes (inputs and outputs) that :func:`cache_pickle_compression` keeps at most
PICKLE_MEMO_BYTES = 32 * 2**20


def cache_pickle_compression() -> None:
    """Make Beam's pickler (``apache_beam.internal.cloudpickle_pickler``: every ``DoFn``, ``CombineFn``
    and coder of a job is pickled, then ``bz2``-compressed at level 9, and read back the other way)
    compress or decompress the same bytes once in this process; the bytes it makes and reads are
    the same as before (the same ``bz2`` calls, their answers remembered), so the job's
    representation does not change.

    Why: building and translating a job pickles the same functions several times, and the
    in-memory runner unpickles each stage's functions again for every bundle processor: in one
    small audit (10 sessions, Bayesian humanity+toxicity) 460 compressions of 231 distinct
    payloads and 743 decompressions of 209, 0.26 of its 1.47 CPU s. At most
    :data:`PICKLE_MEMO_BYTES` are kept (least recently used dropped first; one payload above a
    sixteenth of it is never kept). Called by :func:`fair_forge_beam.beam_pipeline.run_pipeline`,
    beside :func:`cache_dofn_signatures`."""
    import bz2

    from apache_beam.internal import cloudpickle_pickler

    with _ARGS_LOCK:
        if isinstance(getattr(cloudpickle_pickler, "bz2", None), _MemoBz2):
            return
        if getattr(cloudpickle_pickler, "bz2", None) is bz2:
            cloudpickle_pickler.bz2 = _MemoBz2(bz2, PICKLE_MEMO_BYTES)


__all__ += ["cache_pickle_compression"]


#: ``id(dofn) -> (weak reference to it, (state specs, timer specs))`` (see cache_dofn_specs)
_SPECS: "dict" = {}


def cache_dofn_specs() -> None:
    """Make Beam's ``userstate.get_dofn_specs`` (a ``DoFn``'s state and timer specs: ``dir(dofn)``,
    then the default values of every method's arguments) answer once per ``DoFn`` object, in this
    process; it hands out new sets each time. A ``DoFn`` that cannot be weakly referenced, and one
    that raises (duplicate parameters), go to Beam's function every time.

    Why: Beam asks it for every ``DoFn`` each time it checks whether the ``DoFn`` is stateful (a
    ``ParDo``'s construction and translation, every ``DoFnSignature``, each bundle processor's
    runner): 1,149 calls for 290 objects in one small audit (10 sessions, Bayesian
    humanity+toxicity), 0.14 of its 1.25 CPU s. An entry goes with its ``DoFn`` (a weak reference
    whose callback drops it). Called by :func:`fair_forge_beam.beam_pipeline.run_pipeline`, beside
    :func:`cache_dofn_signatures`."""
    from apache_beam.transforms import userstate

    def make(original):
        def get_dofn_specs(dofn):
            key = id(dofn)
            hit = _SPECS.get(key)
            if hit is not None and hit[0]() is dofn:
                return set(hit[1][0]), set(hit[1][1])
            state, timers = original(dofn)
            try:
                ref = weakref.ref(dofn, lambda _, key=key: _SPECS.pop(key, None))
            except TypeError:  # no weak references to it: not kept
                return state, timers
            _SPECS[key] = (ref, (frozenset(state), frozenset(timers)))
            return set(state), set(timers)

        return get_dofn_specs

    _remember(userstate, "get_dofn_specs", make)


__all__ += ["cache_dofn_specs"]


#: ``code object -> the source text Beam's yield-and-return check reads`` (see cache_dofn_sources)
_SOURCES: "dict" = {}


def cache_dofn_sources() -> None:
    """Make Beam's ``core._get_function_body_without_inners`` (the source text of a ``DoFn``'s
    ``process`` method without its inner functions, read with ``inspect.getsourcelines``) read a
    method's source once per code object in this process; Beam's check of that text
    (``_check_fn_use_yield_and_return``: yield and return in one method, its "returned None" warning)
    still runs on every ``ParDo`` as before, on the same text. A callable that is not a Python
    function or method, and one whose source cannot be read (Beam's check then says nothing, as
    before), go to Beam's function every time.

    Why: Beam reads and tokenizes the source file's lines of ``process`` for every ``ParDo`` it
    constructs (every ``Map``, ``FlatMap`` and ``Filter`` too, whose ``process`` is one method),
    although the text depends on the code only: 1,968 reads in 20 small pipelines of
    tests/test_reader_hostile.py, 4 % of their CPU under a profile (fast44). The text is
    kept per code object (a method's code lives as long as its class; a source file edited while
    the process runs is not read again, as Python's own ``linecache`` would not either for code
    already loaded). Called by :func:`fair_forge_beam.beam_pipeline.run_pipeline`, beside
    :func:`cache_dofn_signatures`."""
    import inspect

    from apache_beam.transforms import core

    def make(original):
        def _get_function_body_without_inners(func):
            target = inspect.unwrap(func.__func__ if isinstance(func, types.MethodType) else func)
            if type(target) is not types.FunctionType:
                return original(func)
            code = target.__code__
            text = _SOURCES.get(code)
            if text is None:
                text = _SOURCES.setdefault(code, original(func))  # raises as Beam's does (no source): nothing kept
            return text

        return _get_function_body_without_inners

    _remember(core, "_get_function_body_without_inners", make)


__all__ += ["cache_dofn_sources"]

def probe_ipython_only_when_imported() -> None:
    """Make Beam's ``interactive_utils.is_in_ipython`` (and each Beam module's own name for it) answer
    ``False`` without importing IPython when IPython is not imported in this process; when it is,
    Beam's function answers, as before.

    Why: Beam asks it for every transform it applies (``alter_label_if_ipython``) and when a
    pipeline finishes, and its answer imports IPython (``from IPython import get_ipython``) when
    IPython is installed: 0.04-0.06 CPU s of README's main job (issue 26) for an answer known
    without it, since a process running in an IPython shell or kernel has imported IPython before it
    runs the user's code. The answer is the same in every process. Called by
    :func:`fair_forge_beam.beam_pipeline.run_pipeline`, beside :func:`cache_dofn_signatures`;
    tests/test_beam_ipython_probe.py checks that a job's process no longer imports IPython, that
    Beam's answer is still asked for inside IPython, and that Beam's modules use the name replaced."""
    import sys

    from apache_beam.utils import interactive_utils

    with _ARGS_LOCK:
        current = interactive_utils.is_in_ipython
        if getattr(current, "_ffb_cached", False):
            return
        original = current

        def is_in_ipython():
            if "IPython" not in sys.modules:  # no IPython shell without IPython imported
                return False
            return original() and _interactive_beam_loads()

        is_in_ipython._ffb_cached = True
        is_in_ipython.__wrapped_original__ = original
        is_in_ipython.__doc__ = original.__doc__
        for name, module in list(sys.modules.items()):  # the modules that imported the name itself
            if name.startswith("apache_beam") and getattr(module, "is_in_ipython", None) is original:
                module.is_in_ipython = is_in_ipython


_INTERACTIVE: list = []  # [whether Beam's interactive environment imports], once per process


def _interactive_beam_loads() -> bool:
    """Whether Beam's interactive environment (what Beam applies in an IPython shell) can be imported
    in this process, asked once. It imports ``apache_beam.dataframe``, which needs the pandas range
    of Beam's ``interactive`` extra (``<2.4`` for Beam 2.77); this package pins pandas 3, so inside
    IPython or Jupyter every pipeline failed in ``Pipeline.apply`` (``DataFrame has no attribute
    'first'``, trial37b B8). When it cannot be imported, the pipeline runs as outside IPython (Beam's
    interactive features are unavailable either way) and one warning says why."""
    with _ARGS_LOCK:
        if not _INTERACTIVE:
            try:
                import apache_beam.runners.interactive.interactive_environment  # noqa: F401
                _INTERACTIVE.append(True)
            except Exception as exc:  # noqa: BLE001 - an import failing inside Beam's dataframe module
                _INTERACTIVE.append(False)
                logging.getLogger(__name__).warning(
                    "Beam's interactive mode cannot load in this IPython session (%s: %s; its pandas range is not the "
                    "installed one): pipelines run as outside IPython", type(exc).__name__, exc)
        return _INTERACTIVE[0]


__all__ += ["probe_ipython_only_when_imported"]
