"""Rendering and reading results: ``results.json`` / Parquet / dead letter (:mod:`.results`), the
HTML audit report (:mod:`.html`, plots in :mod:`.plots`), run comparison (:mod:`.compare`) and
``load_results`` for analysts (:mod:`.load`)."""
