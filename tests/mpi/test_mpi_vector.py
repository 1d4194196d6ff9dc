"""DistVector on every grid shape: placement, arithmetic and reductions against
NumPy on the gathered arrays, scatter/gather, per-rank file I/O, a solver."""

from __future__ import annotations

import math

import numpy as np
import pytest
from mpitools import all_true, comm, each_grid, max_all, mpi_rng, rel_err  # noqa: F401

from fftmatvec import BTTOperator
from fftmatvec.errors import ConfigError
from fftmatvec.grid import ProcessGrid
from fftmatvec.vector import DistVector, inner

CASES = [("param", 7, 5, None), ("data", 3, 4, None), ("param", 2, 3, 2), ("data", 1, 6, None), ("param", 1, 2, 3)]


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("space, n, Nt, K", CASES)
def test_placement_and_gather(comm, mpi_rng, space, n, Nt, K):
    shape = (n, Nt) + ((K,) if K else ())
    full = mpi_rng.standard_normal(shape)
    for grid in each_grid(comm):
        v = DistVector.from_global(full, grid, space)
        start, count = grid.block(space, n)
        holds = grid.r == 0 if space == "param" else grid.c == 0
        expect = full[start:start + count] if holds else np.empty((0,) + shape[1:])
        ok = v.holds == holds and v.local.shape == expect.shape and np.array_equal(v.local, expect)
        ok &= v.shape == shape and (v.start, v.count) == (start, count)
        g0 = v.gather(root=0)
        ok &= np.array_equal(g0, full) if grid.rank == 0 else g0 is None
        last = grid.size - 1
        gl = v.gather(root=last)
        ok &= np.array_equal(gl, full) if grid.rank == last else gl is None
        ok &= np.array_equal(v.gather(root=None), full)
        whole = v.allgather()
        ok &= type(whole) is np.ndarray and np.array_equal(whole, full)
        # float32 blocks: the ranks without blocks take the holders' dtype, so the gathers agree
        f32 = DistVector.from_global(full.astype(np.float32), grid, space)
        ok &= f32.local.dtype == np.float32 and np.array_equal(f32.allgather(), full.astype(np.float32))
        counting = np.arange(math.prod(shape)).reshape(shape)
        ints = DistVector.from_global(counting, grid, space)
        ok &= ints.local.dtype == np.float64 and np.array_equal(ints.allgather(), counting)
        assert all_true(comm, ok), grid.shape


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("space, n, Nt, K", CASES)
def test_scatter_roundtrip(comm, mpi_rng, space, n, Nt, K):
    shape = (n, Nt) + ((K,) if K else ())
    full = mpi_rng.standard_normal(shape)
    for grid in each_grid(comm):
        for root in sorted({0, grid.size - 1}):
            v = DistVector.scatter(full if grid.rank == root else None, grid, space, root=root)
            ref = DistVector.from_global(full, grid, space)
            ok = np.array_equal(v.local, ref.local) and v.shape == shape
            ok &= np.array_equal(v.gather(root=None), full)
            assert all_true(comm, ok), (grid.shape, root)
        f32 = DistVector.scatter(full.astype(np.float32) if grid.rank == 0 else None, grid, space)
        assert f32.dtype == np.float32 and f32.gather(root=None).dtype == np.float32


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("space, n, Nt, K", CASES)
def test_arithmetic_and_reductions_match_numpy(comm, mpi_rng, space, n, Nt, K):
    shape = (n, Nt) + ((K,) if K else ())
    a, b = mpi_rng.standard_normal((2,) + shape)
    alpha = float(mpi_rng.standard_normal())
    for grid in each_grid(comm):
        x, y = DistVector.from_global(a, grid, space), DistVector.from_global(b, grid, space)
        dot, norm = x.dot(y), x.norm()
        assert comm.allgather((dot, norm)) == [(dot, norm)] * comm.size  # identical on all ranks
        assert math.isclose(dot, float(np.vdot(a, b)), rel_tol=1e-12, abs_tol=1e-12)
        assert math.isclose(norm, float(np.linalg.norm(a)), rel_tol=1e-12)
        assert inner(x, y) == dot
        checks = {
            "x + y": (x + y, a + b), "x - y": (x - y, a - b), "alpha * x": (alpha * x, alpha * a),
            "x * alpha": (x * alpha, a * alpha), "x / 3": (x / 3.0, a / 3.0), "-x": (-x, -a),
            "np.float64 * x": (np.float64(alpha) * x, alpha * a),
            "2x - 0.5y": (2 * x - 0.5 * y, 2 * a - 0.5 * b),
        }
        z = x.copy()
        z.axpy(alpha, y)
        checks["axpy"] = (z, a + alpha * b)
        w = x.copy()
        w += y
        w -= 3 * y
        w *= 2.0
        w /= 4.0
        checks["in place"] = (w, (a - 2 * b) / 2)
        checks["zeros_like"] = (x.zeros_like(), np.zeros_like(a))
        checks["copy untouched"] = (x, a)  # copy() and axpy did not alias x
        err = max(rel_err(v.gather(root=None), ref) if ref.any() else float(np.abs(v.gather(root=None)).max())
                  for v, ref in checks.values())
        assert max_all(comm, err) < 1e-14, grid.shape
        if K:
            G = x.gram(y)
            assert np.allclose(G, a.reshape(-1, K).T @ b.reshape(-1, K), rtol=1e-12)
        other = DistVector.from_global(a[:, :-1] if Nt > 1 else np.ones((n + 1, Nt)), grid, space)
        with pytest.raises(ConfigError, match="incompatible"):  # metadata is agreed: all ranks raise
            x + other


@pytest.mark.mpi(min_size=1)
def test_constructor_from_local_blocks(comm, mpi_rng):
    n, Nt = 5, 4
    full = mpi_rng.standard_normal((n, Nt))
    for grid in each_grid(comm):
        for space in ("param", "data"):
            s, c = grid.block(space, n)
            v = DistVector(full[s:s + c] if grid.holds(space) else None, grid, space, n)
            assert v.Nt == Nt and np.array_equal(v.gather(root=None), full)
            z = DistVector.zeros(grid, space, n, Nt, K=2)
            assert z.shape == (n, Nt, 2) and z.norm() == 0.0
            # float32 blocks: the ranks without blocks keep an empty float32 array, so the gather agrees
            f32 = DistVector(full[s:s + c].astype(np.float32) if grid.holds(space) else None, grid, space, n)
            assert f32.dtype == np.float32 and np.array_equal(f32.allgather(), full.astype(np.float32))
    if comm.size > 1:  # holders' blocks of two dtypes, or whole arrays of two: the same error everywhere
        with ProcessGrid(comm, (1, comm.size)) as grid:
            s, c = grid.block("param", n)
            dtype = np.float32 if grid.rank == 0 else np.float64
            with pytest.raises(ConfigError, match="ranks disagree on the vector's"):
                DistVector(full[s:s + c].astype(dtype), grid, "param", n)
            with pytest.raises(ConfigError, match="ranks disagree on the global vector's shape and dtype"):
                DistVector.from_global(full.astype(dtype), grid, "param")


@pytest.mark.mpi(min_size=1)
def test_write_then_read_per_rank(comm, mpi_rng, mpi_tmp_path):
    from fftmatvec.io import read_vector

    n, Nt = 7, 5
    full = mpi_rng.standard_normal((n, Nt))
    for grid in each_grid(comm):
        for space in ("param", "data"):
            path = mpi_tmp_path / f"v_{space}_{grid.pr}x{grid.pc}.h5"
            DistVector.from_global(full, grid, space).write(path, attrs={"dt": 0.5})
            comm.Barrier()
            whole, info = read_vector(path, space)
            assert np.array_equal(whole, full) and info.n == n and info.Nt == Nt
            back = DistVector.read(path, grid, space)  # n learned from the file
            assert back.shape == (n, Nt) and np.array_equal(back.gather(root=None), full)
            back2 = DistVector.read(path, grid, space, n=n, Nt=Nt)
            assert all_true(comm, np.array_equal(back2.local, back.local))


@pytest.mark.mpi(min_size=1)
def test_cg_runs_unchanged_on_dist_vectors(comm, mpi_rng):
    """The inversion's CG on DistVector with the all-reduced inner product gives
    the serial solution (same iterations)."""
    from fftmatvec.inversion.cg import cg

    Nd, Nm, Nt = 4, 6, 5
    f = mpi_rng.standard_normal((Nd, Nm, Nt))
    b = mpi_rng.standard_normal((Nm, Nt))
    serial = BTTOperator(f)
    ref = cg(lambda v: serial.normal(v) + v, b, rtol=1e-10, maxiter=200)
    for grid in each_grid(comm):
        op = BTTOperator(f, grid=grid)
        bv = DistVector.from_global(b, grid, "param")
        res = cg(lambda v: op.normal(v) + v, bv, x0=bv.zeros_like(), rtol=1e-10, maxiter=200, inner=inner)
        assert res.converged and abs(res.iterations - ref.iterations) <= 1
        assert max_all(comm, rel_err(res.x.gather(root=None), ref.x)) < 1e-8
