"""Every keyword of the Python API is read by someone or refused (trial36 T1: ``Humanity.run(R,
statistcal_mode=BayesianMode())`` ran in the default frequentist mode and ``Toxicity.run(R,
toxicity_scorer="profanity-check")`` with the HurtLex rule, 0.8333 toxic where the classifier gives
0.1556, without a word: a keyword the metric does not take went to the retriever, whose base
``__init__`` stores anything)."""
from __future__ import annotations

import pickle

import pytest

from fair_forge_beam.io.read import ReadInteractions
from fair_forge_beam.io.retriever import Keywords, Retriever, declared_keywords_problem, unread_keywords_problem
from fair_forge_beam.metrics.humanity import Humanity
from fair_forge_beam.metrics.toxicity import Toxicity
from fair_forge_beam.statistical import BayesianMode


def _session(i: int) -> dict:
    return {"session_id": f"s{i}", "assistant_id": "bot", "language": "english", "context": "",
            "conversation": [{"qa_id": f"q{i}", "query": "how are you?", "assistant": "happy to help, glad you asked"}]}


class Sessions(Retriever):
    """The upstream way: keywords read from self.kwargs while loading."""

    def load_dataset(self):
        return [_session(i) for i in range(self.kwargs.get("n", 3))]


class Declared(Retriever):
    """A retriever that declares its keywords."""

    def __init__(self, path: str, limit: int = 3):
        super().__init__()
        self.path, self.limit = path, limit

    def load_dataset(self):
        return [_session(i) for i in range(self.limit)]


def test_a_misspelt_metric_keyword_is_refused_naming_the_keyword_it_is_nearest_to():
    with pytest.raises(TypeError) as exc:
        Humanity.run(Sessions, statistcal_mode=BayesianMode(mc_samples=200), n=2)
    msg = str(exc.value)
    assert "Sessions never read the keyword argument given to it: 'statistcal_mode' (not a keyword of Humanity: " \
           "did you mean statistical_mode=?) (it asked for 'n')" in msg, msg


def test_the_command_lines_spelling_is_refused_saying_the_python_spelling():
    with pytest.raises(TypeError) as exc:
        Toxicity.run(Sessions, n=2, toxicity_scorer="profanity-check")
    msg = str(exc.value)
    assert "'toxicity_scorer' (the command line's --toxicity-scorer; in Python: Toxicity(toxicity_classifier=" \
           "'profanity-check'" in msg, msg


def test_the_command_lines_spelling_of_a_value_works_under_the_python_keyword():
    from fair_forge_beam.components.group_extractor import KeywordGroupExtractor
    from fair_forge_beam.components.toxicity_classifier import ProfanityCheckClassifier

    t = Toxicity(toxicity_classifier="profanity-check", group_extractor="keyword")
    assert isinstance(t.classifier, ProfanityCheckClassifier) and isinstance(t.extractor, KeywordGroupExtractor)
    assert Toxicity(toxicity_classifier="hurtlex", group_extractor="keyword").classifier is None
    with pytest.raises(ValueError, match="a name is one of \\['hurtlex', 'profanity-check'\\]"):
        Toxicity(toxicity_classifier="perspective", group_extractor="keyword")
    with pytest.raises(ValueError, match="a name is 'keyword' or 'embedding'"):
        Toxicity(group_extractor="keywords")


def test_a_keyword_the_retriever_reads_is_passed_on():
    res = Humanity.run(Sessions, n=2)
    assert len(res.sessions) == 2 and not res.dead_letter


def test_a_retriever_that_declares_its_keywords_refuses_another_before_any_pipeline():
    with pytest.raises(TypeError, match="Declared takes no keyword argument 'pth' \\(did you mean 'path'\\?\\); "
                                        "its keywords: 'path', 'limit'"):
        ReadInteractions(retriever=Declared, retriever_kwargs={"pth": "x"})
    with pytest.raises(TypeError, match="Declared: missing a required argument: 'path'"):
        ReadInteractions(retriever=Declared, retriever_kwargs={})
    assert declared_keywords_problem(Declared, {"path": "x", "limit": 2}) is None
    assert declared_keywords_problem(Sessions, {"anything": 1}) is None  # **kwargs: checked once loaded
    with pytest.raises(TypeError, match="'statistcal_mode' \\(not a keyword of Humanity: did you mean statistical_mode=\\?\\)"):
        Humanity.run(Declared, path="x", statistcal_mode=BayesianMode())


def test_keywords_remember_what_was_asked_for():
    kw = Keywords(n=1, m=2, k=3)
    kw.get("n")
    assert kw.unread() == ["m", "k"]
    assert "m" in kw and kw.unread() == ["k"]
    dict(kw)  # the whole mapping read: every key
    assert kw.unread() == []
    for whole in (lambda d: d.items(), lambda d: list(d), lambda d: {**d}, lambda d: d.copy(),
                  lambda d: pickle.loads(pickle.dumps(d))):
        kw = Keywords(a=1)
        whole(kw)
        assert kw.unread() == [], whole
    r = Sessions(n=2, typo=1)
    r.load_dataset()
    assert unread_keywords_problem(r).startswith("Sessions never read the keyword argument given to it: 'typo' "
                                                 "(it asked for 'n')")


def test_verbose_is_read(capsys):
    """run's own keyword `verbose` (upstream's) was accepted and read by nobody."""
    Humanity.run(Sessions, n=2, verbose=True)
    assert "Humanity.run: 2 interactions scored, 2 sessions, 3 slices, 0 dead letters, 0 data-quality warnings" \
        in capsys.readouterr().err
    Humanity.run(Sessions, n=2)
    assert "Humanity.run:" not in capsys.readouterr().err
