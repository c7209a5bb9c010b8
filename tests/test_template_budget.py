"""Issue 28, hostile trial 2: a request or prompt template cannot build a big value or loop long.

``{{ ("a"|center(400000000))|length }}`` ran each turn (exit 0, 1.5 GB), ``~`` built 100 MB,
list ``+`` ran out of memory, two nested ``range(99999)`` loops hung the runner. Every way a
template builds a value or repeats work is bounded (components/template_sandbox.py): each case is
a one-line template error, quickly, with little memory."""
from __future__ import annotations

import time
import tracemalloc

import pytest

from fair_forge_beam.assistants.assistant import render_request

VALUES = {"query": "q\tx\ny", "history": [], "turn_index": 0}

HOSTILE = {
    "center filter": '{"m": {{ ("a"|center(400000000))|length }}}',
    "center filter, under the width limit, in a loop": '{% for i in range(1000) %}{% set x = "a"|center(999999) %}{% endfor %}{"m": 1}',
    "center method": '{"m": {{ "a".center(400000000)|length }}}',
    "ljust method in a loop": '{% for i in range(5000) %}{% set x = query.ljust(900000) %}{% endfor %}{"m": 1}',
    "zfill method": '{"m": {{ "1".zfill(400000000)|length }}}',
    "expandtabs": '{% set t = "\t" * 100000 %}{"m": {{ t.expandtabs(900000)|length }}}',
    "indent many lines": '{% set t = "\n" * 900000 %}{"m": {{ t|indent(900000)|length }}}',
    "replace grows": '{% set t = "a" * 900000 %}{"m": {{ t|replace("a", "bbbbbbbbbb")|length }}}',
    "replace method grows": '{% set t = "a" * 900000 %}{"m": {{ t.replace("a", "bbbbbbbbbb")|length }}}',
    "percent width": '{"m": {{ ("%400000000s" % "a")|length }}}',
    "percent star width": '{"m": {{ ("%*s" % (400000000, "a"))|length }}}',
    "format filter width": '{"m": {{ ("%400000000s"|format("a"))|length }}}',
    "str.format width": '{"m": {{ "{:>400000000}".format("a")|length }}}',
    "str.format nested width": '{"m": {{ "{:>{}}".format("a", 400000000)|length }}}',
    "concat chain": '{% set a = "a" * 900000 %}{% set b = a ~ a ~ a ~ a %}{"m": {{ b|length }}}',
    "concat in a loop": '{% set a = "a" * 900000 %}{% for i in range(1000) %}{% set b = a ~ "x" %}{% endfor %}{"m": 1}',
    "list plus": '{% set a = [0] * 400000 %}{% set b = a + a + a + a %}{"m": {{ b|length }}}',
    "string plus": '{% set a = "a" * 900000 %}{"m": {{ (a + a)|length }}}',
    "string times": '{"m": {{ ("ab" * 100000000)|length }}}',
    "nested list times": '{% set a = ["a" * 900000] * 1000 %}{"m": {{ a|string|length }}}',
    "join of shared items": '{% set a = ["a" * 900000] * 100 %}{"m": {{ a|join(",")|length }}}',
    "join method of shared items": '{% set a = ["a" * 900000] * 100 %}{"m": {{ ",".join(a)|length }}}',
    "sum of lists": '{% set a = [[0] * 300000] * 100 %}{"m": {{ a|sum(start=[])|length }}}',
    "int times": '{"m": {{ (10 ** 4000) * (10 ** 4000) }}}',
    "power": '{"m": {{ 10 ** 100000 }}}',
    "nested loops": '{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}{"m": 1}',
    "three nested loops": '{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}{% endfor %}{% endfor %}{% endfor %}{"m": 1}',
    "loop over a long string": '{% set s = "a" * 900000 %}{% for c in s %}{% for d in s %}{% endfor %}{% endfor %}{"m": 1}',
    "loop writing text": '{% for i in range(99999) %}' + "x" * 2000 + '{% endfor %}{"m": 1}',
    "loop printing a big value": '{% set j = ("a" * 900000)|tojson %}{"m": [{% for i in range(99999) %}{{ j }},{% endfor %}1]}',
    "recursive loop": '{% set t = [[1, 2, 3]] * 1000 %}{% for x in t recursive %}{% for y in t %}{{ loop(t) if false }}{% endfor %}{% endfor %}{"m": 1}',
    "lipsum": '{"m": {{ lipsum(99999)|length }}}',
    "batch": '{"m": {{ ([1]|batch(400000000, fill_with="x"))|list|length }}}',
    "big integers as text": '{% set a = [10 ** 4000] * 100000 %}{"m": {{ a|string|length }}}',
    # hostile trial 3: widths and counts the first checks did not see (each built before, up to 2.6 GB)
    "str.format nested width given as text": '{"m": {{ "{:{}}".format("a", "1999999999")|length }}}',
    "str.format nested width given as a float": '{"m": {{ "{:{}}".format("a", 99999999.0)|length }}}',
    "str.format nested precision of a float": '{"m": {{ "{:.{}f}".format(1.5, "99999999")|length }}}',
    "str.format width of a huge number of digits": '{"m": {{ "{:{}}".format("a", "9" * 5000)|length }}}',
    "str.format repeated field": '{"m": {{ ("{0}" * 9999).format("x" * 9999)|length }}}',
    "str.format_map repeated field": '{"m": {{ ("{a}" * 9999).format_map({"a": "x" * 9999})|length }}}',
    "str.format repr of a nested value": '{% set a = ["\x00" * 200000] * 5 %}{"m": {{ "{0!r}{0!r}".format(a)|length }}}',
    "join method of a long separator": '{"m": {{ ("a" * 99000).join(["b"] * 10000)|length }}}',
    "join filter of a long separator": '{"m": {{ (["b"] * 10000)|join("a" * 99000)|length }}}',
    "join method of a generator": '{"m": {{ ("a" * 99000).join(["b"] * 10000|map("upper"))|length }}}',
    "translate grows": '{"m": {{ ("a" * 900000).translate({97: "b" * 1000})|length }}}',
    "percent star widths under the limit": '{"m": {{ ("%*s%*s%*s" % (999999, "a", 999999, "a", 999999, "a"))|length }}}',
    "percent mapping key repeated": '{"m": {{ (("%(a)s" * 1000) % {"a": "x" * 900000})|length }}}',
    "percent precision of a float": '{"m": {{ ("%.999999f%.999999f" % (1.5, 1.5))|length }}}',
    "format filter star widths": '{"m": {{ ("%*s%*s"|format(999999, "a", 999999, "a"))|length }}}',
    "upper of a text that grows": '{"m": {{ ("\u00df" * 900000).upper()|length }}}',
    "wordwrap with a long wrap string": '{"m": {{ ("a " * 400000)|wordwrap(1, wrapstring="x" * 100)|length }}}',
    # session 9: a sum of many small lists copies its partial list once per item, quadratic time
    # from a value within the limit (1,000,000 one-item lists: about 1,000 s before)
    "sum of many one-item lists": '{% set a = [[0]] * 160000 %}{"m": {{ a|sum(start=[])|length }}}',
    "sum of many one-item tuples": '{% set a = [(0,)] * 160000 %}{"m": {{ a|sum(start=())|length }}}',
    # session 9: work that reads a long value without building one was not counted (a loop of 100,000 steps
    # searching a 450,000-item list: about 800 s; jinja2's max filter: about 3 hours)
    "search a list in a loop": '{% set a = [0] * 450000 %}{% for i in range(200) %}{% if 1 in a %}{% endif %}{% endfor %}{"m": 1}',
    "search a text in a loop": '{% set a = "a" * 900000 %}{% for i in range(200) %}{% if "b" not in a %}{% endif %}{% endfor %}{"m": 1}',
    "compare long lists in a loop": '{% set a = [0] * 450000 %}{% set b = [0] * 450000 %}{% for i in range(200) %}{% if a == b %}{% endif %}{% endfor %}{"m": 1}',
    "count method in a loop": '{% set a = [0] * 450000 %}{% for i in range(200) %}{% set c = a.count(1) %}{% endfor %}{"m": 1}',
    "find method in a loop": '{% set a = "a" * 900000 %}{% for i in range(200) %}{% set c = a.find("b") %}{% endfor %}{"m": 1}',
    "max filter in a loop": '{% set a = [0] * 450000 %}{% for i in range(200) %}{% set c = a|max %}{% endfor %}{"m": 1}',
    "slice in a loop": '{% set a = [0] * 450000 %}{% for i in range(200) %}{% set c = a[1:] %}{% endfor %}{"m": 1}',
    "eq test in a loop": '{% set a = [0] * 450000 %}{% for i in range(200) %}{% if a is eq(a) %}{% endif %}{% endfor %}{"m": 1}',
    "in test in a loop": '{% set a = [0] * 450000 %}{% for i in range(200) %}{% if 1 is in(a) %}{% endif %}{% endfor %}{"m": 1}',
    "loop.changed of a long list": '{% set a = [0] * 450000 %}{% for i in range(200) %}{% if loop.changed(a) %}{% endif %}{% endfor %}{"m": 1}',
    # session 9 trial: bytes were not counted at all (a 1.2 GB value from one replace, 5.5 GB in run_assistant)
    "bytes replace grows": '{"m": {{ ((0).to_bytes(35000, "big")).replace((0).to_bytes(1, "big"), (0).to_bytes(35000, "big"))|length }}}',
    "bytes built in a loop": '{% for i in range(99999) %}{% set b = (0).to_bytes(999999, "big") %}{% endfor %}{"m": 1}',
    "bytes expandtabs grows": '{"m": {{ ((9).to_bytes(9, "big") * 99999).expandtabs(999)|length }}}',
    "sum of many lists by attribute": '{% set a = [{"v": [0]}] * 100000 %}{"m": {{ a|sum(attribute="v", start=[])|length }}}',
}


#: the cases that run the budget out by work (each 7-15 s at 2 workers): the slow tier (docs/testing.md)
_LONG = {"eq test in a loop", "compare long lists in a loop", "max filter in a loop", "count method in a loop",
         "in test in a loop", "search a list in a loop", "loop.changed of a long list", "sum of many one-item tuples",
         "sum of many one-item lists", "sum of many lists by attribute"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in _LONG else n for n in sorted(HOSTILE)])
def test_a_template_cannot_build_big_values_or_loop_long(name):
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="request template") as exc:
        render_request(HOSTILE[name], VALUES)
    took = time.perf_counter() - t0
    assert "\n" not in str(exc.value)
    assert took < 5.0, (name, took)
    tracemalloc.start()  # again, its memory traced (tracing slows it down: timed above)
    try:
        with pytest.raises(ValueError, match="request template"):
            render_request(HOSTILE[name], VALUES)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, (name, peak / 2**20)


def test_legitimate_templates_still_render_and_given_values_may_be_long():
    history = [{"role": "user", "content": f"q{i}"} for i in range(50)]
    tpl = ('{"messages": [{% for m in history %}{"role": {{ m.role|tojson }}, "content": {{ m.content|tojson }}},{% endfor %}'
           '{"role": "user", "content": {{ query|tojson }}}], "n": {{ history|length }}, "s": {{ ("ab" * 3 ~ "c")|tojson }},'
           ' "k": {{ ("%5s" % "a")|tojson }}, "u": {{ query.upper()|tojson }}}')
    out = render_request(tpl, {"query": "hi", "history": history})
    ok = render_request('{"a": {{ "{} {:>5} {:.2f} {x}".format("a", "b", 1.234, x=7)|tojson }}, '
                        '"b": {{ ("%s-%05d %(k)s" if false else "%s-%05d" % ("a", 3))|tojson }}, '
                        '"c": {{ ",".join(["a", "b"])|tojson }}, "d": {{ "abc".translate({97: "xy"})|tojson }}, '
                        '"e": {{ "{a}{a}".format_map({"a": "z"})|tojson }}, "f": {{ (["p", "q"]|map("upper"))|join("+")|tojson }}, '
                        '"g": {{ ("%(k)s=%(k)s" % {"k": "v"})|tojson }}, "h": {{ "{0!r}".format("q")|tojson }}, '
                        '"i": {{ [1, 2.5]|sum(start=1) }}, "j": {{ [{"v": 2}, {"v": 3}]|sum(attribute="v") }}, '
                        '"k": {{ [[1], [2]]|sum(start=[])|tojson }}, "l": {{ (1 < 2 < 3)|tojson }}, '
                        '"m": {{ (3 < 2 < 5)|tojson }}, "n": {{ (3 in [1, 3] and 2 not in [1])|tojson }}, '
                        '"o": {{ "abc"[1:]|tojson }}, "p": {{ ([1, 2, 3][::2] is eq([1, 3]) and 1 is in([1]))|tojson }}, '
                        '"q": {{ ("a b a".count("a") + [3, 1]|max)|tojson }}}', {})
    assert ok == {"a": "a     b 1.23 7", "b": "a-00003", "c": "a,b", "d": "xybc", "e": "zz", "f": "P+Q", "g": "v=v",
                  "h": "'q'", "i": 4.5, "j": 5, "k": [1, 2], "l": True, "m": False, "n": True, "o": "bc", "p": True,
                  "q": 5}
    assert len(out["messages"]) == 51 and out["n"] == 50 and out["s"] == "abababc" and out["k"] == "    a" and out["u"] == "HI"
    long_query = "x" * 3_000_000  # longer than one built value may be: a given value is printed as it is
    assert render_request('{"q": {{ query|tojson }}, "r": {{ query|tojson }}}', {"query": long_query})["q"] == long_query


def test_judge_prompt_templates_are_bounded_too():
    from fair_forge_beam.components.judge.prompts import PromptTemplate, TemplateRenderError

    ok = PromptTemplate("Q: {{ query }} {% for i in range(3) %}{{ i }}{% endfor %}", slots=["query"])
    assert ok.render(query="x" * 2_000_000).startswith("Q: xxx")
    for source in ('{{ ("a"|center(400000000))|length }}', "{% for i in range(99999) %}{% for j in range(99999) %}"
                   "{% endfor %}{% endfor %}", '{{ (query ~ query ~ query ~ query)|length }}'):
        with pytest.raises(TemplateRenderError, match="^template error while rendering.*template limit"):
            PromptTemplate(source, slots=["query"]).render(query="y" * 900_000)
