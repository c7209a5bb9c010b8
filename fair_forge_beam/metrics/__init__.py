"""Metrics: one module per metric (scorer + combiner wiring + PTransform + ``run``)."""


def __getattr__(name):
    if name == "Humanity":
        from fair_forge_beam.metrics.humanity import Humanity

        return Humanity
    raise AttributeError(name)


__all__ = ["Humanity"]
