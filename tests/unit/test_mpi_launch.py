"""Whole MPI jobs with a fault on one rank, launched with ``mpiexec -n 3``: the
job must end quickly with a non-zero status and one clear message.

Runs in a serial ``pytest`` (it starts its own ``mpiexec``); skipped under
``--with-mpi``, inside an MPI job, or when mpi4py or ``mpiexec`` is missing.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import fftmatvec
from fftmatvec.io import block_path, write_matrix

pytestmark = [pytest.mark.mpi_skip, pytest.mark.timeout(180)]

SRC = Path(fftmatvec.__file__).resolve().parents[1]
LIMIT_S = 60
_LAUNCHER_VARS = ("PMI_", "PMIX_", "HYDRA_", "OMPI_", "MPI_LOCALRANKID", "MPI_LOCALNRANKS")


def _mpiexec() -> str | None:
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def _inside_mpi_job() -> bool:
    return any(k.startswith(("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD", "PMIX_RANK")) for k in os.environ)


@pytest.fixture
def launch(tmp_path):
    """``launch(code, *args, n=3)`` runs ``code`` under ``mpiexec -n n``;
    returns (returncode, stderr, seconds)."""
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpi4py not installed")
    mpiexec = _mpiexec()
    if mpiexec is None:
        pytest.skip("no mpiexec beside the Python executable or on PATH")
    if _inside_mpi_job():
        pytest.skip("already inside an MPI job")
    env = {k: v for k, v in os.environ.items() if not k.startswith(_LAUNCHER_VARS)}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.pop("FFTMATVEC_TRACEBACK", None)

    def run(code: str, *args: str, n: int = 3):
        script = tmp_path / "job.py"
        script.write_text(textwrap.dedent(code))
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([mpiexec, "-n", str(n), sys.executable, str(script), *args],
                                  capture_output=True, text=True, env=env, timeout=LIMIT_S)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"the job hung for {LIMIT_S} s; stderr so far: {exc.stderr!r}")
        return proc.returncode, proc.stderr, time.perf_counter() - t0

    return run


def test_unexpected_exception_on_one_rank_aborts_the_job(launch):
    rc, err, seconds = launch("""
        from mpi4py import MPI
        from fftmatvec.mpi import run_collectively

        comm = MPI.COMM_WORLD

        def main():
            if comm.rank == 1:
                raise RuntimeError("injected fault")
            comm.Barrier()  # the other ranks would wait here forever

        run_collectively(main)
    """)
    assert rc != 0 and seconds < LIMIT_S
    lines = [ln for ln in err.splitlines() if ln.startswith("fftmatvec: error")]
    assert lines == ["fftmatvec: error on rank 1 of 3: RuntimeError: injected fault"], err
    assert "Traceback" in err  # a bug: the traceback comes with it, rank-tagged
    assert "[rank 1]" in err


def test_unvoted_library_error_on_one_rank_aborts_without_traceback(launch):
    rc, err, seconds = launch("""
        from mpi4py import MPI
        from fftmatvec.errors import FileFormatError
        from fftmatvec.mpi import run_collectively

        comm = MPI.COMM_WORLD

        def main():
            if comm.rank == 2:
                raise FileFormatError("m.h5: broken on rank 2 only")
            comm.Barrier()

        run_collectively(main)
    """)
    assert rc != 0 and seconds < LIMIT_S
    lines = [ln for ln in err.splitlines() if ln.startswith("fftmatvec: error")]
    assert lines == ["fftmatvec: error on rank 2 of 3: FileFormatError: m.h5: broken on rank 2 only"], err
    assert "Traceback" not in err


def test_voted_error_exits_1_with_one_message(launch, tmp_path):
    """A bad block file read by rank 2 only: all ranks raise the same error
    (collective vote), rank 0 prints it once, every rank exits 1."""
    rng = np.random.default_rng(0)
    meta = write_matrix(tmp_path / "mat", rng.standard_normal((3, 4, 5)))
    block_path(tmp_path / "mat", meta, 2).unlink()
    rc, err, seconds = launch("""
        import sys
        from mpi4py import MPI
        from fftmatvec import BTTOperator
        from fftmatvec.errors import FftmatvecError
        from fftmatvec.grid import ProcessGrid
        from fftmatvec.mpi import run_collectively

        def main(path):
            with ProcessGrid(None, "3x1") as grid:
                BTTOperator.from_matrix_dir(path, grid=grid)

        try:
            run_collectively(main, sys.argv[1])
        except FftmatvecError as exc:
            if MPI.COMM_WORLD.rank == 0:
                print(f"fftmatvec: error: {exc}", file=sys.stderr)
            sys.exit(1)
    """, str(tmp_path / "mat"))
    assert rc == 1 and seconds < LIMIT_S, err
    lines = [ln for ln in err.splitlines() if "error" in ln.lower()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"fftmatvec: error: reading matrix {tmp_path / 'mat'} failed on rank 2: ")
    assert "no such file" in lines[0]


def test_bad_grid_shape_exits_2_like_everywhere(launch):
    """A ConfigError is deterministic: every rank raises it, no abort needed."""
    rc, err, seconds = launch("""
        import sys
        from mpi4py import MPI
        from fftmatvec.errors import ConfigError
        from fftmatvec.grid import ProcessGrid
        from fftmatvec.mpi import run_collectively

        try:
            run_collectively(ProcessGrid, None, "2x2")
        except ConfigError as exc:
            if MPI.COMM_WORLD.rank == 0:
                print(f"fftmatvec: error: {exc}", file=sys.stderr)
            sys.exit(2)
    """)
    assert rc == 2 and seconds < LIMIT_S, err
    assert [ln for ln in err.splitlines() if "error" in ln] == [
        "fftmatvec: error: grid 2x2 needs 4 ranks, but there are 3"], err
