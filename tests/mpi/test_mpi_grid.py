"""The process grid over MPI and its collectives: ownership, hooks, statistics.

(Shape parsing and the auto rule, which need no MPI: tests/unit/test_grid_shapes.py.)
"""

from __future__ import annotations

import numpy as np
import pytest
from mpitools import all_true, assert_same_error, comm, each_grid, grid_shapes  # noqa: F401

from fftmatvec.errors import ConfigError
from fftmatvec.grid import ProcessGrid, SerialGrid
from fftmatvec.layout import block_range

# ------------------------------------------------------------ MPI


@pytest.mark.mpi(min_size=1)
def test_every_shape_coordinates_and_subcomms(comm):
    for grid in each_grid(comm):
        pr, pc = grid.shape
        assert grid.comm.Get_size() == comm.size
        assert grid.rank == grid.comm.Get_rank() == comm.rank  # row-major, no reordering
        assert (grid.r, grid.c) == divmod(comm.rank, pc)
        assert grid.row.size == pc and grid.row.rank == grid.c
        assert grid.col.size == pr and grid.col.rank == grid.r
        assert grid.holds_param() == (grid.r == 0) and grid.holds_data() == (grid.c == 0)
        assert 0 <= grid.device_index(3) < 3
        # the ranks of my row all have my r; of my column my c
        assert set(grid._row_comm.allgather(grid.r)) == {grid.r}
        assert set(grid._col_comm.allgather(grid.c)) == {grid.c}


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("Nd, Nm", [(5, 7), (2, 1), (1, 13), (13, 3), (4, 4)])
def test_ownership_covers_every_block_once(comm, Nd, Nm):
    """Uneven splits and ranks without blocks (Nd < pr, Nm < pc)."""
    for grid in each_grid(comm):
        (i0, nd), (j0, nm) = grid.row_block(Nd), grid.col_block(Nm)
        assert (i0, nd) == block_range(Nd, grid.pr, grid.r)
        slabs = comm.allgather((grid.r, grid.c, i0, nd, j0, nm))
        cover = np.zeros((Nd, Nm), dtype=int)
        for _, _, a, na, b, nb in slabs:
            cover[a:a + na, b:b + nb] += 1
        assert (cover == 1).all(), (grid.shape, cover)
        # remainder to the lowest ranks
        counts = [nd_ for r, c, _, nd_, _, _ in slabs if c == 0]
        assert counts == sorted(counts, reverse=True) and max(counts) - min(counts) <= 1
        layout = grid.layout(Nd, Nm)
        assert sum(layout["rows_per_grid_row"]) == Nd and sum(layout["cols_per_grid_col"]) == Nm
        assert layout["idle_ranks"] == sum(1 for s in slabs if s[3] * s[5] == 0)


@pytest.mark.mpi(min_size=1)
def test_bad_grid_shape_raises_config_error_everywhere(comm):
    size = comm.size
    for shape in [(2, size), (size + 1, 1), "0x%d" % size, "%dx" % size, (-1, -size), "grid"]:
        assert_same_error(comm, lambda: ProcessGrid(comm, shape), ConfigError)
    assert_same_error(comm, lambda: ProcessGrid(comm, pr=size), ConfigError, "give both")
    msg = assert_same_error(comm, lambda: ProcessGrid.from_option(comm, f"{size}x2", 3, 3), ConfigError)
    assert f"needs {2 * size} ranks, but there are {size}" in msg


@pytest.mark.mpi(min_size=1)
def test_from_option(comm):
    grid = ProcessGrid.from_option(comm, None, 4, 6)
    if comm.size == 1:
        assert isinstance(grid, SerialGrid)
    else:
        assert isinstance(grid, ProcessGrid) and grid.shape == (1, comm.size)
    grid.free()
    with ProcessGrid.from_option(comm, "auto", 100, 5000) as grid:
        assert grid.shape == ProcessGrid.auto_shape(comm.size, 100, 5000)
    with ProcessGrid.from_option(None, f"{comm.size}x1") as grid:  # None: COMM_WORLD
        assert grid.shape == (comm.size, 1)


@pytest.mark.mpi(min_size=1)
def test_free_is_idempotent_and_releases_communicators(comm):
    from mpi4py import MPI

    with ProcessGrid(comm) as grid:
        pass
    assert grid.comm == MPI.COMM_NULL and grid._row_comm == MPI.COMM_NULL
    grid.free()  # a second time is harmless
    assert comm != MPI.COMM_NULL  # the parent communicator is not freed


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_collectives_sum_and_broadcast(comm, dtype):
    for grid in each_grid(comm):
        for coll, my, n in ((grid.row, grid.c, grid.pc), (grid.col, grid.r, grid.pr)):
            coll.reset_stats()
            base = np.arange(12, dtype=dtype).reshape(3, 4) + (1j if np.iscomplexobj(dtype(0)) else 0)
            x = base * (my + 1)
            total = base * (n * (n + 1) // 2)
            y = coll.allreduce(x.copy())
            ok = np.allclose(y, total)
            out = np.empty_like(x)
            r = coll.reduce(x, out=out, root=0)
            ok &= (r is out and np.allclose(out, total)) if my == 0 else r is None
            ok &= np.allclose(x, base * (my + 1))  # input untouched with out=
            z = x.copy()
            r = coll.reduce(z, root=n - 1)
            ok &= (r is z and np.allclose(z, total)) if my == n - 1 else r is None
            b = x.copy()
            coll.bcast(b, root=0)
            ok &= np.allclose(b, base)
            o2 = np.empty_like(x)
            coll.allreduce(x, out=o2)
            ok &= np.allclose(o2, total)
            assert all_true(comm, ok), (grid.shape, dtype)
            stats = coll.stats
            assert stats["bcast"]["calls"] == 1 and stats["bcast"]["bytes"] == x.nbytes
            assert stats["reduce"]["calls"] == 2 and stats["allreduce"]["calls"] == 2
            assert coll.seconds > 0 and coll.seconds == pytest.approx(sum(s["seconds"] for s in stats.values()))


@pytest.mark.mpi(min_size=1)
def test_collectives_reject_non_contiguous(comm):
    with ProcessGrid(comm) as grid:
        x = np.zeros((4, 4))[:, ::2]
        with pytest.raises(ValueError, match="contiguous"):
            grid.row.allreduce(x)  # raised before any MPI call: every rank, no hang
        grid.reset_comm_stats()
        assert grid.comm_seconds == 0.0


@pytest.mark.mpi(min_size=1)
def test_hooks_move_blocks(comm):
    for grid in each_grid(comm):
        x = np.full((2, 3), float(grid.r * 10 + grid.c))
        grid.col_bcast(x)
        ok = np.all(x == grid.c)  # from (0, c)
        y = np.full((2, 3), 1.0 + grid.c)
        got = grid.row_reduce(y)
        expect = sum(1.0 + c for c in range(grid.pc))
        ok &= (got is not None and np.all(got == expect)) if grid.c == 0 else (got is None or grid.pc == 1)
        z = np.full((2, 3), 1.0 + grid.r)
        got = grid.col_reduce(z, all=True)
        ok &= np.all(got == sum(1.0 + r for r in range(grid.pr)))
        w = np.full((2, 3), float(grid.c + 5 * grid.r))
        grid.row_bcast(w)
        ok &= np.all(w == 5 * grid.r)
        assert all_true(comm, ok), grid.shape
        assert grid_shapes(comm.size)
