"""Rendering and writing results (JSON, Parquet; HTML report planned)."""
