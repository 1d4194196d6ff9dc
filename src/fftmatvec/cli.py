"""The ``fftmatvec`` command line: sub-commands, exit codes, error reporting.

Each sub-command lives in :mod:`fftmatvec.commands` as a module with
``add_parser(subparsers)`` (which sets ``func``) and no work at import time;
CuPy and MPI are imported inside the commands, so ``--help`` works anywhere.

Exit status: 0 ok, 2 usage or configuration error, 1 run-time failure.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__
from .errors import ConfigError, FftmatvecError

COMMANDS = ("info", "matvec", "bench", "generate", "invert")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        raise ConfigError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fftmatvec", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"fftmatvec {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f".commands.{name}", __package__).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"fftmatvec: error: {exc}", file=sys.stderr)
        return 2
    except (FftmatvecError, OSError, ValueError, MemoryError) as exc:
        print(f"fftmatvec: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
