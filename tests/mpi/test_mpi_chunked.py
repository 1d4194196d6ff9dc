"""Forward products with the reduction of each chunk of block rows started
while the next chunk is computed (``reduce_chunks``): every grid shape against
the dense reference and the one-piece product; non-blocking reductions."""

from __future__ import annotations

import numpy as np
import pytest
from mpitools import apply_dense, comm, dense_btt, each_grid, max_all, mpi_rng, rel_err  # noqa: F401

from fftmatvec import BTTOperator
from fftmatvec.vector import DistVector


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("Nd, Nm, Nt", [(5, 7, 6), (7, 2, 9), (2, 5, 4)], ids=str)
@pytest.mark.parametrize("chunks", [2, 3, 8])
def test_chunked_forward_on_every_grid(comm, mpi_rng, Nd, Nm, Nt, chunks):
    f = mpi_rng.standard_normal((Nd, Nm, Nt))
    m = mpi_rng.standard_normal((Nm, Nt, 2))
    ref = apply_dense(dense_btt(f), m, Nd)
    for grid in each_grid(comm):
        op = BTTOperator(f, grid=grid, reduce_chunks=chunks)
        mv = DistVector.from_global(m, grid, "param")
        grid.reset_comm_stats()
        y = op.matvec(mv).gather(root=None)
        err = max_all(comm, rel_err(y, ref))
        assert err < 1e-13, (grid.shape, err)
        if grid.pc > 1 and grid.row_block(Nd)[1] > 1:
            assert grid.row.stats.get("ireduce", {}).get("calls", 0) >= 2
        timer = op.backend.timer()
        y2 = op.matvec(mv, timer=timer).gather(root=None)
        assert max_all(comm, rel_err(y2, ref)) < 1e-13


@pytest.mark.mpi(min_size=2)
def test_ireduce_in_place_and_out_of_order_waits(comm):
    from fftmatvec.grid import ProcessGrid

    with ProcessGrid(comm, (1, comm.size)) as grid:
        bufs = [np.full((3, 2), float(comm.rank + 1) * (k + 1)) for k in range(3)]
        reqs = [grid.row_ireduce(b) for b in bufs]
        total = sum(range(1, comm.size + 1))
        for k in (2, 0, 1):
            got = reqs[k].wait()
            if comm.rank == 0:
                assert got is bufs[k] and np.all(got == total * (k + 1))
            else:
                assert got is None and np.all(bufs[k] == (comm.rank + 1) * (k + 1))
