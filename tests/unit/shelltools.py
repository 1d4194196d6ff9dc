"""Helpers for tests that run shell commands the way a user would: the docs'
commands (test_docs.py) and the Slurm job scripts in local mode
(test_slurm_scripts.py).

``fftmatvec`` on the commands' PATH is a shim running ``python -m fftmatvec``
with this interpreter and this source tree (``PYTHONPATH``), so the tests
exercise the working tree whether or not the package is installed.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"

#: Prefixes of the variables an MPI launcher sets; a child ``mpiexec`` must not see them.
LAUNCHER_PREFIXES = ("PMI_", "PMIX_", "HYDRA_", "OMPI_", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "SLURM_")


def mpiexec() -> str | None:
    """The ``mpiexec`` beside this Python (the ``mpich`` wheel), else on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def require_mpi() -> str:
    """``mpiexec``'s path, or skip: no mpi4py, no ``mpiexec``, or already in an MPI job."""
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpi4py not installed")
    exe = mpiexec()
    if exe is None:
        pytest.skip("no mpiexec beside the Python executable or on PATH")
    if any(k.startswith(("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD", "PMIX_RANK")) for k in os.environ):
        pytest.skip("already inside an MPI job")
    return exe


def shell_env(tmp: Path) -> dict[str, str]:
    """The environment of a user's shell in this checkout: ``fftmatvec`` and
    ``mpiexec`` on PATH (``tmp/bin`` first), the source tree importable,
    matplotlib headless, no launcher or Slurm variables of an enclosing job."""
    bindir = tmp / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    shim = bindir / "fftmatvec"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m fftmatvec "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_PREFIXES)}
    path = [str(bindir), str(Path(sys.executable).parent)]
    exe = mpiexec()
    if exe is not None:
        path.append(str(Path(exe).parent))
    env["PATH"] = os.pathsep.join(path + [env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(SRC)] + [p for p in [env.get("PYTHONPATH")] if p])
    env["MPLBACKEND"] = "Agg"
    env.pop("FFTMATVEC_TRACEBACK", None)
    return env
