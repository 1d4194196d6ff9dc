"""The ``fftmatvec`` command line: sub-commands, exit codes, error reporting.

Each sub-command lives in :mod:`fftmatvec.commands` as a module with
``add_parser(subparsers)`` (which sets ``func``) and no work at import time;
CuPy and MPI are imported inside the commands, so ``--help`` works anywhere.

Exit status: 0 ok, 2 usage or configuration error, 1 run-time failure (also,
with no message, when the reader of stdout left), the same on every rank.
Under an MPI launcher every rank runs the command; rank 0 alone prints to
stdout and reports errors, and an error that not every rank shares ends the
job through ``MPI_Abort`` (:func:`fftmatvec.mpi.run_collectively`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import sys

from . import __version__
from .errors import ConfigError, FftmatvecError

COMMANDS = ("info", "matvec", "bench", "generate", "invert", "precision")


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


def _report(exc: Exception, is_root: bool) -> None:
    if is_root:
        print(f"fftmatvec: error: {exc}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    try:
        args = build_parser().parse_args(argv)
    except ConfigError as exc:
        _report(exc, True)
        return 2
    from .mpi import launched, rank, run_collectively

    is_root = not launched() or rank() == 0
    quiet = contextlib.nullcontext() if is_root else contextlib.redirect_stdout(io.StringIO())
    try:
        with quiet:
            status = run_collectively(args.func, args) if launched() else args.func(args)
            sys.stdout.flush()  # a reader that left shows here, not at exit
        return int(status or 0)
    except BrokenPipeError:  # stdout's reader left (`fftmatvec ... | head`): a normal end, no message
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # for the flush at exit
        return 1
    except ConfigError as exc:
        _report(exc, is_root)
        return 2
    except (FftmatvecError, OSError, ValueError, MemoryError) as exc:
        _report(exc, is_root)
        return 1


if __name__ == "__main__":
    sys.exit(main())
