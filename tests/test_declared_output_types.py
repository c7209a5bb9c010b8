"""The main job's ``DoFn``\\ s whose output type Beam can only infer as ``Any`` declare it
(``@beam.typehints.with_output_types(Any)``): Beam derives an undeclared ``DoFn``'s output type
by interpreting the bytecode of its ``process`` while it builds the graph, once per audit, about
44 ms of README's job for these six (issue 26, docs/performance.md). The declaration is what the
inference gives for any input type, so no element type and no coder changes."""
from __future__ import annotations

import typing

import apache_beam as beam
import apache_beam.transforms.core as core
import pytest
from apache_beam.io.filesystem import FileMetadata
from apache_beam.typehints import typehints as th

from fair_forge_beam.io import read, session_stats
from fair_forge_beam.reports import results

DECLARED = [read._ReadJsonFile, read._OrderStreamed, read._ParseRecord, session_stats._SliceToRow,
            session_stats._ToRow, results._ScoredPerBundle]
#: input element types the inference is tried with
INPUTS = [th.Any, str, int, bytes, typing.Tuple[str, int], typing.Dict[str, typing.Any], FileMetadata,
          typing.Tuple[str, typing.Iterable[typing.Any]], typing.List[typing.Any]]


@pytest.mark.parametrize("cls", DECLARED, ids=lambda c: c.__name__)
def test_beam_takes_the_declared_type_which_is_what_it_would_infer(cls):
    fn = cls.__new__(cls)  # the type hints are the class's: no argument needed
    declared = beam.ParDo(fn).get_type_hints().simple_output_type(cls.__name__)
    assert declared == th.Any  # not None: Beam's _infer_result_type uses it and never reads process's bytecode
    assert {str(core.DoFn.infer_output_type(fn, t)) for t in INPUTS} == {"Any"}
