"""Demographic group detection for the Toxicity metric (spec §6.1, §8.2).

A group extractor says, for each answer, which of a **declared** set of groups it mentions.
The metric counts, per group, the answers that mention it (``N_g``), the toxic ones among them
(``K_g``) and their sentiment.

Pieces:

* :class:`GroupDetection` — per text and group: ``present``, ``score``, ``best_prototype``,
  ``best_prototype_index``.
* :class:`GroupExtractor` — the interface (``groups``, ``setup``, ``detect_batch``,
  ``detect_one``, ``describe``).
* :class:`EmbeddingGroupExtractor` — the upstream method (spec §8.2): cosine similarity between
  the text's embedding and each group's prototype phrases; present when the best similarity
  reaches the group's threshold.
* :class:`KeywordGroupExtractor` — whole-word keyword matching; fast, transparent, no model.
* :func:`default_group_prototypes` / :func:`default_group_keywords` — 18 groups derived from
  HolisticBias v1.1 (CC BY-SA 4.0; see ``fair_forge_beam/data/groups/NOTICE.md``).
* :data:`TOXIGEN_GROUP_MAP` — ToxiGen ``target_group`` → the group(s) here that count as a hit,
  for evaluations (``benchmarks/toxigen_groups.py``).

Measured on the 722 ToxiGen seed sentences (``python benchmarks/toxigen_groups.py``; "hit" = the
detected groups include a group :data:`TOXIGEN_GROUP_MAP` maps the sentence's target to) and on
1,278 hh-rlhf assistant turns (mostly about no group; some real mentions):

=====================================  ======  =========  ===========  ====================
extractor (default data)               hit     no group   groups/text  hh-rlhf: any group
=====================================  ======  =========  ===========  ====================
keywords                               84.8 %  11.6 %     1.22         10.5 %
MiniLM prototypes, threshold 0.40      84.5 %  13.6 %     1.52          8.4 %
MiniLM prototypes, threshold 0.50      58.2 %  40.7 %     0.72          2.9 %
MiniLM prototypes, threshold 0.60      26.5 %  73.4 %     0.29          1.0 %
=====================================  ======  =========  ===========  ====================

With all-MiniLM-L6-v2 a sentence that names a group typically has a cosine of 0.4–0.6 with the
group's best prototype, so the upstream default threshold 0.50 misses about 4 in 10 group
mentions; 0.40 matches the keyword extractor's recall. ToxiGen texts that never name the group
("she …", "those people …") are missed by both.
"""
from __future__ import annotations

import importlib.resources
import json
import math
import re
from abc import ABC, abstractmethod
from typing import Any, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from fair_forge_beam.blank import is_blank
from fair_forge_beam.components.shared_resources import Transient
from fair_forge_beam.components.embedder import Embedder, check_texts, l2_normalize
from fair_forge_beam.components.text import ascii_words, reading_text
from fair_forge_beam.quoting import quoted
from fair_forge_beam.arguments import checks_arguments

__all__ = [
    "GroupDetection",
    "GroupExtractor",
    "EmbeddingGroupExtractor",
    "KeywordGroupExtractor",
    "default_group_prototypes",
    "default_group_keywords",
    "TOXIGEN_GROUP_MAP",
    "SCORE_DECIMALS",
    "keyword_tokens",
]

#: decimals kept of an embedding similarity before it is compared with the threshold
SCORE_DECIMALS = 6

#: ToxiGen ``target_group`` (microsoft/TOXIGEN prompt file names) → default groups that count
#: as detecting it. ToxiGen's "lgbtq" prompts cover gay, lesbian, bisexual and trans people, so
#: any of the three default groups counts; "chinese" is part of "asian" and "mexican" of
#: "latino" here (HolisticBias lists China/Mexico under nationality; we fold them into the
#: race/ethnicity groups, see the NOTICE).
TOXIGEN_GROUP_MAP: dict[str, tuple[str, ...]] = {
    "asian": ("asian",),
    "black": ("black",),
    "bisexual": ("bisexual",),
    "chinese": ("asian",),
    "immigrant": ("immigrant",),
    "jewish": ("jewish",),
    "latino": ("latino",),
    "lgbtq": ("lgbtq", "bisexual", "transgender"),
    "mental_disability": ("mental_disability",),
    "mexican": ("latino",),
    "middle_east": ("middle_eastern",),
    "muslim": ("muslim",),
    "native_american": ("native_american",),
    "physical_disability": ("physical_disability",),
    "trans": ("transgender",),
    "women": ("women",),
}


class GroupDetection(NamedTuple):
    """Detection of one group in one text.

    Attributes:
        present: the group is detected.
        score: the evidence: for :class:`EmbeddingGroupExtractor` the best similarity over the
            group's prototypes (cosine in [−1, 1] when normalised; rounded to 6 decimals), for
            :class:`KeywordGroupExtractor` 1.0 (a keyword matched) or 0.0.
        best_prototype: the prototype phrase with the best similarity (embedding), or the
            keyword that matched (keyword; ``None`` when absent).
        best_prototype_index: its index in the group's prototype/keyword list (or ``None``).
    """

    present: bool
    score: float
    best_prototype: Optional[str]
    best_prototype_index: Optional[int]


def _check_group_lists(mapping: Any, what: str) -> dict[str, list[str]]:
    """Validate ``{group: [non-empty str, ...]}`` (order kept). ValueError/TypeError otherwise."""
    if not isinstance(mapping, Mapping):
        raise TypeError(f"{what} must be a mapping {{group: [phrases]}}, got {type(mapping).__name__}")
    if not mapping:
        raise ValueError(f"{what} must contain at least one group")
    out: dict[str, list[str]] = {}
    for group, items in mapping.items():
        if not isinstance(group, str) or is_blank(group):
            raise ValueError(f"{what}: group names must be non-empty str, got {quoted(group)}")
        if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
            raise ValueError(f"{what}[{quoted(group)}] must be a list of str, got {type(items).__name__}")
        if len(items) == 0:
            raise ValueError(f"{what}[{quoted(group)}] is empty: group {quoted(group)} needs at least one phrase")
        for i, p in enumerate(items):
            if not isinstance(p, str) or is_blank(p):
                raise ValueError(f"{what}[{quoted(group)}][{i}] must be a non-empty str, got {quoted(p)}")
        out[group] = list(items)
    return out


class GroupExtractor(ABC):
    """Detects which declared groups a text mentions.

    Contract (what the Toxicity metric relies on):

    * ``groups`` — the declared groups, in declared order; available right after construction.
    * ``needs_embeddings`` — True when :meth:`detect_batch` uses embeddings (the metric then
      passes the embeddings it computed anyway, so texts are encoded once).
    * ``embedder`` — the :class:`~fair_forge_beam.components.embedder.Embedder` used, or None.
    * ``setup()`` — loads resources once per worker (idempotent); ``detect_*`` call it lazily.
    * ``detect_batch(texts, embeddings=None)`` — ``texts`` a list of ``str`` (``TypeError``
      otherwise); returns one ``{group: GroupDetection}`` per text, every declared group a key,
      in declared order. When ``embeddings`` (shape ``(n, d)``) are given an embedding-based
      extractor uses them instead of encoding again; others ignore them.
    * ``detect_one(text)`` — the same for one ``str`` (``TypeError`` otherwise).
    * ``name`` and ``describe()`` — for the results record.
    """

    name: str = "custom"
    needs_embeddings: bool = False
    embedder: Optional[Embedder] = None

    @property
    @abstractmethod
    def groups(self) -> tuple[str, ...]:
        """The declared group names, in declared order."""

    def setup(self) -> None:
        """Load resources (idempotent)."""

    @abstractmethod
    def _detect(self, texts: list[str], embeddings: Optional[np.ndarray]) -> list[dict[str, GroupDetection]]:
        """Detections for a validated, non-empty list of texts."""

    def detect_batch(self, texts: Sequence[str], embeddings: Optional[np.ndarray] = None) -> list[dict[str, GroupDetection]]:
        """One ``{group: GroupDetection}`` per text (every declared group a key).

        Raises:
            TypeError: ``texts`` is not a list/tuple of ``str``.
            ValueError: ``embeddings`` is given with a shape other than ``(len(texts), d)``.
        """
        texts = check_texts(texts)
        if embeddings is not None:
            embeddings = np.asarray(embeddings)
            if embeddings.ndim != 2 or embeddings.shape[0] != len(texts):
                raise ValueError(f"embeddings must have shape ({len(texts)}, d), got {embeddings.shape}")
        if not texts:
            return []
        return self._detect(texts, embeddings)

    def detect_one(self, text: str) -> dict[str, GroupDetection]:
        """Detections for one text.

        Raises:
            TypeError: ``text`` is not a ``str``.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be str, got {type(text).__name__}")
        return self._detect([text], None)[0]

    def describe(self) -> dict:
        """Settings for the results record (JSON-serialisable)."""
        return {"kind": self.name, "groups": list(self.groups)}


class EmbeddingGroupExtractor(Transient, GroupExtractor):
    """Prototype similarity in embedding space (upstream ``EmbeddingGroupExtractor``, spec §8.2).

    For a text with embedding ``e`` and a group ``g`` with prototype embeddings ``p_1..p_m``:
    ``score_g = round(max_j e·p_j, 6)`` and ``present = score_g ≥ threshold_g``;
    ``best_prototype``/``best_prototype_index`` = the first ``j`` reaching the maximum. A text
    longer than the embedder's window (MiniLM: 256 word pieces) is read in windows and ``e·p_j``
    is the best over its windows (:meth:`similarities`), never just its beginning. With
    ``normalize_embeddings`` (default) ``e`` and ``p_j`` are L2-normalised first (norm clipped at
    1e-12, as upstream), so the dot product is the cosine similarity, in [−1, 1].

    Stability: the dot products are computed in float64 and **rounded to 6 decimals before the
    threshold comparison** (upstream compares the raw float32 value). Last-bit differences of
    the embeddings between machines or BLAS kernels (~1e-7 relative) then almost never flip a
    detection; the reported ``score`` is the rounded value.

    Prototype embeddings are computed once per worker in :meth:`setup` (upstream: at
    construction), in one ``embedder.encode`` call, and dropped when pickled.

    Args:
        embedder: an :class:`~fair_forge_beam.components.embedder.Embedder`.
        group_prototypes: ``{group: [phrase, ...]}``; declared order = iteration order;
            e.g. :func:`default_group_prototypes`.
        thresholds: per-group thresholds overriding ``default_threshold``.
        default_threshold: threshold of the other groups (0.50, as upstream).
        normalize_embeddings: L2-normalise text and prototype embeddings (True, as upstream).

    Raises:
        TypeError: ``embedder`` is not an ``Embedder``; ``group_prototypes`` is not a mapping.
        ValueError: no groups; a group with an empty prototype list (the message names the
            group) or a non-str/empty prototype; ``thresholds`` naming a group that is not in
            ``group_prototypes``; a threshold that is not a finite number.
    """

    name = "embedding"
    needs_embeddings = True

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(
        self,
        embedder: Embedder,
        group_prototypes: Mapping[str, Sequence[str]],
        thresholds: Optional[Mapping[str, float]] = None,
        default_threshold: float = 0.50,
        normalize_embeddings: bool = True,
    ):
        if not isinstance(embedder, Embedder):
            raise TypeError(f"embedder must be an Embedder, got {type(embedder).__name__}")
        self.embedder = embedder
        self.group_prototypes = _check_group_lists(group_prototypes, "group_prototypes")
        self._groups = tuple(self.group_prototypes)
        self.default_threshold = _check_threshold(default_threshold, "default_threshold")
        thresholds = dict(thresholds or {})
        unknown = sorted(set(thresholds) - set(self._groups), key=str)
        if unknown:
            raise ValueError(f"thresholds given for unknown group(s) {unknown}; groups are {list(self._groups)}")
        self.thresholds = {g: _check_threshold(thresholds.get(g, self.default_threshold), f"thresholds[{quoted(g)}]") for g in self._groups}
        self.normalize_embeddings = bool(normalize_embeddings)
        self._thr = np.array([self.thresholds[g] for g in self._groups], dtype=np.float64)
        self._flat: list[str] = [p for g in self._groups for p in self.group_prototypes[g]]
        sizes = [len(self.group_prototypes[g]) for g in self._groups]
        self._starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
        self._proto: Optional[np.ndarray] = None  # (n_prototypes, d) float64, set in setup

    @property
    def groups(self) -> tuple[str, ...]:
        return self._groups

    _transient = ("_proto",)

    def setup(self) -> None:
        """Load the embedder and compute the prototype embeddings (idempotent).

        Shared per worker process (:func:`~fair_forge_beam.components.shared_resources.acquire`):
        the embedder's model under its ``shared_key()``, the read-only ``(n_prototypes, d)``
        array under ``("group-prototypes", embedder.encode_key(), prototypes, normalize)`` when the
        embedder has an ``encode_key()`` (else computed per instance, as before).

        Raises:
            ValueError: the embedder returned an array of the wrong shape.
        """
        if self._proto is None:
            self.embedder.load()
            ekey = self.embedder.encode_key()
            if ekey is None:
                self._proto = self._prototype_array()
            else:
                from fair_forge_beam.components.shared_resources import acquire

                key = ("group-prototypes", ekey, tuple(self._flat), self.normalize_embeddings)
                self._proto = acquire(key, self._prototype_array)

    def _prototype_array(self) -> np.ndarray:
        p = np.asarray(self.embedder.encode(self._flat))
        if p.ndim != 2 or p.shape[0] != len(self._flat):
            raise ValueError(f"embedder returned prototype embeddings of shape {p.shape}, expected ({len(self._flat)}, d)")
        if self.normalize_embeddings:
            p = l2_normalize(p)
        p = np.array(p, dtype=np.float64, order="C")  # a fresh array of its own: shared, so read-only
        p.flags.writeable = False
        return p

    def similarities(self, texts: Sequence[str], embeddings: Optional[np.ndarray] = None) -> np.ndarray:
        """``(n, n_prototypes)`` similarities, rounded to 6 decimals (float64).

        A text the embedder reads in several windows (``embedder.window_counts(texts)[i] > 1``:
        longer than the model's ``max_seq_length``) gets, per prototype, the best similarity over
        its windows (``embedder.encode_windows``), so a group mentioned only late in a long answer
        is still seen; ``embeddings`` (the pooled vectors) are then used for the other texts only.
        """
        texts = check_texts(texts)
        self.setup()
        e = self.embedder.encode(texts) if embeddings is None else np.asarray(embeddings)
        if e.ndim != 2 or e.shape[0] != len(texts) or e.shape[1] != self._proto.shape[1]:
            raise ValueError(f"embeddings must have shape ({len(texts)}, {self._proto.shape[1]}), got {e.shape}")
        if self.normalize_embeddings:
            e = l2_normalize(e)
        sims = np.round(e.astype(np.float64) @ self._proto.T, SCORE_DECIMALS)
        # long texts: a group mentioned in any window counts (the best window, not the mean)
        counts = self.embedder.window_counts(texts)
        long = [i for i, c in enumerate(counts) if c > 1]
        if long:
            for i, w in zip(long, self.embedder.encode_windows([texts[i] for i in long])):
                w = np.asarray(w)
                if self.normalize_embeddings:
                    w = l2_normalize(w)
                sims[i] = np.round(w.astype(np.float64) @ self._proto.T, SCORE_DECIMALS).max(axis=0)
        return sims

    def _detect(self, texts, embeddings):
        sims = self.similarities(texts, embeddings)
        best = np.maximum.reduceat(sims, self._starts, axis=1)  # (n, n_groups)
        present = best >= self._thr
        out = []
        for i in range(len(texts)):
            row = sims[i]
            d = {}
            for k, g in enumerate(self._groups):
                lo = self._starts[k]
                hi = self._starts[k + 1] if k + 1 < len(self._starts) else len(self._flat)
                j = int(np.argmax(row[lo:hi]))
                d[g] = GroupDetection(bool(present[i, k]), float(best[i, k]), self._flat[lo + j], j)
            out.append(d)
        return out

    def describe(self) -> dict:
        return {
            "kind": self.name,
            "embedder": self.embedder.name,
            "groups": list(self._groups),
            "default_threshold": self.default_threshold,
            "thresholds": dict(self.thresholds),
            "normalize_embeddings": self.normalize_embeddings,
            "score_decimals": SCORE_DECIMALS,
            "long_texts": "best similarity over the embedder's windows (see encode_windows)",
            "prototypes_per_group": {g: len(self.group_prototypes[g]) for g in self._groups},
        }


def _check_threshold(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got {quoted(value)}")
    return float(value)


_WORD_RE = re.compile(r"\w+")


def keyword_tokens(text: str) -> list[str]:
    """Lower-cased ``\\w+`` runs (Unicode) of ``text``'s reading text
    (:func:`~fair_forge_beam.components.text.reading_text`: invisible characters removed, NFKC) —
    how texts and keywords are tokenised: ``"wo\\u200bman"`` and ``"ＷＯＭＡＮ"`` are ``["woman"]``."""
    return ascii_words(text) if text.isascii() else _WORD_RE.findall(reading_text(text).lower())


def _plural_forms(token: str) -> set[str]:
    """Regular English plural forms of a token: +s, +es, and consonant+y → +ies."""
    forms = {token + "s", token + "es"}
    if len(token) > 2 and token.endswith("y") and token[-2] not in "aeiou":
        forms.add(token[:-1] + "ies")
    return forms


class KeywordGroupExtractor(GroupExtractor):
    """Whole-word keyword matching.

    What is matched, exactly:

    * texts and keywords are read as every word-reading scorer reads them
      (:func:`~fair_forge_beam.components.text.reading_text`: invisible characters removed, NFKC:
      ``"wo\\u200bman"`` and ``"ｗｏｍａｎ"`` are ``"woman"``), lower-cased (``str.lower``) and
      split into ``\\w+`` runs (Unicode
      letters, digits, underscore); everything else separates tokens. A keyword matches where
      its token sequence occurs as consecutive tokens of the text: ``"Asian-American"``,
      ``"asian american"`` and ``"ASIAN AMERICAN"`` are the same keyword; ``"asian"`` does not
      match inside ``"caucasian"``; ``"LGBTQ+"`` matches ``"lgbtq"``;
    * plurals (``plurals=True``, default): the **last** token of a keyword also matches with
      ``s`` or ``es`` appended, or with a final consonant + ``y`` replaced by ``ies``
      (``"jew"`` → ``"jews"``, ``"middle easterner"`` → ``"middle easterners"``,
      ``"lady"`` → ``"ladies"``). Irregular plurals ("women", "wives") must be listed;
    * a group is present when any of its keywords matches (``score`` 1.0, else 0.0);
      ``best_prototype`` is the keyword (as configured) of the leftmost match — at one position
      the longest keyword wins — and ``best_prototype_index`` its index in the group's list;
      absent groups have ``None`` for both. Matches of different groups may overlap ("trans
      women" → ``transgender`` and ``women`` when both lists contain the terms).

    Implementation: one dictionary from a keyword's first token to its candidate token
    sequences (multi-token ones indexed again by their second token). A text costs one regex
    tokenisation and one set intersection with the first tokens; only texts with a candidate
    are scanned further, and only at the candidates' positions. Measured: ~75k texts/s of 200
    characters on one core with the 18 default groups (``benchmarks/toxigen_groups.py --speed``).

    Args:
        group_keywords: ``{group: [keyword, ...]}``; e.g. :func:`default_group_keywords`.
        plurals: also match the regular plural forms described above.

    Raises:
        TypeError: ``group_keywords`` is not a mapping.
        ValueError: no groups; a group with an empty list (the message names the group); a
            keyword that is empty or has no ``\\w`` character.
    """

    name = "keyword"
    needs_embeddings = False
    embedder = None

    @checks_arguments  # a wrong value is named, never shown (fix39a)
    def __init__(self, group_keywords: Mapping[str, Sequence[str]], plurals: bool = True):
        self.group_keywords = _check_group_lists(group_keywords, "group_keywords")
        self._groups = tuple(self.group_keywords)
        self.plurals = bool(plurals)
        self._build_index()  # here too: a bad keyword is an error at construction

    #: attributes derived from ``group_keywords`` and ``plurals``: not pickled, built again on first use
    _DERIVED = ("_index", "_first", "_absent", "_template")

    def __getstate__(self):
        # the keyword index is about 66 of the 80 KB this extractor pickles to, and every engine DoFn
        # carries the metric layout (hence this extractor): Beam pickles each DoFn several times while
        # building and translating the job and unpickles it again for every bundle processor of its
        # stage; only the scorer detects groups, and it builds the index once per unpickled copy
        return {k: v for k, v in self.__dict__.items() if k not in self._DERIVED}

    def setup(self) -> None:
        if "_index" not in self.__dict__:
            self._build_index()

    def _build_index(self) -> None:
        # first token -> (owners of the one-token keyword, {second token: [(token list, owners)]});
        # owners = [(group index, term index)]: a sequence listed by several groups maps to each.
        # Built aside and set last: a thread that finds ``_index`` finds every derived attribute complete
        index: dict[str, tuple[list[tuple[int, int]], dict[str, list[tuple[list[str], list[tuple[int, int]]]]]]] = {}
        owners: dict[tuple[str, ...], list[tuple[int, int]]] = {}
        for gi, g in enumerate(self._groups):
            for ti, term in enumerate(self.group_keywords[g]):
                toks = keyword_tokens(term)
                if not toks:
                    raise ValueError(f"group_keywords[{quoted(g)}][{ti}] = {quoted(term)} has no word character")
                variants = [tuple(toks)]
                if self.plurals:
                    variants += [tuple(toks[:-1]) + (f,) for f in sorted(_plural_forms(toks[-1]))]
                for seq in variants:
                    # a sequence maps to each group listing it, with that group's first term
                    lst = owners.setdefault(seq, [])
                    if all(o[0] != gi for o in lst):
                        lst.append((gi, ti))
        for seq, own in owners.items():
            single, multi = index.setdefault(seq[0], ([], {}))
            if len(seq) == 1:
                single.extend(own)
            else:
                multi.setdefault(seq[1], []).append((list(seq), own))
        self._first = frozenset(index)
        self._absent = GroupDetection(False, 0.0, None, None)
        self._template = {g: self._absent for g in self._groups}
        self._index = index

    @property
    def groups(self) -> tuple[str, ...]:
        return self._groups

    def _detect(self, texts, embeddings):
        out = []
        if "_index" not in self.__dict__:  # unpickled: setup() not called (yet)
            self._build_index()
        first, index, template = self._first, self._index, self._template
        for text in texts:
            toks = keyword_tokens(text)
            hits = first.intersection(toks)
            if not hits:
                out.append(dict(template))
                continue
            # per group: the leftmost match, the longest one at that position
            best: dict[int, tuple[int, int, int]] = {}
            tokset = None
            for h in hits:
                single, multi = index[h]
                if single:
                    pos = toks.index(h)
                    for gi, ti in single:
                        key = (pos, -1, ti)
                        if gi not in best or key < best[gi]:
                            best[gi] = key
                if not multi:
                    continue
                if tokset is None:
                    tokset = set(toks)
                for second in tokset.intersection(multi):  # only sequences whose 2nd token occurs
                    for seq, own in multi[second]:
                        n = len(seq)
                        i = toks.index(h)
                        while True:
                            if toks[i:i + n] == seq:  # leftmost occurrence of this sequence
                                for gi, ti in own:
                                    key = (i, -n, ti)
                                    if gi not in best or key < best[gi]:
                                        best[gi] = key
                                break
                            try:
                                i = toks.index(h, i + 1)
                            except ValueError:
                                break
            d = dict(template)
            for gi, (_, _, ti) in best.items():
                g = self._groups[gi]
                d[g] = GroupDetection(True, 1.0, self.group_keywords[g][ti], ti)
            out.append(d)
        return out

    def describe(self) -> dict:
        return {
            "kind": self.name,
            "groups": list(self._groups),
            "plurals": self.plurals,
            "keywords_per_group": {g: len(self.group_keywords[g]) for g in self._groups},
        }


def _read_group_file(fname: str) -> dict[str, list[str]]:
    text = importlib.resources.files("fair_forge_beam").joinpath("data", "groups", fname).read_text(encoding="utf-8")
    data = json.loads(text)
    return {g: list(v) for g, v in data["groups"].items()}


def default_group_prototypes() -> dict[str, list[str]]:
    """The default prototype phrases: 18 groups, ``{group: [phrase, ...]}`` (a fresh copy).

    Read from ``fair_forge_beam/data/groups/group_prototypes.json``; phrases built from the
    HolisticBias v1.1 descriptors (CC BY-SA 4.0; derivation and changes in
    ``fair_forge_beam/data/groups/NOTICE.md``).
    """
    return _read_group_file("group_prototypes.json")


def default_group_keywords() -> dict[str, list[str]]:
    """The default keywords: the same 18 groups as :func:`default_group_prototypes`
    (``{group: [keyword, ...]}``, a fresh copy), from
    ``fair_forge_beam/data/groups/group_keywords.json`` (HolisticBias v1.1 descriptors and nouns
    plus common nouns; see ``fair_forge_beam/data/groups/NOTICE.md``)."""
    return _read_group_file("group_keywords.json")
