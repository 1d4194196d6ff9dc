"""The distributed layer in one process, without MPI: collective() against a
stand-in communicator, run_collectively's decisions, DistVector on the serial
grid, and the operator's DistVector / None handling."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fftmatvec import BTTOperator
from fftmatvec.errors import ConfigError, FftmatvecError, FileFormatError, agreed, collective
from fftmatvec.grid import SerialGrid
from fftmatvec.mpi import run_collectively
from fftmatvec.vector import DistVector, inner


class FakeComm:
    """Rank ``rank`` of ``size``; the other ranks' allgather contributions are given."""

    def __init__(self, rank, others, size=None):
        self.rank, self.others = rank, dict(others)
        self.size = size or len(self.others) + 1
        self.aborted = None

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size

    def allgather(self, mine):
        return [mine if r == self.rank else self.others.get(r, (None, None)) for r in range(self.size)]

    def Abort(self, code):
        self.aborted = code


def _raise(exc):
    raise exc


def test_collective_without_comm_passes_exceptions_through():
    with pytest.raises(KeyError):
        with collective(None, "x"):
            raise KeyError("k")
    with collective(None, "x") as vote:
        vote.share(3)
    assert vote.values == [3] and vote.agreed("three") == 3


def test_collective_reports_the_lowest_failing_rank_with_its_class():
    comm = FakeComm(0, {1: (("b.h5: bad", ("fftmatvec.errors", "FileFormatError")), None),
                        2: (("ValueError: nope", None), None)})
    with pytest.raises(FileFormatError) as info:
        with collective(comm, "reading"):
            pass
    assert str(info.value) == "reading failed on rank 1: b.h5: bad (also failed on rank 2)"
    assert info.value.rank == 1 and info.value.ranks == [1, 2]
    assert agreed(info.value, comm)


def test_collective_failing_rank_chains_the_original():
    comm = FakeComm(1, {0: (None, None)})
    with pytest.raises(FftmatvecError) as info:
        with collective(comm, "step"):
            raise MemoryError()
    assert str(info.value) == "step failed on rank 1: MemoryError"
    assert type(info.value) is FftmatvecError and isinstance(info.value.__cause__, MemoryError)


def test_collective_unknown_class_falls_back():
    comm = FakeComm(0, {1: (("odd", ("nowhere.module", "Gone")), None)})
    with pytest.raises(FftmatvecError, match="step failed on rank 1: odd"):
        with collective(comm, "step"):
            pass


def test_vote_disagreement_is_a_config_error():
    comm = FakeComm(0, {1: (None, (4, 5)), 2: (None, None)})
    with collective(comm, "sizes") as vote:
        vote.share((4, 6))
    assert vote.values == [(4, 6), (4, 5), None]
    with pytest.raises(ConfigError, match="ranks disagree on the sizes"):
        vote.agreed("the sizes")


def test_run_collectively_decisions(capsys):
    assert run_collectively(lambda a, b=1: a + b, 2, b=3, comm=FakeComm(0, {}, size=1)) == 5
    # one process: everything re-raised
    with pytest.raises(RuntimeError):
        run_collectively(_raise, RuntimeError("x"), comm=FakeComm(0, {}, size=1))
    # several ranks: a ConfigError is deterministic, re-raised
    comm = FakeComm(1, {}, size=4)
    with pytest.raises(ConfigError):
        run_collectively(_raise, ConfigError("bad option"), comm=comm)
    assert comm.aborted is None
    # an unexpected error: message, then Abort(1)
    with pytest.raises(RuntimeError):  # the stand-in Abort returns, so the error resurfaces
        run_collectively(_raise, RuntimeError("bug"), comm=comm)
    assert comm.aborted == 1
    err = capsys.readouterr().err
    assert "fftmatvec: error on rank 1 of 4: RuntimeError: bug" in err and "[rank 1] Traceback" in err


def test_dist_vector_on_the_serial_grid(tmp_path):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 5, 4))
    x, y = DistVector(a, None, "param"), DistVector.from_global(b, SerialGrid(), "param")
    assert x.shape == (5, 4) and x.holds and np.array_equal(x.gather(), a)
    assert math.isclose(inner(x, y), float(np.vdot(a, b)))
    assert math.isclose((x - 2 * y).norm(), float(np.linalg.norm(a - 2 * b)))
    x.write(tmp_path / "x.h5")
    back = DistVector.read(tmp_path / "x.h5", space="param")
    assert np.array_equal(back.local, a) and not back.qoi
    s = DistVector.scatter(a, None, "data")
    assert s.space == "data" and np.array_equal(s.local, a)
    with pytest.raises(ConfigError, match="local block must have shape"):
        DistVector(a, None, "param", n=6)
    with pytest.raises(ConfigError, match="batch"):
        DistVector(np.ones((2, 3, 2)), None, "data").write(tmp_path / "b.h5")


def test_operator_takes_and_returns_dist_vectors():
    rng = np.random.default_rng(2)
    f = rng.standard_normal((3, 4, 5))
    op = BTTOperator(f)
    m, d = rng.standard_normal((4, 5)), rng.standard_normal((3, 5))
    y = op.matvec(DistVector(m, None, "param"))
    assert isinstance(y, DistVector) and y.space == "data" and np.allclose(y.local, op.matvec(m))
    z = op.rmatvec(DistVector(d, None, "data"))
    assert z.space == "param" and np.allclose(z.local, op.rmatvec(d))
    with pytest.raises(ConfigError, match="expected a param-space vector"):
        op.matvec(DistVector(d, None, "data"))
    with pytest.raises(ConfigError, match="got None"):
        op.matvec(None)  # in one process the rank holds every block
