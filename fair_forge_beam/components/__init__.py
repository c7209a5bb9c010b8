"""Pluggable components behind interfaces (lexicons, sentiment, embedders, judges, ...)."""
