"""MPI helpers for programs and commands: the world communicator when
mpi4py is there, and a wrapper that never lets one failing rank hang a job.

Nothing here imports mpi4py at import time.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from typing import Any, Callable, TypeVar

from .errors import ConfigError, FftmatvecError, agreed

T = TypeVar("T")


#: Environment variables that MPI launchers (MPICH/Hydra, Open MPI, PMIx,
#: Slurm's PMI) set in every process they start.
_LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")


def launched() -> bool:
    """Whether this process was started by an MPI launcher (mpiexec, srun).

    The command line initialises MPI only then, so that a plain
    ``fftmatvec ...`` on a login node never calls ``MPI_Init``.
    """
    return any(v in os.environ for v in _LAUNCHER_VARS) and available()


def available() -> bool:
    """Whether mpi4py imports."""
    try:
        import mpi4py.MPI  # noqa: F401
    except ImportError:
        return False
    return True


def world() -> Any:
    """``MPI.COMM_WORLD``, or None when mpi4py is not installed."""
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return MPI.COMM_WORLD


def rank(comm: Any = None) -> int:
    """My rank in ``comm`` (default: the world; 0 without mpi4py)."""
    comm = world() if comm is None else comm
    return 0 if comm is None else comm.Get_rank()


def size(comm: Any = None) -> int:
    """The size of ``comm`` (default: the world; 1 without mpi4py)."""
    comm = world() if comm is None else comm
    return 1 if comm is None else comm.Get_size()


def run_collectively(main: Callable[..., T], *args: Any, comm: Any = None, **kwargs: Any) -> T:
    """Call ``main(*args, **kwargs)`` so that no rank is left waiting.

    An exception that every rank raises the same way is re-raised for the
    caller to report (on rank 0) and turn into an exit status:

    * errors agreed through :func:`fftmatvec.errors.collective` on a
      communicator spanning all ranks of ``comm``;
    * :class:`~fftmatvec.errors.ConfigError`, which the package raises only
      from deterministic checks of arguments every rank sees the same way
      (option parsing, grid shapes, precision codes).

    Any other exception (a bug, an error on one rank only) may leave the
    other ranks blocked in a collective, so it is printed to stderr as one
    rank-tagged line (plus the traceback unless it is a FftmatvecError;
    ``FFTMATVEC_TRACEBACK=0``/``1`` overrides), and the job is ended with
    ``comm.Abort(1)``: ``mpiexec`` then returns non-zero.  In one process
    (no mpi4py, or ``comm`` of size 1) everything is re-raised.

    ``comm`` None means the world communicator.
    """
    comm = world() if comm is None else comm
    try:
        return main(*args, **kwargs)
    except BaseException as exc:
        if comm is None or comm.Get_size() == 1 or isinstance(exc, (ConfigError, SystemExit)):
            raise
        if isinstance(exc, Exception) and agreed(exc, comm):
            raise
        _abort(comm, exc)
        raise  # not reached


def _abort(comm: Any, exc: BaseException) -> None:
    """Print a rank-tagged message and abort the whole job."""
    r = comm.Get_rank()
    text = " ".join(str(exc).split())
    what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    try:
        sys.stdout.flush()
        sys.stderr.write(f"fftmatvec: error on rank {r} of {comm.Get_size()}: {what}\n")
        default = "0" if isinstance(exc, FftmatvecError) else "1"
        if os.environ.get("FFTMATVEC_TRACEBACK", default) != "0":
            lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
            sys.stderr.write("".join(f"[rank {r}] {line}" for chunk in lines for line in chunk.splitlines(True)))
        sys.stderr.write(f"fftmatvec: aborting all ranks (rank {r} failed)\n")
        sys.stderr.flush()
        # the launcher forwards this rank's stderr through a pipe, and an abort can kill the forwarding
        # before it is drained (MPICH's mpiexec dropped the whole message in about 1 run of 12)
        time.sleep(0.2)
    finally:
        comm.Abort(1)
        # MPI_Abort may return before the launcher kills us (MPICH does):
        # leave now, without Python's own traceback and exit handlers.
        if type(comm).__module__.split(".")[0] == "mpi4py":
            os._exit(1)
