"""GPU grids under MPI: the choice of collectives (NCCL or host-staged MPI),
the NCCL collectives themselves and the distributed operator on GPUs against
the CPU.

Run with ``mpiexec -n N python -m pytest --with-mpi tests/gpu/test_gpu_mpi.py``
(pytest-mpi); ``FFTMATVEC_COLLECTIVES=nccl`` forces NCCL, ``mpi`` forbids it.
NCCL needs one GPU per rank, so with more ranks than GPUs the grid falls back
to MPI (auto) or every rank raises the same ConfigError (forced), and the
tests of NCCL itself are skipped.  Skipped without CuPy or a GPU.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from conftest import dense_btt, rel_err
from gputools import require_gpu

cupy = require_gpu()
_NDEV = cupy.cuda.runtime.getDeviceCount()

from fftmatvec import BTTOperator, ReplicatedOperator  # noqa: E402
from fftmatvec.collectives import COLLECTIVES_ENV, NCCLCollectives, collectives_mode, nccl_available  # noqa: E402
from fftmatvec.errors import ConfigError, FftmatvecError  # noqa: E402
from fftmatvec.vector import DistVector  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture
def comm():
    MPI = pytest.importorskip("mpi4py.MPI")
    return MPI.COMM_WORLD


def shapes(size):
    return [(pr, size // pr) for pr in range(1, size + 1) if size % pr == 0]


def max_all(comm, v):
    vals = comm.allgather(float(v))
    return float("nan") if any(np.isnan(vals)) else max(vals)


def nccl_expected(size):
    """What "auto"/"nccl" should give: NCCL when it is there and every rank has its own GPU."""
    return nccl_available() and size <= _NDEV


def forced_nccl_impossible(size):
    """FFTMATVEC_COLLECTIVES=nccl where NCCL cannot run: every grid raises
    the same ConfigError (test_transport_choice checks it); the same on every rank."""
    return collectives_mode() == "nccl" and not nccl_expected(size)


def make_grid(comm, shape):
    from fftmatvec.grid import ProcessGrid

    return ProcessGrid(comm, shape, device="gpu")


@pytest.mark.mpi(min_size=1)
def test_transport_choice(comm):
    mode = collectives_mode()
    want_nccl = mode != "mpi" and nccl_expected(comm.size)
    if forced_nccl_impossible(comm.size):  # the same error on every rank
        try:
            make_grid(comm, (1, comm.size))
            got = None
        except ConfigError as exc:
            got = str(exc)
        msgs = comm.allgather(got)
        assert all(m is not None and m == msgs[0] for m in msgs), msgs
        assert COLLECTIVES_ENV in msgs[0] and ("GPU" in msgs[0] or "NCCL" in msgs[0])
        return
    with make_grid(comm, (1, comm.size)) as grid:
        assert grid.collectives == ("nccl" if want_nccl else "mpi"), grid.collectives_note
        assert grid.device_id == grid.node_rank % _NDEV == cupy.cuda.runtime.getDevice()
        kinds = {type(c).__name__ for c in (grid.row, grid.col, grid.all)}
        assert kinds == {"NCCLCollectives" if want_nccl else "MPICollectives"}
        print(f"rank {comm.rank}: {grid.collectives} ({grid.collectives_note}) on GPU {grid.device_id}")


def _needs_nccl(comm, grid):
    if grid.collectives != "nccl":  # the same on every rank (voted)
        grid.free()
        pytest.skip(f"NCCL not in use: {grid.collectives_note or 'FFTMATVEC_COLLECTIVES=mpi'}")


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_nccl_collectives(comm, dtype):
    if collectives_mode() == "mpi" or not nccl_expected(comm.size):
        pytest.skip(f"NCCL needs one GPU per rank and {COLLECTIVES_ENV} != mpi ({comm.size} ranks, {_NDEV} GPUs)")
    grid = make_grid(comm, (1, comm.size))
    _needs_nccl(comm, grid)
    with grid:
        coll = grid.row
        assert isinstance(coll, NCCLCollectives)
        size, rank = comm.size, comm.rank
        tot = size * (size + 1) / 2
        base = np.arange(12, dtype=np.float64).reshape(3, 4)
        val = (base + (1j * base if np.dtype(dtype).kind == "c" else 0)).astype(dtype)
        rtol = 1e-6 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-14
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:  # on a non-default stream: the calls are queued on it
            coll.reset_stats()
            # bcast
            b = cupy.asarray(val * (rank + 1))
            coll.bcast(b, root=size - 1)
            np.testing.assert_allclose(b.get(), val * size, rtol=rtol)
            # allreduce in place and into out (device and host)
            a = cupy.asarray(val * (rank + 1))
            coll.allreduce(a)
            np.testing.assert_allclose(a.get(), val * tot, rtol=rtol)
            src = cupy.asarray(val * (rank + 1))
            out = cupy.empty_like(src)
            assert coll.allreduce(src, out=out) is out
            np.testing.assert_allclose(out.get(), val * tot, rtol=rtol)
            np.testing.assert_array_equal(src.get(), val * (rank + 1))
            host_out = np.empty(val.shape, dtype)
            assert coll.allreduce(src, out=host_out) is host_out
            np.testing.assert_allclose(host_out, val * tot, rtol=rtol)
            # reduce in place, into out
            r = cupy.asarray(val * (rank + 1))
            got = coll.reduce(r, root=0)
            if rank == 0:
                assert got is r
                np.testing.assert_allclose(r.get(), val * tot, rtol=rtol)
            else:
                assert got is None
                np.testing.assert_array_equal(r.get(), val * (rank + 1))
            r2 = cupy.asarray(val * (rank + 1))
            out2 = cupy.zeros_like(r2)
            got = coll.reduce(r2, out=out2, root=0)
            if rank == 0:
                assert got is out2
                np.testing.assert_allclose(out2.get(), val * tot, rtol=rtol)
            # non-blocking reduce after a marked piece of work
            x = cupy.zeros(val.shape, dtype)
            x += cupy.asarray(val * (rank + 1))
            ev = cupy.cuda.Event(disable_timing=True)
            ev.record()
            req = coll.ireduce(x, root=0, after=ev)
            res = req.wait()
            # on a stream of the highest priority (H200: -5), so that it runs beside the product's next chunk
            assert coll._stream.priority < cupy.cuda.Stream(non_blocking=True).priority
            if rank == 0:
                assert res is x
                np.testing.assert_allclose(x.get(), val * tot, rtol=rtol)
            else:
                assert res is None
            # all-gather with uneven counts, one rank sending nothing when there are several
            counts = [0 if (r == 1 and size > 2) else 2 * r + 3 for r in range(size)]
            pieces = [(np.arange(c) + 100 * r).astype(np.float64) for r, c in enumerate(counts)]
            pieces = [(p + (1j * p if np.dtype(dtype).kind == "c" else 0)).astype(dtype) for p in pieces]
            whole = cupy.full(sum(counts), -1, dtype)
            assert coll.gatherv(cupy.asarray(pieces[rank]), counts, whole, root=None) is whole
            np.testing.assert_array_equal(whole.get(), np.concatenate(pieces))
            # host arrays go through MPI
            h = np.full(4, float(rank + 1))
            coll.allreduce(h)
            np.testing.assert_allclose(h, tot)
            stream.synchronize()
            stats = coll.stats
        for op in ("bcast", "allreduce", "reduce", "ireduce", "allgatherv"):
            assert stats[op]["calls"] >= 1 and stats[op]["seconds"] >= 0, stats
        assert stats["allreduce"]["calls"] == 3 and stats["reduce"]["calls"] == 2
        assert stats["mpi:allreduce"]["calls"] == 1
        assert coll.seconds > 0
        coll.check()


@pytest.mark.mpi(min_size=2)
@pytest.mark.parametrize("bad", [np.nan, -np.inf])
def test_bad_value_in_a_device_block_fails_every_rank_before_any_collective(comm, bad):
    """A NaN or Inf in one rank's device block (the finite check of the grid
    path, on the device; one process does not check device blocks): every
    rank raises the same error, and no rank has started a broadcast or a
    reduction."""
    if forced_nccl_impossible(comm.size):
        pytest.skip(f"{COLLECTIVES_ENV}=nccl cannot run here ({comm.size} ranks, {_NDEV} GPUs)")
    rng = np.random.default_rng(5)
    Nd, Nm, Nt = 4, 2 * comm.size + 3, 6
    f = rng.standard_normal((Nd, Nm, Nt))
    for shape in shapes(comm.size):
        with make_grid(comm, shape) as grid:
            op = BTTOperator(f, grid=grid, device="gpu")
            j0, nm = grid.col_block(Nm)
            x = cupy.asarray(rng.standard_normal((Nm, Nt))[j0:j0 + nm]) if grid.holds_param() else None
            victim = grid.pc - 1  # the last holder of parameter blocks
            if grid.rank == victim:
                x[nm // 2, Nt - 1] = bad
            grid.reset_comm_stats()
            try:
                op.matvec(x)
                message = None
            except FftmatvecError as exc:
                message = str(exc)
            messages = comm.allgather(message)
            assert messages == [f"checking the input of F m failed on rank {victim}: "
                                "input vector contains NaN or Inf"] * comm.size, (shape, messages)
            stats = grid.comm_stats()
            assert "bcast" not in stats["col"] and "reduce" not in stats["row"], (shape, stats)


@pytest.mark.mpi(min_size=1)
@pytest.mark.parametrize("chunks", [1, 3])
def test_operator_on_gpu_grid_vs_cpu(comm, chunks):
    """F, F^T and F^T F on every grid shape, GPU ranks against the CPU
    single-process operator and the dense matrix (NCCL or host-staged MPI,
    whichever the grid took)."""
    rng = np.random.default_rng(comm.bcast(int.from_bytes(os.urandom(4), "little") if comm.rank == 0 else None))
    Nd, Nm, Nt = 7, 11, 9
    f = rng.standard_normal((Nd, Nm, Nt))
    m, d = rng.standard_normal((Nm, Nt, 2)), rng.standard_normal((Nd, Nt, 2))
    F = dense_btt(f)
    cpu = BTTOperator(f)
    refs = {"F m": cpu.matvec(m), "F^T d": cpu.rmatvec(d), "F^T F m": cpu.normal(m)}
    dense = {"F m": (F @ m.reshape(Nm * Nt, 2)).reshape(Nd, Nt, 2),
             "F^T d": (F.T @ d.reshape(Nd * Nt, 2)).reshape(Nm, Nt, 2)}
    if forced_nccl_impossible(comm.size):
        pytest.skip(f"{COLLECTIVES_ENV}=nccl cannot run here ({comm.size} ranks, {_NDEV} GPUs)")
    for shape in shapes(comm.size):
        with make_grid(comm, shape) as grid:
            op = BTTOperator(f, grid=grid, device="gpu", reduce_chunks=chunks)
            assert grid.collectives in ("mpi", "nccl")
            mv, dv = DistVector.from_global(m, grid, "param"), DistVector.from_global(d, grid, "data")
            got = {"F m": op.matvec(mv), "F^T d": op.rmatvec(dv), "F^T F m": op.normal(mv)}
            for name, v in got.items():
                full = v.gather(root=None)
                err = max_all(comm, rel_err(full, refs[name]))
                assert err < 1e-13, (shape, grid.collectives, name, err)
                if name in dense:
                    assert max_all(comm, rel_err(full, dense[name])) < 1e-12
            # dot / norm through grid.all (host buffers: MPI fallback under NCCL)
            assert abs(mv.dot(mv) - float(np.vdot(m, m))) < 1e-9 * float(np.vdot(m, m))
            # device blocks in, device blocks out
            (j0, nm) = grid.col_block(Nm)
            x = cupy.asarray(m[j0:j0 + nm, :, 0]) if grid.holds_param() else None
            y = op.matvec(x)
            if grid.holds_data():
                (i0, nd) = grid.row_block(Nd)
                assert isinstance(y, cupy.ndarray)
                e = rel_err(y.get(), refs["F m"][i0:i0 + nd, :, 0]) if nd else 0.0
            else:
                e = 0.0
            assert max_all(comm, e) < 1e-13
            if comm.rank == 0:
                print(f"{shape}: {grid.collectives} ({grid.collectives_note}); comm {grid.comm_stats()}")


@pytest.mark.mpi(min_size=1)
def test_replicated_operator_keeps_whole_vectors_on_the_device(comm):
    """The inversion's view of a GPU grid: whole CuPy vectors in, whole CuPy
    vectors out on every rank, equal to the CPU single-process products; with
    NCCL the gather of the result stays on the device (no host all-gather)."""
    rng = np.random.default_rng(comm.bcast(int.from_bytes(os.urandom(4), "little") if comm.rank == 0 else None))
    Nd, Nm, Nt = 5, 13, 6
    f = rng.standard_normal((Nd, Nm, Nt))
    m, d = rng.standard_normal((Nm, Nt)), rng.standard_normal((Nd, Nt, 3))
    cpu = BTTOperator(f)
    refs = {"matvec": cpu.matvec(m), "rmatvec": cpu.rmatvec(d), "normal": cpu.normal(m)}
    if forced_nccl_impossible(comm.size):
        pytest.skip(f"{COLLECTIVES_ENV}=nccl cannot run here ({comm.size} ranks, {_NDEV} GPUs)")
    for shape in shapes(comm.size):
        with make_grid(comm, shape) as grid:
            F = ReplicatedOperator(BTTOperator(f, grid=grid, device="gpu"))
            assert F.xp is cupy
            grid.reset_comm_stats()
            for name, v in (("matvec", m), ("rmatvec", d), ("normal", m)):
                y = getattr(F, name)(cupy.asarray(v))
                assert isinstance(y, cupy.ndarray), (shape, name)
                assert max_all(comm, rel_err(y.get(), refs[name])) < 1e-13, (shape, name)
            gathers = grid.comm_stats()["all"]
            if grid.size == 1:  # one process: the products themselves, no gather
                assert not gathers, gathers
            elif grid.collectives == "nccl":
                assert gathers["allgatherv"]["calls"] == 3 and "mpi:gatherv" not in gathers, gathers
            else:
                assert gathers["gatherv"]["calls"] == 3, gathers


@pytest.mark.mpi(min_size=1)
def test_device_allgather_of_a_distributed_vector(comm):
    """``DistVector.allgather`` of CuPy blocks: a CuPy array on every rank,
    equal to the whole vector, on every grid, with uneven blocks, a batch and
    float32 blocks (NCCL, or MPI staged through the host)."""
    if forced_nccl_impossible(comm.size):
        pytest.skip(f"{COLLECTIVES_ENV}=nccl cannot run here ({comm.size} ranks, {_NDEV} GPUs)")
    rng = np.random.default_rng(comm.bcast(int.from_bytes(os.urandom(4), "little") if comm.rank == 0 else None))
    for shape in shapes(comm.size):
        with make_grid(comm, shape) as grid:
            for space, n, tail, dtype in (("param", 7, (5,), np.float64), ("data", 3, (4, 2), np.float64),
                                          ("param", 5, (3,), np.float32)):
                full = rng.standard_normal((n,) + tail).astype(dtype)
                v = DistVector.from_global(cupy.asarray(full), grid, space)
                whole = v.allgather()
                ok = isinstance(whole, cupy.ndarray) and whole.dtype == dtype
                ok = ok and bool((whole == cupy.asarray(full)).all())
                assert all(comm.allgather(ok)), (shape, space, n, tail, dtype)


@pytest.mark.mpi(min_size=1)
def test_auto_precision_on_a_gpu_grid(comm):
    """``precision="auto"`` measured through the GPU grid's products (NCCL or
    MPI): one choice on every rank, each code's error within 4x of the CPU's
    one-process measurement on the same probes."""
    from fftmatvec.tuning import measure, synthetic_matrix

    f = synthetic_matrix(5, 31, 20, cond=1e2, seed=4)
    options = dict(probes=2, repeats=1, seed=4)
    cpu = measure(f, **options)
    if forced_nccl_impossible(comm.size):
        pytest.skip(f"{COLLECTIVES_ENV}=nccl cannot run here ({comm.size} ranks, {_NDEV} GPUs)")
    for shape in shapes(comm.size):
        with make_grid(comm, shape) as grid:
            op = BTTOperator(f, grid=grid, device="gpu", precision="auto", tolerance=1e-6, auto_options=options)
            t = op.tuning
            assert comm.bcast((t.forward, t.adjoint), root=0) == (t.forward, t.adjoint)
            ratios = [e.error / cpu.entry(e.direction, e.code).error for e in t.entries if e.code != "ddddd"]
            worst = max(max(ratios), 1 / min(ratios))
            assert max_all(comm, worst) <= 4, (shape, grid.collectives, worst)
