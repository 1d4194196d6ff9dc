"""Scaling sweeps over MPI: every grid that fits runs on a sub-communicator of
the first ``pr*pc`` ranks while the others wait, and all ranks end with the
same rows, or the same error (fftmatvec.scaling, docs/benchmarks.md)."""

from __future__ import annotations

import math

import pytest
from mpitools import all_true, assert_same_error, comm  # noqa: F401

from fftmatvec.bench import BenchConfig, run_bench
from fftmatvec.errors import ConfigError
from fftmatvec.grid import ProcessGrid
from fftmatvec.scaling import add_efficiency, run_sweep

GRIDS = [(1, 1), (1, 2), (2, 1), (1, 3), (2, 2), (3, 1), (3, 3)]


def _cfg(**kw):
    # a known copy bandwidth skips the 256 MB probe, which is not what is tested here
    return BenchConfig(**dict(dict(Nm=7, Nd=5, Nt=6, reps=2, check=True, copy_bandwidth=1e10, seed=3), **kw))


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("sweep", ["weak", "strong"])
def test_every_grid_that_fits_runs_and_all_ranks_agree(comm, sweep):
    rows, skipped = run_sweep(_cfg(), sweep, GRIDS, comm=comm)
    fits = [g for g in GRIDS if g[0] * g[1] <= comm.size]
    assert [r["grid"] for r in rows] == [f"{pr}x{pc}" for pr, pc in sorted(fits, key=lambda g: (g[0] * g[1], g[0]))]
    assert sorted(skipped) == sorted(f"{pr}x{pc}" for pr, pc in GRIDS if pr * pc > comm.size)
    for row in rows:
        assert row["Nm"] == (7 * row["ranks"] if sweep == "weak" else 7)
        assert row["rel_error"] < 1e-12  # the product on the sub-grid is right
        assert row["time_s"] > 0 and row["fhat_bytes"] == 16 * (6 + 1) * 5 * row["Nm"]  # all of Fhat
        assert (row["bcast_s"] > 0 and row["reduce_s"] > 0) == (row["ranks"] > 1)  # timed only on a grid
    assert all_true(comm, comm.allgather(repr(rows)) == [repr(rows)] * comm.size)
    add_efficiency(rows)
    assert math.isclose(rows[0]["efficiency"], 1.0)


@pytest.mark.mpi(min_size=2)
def test_an_error_on_a_subgrid_reaches_the_idle_ranks(comm):
    # Nd=1 with 2 grid rows: the sub-grid's ranks fail alike, the others learn it from the vote
    assert_same_error(comm, lambda: run_sweep(_cfg(precision="dxdxd"), "strong", [(1, 2)], comm=comm),
                      ConfigError, "grid 1x2", "dxdxd")


@pytest.mark.mpi(min_size=2)
def test_a_warm_up_runs_as_many_products_on_every_rank(comm):
    # each rank times its own first product; the count is every rank's largest, so the broadcasts and
    # reductions of the products match (a rank that ran fewer would leave the others waiting)
    with ProcessGrid(comm, (1, comm.size)) as grid:
        result = run_bench(_cfg(warmup_s=0.02 * (1 + comm.rank)), grid)
    counts = comm.allgather(result["warmup_products"])
    assert counts == [counts[0]] * comm.size and counts[0] >= 2 and result["rel_error"] < 1e-12


@pytest.mark.mpi(min_size=2)
def test_the_normal_product_on_a_grid(comm):
    # F^T F m across the grid's passes (its all-reduce between them): the float64 reference on every rank,
    # and a floor from the largest slab, read twice
    shape = (2, comm.size // 2) if comm.size >= 4 else (1, comm.size)
    with ProcessGrid(comm, shape) as grid:
        result = run_bench(_cfg(normal=True, nrhs=2), grid)
        slab_reads = 2 * 16 * (6 + 1) * grid.row_block(5)[1] * grid.col_block(7)[1]
    errors = comm.allgather(result["rel_error"])
    assert all_true(comm, errors == [errors[0]] * comm.size and errors[0] < 1e-12 and result["normal"])
    assert all_true(comm, result["fhat_bytes"] == max(comm.allgather(slab_reads))
                    and result["fhat_bytes_total"] == sum(comm.allgather(slab_reads)) and result["comm_s"] > 0)
