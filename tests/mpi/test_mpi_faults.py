"""Fault injection on ONE rank: every rank must raise the same error, quickly,
and the grid must stay usable (no rank left inside a collective).

``timeout(60, method="thread")``: a rank stuck in an MPI call cannot be
interrupted by a signal; the thread method ends the process, and mpiexec
then ends the job, so a hang turns into a failure.
"""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from mpitools import assert_same_error, comm, each_grid, max_all, mpi_rng, rel_err  # noqa: F401

import fftmatvec.operator as operator_module
from fftmatvec import BTTOperator
from fftmatvec.errors import ConfigError, FftmatvecError, FileFormatError, collective
from fftmatvec.grid import ProcessGrid
from fftmatvec.io import block_path, write_matrix, write_vector
from fftmatvec.layout import block_range
from fftmatvec.vector import DistVector

pytestmark = pytest.mark.timeout(60, method="thread")


def _matrix(comm, tmp, rng, Nd, Nm=6, Nt=5, name="mat", checksum=True):
    """A matrix directory written by rank 0; returns (dir, meta, f)."""
    f = rng.standard_normal((Nd, Nm, Nt))
    path = tmp / name
    meta = write_matrix(path, f, checksum=checksum) if comm.rank == 0 else None
    meta = comm.bcast(meta, root=0)
    comm.Barrier()
    return path, meta, f


def _span(start_count):
    start, count = start_count
    return start, start + count


def _still_works(comm, grid, f):
    """A correct product after the fault: proves every rank left the failed call."""
    op = BTTOperator(f, grid=grid)
    m = np.ones(f.shape[1:])
    y = op.matvec(DistVector.from_global(m, grid, "param")).gather(root=None)
    assert max_all(comm, rel_err(y, BTTOperator(f).matvec(m))) < 1e-13


def _corrupt_last_row(comm, path, meta, how):
    """Damage the file of block row Nd-1 (rank 0 does it, all wait)."""
    if comm.rank == 0:
        last = block_path(path, meta, meta.Nd - 1)
        if how == "missing":
            last.unlink()
        elif how == "garbage":
            last.write_bytes(b"this is not HDF5" * 10)
        elif how == "attribute":
            with h5py.File(last, "r+") as h5:
                h5["vec"].attrs["n_param"] = np.int32(meta.Nm + 1)
        elif how == "nan":
            with h5py.File(last, "r+") as h5:
                h5["vec"][3] = np.nan
        elif how == "checksum":
            with h5py.File(last, "r+") as h5:
                h5["vec"][0] += 1.0
    comm.Barrier()


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("how, needle", [("missing", "no such file"), ("garbage", "not a readable HDF5"),
                                         ("attribute", "n_param"), ("nan", "non-finite"),
                                         ("checksum", "CRC-32")])
def test_bad_block_file_on_one_rank(comm, mpi_rng, mpi_tmp_path, how, needle):
    """Grid size x 1 with Nd = size: block row Nd-1 is read by the last rank only."""
    # without checksums for "nan", or the checksum check would report it first
    path, meta, f = _matrix(comm, mpi_tmp_path, mpi_rng, Nd=comm.size, checksum=how != "nan")
    _corrupt_last_row(comm, path, meta, how)
    last = comm.size - 1
    with ProcessGrid(comm, (comm.size, 1)) as grid:
        assert grid.row_block(meta.Nd) == (grid.r, 1)
        msg = assert_same_error(comm, lambda: BTTOperator.from_matrix_dir(path, grid=grid), FileFormatError,
                                f"reading matrix {path} failed on rank {last}: ", needle,
                                f"{meta.prefix}{last:06d}")
        assert "also failed" not in msg
        _still_works(comm, grid, f)


@pytest.mark.mpi(min_size=1)
def test_bad_file_on_every_grid_shape(comm, mpi_rng, mpi_tmp_path):
    """The rank(s) of the last grid row fail; the lowest of them is named."""
    path, meta, f = _matrix(comm, mpi_tmp_path, mpi_rng, Nd=5)
    _corrupt_last_row(comm, path, meta, "garbage")
    for grid in each_grid(comm):
        # every rank of the grid row owning block row 4 opens that file
        r_bad = next(r for r in range(grid.pr) if 4 in range(*_span(block_range(5, grid.pr, r))))
        failing = [r_bad * grid.pc + c for c in range(grid.pc)]
        msg = assert_same_error(comm, lambda: BTTOperator.from_matrix_dir(path, grid=grid), FileFormatError,
                                f"failed on rank {failing[0]}: ")
        assert ("also failed" in msg) == (len(failing) > 1), (grid.shape, msg)


@pytest.mark.mpi(min_size=1)
def test_nan_input_on_one_rank_fails_before_any_broadcast(comm, mpi_rng):
    Nd, Nm, Nt = 3, 2 * comm.size + 1, 4
    f = mpi_rng.standard_normal((Nd, Nm, Nt))
    m = mpi_rng.standard_normal((Nm, Nt))
    for grid in each_grid(comm):
        op = BTTOperator(f, grid=grid)
        victim = grid.pc - 1  # the last holder of parameter blocks: rank (0, pc-1)
        j0, nm = grid.col_block(Nm)
        local = m[j0:j0 + nm].copy() if grid.holds_param() else None
        if grid.rank == victim:
            local[-1, -1] = np.nan
        grid.reset_comm_stats()
        assert_same_error(comm, lambda: op.matvec(local), FftmatvecError,
                          f"checking the input of F m failed on rank {victim}: input vector contains NaN or Inf")
        stats = grid.comm_stats()
        assert "bcast" not in stats["col"] and "reduce" not in stats["row"], stats  # voted first
        # the same with a DistVector, and for the adjoint / F^T F paths
        mv = DistVector(local, grid, "param", Nm)
        assert_same_error(comm, lambda: op.normal(mv), FftmatvecError, f"failed on rank {victim}")
        d = np.ones((Nd, Nt))
        dv = DistVector.from_global(d, grid, "data")
        if grid.rank == 0:
            dv.local[0, 0] = np.inf
        assert_same_error(comm, lambda: op.rmatvec(dv), FftmatvecError, "F^T d failed on rank 0")
        _still_works(comm, grid, f)


@pytest.mark.mpi(min_size=1)
def test_wrong_shape_or_batch_on_one_rank(comm, mpi_rng):
    Nd, Nm, Nt = 4, 5, 3
    f = mpi_rng.standard_normal((Nd, Nm, Nt))
    for grid in each_grid(comm):
        op = BTTOperator(f, grid=grid)
        last = grid.pr - 1
        i0, nd = grid.row_block(Nd)
        good = np.ones((nd, Nt)) if grid.holds_data() else None
        bad = np.ones((nd + 1, Nt)) if grid.r == last and grid.holds_data() else good
        assert_same_error(comm, lambda: op.rmatvec(bad), ConfigError,
                          f"failed on rank {last * grid.pc}: input must have shape")
        if grid.pr > 1:  # holders disagree on K: one vote, one error everywhere
            batch = np.ones((nd, Nt, 2 if grid.r == last else 3)) if grid.holds_data() else None
            assert_same_error(comm, lambda: op.rmatvec(batch), ConfigError, "ranks disagree on the batch size K")
        out = np.empty((grid.col_block(Nm)[1], Nt)) if grid.rank == comm.size - 1 else None
        assert_same_error(comm, lambda: op.rmatvec(good, out=out), ConfigError,
                          f"failed on rank {comm.size - 1}", "F^T d: out= is for array products without a grid")
        with pytest.raises(ConfigError, match="parameter|param"):  # agreed metadata: no vote needed
            op.matvec(DistVector.from_global(np.ones((Nd, Nt)), grid, "data"))
        _still_works(comm, grid, f)


@pytest.mark.mpi(min_size=1)
def test_setup_failures_on_one_rank(comm, mpi_rng, monkeypatch):
    Nd, Nm, Nt = comm.size, 3, 4
    f = mpi_rng.standard_normal((Nd, Nm, Nt))
    last = comm.size - 1
    with ProcessGrid(comm, (comm.size, 1)) as grid:
        i0, nd = grid.row_block(Nd)
        slab = f[i0:i0 + nd].copy()
        if grid.rank == last:
            slab[0, 0, 0] = np.nan
        assert_same_error(comm, lambda: BTTOperator(slab, grid=grid, shape=(Nd, Nm, Nt)), FftmatvecError,
                          f"setting up the operator failed on rank {last}: f contains NaN or Inf")
        # wrong slab shape on one rank
        slab = f[i0:i0 + nd, :-1] if grid.rank == last and Nm > 1 else f[i0:i0 + nd]
        assert_same_error(comm, lambda: BTTOperator(slab, grid=grid, shape=(Nd, Nm, Nt)), ConfigError,
                          f"failed on rank {last}: f must have shape")
        # out of memory (simulated) while building Fhat on one rank
        if grid.rank == last:
            def no_memory(*args, **kwargs):
                raise MemoryError("simulated: cannot allocate Fhat")
            monkeypatch.setattr(operator_module, "LocalBTT", no_memory)
        assert_same_error(comm, lambda: BTTOperator(f, grid=grid), FftmatvecError,
                          f"failed on rank {last}: MemoryError: simulated")
        monkeypatch.undo()
        # ranks disagree on the sizes
        g = f if grid.rank != last else f[:, :, :-1]
        if comm.size > 1:
            assert_same_error(comm, lambda: BTTOperator(g, grid=grid), ConfigError, "ranks disagree")
        _still_works(comm, grid, f)


@pytest.mark.mpi(min_size=1)
def test_vector_file_faults(comm, mpi_rng, mpi_tmp_path):
    n, Nt = 2 * comm.size, 3
    full = mpi_rng.standard_normal((n, Nt))
    good, wrong = mpi_tmp_path / "good.h5", mpi_tmp_path / "wrong.h5"
    if comm.rank == 0:
        write_vector(good, full, "param")
        write_vector(wrong, full, "data")
    comm.Barrier()
    for grid in each_grid(comm):
        assert_same_error(comm, lambda: DistVector.read(mpi_tmp_path / "none.h5", grid, "param"), FileFormatError,
                          "reading vector", "failed on rank 0", "no such file")
        assert_same_error(comm, lambda: DistVector.read(wrong, grid, "param"), FileFormatError,
                          "data-space vector")
        assert_same_error(comm, lambda: DistVector.read(good, grid, "param", n=n + 1), FileFormatError,
                          f"n_param={n} but expected {n + 1}")
        v = DistVector.read(good, grid, "param")
        assert max_all(comm, rel_err(v.gather(root=None), full)) == 0.0
        # a failed write (the target is a directory) fails on every rank
        assert_same_error(comm, lambda: v.write(mpi_tmp_path), FftmatvecError, "writing vector", "failed on rank 0")


@pytest.mark.mpi(min_size=1)
def test_collective_semantics(comm):
    size, last = comm.size, comm.size - 1

    def fail_on(ranks, exc):
        def run():
            with collective(comm, "the step"):
                if comm.rank in ranks:
                    raise exc
        return run

    msg = assert_same_error(comm, fail_on({last}, ValueError("boom")), FftmatvecError,
                            f"the step failed on rank {last}: ValueError: boom")
    assert "also" not in msg
    assert_same_error(comm, fail_on({last}, FileFormatError("bad.h5: broken")), FileFormatError,
                      f"the step failed on rank {last}: bad.h5: broken")
    if size > 1:
        msg = assert_same_error(comm, fail_on({0, last}, KeyError("k")), FftmatvecError,
                                "the step failed on rank 0: KeyError: 'k'", f"also failed on rank {last}")
    # the failing rank keeps the original as the cause; the error is marked as agreed
    try:
        fail_on({0}, ValueError("orig"))()
    except FftmatvecError as err:
        assert err.rank == 0 and err.ranks == [0]
        assert isinstance(err.__cause__, ValueError) if comm.rank == 0 else err.__cause__ is None
        from fftmatvec.errors import agreed
        assert agreed(err, comm) and agreed(err)  # on COMM_WORLD: every rank
    # nested blocks over the same communicator: no second vote, no doubled text
    def nested():
        with collective(comm, "outer"):
            fail_on({last}, FileFormatError("x"))()
    assert_same_error(comm, nested, FileFormatError, f"the step failed on rank {last}: x")
    # shared values
    with collective(comm, "sharing") as vote:
        vote.share(comm.rank * 2 if comm.rank % 2 == 0 else None)
    assert vote.values == [r * 2 if r % 2 == 0 else None for r in range(size)]
    with collective(comm, "sharing") as vote:
        vote.share(7)
    assert vote.agreed("seven") == 7
    with collective(comm, "sharing") as vote:
        vote.share(comm.rank)
    if size > 1:
        assert_same_error(comm, lambda: vote.agreed("the rank"), ConfigError, "ranks disagree on the rank")
