"""Reading interactions (Retriever ABC, file sources), element types, sinks."""
from fair_forge_beam.io.elements import DeadLetter, Interaction, QualityWarning
from fair_forge_beam.io.retriever import Retriever

__all__ = ["DeadLetter", "Interaction", "QualityWarning", "Retriever", "ReadInteractions"]


def __getattr__(name):
    if name == "ReadInteractions":
        from fair_forge_beam.io.read import ReadInteractions

        return ReadInteractions
    raise AttributeError(name)
