"""The console script ``fair-forge-beam`` (setup.py's entry point): SIGINT / SIGTERM are taken
before anything heavy is imported (:func:`fair_forge_beam.console.starting`), then
:func:`pipelines.audit.main` runs the command."""
from __future__ import annotations


def main() -> int:
    from fair_forge_beam.console import starting

    starting()
    from pipelines.audit import main as audit_main

    return audit_main()


if __name__ == "__main__":
    raise SystemExit(main())
