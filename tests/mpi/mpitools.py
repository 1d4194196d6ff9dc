"""Helpers and fixtures of the MPI tests (imported by the test modules, not a
conftest: a second ``conftest.py`` would shadow ``tests/conftest.py``'s
``from conftest import ...``).

Run with ``mpiexec -n N python -m pytest --with-mpi tests/mpi``; without
``--with-mpi`` pytest-mpi skips the ``mpi``-marked tests.  mpi4py is imported
only inside fixtures, so collecting these modules does not start MPI.

Rules the tests follow:

* every rank runs the same tests in the same order and makes the same
  collective calls; a skip is decided from data every rank sees alike;
* results are reduced before asserting (:func:`max_all`, :func:`outcomes`),
  so all ranks pass or fail together and no rank is left in a collective;
* random data comes from one seed broadcast from rank 0 (fresh per run,
  fixed with ``FFTMATVEC_SEED``), so all ranks build the same problem.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator

import numpy as np
import pytest

from conftest import dense_btt, rel_err  # noqa: F401  (re-exported to the MPI tests)

from fftmatvec.grid import ProcessGrid

# ------------------------------------------------------------------ fixtures


@pytest.fixture
def comm():
    """``MPI.COMM_WORLD``."""
    MPI = pytest.importorskip("mpi4py.MPI")
    return MPI.COMM_WORLD


@pytest.fixture
def mpi_rng(comm, request) -> np.random.Generator:
    """A generator seeded identically on every rank (seed from rank 0)."""
    env = os.environ.get("FFTMATVEC_SEED")
    seed = int(env) if env is not None else (int.from_bytes(os.urandom(4), "little") if comm.rank == 0 else None)
    seed = comm.bcast(seed, root=0)
    request.node.user_properties.append(("seed", seed))
    print(f"seed={seed} (rerun with FFTMATVEC_SEED={seed})")
    return np.random.default_rng(seed)


# ------------------------------------------------------------------ grids


def grid_shapes(size: int) -> list[tuple[int, int]]:
    """Every ``(pr, pc)`` with ``pr * pc == size``: 1xN, ..., Nx1."""
    return [(pr, size // pr) for pr in range(1, size + 1) if size % pr == 0]


def each_grid(comm) -> Iterator[ProcessGrid]:
    """A :class:`ProcessGrid` of every shape the communicator allows, freed after use."""
    for shape in grid_shapes(comm.size):
        with ProcessGrid(comm, shape) as grid:
            yield grid


# ------------------------------------------------------------------ agreement


def max_all(comm, value: float) -> float:
    """The largest ``value`` over all ranks (NaN wins), the same on every rank."""
    values = comm.allgather(float(value))
    return float("nan") if any(np.isnan(values)) else max(values)


def all_true(comm, value: bool) -> bool:
    return all(comm.allgather(bool(value)))


def outcomes(comm, fn: Callable[[], Any]) -> list[tuple[str, str] | None]:
    """Run ``fn`` on every rank; return every rank's ``(class name, message)``
    of the exception it raised (None where it returned)."""
    try:
        fn()
        mine = None
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        mine = (type(exc).__name__, str(exc))
    return comm.allgather(mine)


def assert_same_error(comm, fn: Callable[[], Any], cls: type, *needles: str) -> str:
    """``fn`` raises ``cls`` with the same message on every rank, containing
    every needle; return the message."""
    got = outcomes(comm, fn)
    assert all(g is not None for g in got), f"some ranks did not raise: {got}"
    assert len(set(got)) == 1, f"ranks raised different errors: {got}"
    name, msg = got[0]
    assert name == cls.__name__, got[0]
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"
    return msg


# ------------------------------------------------------------------ references


def apply_dense(F: np.ndarray, x: np.ndarray, n_out: int) -> np.ndarray:
    """``F @ x`` for SOTI ``x`` (n, Nt) or (n, Nt, K); result (n_out, Nt[, K])."""
    nt = x.shape[1]
    K = x.shape[2:] if x.ndim == 3 else ()
    return (F @ x.reshape(F.shape[1], -1)).reshape((n_out, nt) + K)


def tol(code: str) -> float:
    """Admissible relative error of a precision code at test sizes: a few
    hundred unit round-offs of the lowest-precision stage."""
    return 200 * float(np.finfo(np.float32 if "s" in code else np.float64).eps)
