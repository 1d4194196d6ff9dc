"""The distributed operator on every grid shape against float64 dense references
and the single-process operator: F, F^T, F^T F, G^T F, batches, mixed precision,
the C++ reference fixture read per rank."""

from __future__ import annotations

import numpy as np
import pytest
from mpitools import (apply_dense, comm, dense_btt, each_grid, max_all, mpi_rng,  # noqa: F401
                      outcomes, rel_err, tol)

from fftmatvec import BTTOperator
from fftmatvec.vector import DistVector

# (Nd, Nm, Nt): odd sizes, uneven splits, and sizes below the grid extents
# (Nd=2 on pr=3 or 4, Nm=1 on pc=2..4: ranks with no blocks that still take part)
SIZES = [(5, 7, 6), (3, 11, 13), (2, 1, 5), (1, 3, 4), (7, 2, 9)]
EPS64 = 1e-13


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("Nd, Nm, Nt", SIZES, ids=lambda v: str(v))
def test_products_match_dense_and_serial(comm, mpi_rng, Nd, Nm, Nt):
    f, g = mpi_rng.standard_normal((2, Nd, Nm, Nt))
    m, d = mpi_rng.standard_normal((Nm, Nt)), mpi_rng.standard_normal((Nd, Nt))
    F, G = dense_btt(f), dense_btt(g)
    serial = BTTOperator(f, aux=g)
    refs = {"F m": apply_dense(F, m, Nd), "F^T d": apply_dense(F.T, d, Nm),
            "F^T F m": apply_dense(F.T @ F, m, Nm), "G^T F m": apply_dense(G.T @ F, m, Nm)}
    singles = {"F m": serial.matvec(m), "F^T d": serial.rmatvec(d),
               "F^T F m": serial.normal(m), "G^T F m": serial.aux_normal(m)}
    for grid in each_grid(comm):
        op = BTTOperator(f, aux=g, grid=grid)  # the whole f: each rank cuts its slab
        mv, dv = DistVector.from_global(m, grid, "param"), DistVector.from_global(d, grid, "data")
        got = {"F m": op.matvec(mv), "F^T d": op.rmatvec(dv), "F^T F m": op.normal(mv), "G^T F m": op.aux_normal(mv)}
        for name, v in got.items():
            assert isinstance(v, DistVector) and v.space == ("data" if name == "F m" else "param")
            full = v.gather(root=None)
            err = max_all(comm, rel_err(full, refs[name]))
            err_serial = max_all(comm, rel_err(full, singles[name]))
            assert err < EPS64 and err_serial < EPS64, (grid.shape, name, err, err_serial)


@pytest.mark.mpi(min_size=1)
def test_plain_local_blocks_and_none_on_non_holders(comm, mpi_rng):
    """Without DistVector: holders pass their block, others None; outputs are
    the holder's block, an empty (0, Nt) array elsewhere."""
    Nd, Nm, Nt = 5, 9, 7
    f = mpi_rng.standard_normal((Nd, Nm, Nt))
    m, d = mpi_rng.standard_normal((Nm, Nt)), mpi_rng.standard_normal((Nd, Nt))
    F = dense_btt(f)
    y_ref, z_ref = apply_dense(F, m, Nd), apply_dense(F.T, d, Nm)
    for grid in each_grid(comm):
        (i0, nd), (j0, nm) = grid.row_block(Nd), grid.col_block(Nm)
        op = BTTOperator(f[i0:i0 + nd, j0:j0 + nm], grid=grid, shape=(Nd, Nm, Nt))  # only my slab
        y = op.matvec(m[j0:j0 + nm] if grid.holds_param() else None)
        z = op.rmatvec(d[i0:i0 + nd] if grid.holds_data() else "ignored")
        if grid.holds_data():
            e1 = rel_err(y, y_ref[i0:i0 + nd]) if nd else 0.0
            ok = y.shape == (nd, Nt)
        else:
            e1, ok = 0.0, y.shape == (0, Nt)
        if grid.holds_param():
            e2 = rel_err(z, z_ref[j0:j0 + nm]) if nm else 0.0
            ok &= z.shape == (nm, Nt)
        else:
            e2 = 0.0
            ok &= z.shape == (0, Nt)
        ok &= y.dtype == np.float64 and z.dtype == np.float64
        assert max_all(comm, max(e1, e2)) < EPS64 and max_all(comm, not ok) == 0, grid.shape


@pytest.mark.mpi(min_size=1)
def test_batched_rhs(comm, mpi_rng):
    Nd, Nm, Nt, K = 4, 7, 5, 3
    f = mpi_rng.standard_normal((Nd, Nm, Nt))
    M, D = mpi_rng.standard_normal((Nm, Nt, K)), mpi_rng.standard_normal((Nd, Nt, K))
    F = dense_btt(f)
    for grid in each_grid(comm):
        op = BTTOperator(f, grid=grid)
        Y = op.matvec(DistVector.from_global(M, grid, "param"))
        Z = op.rmatvec(DistVector.from_global(D, grid, "data"))
        N = op.normal(DistVector.from_global(M, grid, "param"))
        assert Y.K == Z.K == N.K == K and Y.local.shape[1:] == (Nt, K)
        err = max(rel_err(Y.gather(root=None), apply_dense(F, M, Nd)),
                  rel_err(Z.gather(root=None), apply_dense(F.T, D, Nm)),
                  rel_err(N.gather(root=None), apply_dense(F.T @ F, M, Nm)))
        # one batched product equals K single ones
        y0 = op.matvec(DistVector.from_global(M[:, :, 1], grid, "param")).gather(root=None)
        err = max(err, rel_err(Y.gather(root=None)[:, :, 1], y0))
        assert max_all(comm, err) < EPS64, grid.shape


@pytest.mark.mpi(min_size=1)
def test_distributed_adjoint_identity(comm, mpi_rng):
    """<F m, d> = <m, F^T d> with the distributed dot products."""
    Nd, Nm, Nt = 6, 13, 11
    f = mpi_rng.standard_normal((Nd, Nm, Nt))
    m, d = mpi_rng.standard_normal((Nm, Nt)), mpi_rng.standard_normal((Nd, Nt))
    for grid in each_grid(comm):
        op = BTTOperator(f, grid=grid)
        mv, dv = DistVector.from_global(m, grid, "param"), DistVector.from_global(d, grid, "data")
        lhs, rhs = op.matvec(mv).dot(dv), mv.dot(op.rmatvec(dv))
        assert comm.allgather(lhs) == [lhs] * comm.size  # the same float everywhere
        scale = np.linalg.norm(f) * np.linalg.norm(m) * np.linalg.norm(d)
        assert abs(lhs - rhs) <= 1e-14 * scale, (grid.shape, lhs, rhs)
        # and F^T F is symmetric positive semi-definite: <m, F^T F m> = ||F m||^2
        assert abs(mv.dot(op.normal(mv)) - op.matvec(mv).norm() ** 2) <= 1e-12 * abs(lhs) + 1e-12 * scale


CODES = ["ddddd", "dssdd", "ddssd", "sdddd", "dddds", "sssss"]


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("code", CODES)
def test_mixed_precision_on_the_grid(comm, mpi_rng, code):
    Nd, Nm, Nt = 5, 23, 16
    f = mpi_rng.standard_normal((Nd, Nm, Nt))
    m, d = mpi_rng.standard_normal((Nm, Nt)), mpi_rng.standard_normal((Nd, Nt))
    F = dense_btt(f)
    y_ref, z_ref = apply_dense(F, m, Nd), apply_dense(F.T, d, Nm)
    for grid in each_grid(comm):
        op = BTTOperator(f, grid=grid, precision=code)
        grid.reset_comm_stats()
        y = op.matvec(DistVector.from_global(m, grid, "param")).gather(root=None)
        stats = grid.comm_stats()
        z = op.rmatvec(DistVector.from_global(d, grid, "data")).gather(root=None)
        err = max_all(comm, max(rel_err(y, y_ref), rel_err(z, z_ref)))
        assert err < tol(code), (grid.shape, code, err)
        if "s" in code:  # really computed in single somewhere
            assert err > 10 * np.finfo(np.float64).eps
        # messages travel in the stage precision: 4 bytes a value for "s"
        (_, nd), (_, nm) = grid.row_block(Nd), grid.col_block(Nm)
        if grid.pr > 1:
            assert stats["col"]["bcast"]["bytes"] == nm * Nt * (4 if code[0] == "s" else 8)
        if grid.pc > 1:
            assert stats["row"]["reduce"]["bytes"] == nd * Nt * (4 if code[4] == "s" else 8)


@pytest.mark.mpi(min_size=1)
def test_separate_adjoint_precision_and_normal(comm, mpi_rng):
    Nd, Nm, Nt = 4, 9, 8
    f = mpi_rng.standard_normal((Nd, Nm, Nt))
    m = mpi_rng.standard_normal((Nm, Nt))
    F = dense_btt(f)
    for grid in each_grid(comm):
        op = BTTOperator(f, grid=grid, precision="dssdd", adjoint_precision="ddssd")
        got = op.normal(DistVector.from_global(m, grid, "param")).gather(root=None)
        assert max_all(comm, rel_err(got, apply_dense(F.T @ F, m, Nm))) < tol("s")


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("name, expected", [("test_mat", "test_obs_vec_SOTI.h5"),
                                            ("test_mat_qoi", "test_qoi_vec_SOTI.h5")])
def test_reference_fixture_per_rank(comm, reference_dir, monkeypatch, name, expected):
    """Each rank reads only its slab of the matrix and its blocks of the vectors."""
    import fftmatvec.io as fio

    seen = {"slab": [], "vec": []}
    read_slab, read_vec = fio.read_matrix_slab, fio.read_vector

    def spy_slab(path, rows, cols, meta=None):
        seen["slab"].append((tuple(rows), tuple(cols)))
        return read_slab(path, rows, cols, meta=meta)

    def spy_vec(path, *args, **kwargs):
        seen["vec"].append(kwargs.get("blocks"))
        return read_vec(path, *args, **kwargs)

    monkeypatch.setattr(fio, "read_matrix_slab", spy_slab)
    monkeypatch.setattr(fio, "read_vector", spy_vec)
    for grid in each_grid(comm):
        seen["slab"].clear(), seen["vec"].clear()
        op = BTTOperator.from_matrix_dir(reference_dir / name, grid=grid)
        assert (op.Nd, op.Nm, op.Nt) == (15, 289, 10)
        assert seen["slab"] == [(grid.row_block(15), grid.col_block(289))]
        m = DistVector.read(reference_dir / "test_param_vec_SOTI.h5", grid, "param", n=op.Nm, Nt=op.Nt)
        d = DistVector.read(reference_dir / expected, grid, "data", n=op.Nd, Nt=op.Nt)
        if grid.holds_param() and grid.holds_data():
            assert seen["vec"] == [grid.col_block(289), grid.row_block(15)]
        elif grid.holds_param():
            assert seen["vec"] == [grid.col_block(289)]
        elif grid.holds_data():
            assert seen["vec"] == [grid.row_block(15)]
        else:
            assert seen["vec"] == []  # non-holders open no vector file
        y = op.matvec(m)
        err = (y - d).norm() / d.norm()  # distributed norms: the same on every rank
        assert comm.allgather(err) == [err] * comm.size
        assert err < 1e-6, (grid.shape, err)
        assert d.qoi == name.endswith("qoi")


@pytest.mark.mpi(min_size=1)
def test_prepare_refused_on_a_process_grid(comm, mpi_rng):
    """Every rank of a process grid refuses a prepared product alike, before
    any collective, so none is left waiting."""
    Nd, Nm, Nt = 3, 4, 5
    f = mpi_rng.standard_normal((Nd, Nm, Nt))
    for grid in each_grid(comm):
        op = BTTOperator(f, grid=grid)
        (_, nm) = grid.col_block(Nm)
        got = outcomes(comm, lambda: op.prepare(np.zeros((nm, Nt))))
        assert all(o is not None and o[0] == "ConfigError" and "process grid" in o[1] for o in got), got
