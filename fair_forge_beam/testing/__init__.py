"""Test and demo helpers shipped with the package (a scripted OpenAI-compatible server).

Nothing here is imported by the library itself; importing this package has no side effects.
"""
