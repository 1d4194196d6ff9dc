"""GPU backend (CuPy + native kernels) against the CPU backend and float64 references.

Skipped cleanly without CuPy or without a visible GPU.  References are built
here, independently of the code under test: a dense block-Toeplitz product
in float64 for the operator, ``numpy.einsum`` for the per-frequency
products, NumPy's FFT for the transforms.
"""

import itertools
import threading

import numpy as np
import pytest

from conftest import rel_err
from gputools import require_gpu

cupy = require_gpu()

from fftmatvec import ALL_CODES, BTTOperator, ConfigError  # noqa: E402
from fftmatvec.backend.cpu import CPUBackend  # noqa: E402
from fftmatvec.backend import kernels  # noqa: E402
from fftmatvec.backend.gpu import GPUBackend, select_device  # noqa: E402
from fftmatvec.errors import FftmatvecError  # noqa: E402

pytestmark = pytest.mark.gpu

EPS_S = float(np.finfo(np.float32).eps)
EPS_D = float(np.finfo(np.float64).eps)


@pytest.fixture(scope="module")
def gpu():
    return GPUBackend()


@pytest.fixture(scope="module")
def eager_gpu():
    """A GPU backend that never records graphs (nor takes the one-kernel product)."""
    be = GPUBackend()
    be.graph_max_bytes = -1
    be.direct_max_nt = 0
    return be


def one_column_backend(fwd_lanes=None, adj_keep_max_bytes=None) -> GPUBackend:
    """A GPU backend that takes the one-column native kernels for every K, the
    blocked adjoint kernel for one right-hand side too, and splits forward rows;
    ``fwd_lanes`` threads at most share a forward row group; adjoint results up
    to ``adj_keep_max_bytes`` are stored at evict-last priority (default: the L2's size)."""
    be = GPUBackend()
    if adj_keep_max_bytes is not None:
        be.adj_keep_max_bytes = adj_keep_max_bytes
    be.blas_min_k = {key: 10**6 for key in be.blas_min_k}
    be.gemm_min_k = {key: 10**6 for key in be.gemm_min_k}
    be.adj_tensor = {key: None for key in be.adj_tensor}
    be.adj_flat = False
    be.fwd_splits = 3
    be.fwd_lanes = fwd_lanes
    return be


@pytest.fixture(scope="module")
def native_gpu():
    """One-column kernels; the adjoint's result always stored plainly."""
    return one_column_backend(adj_keep_max_bytes=0)


@pytest.fixture(scope="module")
def wide_gpu():
    """``native_gpu`` whose forward row groups span up to a block's eight warps."""
    return one_column_backend(fwd_lanes=256)


@pytest.fixture(scope="module")
def gemm_gpu():
    """A GPU backend whose forward products with several right-hand sides all
    take ``sbgemm_fwd`` (never cuBLAS)."""
    be = GPUBackend()
    be.blas_min_k = {key: 10**6 for key in be.blas_min_k}
    be.gemm_min_k = {key: 2 for key in be.gemm_min_k}
    be.gemm_staged[np.dtype(np.complex128)] = (2, 4, 16, 3, 2)
    return be


@pytest.fixture(scope="module")
def staged_gpu():
    """A GPU backend that never takes the one-kernel product (``direct_plan``)."""
    be = GPUBackend()
    be.direct_max_nt = 0
    return be


@pytest.fixture
def rng():
    return np.random.default_rng(20240611)


def dense_product(f, x, adjoint):
    """float64 dense block-Toeplitz product: f (nd, nm, Nt), x (n, Nt, K)."""
    nd, nm, nt = f.shape
    lag = np.arange(nt)[:, None] - np.arange(nt)[None, :]
    T = np.where(lag >= 0, f[:, :, np.clip(lag, 0, None)], 0.0)  # (nd, nm, t, s)
    if adjoint:
        return np.einsum("ijts,itk->jsk", T, x)
    return np.einsum("ijts,jsk->itk", T, x)


def code_tol(code, nm, nt):
    """Error allowed for a code: at the level of its lowest-precision stage."""
    eps = EPS_S if "s" in code else EPS_D
    return 200 * eps * (np.log2(2 * nt) + 2 + np.sqrt(nm))


CORE_SHAPES = [  # (Nd, Nm, Nt)
    (5, 7, 6),  # uneven tiny
    (3, 11, 13),  # primes
    (4, 5, 1),  # Nt = 1
    (1, 9, 8),  # Nd = 1
    (6, 1, 7),  # Nm = 1
    (17, 5, 9),  # Nd > Nm
    (3, 40, 12),  # Nd < Nm
    (2, 3, 31),  # odd length
]


@pytest.mark.parametrize("shape", CORE_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("adjoint", [False, True], ids=["F", "FT"])
@pytest.mark.parametrize("which", ["default", "staged"])
def test_core_shapes_vs_dense_and_cpu(gpu, staged_gpu, rng, shape, adjoint, which):
    nd, nm, nt = shape
    f = rng.standard_normal(shape)
    x = rng.standard_normal((nm if not adjoint else nd, nt, 2))
    ref = dense_product(f, x, adjoint)
    op_g = BTTOperator(f, device=gpu if which == "default" else staged_gpu)
    op_c = BTTOperator(f, device=CPUBackend(workers=1))
    for k in range(2):  # repeated calls: eager, recorded, replayed
        apply = op_g.rmatvec if adjoint else op_g.matvec
        y = apply(x[:, :, 0])
        assert isinstance(y, np.ndarray) and y.shape == ref.shape[:2]
        assert rel_err(y, ref[:, :, 0]) < 1e-12
    y2 = (op_g.rmatvec if adjoint else op_g.matvec)(x)
    assert rel_err(y2, ref) < 1e-12
    yc = (op_c.rmatvec if adjoint else op_c.matvec)(x)
    assert rel_err(y2, yc) < 1e-12


@pytest.mark.parametrize("code", ALL_CODES)
def test_all_precision_codes(gpu, rng, code):
    nd, nm, nt = 6, 33, 16
    f = rng.standard_normal((nd, nm, nt))
    m = rng.standard_normal((nm, nt))
    d = rng.standard_normal((nd, nt))
    op = BTTOperator(f, precision=code, device=gpu)
    op_c = BTTOperator(f, precision=code, device=CPUBackend(workers=1))
    tol = code_tol(code, nm, nt)
    for adjoint, x in ((False, m), (True, d)):
        ref = dense_product(f, x[:, :, None], adjoint)[:, :, 0]
        y = op.rmatvec(x) if adjoint else op.matvec(x)
        err = rel_err(y, ref)
        assert err < tol, (code, adjoint, err, tol)
        if "s" in code:  # single precision really used somewhere
            assert err > 1e-11, (code, adjoint, err)
        yc = op_c.rmatvec(x) if adjoint else op_c.matvec(x)
        assert rel_err(y, yc) < 2 * tol


@pytest.mark.parametrize("code", ["ddddd", "dssdd", "ddssd"])
@pytest.mark.parametrize("K", [2, 3, 5, 8, 9, 16, 17, 33])
def test_batched_vs_loop(gpu, rng, code, K):
    nd, nm, nt = 7, 45, 12
    f = rng.standard_normal((nd, nm, nt))
    op = BTTOperator(f, precision=code, adjoint_precision=code, device=gpu)
    tol = 1e-13 if code == "ddddd" else 10 * EPS_S
    for adjoint in (False, True):
        apply = op.rmatvec if adjoint else op.matvec
        X = rng.standard_normal((nd if adjoint else nm, nt, K))
        Y = apply(X)
        loop = np.stack([apply(X[:, :, k]) for k in range(K)], axis=2)
        assert rel_err(Y, loop) < tol, (adjoint, K)
        assert rel_err(Y, dense_product(f, X, adjoint)) < code_tol(code, nm, nt)


@pytest.mark.parametrize("shape", [(5, 7, 6), (12, 300, 20), (40, 9, 11)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("code", ["ddddd", "sssss"])
def test_adjoint_identity(gpu, rng, shape, code):
    nd, nm, nt = shape
    f = rng.standard_normal(shape)
    op = BTTOperator(f, precision=code, device=gpu)
    m = rng.standard_normal((nm, nt))
    d = rng.standard_normal((nd, nt))
    lhs = float(np.vdot(op.matvec(m), d))
    rhs = float(np.vdot(m, op.rmatvec(d)))
    scale = np.linalg.norm(op.matvec(m)) * np.linalg.norm(d)
    assert abs(lhs - rhs) / scale < (1e-12 if code == "ddddd" else 1e-5)


@pytest.mark.parametrize("K", [1, 4, 16, 40])
@pytest.mark.parametrize("code", ["ddddd", "dssdd", "sdsds"])
def test_graph_replay_equals_eager(staged_gpu, eager_gpu, rng, code, K):
    """The staged kernels recorded and replayed give what they give eagerly
    (one right-hand side too: no one-kernel product on either backend)."""
    gpu = staged_gpu
    nd, nm, nt = 15, 289, 10
    f = rng.standard_normal((nd, nm, nt))
    op_r = BTTOperator(f, precision=code, adjoint_precision=code, device=gpu)
    op_e = BTTOperator(f, precision=code, adjoint_precision=code, device=eager_gpu)
    for adjoint in (False, True):
        for call in range(4):  # eager, recorded, replayed, replayed
            x = rng.standard_normal((nd if adjoint else nm, nt, K))
            yr = (op_r.rmatvec if adjoint else op_r.matvec)(x)
            ye = (op_e.rmatvec if adjoint else op_e.matvec)(x)
            np.testing.assert_array_equal(yr, ye)
        ws = op_r.engine.workspace(adjoint, op_r.precision, K)
        assert ws.x_in is not None
        if K < gpu.blas_min_k[(op_r.engine.Fhat[op_r.precision.sbgemv].dtype, adjoint)]:
            assert ws.launch.graphs, ws.launch.error
    # F^T F through replayed workspaces
    m = rng.standard_normal((nm, nt, K))
    np.testing.assert_array_equal(op_r.normal(m), op_e.normal(m))


@pytest.mark.parametrize("code", ["ddddd", "dssdd", "ddssd", "sssss"])
@pytest.mark.parametrize("shape", [(23, 301, 50), (50, 1000, 64), (7, 33, 1000)], ids=lambda s: "x".join(map(str, s)))
def test_programmatic_launch_equals_plain(gpu, rng, code, shape):
    """Kernels launched programmatically (each may start while the one before
    it ends; the product kernels prefetch Fhat before they wait) give bit for
    bit what plain launches give, eagerly and replayed, on a new input each
    call; and products with programmatic launches are recorded as graphs."""
    if not gpu.programmatic_launch:
        pytest.skip("no programmatic launch on this device")
    plain = GPUBackend()
    plain.programmatic_launch = False
    c64 = np.dtype(np.complex64)
    for be, early in ((gpu, gpu.early_loads), (plain, 0)):  # prefetches before the wait only when launched so
        assert int(be._fwd_config(501, 50, 1000, 1, c64, c64)[4][-1]) == early
        assert int(be._adj_config(501, 50, 1000, 1, c64, c64, flat=True)[4][-3]) == early
    nd, nm, nt = shape
    f = rng.standard_normal(shape)
    op_p = BTTOperator(f, precision=code, adjoint_precision=code, device=gpu)
    op_q = BTTOperator(f, precision=code, adjoint_precision=code, device=plain)
    for adjoint in (False, True):
        for call in range(4):  # eager, recorded, replayed, replayed
            x = cupy.asarray(rng.standard_normal((nd if adjoint else nm, nt)))
            yp = (op_p.rmatvec if adjoint else op_p.matvec)(x)
            yq = (op_q.rmatvec if adjoint else op_q.matvec)(x)
            cupy.testing.assert_array_equal(yp, yq)
        ws = op_p.engine.workspace(adjoint, op_p.adjoint_precision if adjoint else op_p.precision, 1)
        assert ws.launch.graphs, ws.launch.error


@pytest.mark.parametrize("release", [True, False], ids=["released", "kept"])
@pytest.mark.parametrize("code", ["ddddd", "ddssd", "sssss"])
@pytest.mark.parametrize("shape,flat,tiles", [
    ((50, 1000, 500), None, True), ((23, 301, 50), None, True), ((11, 530, 40), None, True),
    ((50, 1000, 64), False, True), ((9, 303, 40), False, True), ((7, 33, 1000), None, False)],
    ids=["mid", "odd", "pairs-partial", "blocked", "blocked-odd", "one-series-blocks"])
def test_tiled_spectra_equal_frequency_major(rng, code, shape, flat, tiles, release):
    """The adjoint with one right-hand side, its spectra laid out in tiles of
    the inverse transform's series per block (the balanced and the blocked
    kernel; a narrower last tile where the tile does not divide Nm, of one
    column or of a pair), gives bit for bit what the frequency-major layout
    gives, eagerly and replayed, on a new input each call, whether the
    inverse drops each tile from the L2 once read (``release_spectra``: a
    block that dropped lines of its neighbours' tiles before they read them
    would change their results) or not; the tiles were taken, except with
    one series per block (33 series), where they are not.  (Nt above 32:
    smaller products run as one kernel, ``direct_plan``.)"""
    tiled, plain = GPUBackend(), GPUBackend()
    tiled.release_spectra = release
    plain.tiled_spectra = False
    for be in (tiled, plain):
        if flat is not None:
            be.adj_flat = flat
    taken = []
    transform = tiled._fused_transform
    tiled._fused_transform = lambda *a, **k: (taken.append(k.get("tiled", False)), transform(*a, **k))[1]
    nd, nm, nt = shape
    f = rng.standard_normal(shape)
    op_t, op_p = (BTTOperator(f, adjoint_precision=code, device=be) for be in (tiled, plain))
    for call in range(4):  # eager, recorded, replayed, replayed
        d = cupy.asarray(rng.standard_normal((nd, nt)))
        cupy.testing.assert_array_equal(op_t.rmatvec(d), op_p.rmatvec(d))
    assert (True in taken) == tiles, taken
    assert all(key[-1] == 0 for key in plain._launch if key[0] == "adj")
    tiled.adj_keep_max_bytes = 0  # spectra that do not fit the L2 are not tiled (a new operator: run eagerly)
    taken.clear()
    d = cupy.asarray(rng.standard_normal((nd, nt)))
    cupy.testing.assert_array_equal(BTTOperator(f, adjoint_precision=code, device=tiled).rmatvec(d), op_p.rmatvec(d))
    assert taken and True not in taken, taken


@pytest.mark.parametrize("code", ["dssdd", "ddssd", "ddddd"])
def test_forward_inverse_drops_spent_spectra(rng, monkeypatch, code):
    """The inverse after a one-vector forward product drops the product's input spectra from the L2 when they are
    kept there and take ``fwd_release_min_bytes`` or more (``release_spectra``); forward and adjoint products in
    turn are bit for bit those of a backend that never drops them, eagerly, recorded and replayed, and each
    forward product of the whole ``Fhat`` asked for the drop (not the adjoint's inverse)."""
    drops, plain = GPUBackend(), GPUBackend()
    drops.fwd_release_min_bytes = 1 << 20
    plain.fwd_release_min_bytes = 1 << 62
    asked = []
    inverse = GPUBackend.irfft_unpad

    def spy(self, x_hat, out, dtype, drop=None):
        if self is drops:
            asked.append((out.shape[0], drop is not None and drop.nbytes))
        return inverse(self, x_hat, out, dtype, drop=drop)

    monkeypatch.setattr(GPUBackend, "irfft_unpad", spy)
    nd, nm, nt = 3, 1100, 500  # forward spectra 2.2 MB in complex64, 4.4 MB in complex128: all kept in the L2
    f = rng.standard_normal((nd, nm, nt))
    ops = [BTTOperator(f, precision=code, adjoint_precision=code, device=be) for be in (drops, plain)]
    for _ in range(4):
        m = cupy.asarray(rng.standard_normal((nm, nt)))
        d = cupy.asarray(rng.standard_normal((nd, nt)))
        cupy.testing.assert_array_equal(ops[0].matvec(m), ops[1].matvec(m))
        cupy.testing.assert_array_equal(ops[0].rmatvec(d), ops[1].rmatvec(d))
    dropped = [(n, nbytes) for n, nbytes in asked if nbytes]
    assert dropped and all(n == nd and nbytes >= (nt + 1) * nm * 8 for n, nbytes in dropped), asked


@pytest.mark.parametrize("K", [1, 3])
@pytest.mark.parametrize("code", ["ddddd", "dssdd", "ddssd", "sssss"])
@pytest.mark.parametrize("shape", [(15, 289, 10), (13, 41, 100)], ids=["one-kernel", "staged"])
def test_prepared_product_replays_one_recording(gpu, rng, shape, code, K):
    """A prepared product (with one right-hand side one CUDA graph launch a
    call, the casts of ``sssss`` inside it) equals ``matvec``/``rmatvec`` of
    the input's current values, refilled in place, bit for bit, and the dense
    float64 product within the code's tolerance."""
    nd, nm, nt = shape
    f = rng.standard_normal(shape)
    op = BTTOperator(f, precision=code, adjoint_precision=code, device=gpu)
    for adjoint in (False, True):
        n_in = nd if adjoint else nm
        v = cupy.asarray(rng.standard_normal((n_in, nt) + ((K,) if K > 1 else ())))
        run = op.prepare(v, adjoint=adjoint)
        if K == 1:
            assert isinstance(getattr(run._run, "__self__", None), cupy.cuda.graph.Graph)
        for _ in range(3):
            v[...] = cupy.asarray(rng.standard_normal(v.shape))
            assert run() is run.out
            cupy.testing.assert_array_equal(run.out, (op.rmatvec if adjoint else op.matvec)(v))
        x = cupy.asnumpy(v).reshape(n_in, nt, K)
        ref = dense_product(f, x, adjoint).reshape(run.out.shape)
        assert rel_err(cupy.asnumpy(run.out), ref) < code_tol(code, nm, nt)
    with pytest.raises(ConfigError, match="array of the operator's backend"):
        op.prepare(np.zeros((nm, nt)))


@pytest.mark.parametrize("K", [1, 3])
@pytest.mark.parametrize("codes", [("ddddd", "ddddd"), ("dssdd", "ddssd"), ("sssss", "dssds")])
@pytest.mark.parametrize("shape", [(15, 289, 10), (13, 41, 100)], ids=["one-kernel", "staged"])
def test_prepared_normal_product_replays_one_recording(gpu, rng, shape, codes, K):
    """``prepare(normal=True)``: ``F^T F m`` with one right-hand side one CUDA
    graph launch a call (both passes and the cast between them inside it),
    equal to :meth:`BTTOperator.normal` bit for bit, and to the dense float64
    product within the two codes' tolerances."""
    nd, nm, nt = shape
    f = rng.standard_normal(shape)
    op = BTTOperator(f, precision=codes[0], adjoint_precision=codes[1], device=gpu)
    m = cupy.asarray(rng.standard_normal((nm, nt) + ((K,) if K > 1 else ())))
    run = op.prepare(m, normal=True)
    if K == 1:
        assert isinstance(getattr(run._run, "__self__", None), cupy.cuda.graph.Graph)
    for _ in range(3):
        m[...] = cupy.asarray(rng.standard_normal(m.shape))
        assert run() is run.out
        cupy.testing.assert_array_equal(run.out, op.normal(m))
    x = cupy.asnumpy(m).reshape(nm, nt, K)
    ref = dense_product(f, dense_product(f, x, False), True).reshape(run.out.shape)
    tol = code_tol(codes[0], nm, nt) + code_tol(codes[1], nm, nt)
    assert rel_err(cupy.asnumpy(run.out), ref) < tol


@pytest.mark.parametrize("codes", [("ddddd", "ddddd"), ("dssdd", "ddssd"), ("sssss", "dssds")])
@pytest.mark.parametrize("shape", [(15, 289, 10), (13, 41, 100)], ids=["one-kernel", "staged"])
def test_normal_replays_both_passes_as_one_recording(gpu, rng, shape, codes):
    """``F.normal`` of a device array in one process runs both passes and the
    cast between them through one replayer: its recordings give what the
    two products give one after the other, bit for bit.  (Where the
    adjoint's result is not float64, as in ``dssds``, the passes run through
    each engine's own launches and the result is cast after them.)"""
    nd, nm, nt = shape
    op = BTTOperator(rng.standard_normal(shape), precision=codes[0], adjoint_precision=codes[1], device=gpu)
    m = cupy.asarray(rng.standard_normal((nm, nt)))
    for _ in range(6):  # eager at first, then recorded and replayed as the result arrays come back
        m[...] = cupy.asarray(rng.standard_normal(m.shape))
        z = op.normal(m)
        cupy.testing.assert_array_equal(z, op.rmatvec(op.matvec(m)))
    (call,) = [c for c in op._local_calls.values() if len(c.passes) == 2]
    if codes[1].endswith("s"):
        assert call.launch is None
    else:
        assert call.launch.graphs, call.launch.error


def test_recording_falls_back_to_plain_launches(rng):
    """A driver that cannot record programmatic launches: the product is
    recorded with plain launches, which the backend keeps from then on, and
    replayed results equal those of plain eager launches."""
    be = GPUBackend()
    if not be.programmatic_launch:
        pytest.skip("no programmatic launch on this device")
    launcher = be._launcher

    def refuses_to_record(*args):
        if cupy.cuda.get_current_stream().is_capturing():
            raise RuntimeError("cuLaunchKernelEx: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
        launcher(*args)

    be._launcher = refuses_to_record
    plain = GPUBackend()
    plain.programmatic_launch = False
    f = rng.standard_normal((5, 40, 48))
    op, op_plain = BTTOperator(f, precision="dssdd", device=be), BTTOperator(f, precision="dssdd", device=plain)
    for call in range(4):  # eager (programmatic), recorded (plain), replayed, replayed
        x = cupy.asarray(rng.standard_normal((40, 48)))
        cupy.testing.assert_array_equal(op.matvec(x), op_plain.matvec(x))
    assert not be.programmatic_launch
    replayer = op.engine.workspace(False, op.precision, 1).launch
    assert replayer.graphs and not replayer.eager, replayer.error


@pytest.mark.parametrize("K", [1, 2])  # native kernels (cuBLAS, from K = 3 in complex128, cannot be recorded)
def test_products_into_caller_array(eager_gpu, staged_gpu, rng, K):
    """Device inputs: the eager staged kernels write the caller's result
    array; replayed ones go through their fixed buffers until a pair of input
    and result buffers comes back, which then gets its own recording; both
    give the dense product, and no call returns a workspace buffer."""
    nd, nm, nt = 6, 50, 40
    f = rng.standard_normal((nd, nm, nt))
    for be in (eager_gpu, staged_gpu):
        op = BTTOperator(f, device=be)
        for adjoint in (False, True):
            apply = op.rmatvec if adjoint else op.matvec
            ws = op.engine.workspace(adjoint, op.precision, K)
            x = rng.standard_normal((nd if adjoint else nm, nt, K))
            x_dev = cupy.asarray(x if K > 1 else x[:, :, 0])
            kept = []
            for call in range(6):  # new inputs, then one input again and again, results kept or dropped
                if call < 2:
                    x = rng.standard_normal(x.shape)
                    x_dev = cupy.asarray(x if K > 1 else x[:, :, 0])
                y = apply(x_dev)
                assert y.shape == ((nm if adjoint else nd, nt) + ((K,) if K > 1 else ()))
                assert y.data.ptr != ws.y.data.ptr
                assert rel_err(y.get(), dense_product(f, x, adjoint).reshape(y.shape)) < 1e-12, (be, adjoint, call)
                if call % 2:
                    kept.append(y)
            assert bool(getattr(ws.launch, "graphs", None)) == (be is staged_gpu)  # eager_gpu: no replayer


@pytest.mark.parametrize("shape", [(15, 289, 10), (6, 50, 40)], ids=["direct", "staged"])
@pytest.mark.parametrize("code", ["ddddd", "dssds"])
@pytest.mark.parametrize("K", [None, 3])
def test_out_array(gpu, rng, shape, code, K):
    """``matvec(x, out=y)``: the product written into the caller's array,
    call after call (eager, recorded, replayed), equal to the allocating
    call and within the code's tolerance of the dense product; host inputs
    take NumPy ``out`` arrays, device inputs CuPy ones."""
    nd, nm, nt = shape
    f = rng.standard_normal(shape)
    op = BTTOperator(f, device=gpu, precision=code, adjoint_precision=code)
    kdim = (K,) if K else ()
    for adjoint in (False, True):
        apply = op.rmatvec if adjoint else op.matvec
        n_in, n_out = (nd, nm) if adjoint else (nm, nd)
        x = cupy.asarray(rng.standard_normal((n_in, nt) + kdim))
        y = cupy.empty((n_out, nt) + kdim)
        for call in range(4):
            x[...] = cupy.asarray(rng.standard_normal(x.shape))
            y[...] = np.nan
            assert apply(x, out=y) is y
            np.testing.assert_array_equal(y.get(), apply(x).get())
            ref = dense_product(f, x.get().reshape(n_in, nt, -1), adjoint).reshape(y.shape)
            assert rel_err(y.get(), ref) < code_tol(code, nm, nt), (adjoint, call)
        host_out = np.empty((n_out, nt) + kdim)
        assert apply(x.get(), out=host_out) is host_out
        np.testing.assert_array_equal(host_out, y.get())
        with pytest.raises(ValueError, match="cupy array"):
            apply(x, out=host_out)
    square = BTTOperator(rng.standard_normal((5, 5, 7)), device=gpu)
    v = cupy.asarray(rng.standard_normal((5, 7)))
    with pytest.raises(ValueError, match="overlaps the input"):
        square.matvec(v, out=v)
    buf = cupy.asarray(rng.standard_normal((11, 7)))  # out= right after the input, then over its last row
    v = buf[:5]
    ref = square.matvec(v).get()
    for _ in range(3):  # eager, recorded, replayed: each call checks out= against the input
        assert rel_err(square.matvec(v, out=buf[5:10]).get(), ref) < 1e-13
    with pytest.raises(ValueError, match="overlaps the input"):
        square.matvec(v, out=buf[4:9])


def test_capture_context(gpu, rng):
    x = cupy.asarray(rng.standard_normal((5, 7, 3)))
    out = cupy.zeros((14, 5, 3))
    with gpu.capture() as rec:
        gpu.pad(x, out)
    np.testing.assert_array_equal(out[:7].get(), x.get().transpose(1, 0, 2))
    x[...] = cupy.asarray(rng.standard_normal((5, 7, 3)))
    rec.replay()
    np.testing.assert_array_equal(out[:7].get(), x.get().transpose(1, 0, 2))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, None, "overflow"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_finite_check_with_work_queued_after_it(gpu, rng, bad, dtype):
    """The check answers for the values it saw, with a product and a write of
    other values queued between the start of the check and its answer."""
    v = cupy.asarray(rng.standard_normal((300, 40, 3)).astype(dtype))
    if bad == "overflow":  # finite values whose sum overflows
        v[...] = np.finfo(dtype).max / 4
    elif bad is not None:
        v[1 + rng.integers(299), rng.integers(40), rng.integers(3)] = bad  # (not where the write below goes)
    op = BTTOperator(rng.standard_normal((4, 300, 40)), device=gpu)
    answer = gpu.finite_check(v)
    op.matvec(v[:, :, 0].astype(np.float64))
    v[0, 0, 0] = np.nan if bad is None else 1.0  # after the check: not seen by it
    assert answer() == (bad in (None, "overflow"))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_bad_matrix_values_are_found_on_the_device(gpu, rng, bad):
    """The set-up checks ``Fhat`` on the GPU (``f`` is not scanned on the
    host): a bad value in ``f`` or ``aux`` names the array, a finite ``f``
    whose transform overflows complex64 is refused, and a good one passes."""
    f = rng.standard_normal((3, 40, 9))
    for at in [(0, 0, 0), (2, 39, 8), (1, 17, 4)]:
        f_bad = f.copy()
        f_bad[at] = bad
        for precision in ("ddddd", "dssdd"):
            with pytest.raises(FftmatvecError, match="^f contains NaN or Inf$"):
                BTTOperator(f_bad, precision=precision, device=gpu)
        with pytest.raises(FftmatvecError, match="^aux contains NaN or Inf$"):
            BTTOperator(f, aux=f_bad, device=gpu)
    with pytest.raises(FftmatvecError, match="transform of f overflows complex64"):
        BTTOperator(f * 1e38, precision="dssdd", device=gpu)
    m = rng.standard_normal((40, 9))
    ref = BTTOperator(f * 1e38).matvec(m)
    assert rel_err(BTTOperator(f * 1e38, device=gpu).matvec(m), ref) < 1e-13


# (Nd, Nm, Nt) for the one-kernel product: the fixture, Nt = 1 and 32 (the largest taken), adjoint blocks
# of 32 columns with a partial last one, Nd or Nm = 1, more rows than 4 per multiprocessor (several per block)
DIRECT_SHAPES = [(15, 289, 10), (4, 5, 1), (3, 7, 32), (2, 65, 9), (1, 40, 5), (9, 1, 7), (701, 3, 4),
                 (5, 1300, 2)]


def _takes_direct(op, adjoint):
    return op.engine.workspace(adjoint, op.adjoint_precision if adjoint else op.precision, 1).direct is not None


@pytest.mark.parametrize("shape", DIRECT_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_direct_product_vs_dense_and_staged(gpu, staged_gpu, rng, shape):
    """The one-kernel product (native/direct.cu) against the float64 dense
    product and against the staged kernels, forward and adjoint, on host and
    device inputs, into the caller's array and into the workspace."""
    nd, nm, nt = shape
    f = rng.standard_normal(shape)
    op, op_s = BTTOperator(f, device=gpu), BTTOperator(f, device=staged_gpu)
    for adjoint in (False, True):
        apply, apply_s = (op.rmatvec, op_s.rmatvec) if adjoint else (op.matvec, op_s.matvec)
        for call in range(3):
            x = rng.standard_normal((nd if adjoint else nm, nt))
            ref = dense_product(f, x[:, :, None], adjoint)[:, :, 0]
            y = apply(x if call == 0 else cupy.asarray(x))
            y = y if isinstance(y, np.ndarray) else y.get()
            assert rel_err(y, ref) < 1e-13, (adjoint, call)
            assert rel_err(y, apply_s(x)) < 1e-13
        assert _takes_direct(op, adjoint) and not _takes_direct(op_s, adjoint)
        prec = op.precision
        x = cupy.asarray(rng.standard_normal((nd if adjoint else nm, nt, 1)))
        ws_y = op.engine.apply(x, prec, adjoint=adjoint)  # no out: the workspace buffer
        assert ws_y is op.engine.workspace(adjoint, prec, 1).y
        assert rel_err(ws_y.get(), dense_product(f, x.get(), adjoint)) < 1e-13


@pytest.mark.parametrize("code", ALL_CODES)
def test_direct_product_precision_codes(gpu, staged_gpu, rng, code):
    """Every code through the one-kernel product: within the code's tolerance
    of the dense product, single precision visibly used, and as close to
    the staged kernels as two roundings in the lowest precision allow."""
    nd, nm, nt = 7, 45, 10
    f = rng.standard_normal((nd, nm, nt))
    op = BTTOperator(f, precision=code, adjoint_precision=code, device=gpu)
    op_s = BTTOperator(f, precision=code, adjoint_precision=code, device=staged_gpu)
    tol = code_tol(code, nm, nt)
    for adjoint in (False, True):
        x = cupy.asarray(rng.standard_normal((nd if adjoint else nm, nt)))
        ref = dense_product(f, x.get()[:, :, None], adjoint)[:, :, 0]
        y = ((op.rmatvec if adjoint else op.matvec)(x)).get()
        assert _takes_direct(op, adjoint)
        err = rel_err(y, ref)
        assert err < tol, (adjoint, err, tol)
        if "s" in code:
            assert err > 1e-11, (adjoint, err)
        assert rel_err(y, ((op_s.rmatvec if adjoint else op_s.matvec)(x)).get()) < 2 * tol


def test_direct_product_replayed(gpu, rng):
    """The one-kernel product recorded per pair of input and result buffers
    (the second time a pair comes) and replayed gives what its eager launch
    gives, and a new pair still launches eagerly."""
    nd, nm, nt = 15, 289, 10
    f = rng.standard_normal((nd, nm, nt))
    eager = GPUBackend()
    eager.graph_max_bytes = -1
    op, op_e = BTTOperator(f, device=gpu), BTTOperator(f, device=eager)
    for adjoint in (False, True):
        prec = op.precision
        x = cupy.asarray(rng.standard_normal((nd if adjoint else nm, nt)))
        y = cupy.full((nm if adjoint else nd, nt), np.nan)
        ref = (op_e.rmatvec if adjoint else op_e.matvec)(x).get()
        np.testing.assert_allclose(ref, dense_product(f, x.get()[:, :, None], adjoint)[:, :, 0], rtol=1e-12,
                                   atol=1e-12 * np.abs(ref).max())
        for call in range(4):  # eager, recorded, replayed, replayed
            x[...] = cupy.asarray(rng.standard_normal(x.shape))
            y[...] = np.nan
            op.engine.apply(x, prec, adjoint=adjoint, out=y)
            np.testing.assert_array_equal(y.get(), (op_e.rmatvec if adjoint else op_e.matvec)(x).get())
        ws = op.engine.workspace(adjoint, prec, 1)
        assert ws.direct is not None and ws.replay and ws.launch.graphs, ws.launch.error
        assert not op_e.engine.workspace(adjoint, prec, 1).replay
        y2 = cupy.full_like(y, np.nan)  # a new result buffer: an eager launch
        op.engine.apply(x, prec, adjoint=adjoint, out=y2)
        np.testing.assert_array_equal(y2.get(), y.get())


@pytest.mark.parametrize("nt", [10, 36])
def test_results_are_new_arrays(gpu, rng, nt):
    """Each product returns its own array (one kernel at Nt = 10, staged at
    36), equal to the eager product: kept results stay as they were, and a
    loop that drops its results cycles the arrays made ahead through
    recorded graphs."""
    nd, nm = 6, 23
    f = rng.standard_normal((nd, nm, nt))
    eager = GPUBackend()
    eager.graph_max_bytes = -1
    op, op_e = BTTOperator(f, device=gpu), BTTOperator(f, device=eager)
    for adjoint in (False, True):
        product, product_e = (op.rmatvec, op_e.rmatvec) if adjoint else (op.matvec, op_e.matvec)
        inputs = [cupy.asarray(rng.standard_normal((nd if adjoint else nm, nt))) for _ in range(10)]
        refs = [product_e(x).get() for x in inputs]
        kept = [product(x) for x in inputs]
        for i, (y, ref) in enumerate(zip(kept, refs)):
            np.testing.assert_array_equal(y.get(), ref)
            assert not any(cupy.shares_memory(y, other) for other in kept[i + 1:])
        del kept
        x = cupy.empty_like(inputs[0])
        for v, ref in zip(inputs, refs):  # a solver's loop: one input buffer, each result dropped
            x[...] = v
            np.testing.assert_array_equal(product(x).get(), ref)
        replayer = op.engine.workspace(adjoint, op.precision, 1).launch
        assert replayer.graphs, replayer.error


@pytest.mark.parametrize("nt", [10, 36])
def test_inputs_of_another_layout_are_made_contiguous(gpu, rng, nt):
    """After products of contiguous device inputs, a strided view and a
    Fortran-ordered array of the same values (other signatures of the
    one-process path) are made contiguous before the native kernels read
    them (one kernel at Nt = 10, staged at 36)."""
    nd, nm = 6, 23
    f = rng.standard_normal((nd, nm, nt))
    op = BTTOperator(f, device=gpu)
    m = rng.standard_normal((nm, nt))
    ref = dense_product(f, m[:, :, None], False)[:, :, 0]
    x = cupy.asarray(m)
    for _ in range(3):
        assert rel_err(op.matvec(x).get(), ref) < 1e-12
    wide = cupy.zeros((nm, 2 * nt))
    wide[:, ::2] = x
    for same in (wide[:, ::2], cupy.asfortranarray(x)):
        assert rel_err(op.matvec(same).get(), ref) < 1e-12


def test_direct_product_not_taken(gpu, rng):
    """Longer series, several right-hand sides and too much work per block go
    to the staged kernels."""
    from fftmatvec.precision import parse

    prec = parse("ddddd")
    for shape, K in (((3, 7, 33), 1), ((3, 7, 10), 2), ((2, 20000, 10), 1), ((3, 7, 10), 1)):
        Fhat = gpu.fft_matrix(rng.standard_normal(shape), np.complex128)
        taken = gpu.direct_plan(Fhat, K, prec, adjoint=False) is not None
        assert taken == (shape == (3, 7, 10) and K == 1), (shape, K)


NM_TAILS = list(range(1, 34)) + [64, 257, 1025]


@pytest.mark.parametrize("adjoint", [False, True], ids=["fwd", "adj"])
@pytest.mark.parametrize(
    "ta,tx", [(np.complex128, np.complex128), (np.complex64, np.complex64), (np.complex64, np.complex128),
              (np.complex128, np.complex64)], ids=["zz", "cc", "cz", "zc"])
@pytest.mark.parametrize("which", ["default", "native", "wide"])
def test_sbgemv_kernel_tails(gpu, native_gpu, wide_gpu, rng, ta, tx, adjoint, which):
    """Odd sizes through the native kernels (both kernel families, forward row
    groups of one warp and of several), against einsum in float64."""
    tol = 5e-14 if ta == np.complex128 else 2e-6
    be = {"default": gpu, "native": native_gpu, "wide": wide_gpu}[which]
    for nm in NM_TAILS:
        for nd in (1, 3, 5) if nm < 40 else (2, 7):
            for K in (1, 3, 6, 9) if nm in (1, 7, 32, 33, 257) else (1,):
                nf = 3
                A = (rng.standard_normal((nf, nd, nm)) + 1j * rng.standard_normal((nf, nd, nm))).astype(ta)
                n_in, n_out = (nd, nm) if adjoint else (nm, nd)
                x = (rng.standard_normal((nf, n_in, K)) + 1j * rng.standard_normal((nf, n_in, K))).astype(tx)
                out = cupy.full((nf, n_out, K), np.nan, dtype=ta)
                be.sbgemv(cupy.asarray(A), cupy.asarray(x), out, adjoint=adjoint)
                A64, x64 = A.astype(np.complex128), x.astype(ta).astype(np.complex128)
                ref = np.einsum("fij,fik->fjk", A64.conj(), x64) if adjoint else A64 @ x64
                got = out.get()
                assert np.all(np.isfinite(got)), (nm, nd, K)
                assert rel_err(got, ref) < tol * np.sqrt(nm if not adjoint else nd), (nm, nd, K)
    if which == "wide" and not adjoint:  # groups of several warps (the tail's G) were taken
        assert max(int(cfg[4][4]) for key, cfg in be._launch.items() if key[0] == "fwd") > 32
    if adjoint:  # the result was stored plainly (native) or at evict-last priority (the others), as configured
        keeps = {int(cfg[4][-2]) for key, cfg in be._launch.items() if key[0] == "adj"}
        assert keeps == ({0} if which == "native" else {1}), keeps


@pytest.mark.parametrize("ta", [np.complex64, np.complex128], ids=["c", "z"])
def test_sbgemv_fwd_launch_for_large_fhat(gpu, rng, ta):
    """From 1 GiB of Fhat with one right-hand side the forward kernel runs in
    groups of four warps, two rows a group with two loads in flight per row:
    chosen there, and right on small odd shapes launched the same way, against
    einsum in float64."""
    ta = np.dtype(ta)
    R, U = 2, 2
    nf_large = (1 << 30) // (100 * 5000 * ta.itemsize) + 1
    fn, grid, block, smem, tail, S = gpu._fwd_config(nf_large, 100, 5000, 1, ta, ta)
    assert (int(tail[4]), S, grid[0]) == (128, 1, -(-nf_large * (100 // R) // 2))
    assert fn is gpu._fwd_config(nf_large, 100, 5000, 1, ta, ta, R=R, U=U)[0]
    for nf, nd, nm in ((3, 7, 1001), (2, 5, 4098), (1, 3, 129), (2, 1, 2)):
        A = (rng.standard_normal((nf, nd, nm)) + 1j * rng.standard_normal((nf, nd, nm))).astype(ta)
        x = (rng.standard_normal((nf, nm, 1)) + 1j * rng.standard_normal((nf, nm, 1))).astype(ta)
        y = cupy.full((nf, nd, 1), np.nan, dtype=ta)
        fn, grid, block, smem, tail, S = gpu._fwd_config(nf, nd, nm, 1, ta, ta, R=R, U=U, lanes=128, S=1)
        fn(grid, block, (cupy.asarray(A), cupy.asarray(x), y) + tail, shared_mem=smem)
        ref = A.astype(np.complex128) @ x.astype(np.complex128)
        tol = 5e-14 if ta == np.complex128 else 2e-6
        assert rel_err(y.get(), ref) < tol * np.sqrt(nm), (nf, nd, nm)


@pytest.mark.parametrize("flat", [False, True], ids=["blocked", "flat"])
def test_sbgemv_adj_keeps_result_by_size(gpu, flat):
    """The adjoint kernels store their result at evict-last priority exactly
    when it takes at most ``adj_keep_max_bytes`` (by default the L2's size)."""
    c64 = np.dtype(np.complex64)
    saved = gpu.adj_keep_max_bytes
    try:
        gpu.adj_keep_max_bytes = 1001 * 5000 * 8  # the big size's complex64 result
        for nm, K, expected in ((5000, 1, 1), (5001, 1, 0), (2500, 2, 1), (2501, 2, 0)):
            tail = gpu._adj_config(1001, 100, nm, K, c64, c64, flat=flat and K == 1)[4]
            assert int(tail[-2]) == expected, (nm, K)
    finally:
        gpu.adj_keep_max_bytes = saved
    assert gpu.adj_keep_max_bytes == gpu._device.attributes.get("L2CacheSize", 0)


@pytest.mark.parametrize("slices", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_blocked_adjoint_row_slices(gpu, rng, dtype, slices):
    """The blocked adjoint with one right-hand side takes four row slices a
    block from 64 rows at the big size (16 rows a slice or more), one below;
    forced to other counts (``adj_row_slices``, a count that does not divide
    the rows among them) it stays right on an odd shape against einsum in
    float64."""
    ta = np.dtype(dtype)
    assert gpu._adj_config(1001, 100, 5000, 1, ta, ta, flat=False)[2] == (4 * 128,)
    assert gpu._adj_config(1001, 63, 5000, 1, ta, ta, flat=False)[2] == (128,)
    nf, nd, nm = 3, 101, 1030
    A = (rng.standard_normal((nf, nd, nm)) + 1j * rng.standard_normal((nf, nd, nm))).astype(ta)
    x = (rng.standard_normal((nf, nd, 1)) + 1j * rng.standard_normal((nf, nd, 1))).astype(ta)
    y = cupy.full((nf, nm, 1), np.nan, dtype=ta)
    saved = gpu.adj_row_slices
    try:
        gpu.adj_row_slices = slices
        fn, grid, block, smem, tail, _ = gpu._adj_config(nf, nd, nm, 1, ta, ta, flat=False)
    finally:
        gpu.adj_row_slices = saved
    assert block[0] % slices == 0 and int(tail[4]) == slices
    fn(grid, block, (cupy.asarray(A), cupy.asarray(x), y) + tail, shared_mem=smem)
    ref = np.einsum("fij,fik->fjk", A.astype(np.complex128).conj(), x.astype(np.complex128))
    assert rel_err(y.get(), ref) < (5e-14 if ta == np.complex128 else 2e-6) * np.sqrt(nd)


@pytest.mark.parametrize("expr", sorted(kernels.REGISTER_TARGETS))
def test_register_target_builds(gpu, rng, expr):
    """Each instantiation built to a register target (kernels.REGISTER_TARGETS)
    fits in it (on the architecture the targets apply to) and is right,
    launched as the engine launches it, on odd shapes against einsum in
    float64."""
    name, args = expr[:-1].split("<")
    types = {v: k for k, v in kernels.CTYPE.items()}
    ta, tx, *ints = [types[a] if a in types else int(a) for a in args.split(", ")]
    for nf, nd, nm in ((3, 37, 122), (2, 5, 4098), (1, 101, 2)):
        adjoint = name != "sbgemv_fwd"
        if adjoint:
            U, VEC, KB = ints if name == "sbgemv_adj" else ints + [1]
            cfg = gpu._adj_config(nf, nd, nm, 1, ta, tx, U=U, VEC=VEC, KB=KB, flat=name == "sbgemv_adj_flat")
        else:
            R, U, VEC, KB = ints
            cfg = gpu._fwd_config(nf, nd, nm, 1, ta, tx, R=R, U=U, VEC=VEC, KB=KB, S=1)
        fn, grid, block, smem, tail, _ = cfg
        if kernels.compute_capability() == kernels.REGISTER_TARGETS_ARCH:
            assert fn.num_regs <= kernels.REGISTER_TARGETS[expr]
        n_in, n_out = (nd, nm) if adjoint else (nm, nd)
        A = (rng.standard_normal((nf, nd, nm)) + 1j * rng.standard_normal((nf, nd, nm))).astype(ta)
        x = (rng.standard_normal((nf, n_in, 1)) + 1j * rng.standard_normal((nf, n_in, 1))).astype(tx)
        y = cupy.full((nf, n_out, 1), np.nan, dtype=ta)
        fn(grid, block, (cupy.asarray(A), cupy.asarray(x), y) + tail, shared_mem=smem)
        A64, x64 = A.astype(np.complex128), x.astype(ta).astype(np.complex128)
        ref = np.einsum("fij,fik->fjk", A64.conj(), x64) if adjoint else A64 @ x64
        tol = 5e-14 if ta == np.complex128 else 2e-6
        assert rel_err(y.get(), ref) < tol * np.sqrt(n_in), (expr, nf, nd, nm)


def test_register_target_reaches_the_compiler(monkeypatch):
    """A target below what the compiler would take on its own holds the build to it."""
    if kernels.compute_capability() != kernels.REGISTER_TARGETS_ARCH:
        pytest.skip(f"register targets apply on compute capability {kernels.REGISTER_TARGETS_ARCH} only")
    args = ("sbgemv.cu", "sbgemv_fwd", np.complex128, np.complex128, 2, 4, 1, 1)
    before = kernels.kernel(*args).num_regs
    monkeypatch.setitem(kernels.REGISTER_TARGETS, "sbgemv_fwd<double2, double2, 2, 4, 1, 1>", 32)
    assert before > 32 and kernels.kernel(*args).num_regs <= 32


def record_kernel_builds(monkeypatch) -> list:
    """The name expressions of the kernels asked of ``kernels.kernel`` from
    now on (in the list returned, in order), for the rest of the test."""
    launched = []
    engine_kernel = kernels.kernel

    def recording(fname, name, *targs, **kw):
        launched.append(kernels.name_expression(name, *targs))
        return engine_kernel(fname, name, *targs, **kw)

    monkeypatch.setattr(kernels, "kernel", recording)
    return launched


def test_register_targets_are_what_the_engine_launches(monkeypatch):
    """Every entry of kernels.REGISTER_TARGETS is an instantiation that the
    product launches for one vector at the big or middle benchmark size
    (Fhat and vector in complex128, complex64, or complex64 with a
    complex128 vector; both directions), so that a change of the launch
    rules cannot leave the measured targets on kernels that no longer run.
    The products run on uninitialised arrays: only the launches count."""
    launched = record_kernel_builds(monkeypatch)
    be = GPUBackend()  # no launch set-ups cached yet
    for nf, nd, nm in ((1001, 100, 5000), (501, 50, 1000)):
        for ta, tx in ((np.complex128, np.complex128), (np.complex64, np.complex64),
                       (np.complex64, np.complex128)):
            Fhat = cupy.empty((nf, nd, nm), ta)
            for adjoint in (False, True):
                n_in, n_out = (nd, nm) if adjoint else (nm, nd)
                be.sbgemv(Fhat, cupy.empty((nf, n_in, 1), tx), cupy.empty((nf, n_out, 1), ta), adjoint)
            del Fhat
    be.synchronize()
    assert set(kernels.REGISTER_TARGETS) <= set(launched), sorted(set(kernels.REGISTER_TARGETS) - set(launched))


@pytest.mark.parametrize("shape, K", [((7, 203, 50), 1), ((6, 90, 50), 3), ((5, 40, 12), 1), ((4, 33, 97), 1)])
def test_build_ahead_builds_what_the_product_launches(monkeypatch, rng, shape, K):
    """LocalBTT.build_ahead asks, in background threads, for the transform
    (fft.cu), one-kernel (direct.cu) and, with one right-hand side, product
    (sbgemv.cu) instantiations that the product then asks for in this
    thread, and for no other (the product asks only once for a launch
    set-up it keeps, so those must have been asked for by a product before):
    fused transforms from float64 into complex64 (the staged kernel's
    occupancy decides), with K = 3, the one-kernel product (Nt = 12), and no
    transform for a length cuFFT takes (Nt = 97, prime), in both directions
    and codes that differ in every stage."""
    from fftmatvec.btt import LocalBTT
    from fftmatvec.precision import parse

    asked = []
    engine_kernel = kernels.kernel

    def recording(fname, name, *targs, **kw):
        if fname in ("fft.cu", "direct.cu") or (fname == "sbgemv.cu" and K == 1):
            background = threading.current_thread().name.startswith("fftmatvec-build")
            asked.append((background, kernels.name_expression(name, *targs)))
        return engine_kernel(fname, name, *targs, **kw)

    monkeypatch.setattr(kernels, "kernel", recording)
    monkeypatch.setattr(kernels, "_builders", None)  # this test's own threads; the others' are put back after

    def settled() -> list:
        """What was asked for since the last call, once every build started ahead has ended."""
        if kernels._builders is not None:
            kernels._builders.shutdown(wait=True)
            kernels._builders = None
        got = asked[:]
        asked.clear()
        return got

    nd, nm, nt = shape
    engine = LocalBTT(rng.standard_normal(shape), GPUBackend(), [np.complex64, np.complex128])
    settled()
    launched_before: set[str] = set()
    for code in ("ddddd", "dssdd", "ddssd", "sssss", "sdsds", "dsdsd"):
        for adjoint in (False, True):
            prec = parse(code)
            engine.build_ahead(adjoint, prec, K)
            ahead = {expr for background, expr in settled() if background}
            x = cupy.asarray(rng.standard_normal((nd if adjoint else nm, nt, K)), prec.pad)
            engine.apply(x, prec, adjoint=adjoint)
            launched = {expr for background, expr in settled() if not background}
            launched_before |= launched
            assert launched <= ahead <= launched_before, (code, adjoint, ahead, launched)
            assert ahead or K > 1
    engine.backend.synchronize()


def test_pipe_tile_by_right_hand_sides_and_rows(rng):
    """The default tiles of ``sbgemm_tc_pipe``: chunks of 32 columns in two
    blocks a multiprocessor (blocks of at most 256 threads) for 9-16
    right-hand sides on up to 64 rows, one block of 64-column chunks
    otherwise (also for 9-16 on more rows, with ``sbgemm_wg_pipe`` off);
    each gives the float64 product."""
    be = GPUBackend()
    if not be.mbarriers or be.gemm_tensor_pipe.get(np.dtype(np.complex64)) is None:
        pytest.skip("no sbgemm_tc_pipe on this device")
    be.gemm_warpgroup = {key: None for key in be.gemm_warpgroup}
    few_rows, other = be.gemm_pipe_few_rows[np.dtype(np.complex64)], be.gemm_tensor_pipe[np.dtype(np.complex64)]
    for nd, K, tile in ((50, 16, few_rows), (64, 9, few_rows), (50, 8, other), (65, 16, other), (100, 12, other)):
        nf, nm = 3, 130
        A = (rng.standard_normal((nf, nd, nm)) + 1j * rng.standard_normal((nf, nd, nm))).astype(np.complex64)
        x = (rng.standard_normal((nf, nm, K)) + 1j * rng.standard_normal((nf, nm, K))).astype(np.complex64)
        out = cupy.empty((nf, nd, K), np.complex64)
        be._launch.clear()
        be.sbgemv(cupy.asarray(A), cupy.asarray(x), out, adjoint=False)
        (cfg,) = [cfg for key, cfg in be._launch.items() if key[0] == "gemm"]
        assert cfg[6] == "sbgemm_tc_pipe", (nd, K, cfg[6])
        assert (cfg[2][0] <= 256) == (tile[2] == 2), (nd, K, cfg[2])  # MINB = 2: two blocks of up to 256 threads
        assert rel_err(out.get(), A.astype(np.complex128) @ x.astype(np.complex128)) < 2e-6 * np.sqrt(nm)


def test_wg_pipe_spread_over_resident_blocks(rng):
    """``sbgemm_wg_pipe`` with more frequencies than resident blocks spreads
    its chunks over them (``gemm_spread``): blocks share frequencies, whose
    sums two blocks add.  The product against float64 at uneven sizes (a
    partial last chunk, fewer right-hand sides than the tile, one more
    frequency than blocks and 2.3 times as many), the same bit for bit
    twice, and against the block-a-frequency launch."""
    be = GPUBackend()
    c64 = np.dtype(np.complex64)
    if not (be.mbarriers and be.warpgroup_mma and be.gemm_warpgroup.get(c64)):
        pytest.skip("no sbgemm_wg_pipe on this device")
    be.gemm_min_k[c64] = 2
    be.blas_min_k = {key: 10**6 for key in be.blas_min_k}
    for nf, nd, nm, K in ((be.sm_count + 1, 100, 200, 16), (7 * be.sm_count // 3, 72, 130, 9)):
        A = (rng.standard_normal((nf, nd, nm)) + 1j * rng.standard_normal((nf, nd, nm))).astype(np.complex64)
        x = (rng.standard_normal((nf, nm, K)) + 1j * rng.standard_normal((nf, nm, K))).astype(np.complex64)
        A_dev, x_dev = cupy.asarray(A), cupy.asarray(x)
        results = {}
        for spread in (True, True, False):
            be.gemm_spread = spread
            be._launch.clear()
            out = cupy.full((nf, nd, K), np.nan, np.complex64)
            be.sbgemv(A_dev, x_dev, out, adjoint=False)
            (cfg,) = [cfg for key, cfg in be._launch.items() if key[0] == "gemm"]
            assert cfg[6] == "sbgemm_wg_pipe", cfg[6]
            per, chunks = int(cfg[4][7]), -(-nm // 64)
            assert (cfg[1][0] < nf and per % chunks != 0) == spread, (nf, nm, cfg[1], per)  # shared frequencies
            results.setdefault(spread, []).append(out.get())
        ref = A.astype(np.complex128) @ x.astype(np.complex128)
        assert rel_err(results[True][0], ref) < 2e-6 * np.sqrt(nm), (nf, nd, nm, K)
        assert np.array_equal(results[True][0], results[True][1]), (nf, nd, nm, K)
        assert rel_err(results[True][0], results[False][0]) < 2e-6 * np.sqrt(nm), (nf, nd, nm, K)


def gemm_kernels_taken(be) -> set:
    """Names of the native/sbgemm.cu kernels in the backend's cached launches."""
    return {cfg[6] for key, cfg in be._launch.items() if key[0] == "gemm"}


def test_forward_products_by_right_hand_sides(rng):
    """The default choice of forward product by the number of right-hand
    sides K, where complex64 has the tensor cores: the one-column kernels for
    one, ``native/sbgemm.cu`` from 2 (complex128: 3) to 32 (complex128: 16),
    in passes of 16 over ``Fhat`` beyond 16, cuBLAS from there; each against
    float64."""
    be = GPUBackend()
    if not (be.tensor_cores_for(np.complex64) and be.tensor_cores_for(np.complex128)):
        pytest.skip("no tensor cores for both dtypes")
    nf, nd, nm = 2, 37, 301
    for ta, K, native in ((np.complex64, 1, False), (np.complex64, 2, True), (np.complex64, 17, True),
                          (np.complex64, 32, True), (np.complex64, 33, False), (np.complex128, 2, False),
                          (np.complex128, 3, True), (np.complex128, 16, True), (np.complex128, 17, False)):
        be._launch.clear()
        A = (rng.standard_normal((nf, nd, nm)) + 1j * rng.standard_normal((nf, nd, nm))).astype(ta)
        x = (rng.standard_normal((nf, nm, K)) + 1j * rng.standard_normal((nf, nm, K))).astype(ta)
        out = cupy.full((nf, nd, K), np.nan, dtype=ta)
        be.sbgemv(cupy.asarray(A), cupy.asarray(x), out, adjoint=False)
        assert bool(gemm_kernels_taken(be)) == native, (ta, K, gemm_kernels_taken(be))
        tol = 5e-14 if ta == np.complex128 else 2e-6
        assert rel_err(out.get(), A.astype(np.complex128) @ x.astype(np.complex128)) < tol * np.sqrt(nm), (ta, K)


@pytest.mark.parametrize(
    "ta,tx", [(np.complex128, np.complex128), (np.complex64, np.complex64), (np.complex64, np.complex128),
              (np.complex128, np.complex64)], ids=["zz", "cc", "cz", "zc"])
def test_sbgemm_kernel(gemm_gpu, rng, ta, tx):
    """sbgemm_wg_pipe, sbgemm_tc_pipe, sbgemm_tc, sbgemm_staged and sbgemm_fwd
    against einsum in float64: every lane layout (K up to 16 and chunks of 16
    beyond), odd shapes (``nd`` beyond one staged or tensor-core block too,
    one warpgroup's 64 rows and a few past them), forced column splits, and a
    block of rows of a larger Fhat read in place."""
    be = gemm_gpu
    tol = 5e-14 if ta == np.complex128 else 2e-6
    shapes = ((3, 1, 1, 2), (2, 7, 33, 3), (3, 9, 257, 5), (2, 100, 1000, 16), (2, 130, 77, 9), (2, 17, 500, 17),
              (2, 5, 3, 33), (1, 64, 4096, 16), (2, 3, 40, 8), (2, 70, 129, 4), (2, 300, 50, 12),
              (2, 330, 50, 10), (3, 250, 301, 6), (2, 16, 64, 7), (3, 37, 250, 10), (2, 112, 66, 14),
              (2, 33, 98, 4), (2, 16, 2, 16), (3, 113, 130, 16), (2, 128, 200, 16), (2, 65, 64, 11))
    tensor, pipe, staged = dict(be.gemm_tensor), dict(be.gemm_tensor_pipe), dict(be.gemm_staged)
    warpgroup, few_rows = dict(be.gemm_warpgroup), dict(be.gemm_pipe_few_rows)
    kinds = ("sbgemm_tc", "sbgemm_staged", "sbgemm_fwd") if be.tensor_cores_for(ta) else ("sbgemm_staged",
                                                                                         "sbgemm_fwd")
    # sbgemm_tc_pipe (complex64, Fhat by tensor copies where its rows allow) in blocks of up to 512 threads
    # (chunks of 64 columns, phases of the k-steps) and of 256 (32 columns)
    pipe_tiles = {"sbgemm_tc_pipe": (64, 3, 1, 1), "sbgemm_tc_pipe/256": (32, 3, 2, 1)}
    kinds += tuple(pipe_tiles) if ta == np.complex64 and be.mbarriers else ()
    # sbgemm_wg_pipe (wgmma) with three stages, and two (as where the rows leave no room for three) with one
    # warp that splits X
    wg_tiles = {"sbgemm_wg_pipe": (3, 4), "sbgemm_wg_pipe/2": (2, 1)}
    kinds += tuple(wg_tiles) if ta == np.complex64 and be.warpgroup_mma else ()
    try:
        for (nf, nd, nm, K), kind in itertools.product(shapes, kinds):
            be.gemm_tensor = tensor if kind.startswith(("sbgemm_tc", "sbgemm_wg")) else {key: None for key in tensor}
            be.gemm_tensor_pipe = {key: pipe_tiles.get(kind, (64, 3, 1, 1) if kind in wg_tiles else None)
                                   for key in pipe}
            be.gemm_pipe_few_rows = {key: None for key in few_rows}  # the tile of the kind for every shape
            be.gemm_warpgroup = {key: wg_tiles.get(kind) for key in warpgroup}
            be.gemm_staged = staged if kind != "sbgemm_fwd" else {key: None for key in staged}
            be._launch.clear()
            wg_taken = kind in wg_tiles and nm % 2 == 0 and 64 < nd <= 128 and K > 8
            pipe_kind = kind in pipe_tiles or (kind in wg_tiles and not wg_taken)  # the pipe where wg is not taken
            pipe_taken = pipe_kind and nm % 2 == 0 and nd <= 112
            tc_taken = kind.startswith(("sbgemm_tc", "sbgemm_wg")) and nd <= 256 and not pipe_taken and not wg_taken
            for S, rows in ((None, None), (1, None), (3, None), (None, (2, 2 + nd))):
                be.gemm_splits = S
                full = nd + 5 if rows else nd
                A = (rng.standard_normal((nf, full, nm)) + 1j * rng.standard_normal((nf, full, nm))).astype(ta)
                x = (rng.standard_normal((nf, nm, K)) + 1j * rng.standard_normal((nf, nm, K))).astype(tx)
                out = cupy.full((nf, nd, K), np.nan, dtype=ta)
                A_dev = cupy.asarray(A)
                be.sbgemv(A_dev[:, rows[0]:rows[1]] if rows else A_dev, cupy.asarray(x), out, adjoint=False)
                A64 = (A[:, rows[0]:rows[1]] if rows else A).astype(np.complex128)
                ref = A64 @ x.astype(ta).astype(np.complex128)
                got = out.get()
                assert np.all(np.isfinite(got)), (nf, nd, nm, K, S, rows)
                assert rel_err(got, ref) < tol * np.sqrt(nm), (nf, nd, nm, K, S, rows)
                if S == 3:  # the forced splits were taken, not a launch cached before
                    assert ((3,) + out.shape, np.dtype(ta), "sbgemm-splits") in be._scratch
                taken = gemm_kernels_taken(be)
                assert ("sbgemm_wg_pipe" in taken) == wg_taken, (nf, nd, nm, K, kind, taken)
                if pipe_kind and nm % 2 == 0 and 112 < nd <= 256:
                    assert len(taken & {"sbgemm_tc", "sbgemm_tc_pipe"}) == 1, (nf, nd, nm, K, kind, taken)
                else:
                    assert ("sbgemm_tc" in taken) == tc_taken, (nf, nd, nm, K, kind, taken)
                    assert ("sbgemm_tc_pipe" in taken) == pipe_taken, (nf, nd, nm, K, kind, taken)
    finally:
        be.gemm_splits = None
        be.gemm_staged, be.gemm_tensor, be.gemm_tensor_pipe = staged, tensor, pipe
        be.gemm_warpgroup, be.gemm_pipe_few_rows = warpgroup, few_rows


@pytest.mark.parametrize("K", [1, 12, 20])
def test_sbgemv_no_rows(gemm_gpu, K):
    """A product with no rows (nd = 0) launches nothing and leaves out empty."""
    A = cupy.zeros((3, 0, 40), np.complex64)
    out = cupy.empty((3, 0, K), np.complex64)
    gemm_gpu.sbgemv(A, cupy.ones((3, 40, K), np.complex64), out, adjoint=False)
    gemm_gpu.synchronize()
    assert out.shape == (3, 0, K)


def test_pipe_tensor_maps_outlive_their_first_use(gemm_gpu):
    """sbgemm_tc_pipe's tensor map of an Fhat is kept however many other arrays get one: a recorded product
    reads its map at each replay, so a map dropped and its memory reused would be read as garbage."""
    be = gemm_gpu
    if not be.mbarriers:
        pytest.skip("no mbarriers (compute capability 9.0)")
    A = cupy.zeros((2, 8, 64), np.complex64)
    first = be._rows_map(A, 8)
    others = [cupy.zeros((2, 8, 64 + 2 * i), np.complex64) for i in range(1, 80)]
    for B in others:
        be._rows_map(B, 8)
    assert be._rows_map(A, 8) is first
    assert first.nbytes == 128 and bool(first.any())  # an encoded map


def test_sbgemm_tc_accuracy(gemm_gpu, rng):
    """The tensor-core product (3xTF32) is as accurate as the float32 one on
    long sums: the tensor core's own float32 sums drift with the number of
    columns (2.4e-5 at 10000 when kept over a whole row), which the
    per-chunk sums must keep out."""
    be = gemm_gpu
    if not be.tensor_cores:
        pytest.skip("no TF32 tensor cores")
    nf, nd, nm, K = 2, 72, 40000, 12  # (sbgemm_wg_pipe takes 65-128 rows)
    A = (rng.standard_normal((nf, nd, nm)) + 1j * rng.standard_normal((nf, nd, nm))).astype(np.complex64)
    x = (rng.standard_normal((nf, nm, K)) + 1j * rng.standard_normal((nf, nm, K))).astype(np.complex64)
    ref = A.astype(np.complex128) @ x.astype(np.complex128)
    errs = {}
    tensor, pipe, warpgroup = dict(be.gemm_tensor), dict(be.gemm_tensor_pipe), dict(be.gemm_warpgroup)
    kinds = (("sbgemm_tc", "sbgemm_staged") + (("sbgemm_tc_pipe",) if be.mbarriers else ())
             + (("sbgemm_wg_pipe",) if be.warpgroup_mma else ()))
    try:
        for kind in kinds:
            be.gemm_tensor = tensor if kind.startswith(("sbgemm_tc", "sbgemm_wg")) else {key: None for key in tensor}
            be.gemm_tensor_pipe = {key: (64, 3, 1, 1) if kind.endswith("_pipe") else None for key in pipe}
            be.gemm_warpgroup = {key: (3, 4) if kind == "sbgemm_wg_pipe" else None for key in warpgroup}
            be._launch.clear()
            out = cupy.empty((nf, nd, K), np.complex64)
            be.sbgemv(cupy.asarray(A), cupy.asarray(x), out, adjoint=False)
            assert gemm_kernels_taken(be) == {kind}
            errs[kind] = rel_err(out.get(), ref)
    finally:
        be.gemm_tensor, be.gemm_tensor_pipe, be.gemm_warpgroup = tensor, pipe, warpgroup
    for kind in kinds:
        assert errs[kind] < 2 * errs["sbgemm_staged"], errs


@pytest.mark.parametrize("tile", [None, (8, 2, 4, 1), (4, 1, 3, 2), (2, 4, 2, 2)], ids=["default", "w8", "w4", "w2"])
@pytest.mark.parametrize(
    "ta,tx", [(np.complex128, np.complex128), (np.complex64, np.complex64), (np.complex64, np.complex128),
              (np.complex128, np.complex64)], ids=["zz", "cc", "cz", "zc"])
def test_sbgemm_adj_tc(gpu, rng, ta, tx, tile):
    """sbgemm_adj_tc with the default tile (``tile`` None) and others against
    einsum in float64: rows not a multiple of the tensor core's depth (8) or
    of a staged chunk, columns not a multiple of the warp's tile (16) or of
    the block's, odd column counts (complex64 copied one value at a time), K
    from 3 to 16 (one or two tiles of 8 right-hand sides, unused ones), forced
    column splits, no rows at all."""
    be = gpu
    if not be.tensor_cores_for(ta):
        pytest.skip("no tensor cores for this dtype")
    tol = 5e-14 if ta == np.complex128 else 2e-6
    saved = dict(be.adj_tensor_min_k), be.gemm_splits, dict(be.adj_tensor)
    be.adj_tensor_min_k = {key: 3 for key in be.adj_tensor_min_k}
    if tile is not None:
        be.adj_tensor[np.dtype(ta)] = tile
    try:
        for nf, nd, nm, K in ((2, 100, 1000, 16), (3, 9, 257, 9), (2, 1, 33, 12), (2, 130, 77, 5), (1, 64, 4096, 8),
                              (2, 17, 500, 3), (2, 0, 40, 10)):
            for S in (None, 3):
                be.gemm_splits = S
                A = (rng.standard_normal((nf, nd, nm)) + 1j * rng.standard_normal((nf, nd, nm))).astype(ta)
                x = (rng.standard_normal((nf, nd, K)) + 1j * rng.standard_normal((nf, nd, K))).astype(tx)
                out = cupy.full((nf, nm, K), np.nan, dtype=ta)
                be.sbgemv(cupy.asarray(A), cupy.asarray(x), out, adjoint=True)
                ref = np.einsum("fij,fik->fjk", A.astype(np.complex128).conj(), x.astype(ta).astype(np.complex128))
                got = out.get()
                assert np.all(np.isfinite(got)), (nf, nd, nm, K, S)
                assert rel_err(got, ref) < tol * np.sqrt(max(nd, 1)), (nd, nm, K, S)  # nd = 0: exact zeros
                key = ("gemm-adj", nf, nd, nm, K, np.dtype(ta), np.dtype(tx), be.adj_tensor[np.dtype(ta)], S)
                assert be._launch.get(key) is not None, key  # sbgemm_adj_tc ran
    finally:
        be.adj_tensor_min_k, be.gemm_splits, be.adj_tensor = saved


@pytest.mark.parametrize("ta", [np.complex64, np.complex128], ids=["c", "z"])
@pytest.mark.parametrize("adjoint", [False, True], ids=["fwd", "adj"])
@pytest.mark.parametrize("which", ["default", "native", "wide"])
def test_sbgemv_large_and_blas(gpu, native_gpu, wide_gpu, rng, ta, adjoint, which):
    """Shapes with several blocks per frequency, many RHS (cuBLAS path) and tall matrices."""
    be = {"default": gpu, "native": native_gpu, "wide": wide_gpu}[which]
    for nf, nd, nm, K in ((4, 100, 5000, 1), (3, 300, 20, 1), (2, 2000, 3, 1), (3, 9, 700, 2), (2, 30, 500, 12),
                          (40, 50, 1000, 1)):
        A = (rng.standard_normal((nf, nd, nm)) + 1j * rng.standard_normal((nf, nd, nm))).astype(ta)
        n_in, n_out = (nd, nm) if adjoint else (nm, nd)
        x = (rng.standard_normal((nf, n_in, K)) + 1j * rng.standard_normal((nf, n_in, K))).astype(ta)
        out = cupy.full((nf, n_out, K), np.nan, dtype=ta)
        be.sbgemv(cupy.asarray(A), cupy.asarray(x), out, adjoint=adjoint)
        A64, x64 = A.astype(np.complex128), x.astype(np.complex128)
        ref = np.einsum("fij,fik->fjk", A64.conj(), x64) if adjoint else A64 @ x64
        tol = 1e-13 if ta == np.complex128 else 1e-5
        assert rel_err(out.get(), ref) < tol, (nf, nd, nm, K)


@pytest.mark.parametrize("K", [1, 2, 3, 5, 33, 130])
@pytest.mark.parametrize("tin,tout", [(np.float64, np.float64), (np.float64, np.float32), (np.float32, np.float64)])
def test_pad_unpad_kernels(gpu, rng, K, tin, tout):
    for n, nt in ((1, 1), (5, 7), (33, 31), (70, 3)):
        x = rng.standard_normal((n, nt, K)).astype(tin)
        pad = cupy.full((2 * nt, n, K), np.nan, dtype=tout)
        pad[nt:] = 0
        gpu.pad(cupy.asarray(x), pad)
        np.testing.assert_array_equal(pad[:nt].get(), x.transpose(1, 0, 2).astype(tout))
        assert not np.any(pad[nt:].get())
        xp = rng.standard_normal((2 * nt, n, K)).astype(tin)
        out = cupy.full((n, nt, K), np.nan, dtype=tout)
        gpu.unpad(cupy.asarray(xp), out)
        np.testing.assert_array_equal(out.get(), xp[:nt].transpose(1, 0, 2).astype(tout))


LAYOUTS = [("fused", "fused"), ("cs", "sc"), ("cc", "cc"), ("ss", "ss")]


@pytest.fixture(scope="module", params=LAYOUTS, ids=lambda p: "-".join(p))
def layout_gpu(request):
    be = GPUBackend()
    be.fft_layout = {"r2c": request.param[0], "c2r": request.param[1]}
    return be


@pytest.mark.parametrize("real", [np.float32, np.float64])
@pytest.mark.parametrize("K", [1, 3])
def test_ffts_match_numpy(layout_gpu, rng, real, K):
    gpu = layout_gpu
    L, n = 26, 7
    cplx = np.result_type(real, np.complex64)
    x = rng.standard_normal((L, n, K)).astype(real)
    out = cupy.empty((L // 2 + 1, n, K), cplx)
    gpu.rfft(cupy.asarray(x), out)
    tol = 1e-5 if real == np.float32 else 1e-13
    assert rel_err(out.get(), np.fft.rfft(x, axis=0)) < tol
    for src in (np.complex64, np.complex128):
        xh = np.fft.rfft(rng.standard_normal((L, n, K)), axis=0).astype(src)
        y = cupy.empty((L, n, K), real)
        gpu.irfft(cupy.asarray(xh), y)
        ref = np.fft.irfft(xh.astype(np.complex128), n=L, axis=0)
        assert rel_err(y.get(), ref) < 10 * tol
        u = cupy.empty((n, L // 2, K), real)
        gpu.irfft_unpad(cupy.asarray(xh), u, real)
        assert rel_err(u.get(), ref[: L // 2].transpose(1, 0, 2)) < 10 * tol


@pytest.mark.parametrize("K", [1, 3])
def test_transform_rounded_into_product_precision(layout_gpu, rng, K):
    """A float64 transform stored in complex64 (pad_rfft's dtype, rfft into a
    lower precision) is the complex128 transform rounded, bit for bit; and a
    complex64 product of it equals the product that casts a complex128 input
    as it loads it (the engine's ddssd and ddsdd)."""
    gpu = layout_gpu
    for n, nt in ((7, 13), (40, 5), (3, 500)):
        x = cupy.asarray(rng.standard_normal((n, nt, K)))
        full = cupy.empty((nt + 1, n, K), np.complex128)
        gpu.pad_rfft(x, full)
        low = cupy.full((nt + 1, n, K), np.nan, np.complex64)
        gpu.pad_rfft(x, low, np.float64)
        assert np.array_equal(low.get(), full.get().astype(np.complex64))
        x_pad = cupy.zeros((2 * nt, n, K))
        x_pad[:nt] = x.transpose(1, 0, 2)
        gpu.rfft(x_pad, low)
        ref = cupy.empty_like(full)
        gpu.rfft(x_pad, ref)
        assert np.array_equal(low.get(), ref.get().astype(np.complex64))
        Fhat = cupy.asarray((rng.standard_normal((nt + 1, 4, n)) + 1j * rng.standard_normal((nt + 1, 4, n)))
                            .astype(np.complex64))
        gpu.pad_rfft(x, low, np.float64)
        for A, adjoint in ((Fhat, False), (Fhat.transpose(0, 2, 1).copy(), True)):
            y_low, y_full = (cupy.empty((nt + 1, 4, K), np.complex64) for _ in range(2))
            gpu.sbgemv(A, low, y_low, adjoint=adjoint)
            gpu.sbgemv(A, full, y_full, adjoint=adjoint)
            assert np.array_equal(y_low.get(), y_full.get()), adjoint
    with pytest.raises(ValueError, match="does not fit"):
        gpu.pad_rfft(cupy.zeros((2, 3, 1)), cupy.empty((4, 2, 1), np.complex128), np.float32)
    with pytest.raises(ValueError, match="does not fit"):
        gpu.pad_rfft(cupy.zeros((2, 3, 1)), cupy.empty((4, 2, 1), np.float32), np.float64)
    with pytest.raises(ValueError, match="does not fit"):
        gpu.rfft(cupy.zeros((6, 2, 1)), cupy.empty((4, 2, 1), np.float32))


@pytest.mark.parametrize("K", [1, 2, 5])
@pytest.mark.parametrize("tin,tout", [(np.float64, np.float64), (np.float64, np.float32), (np.float32, np.float64)])
def test_pad_rfft_fused(layout_gpu, rng, K, tin, tout):
    gpu = layout_gpu
    for n, nt in ((1, 1), (7, 13), (40, 5)):
        L = 2 * nt
        x = rng.standard_normal((n, nt, K)).astype(tin)
        out = cupy.full((nt + 1, n, K), np.nan, np.result_type(tout, np.complex64))
        gpu.pad_rfft(cupy.asarray(x), out)
        ref = np.fft.rfft(x.astype(tout).astype(np.float64), n=L, axis=1).transpose(1, 0, 2)
        assert rel_err(out.get(), ref) < (1e-5 if tout == np.float32 else 1e-13)
        # and back: fused inverse + unpad gives x again (round trip of the zero-padded series)
        y = cupy.full((n, nt, K), np.nan, tin)
        gpu.irfft_unpad(out, y, tout)
        assert rel_err(y.get(), x) < (1e-5 if np.float32 in (tin, tout) else 1e-13)


# Nt for the fused transforms: every radix (2, 3, 4, 5, 7, 8, 10), Nt = 1, the big and mid target sizes;
# 11 and 13 have no fused plan and take cuFFT
FUSED_NT = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 21, 30, 49, 60, 64, 100, 105, 128, 210, 250, 400, 500, 1000,
            11, 13]


@pytest.mark.parametrize("nt", FUSED_NT)
def test_fused_transforms_vs_numpy(gpu, nt):
    """pad_rfft and irfft_unpad (native/fft.cu) against NumPy's float64 FFT,
    on series counts that leave a partial last block, K = 1 and K > 1, every
    precision pair; outputs poisoned with NaN first."""
    from fftmatvec.backend.fused_fft import fft_radices

    rng = np.random.default_rng()
    L = 2 * nt
    assert (fft_radices(nt) is None) == (nt in (11, 13))
    for n, K in ((1, 1), (37, 1), (5, 3), (3, 16)):
        for tin, tfft in ((np.float64, np.float64), (np.float64, np.float32), (np.float32, np.float64)):
            cplx = np.result_type(tfft, np.complex64)
            tol = 1e-5 if np.float32 in (tin, tfft) else 1e-13
            x = rng.standard_normal((n, nt, K)).astype(tin)
            out = cupy.full((nt + 1, n, K), np.nan, cplx)
            gpu.pad_rfft(cupy.asarray(x), out)
            ref = np.fft.rfft(x.astype(np.float64), n=L, axis=1).transpose(1, 0, 2)
            assert rel_err(out.get(), ref) < tol, (n, K, tin, tfft)
            # inverse from random spectra (imaginary parts of f = 0 and Nt are ignored, as numpy does)
            yh = (rng.standard_normal((nt + 1, n, K)) + 1j * rng.standard_normal((nt + 1, n, K))).astype(cplx)
            y = cupy.full((n, nt, K), np.nan, tin)
            gpu.irfft_unpad(cupy.asarray(yh), y, tfft)
            yref = np.fft.irfft(yh.astype(np.complex128), n=L, axis=0)[:nt].transpose(1, 0, 2)
            assert rel_err(y.get(), yref) < 10 * tol, (n, K, tin, tfft)


@pytest.mark.parametrize("nt", [10, 500])
def test_pad_rfft_l2_priority(gpu, rng, nt):
    """pad_rfft stores its spectra at evict-last priority in the L2 when they
    take at most ``rfft_keep_max_bytes``: the same values either way, and
    NumPy's float64 FFT's."""
    x = cupy.asarray(rng.standard_normal((37, nt, 1)))
    outs = []
    saved = gpu.rfft_keep_max_bytes
    try:
        for limit in (saved, 0):
            gpu.rfft_keep_max_bytes = limit
            out = cupy.full((nt + 1, 37, 1), np.nan, np.complex128)
            gpu.pad_rfft(x, out)
            outs.append(out.get())
    finally:
        gpu.rfft_keep_max_bytes = saved
    assert saved == gpu._device.attributes.get("L2CacheSize", 0) and saved >= outs[0].nbytes
    assert np.array_equal(outs[0], outs[1])
    ref = np.fft.rfft(x.get(), n=2 * nt, axis=1).transpose(1, 0, 2)
    assert rel_err(outs[0], ref) < 1e-13


@pytest.mark.parametrize("S", [2, 4, 16])
@pytest.mark.parametrize("nt", [1, 5, 10, 21, 64, 500, 1000])
def test_fused_transforms_series_per_block(gpu, nt, S):
    """The fused transforms with S series per block (the lanes of a pair in
    native/fft.cu's PairItem are S apart; the other tests' few series take
    S = 1): S forced through the shared-memory target and the multiprocessor
    count, a partial last block, K = 1, 16 and odd K (a block's series then
    belong to more than one parameter), 32 and 512 threads."""
    from fftmatvec.backend.fused_fft import fused_row_stride

    rng = np.random.default_rng()
    saved = gpu.sm_count, gpu.fused_smem_target, gpu.fused_threads
    try:
        for n, K in ((2 * S + 3, 1), (3, 16), (11, 3), (5, 7)):
            for tin, tfft in ((np.float64, np.float64), (np.float64, np.float32)):
                cplx = np.dtype(np.result_type(tfft, np.complex64))
                smem = 2 * S * fused_row_stride(nt, S, cplx.itemsize) * cplx.itemsize
                if smem > gpu.smem_limit:
                    continue
                for threads in (32, 512):
                    gpu.sm_count, gpu.fused_threads = 1, threads
                    gpu.fused_smem_target = 2 * S * (nt + 1) * cplx.itemsize
                    gpu._fused.clear()
                    assert gpu._fused_config(nt, cplx, n * K, K)[0] == {"rfft_pad": S, "irfft_unpad": S}
                    tol = 1e-5 if np.float32 in (tin, tfft) else 1e-13
                    x = rng.standard_normal((n, nt, K)).astype(tin)
                    out = cupy.full((nt + 1, n, K), np.nan, cplx)
                    gpu.pad_rfft(cupy.asarray(x), out)
                    ref = np.fft.rfft(x.astype(np.float64), n=2 * nt, axis=1).transpose(1, 0, 2)
                    assert rel_err(out.get(), ref) < tol, (n, K, tin, tfft, threads)
                    yh = (rng.standard_normal((nt + 1, n, K)) + 1j * rng.standard_normal((nt + 1, n, K))).astype(cplx)
                    y = cupy.full((n, nt, K), np.nan, tin)
                    gpu.irfft_unpad(cupy.asarray(yh), y, tfft)
                    yref = np.fft.irfft(yh.astype(np.complex128), n=2 * nt, axis=0)[:nt].transpose(1, 0, 2)
                    assert rel_err(y.get(), yref) < 10 * tol, (n, K, tin, tfft, threads)
    finally:
        gpu.sm_count, gpu.fused_smem_target, gpu.fused_threads = saved
        gpu._fused.clear()


@pytest.mark.parametrize("nt", [1, 10, 500, 1000])
def test_fused_transforms_in_place(gpu, nt):
    """The complex128 transforms over many blocks run their passes in one
    shared-memory buffer where every pass has one butterfly per thread (all
    of Nt = 1 and 10; Nt = 1000 with 256 threads), in two otherwise (Nt = 500:
    400 butterflies of radix 5 for 256 threads; 32 threads at Nt = 500 and
    1000).  With K = 8 and 16 at Nt = 1000 a forward block takes twice the
    series (4) in one buffer and the 416 threads of a pass's butterflies, an
    inverse block four times (8) and 1024 threads.  Both against NumPy,
    forward and inverse, K = 1, 8 and 16."""
    rng = np.random.default_rng()
    saved = gpu.sm_count, gpu.fused_threads
    try:
        for threads in (None, 32):
            for n, K in ((203, 1), (41, 16), (37, 8)):
                gpu.sm_count, gpu.fused_threads = 1, threads  # one multiprocessor: many waves of blocks
                gpu._fused.clear()
                in_place = gpu._fused_config(nt, np.dtype(np.complex128), n * K, K)[6]
                expected = nt in (1, 10) or (threads is None and nt == 1000)
                assert in_place == {"rfft_pad": expected, "irfft_unpad": expected}, (threads, in_place)
                if threads is None and nt == 1000:
                    S_of, threads_of = gpu._fused_config(nt, np.dtype(np.complex128), n * K, K)[:2]
                    assert ((S_of["rfft_pad"], threads_of["rfft_pad"], S_of["irfft_unpad"], threads_of["irfft_unpad"])
                            == ((4, 416, 8, 1024) if K > 1 else (2, 224, 2, 256))), (S_of, threads_of)
                x = rng.standard_normal((n, nt, K))
                out = cupy.full((nt + 1, n, K), np.nan, np.complex128)
                gpu.pad_rfft(cupy.asarray(x), out)
                assert rel_err(out.get(), np.fft.rfft(x, n=2 * nt, axis=1).transpose(1, 0, 2)) < 1e-13
                yh = rng.standard_normal((nt + 1, n, K)) + 1j * rng.standard_normal((nt + 1, n, K))
                y = cupy.full((n, nt, K), np.nan)
                gpu.irfft_unpad(cupy.asarray(yh), y, np.float64)
                yref = np.fft.irfft(yh, n=2 * nt, axis=0)[:nt].transpose(1, 0, 2)
                assert rel_err(y.get(), yref) < 1e-12
    finally:
        gpu.sm_count, gpu.fused_threads = saved
        gpu._fused.clear()


def test_fused_set_ups_fit_a_block(gpu):
    """Every launch set-up of the fused transforms fits a block: at most 1024
    threads and the shared memory a block may have, for lengths from 1 to
    5000 (the radices' primes), complex64 and complex128, 1 to 32 right-hand
    sides and series counts from one block to many waves, with this device's
    multiprocessors and with 1 and 16 (the rules compare the blocks with
    them: between two of them an inverse once asked for 258 KB)."""
    saved = gpu.sm_count
    try:
        for sm_count, nt, ctype, K, n in itertools.product(
                (saved, 1, 16), (1, 7, 10, 21, 500, 1000, 2048, 5000), (np.complex64, np.complex128),
                (1, 2, 3, 8, 16, 24, 32), (1, 3, 50, 100, 300, 5000)):
            gpu.sm_count = sm_count
            gpu._fused.clear()
            cfg = gpu._fused_config(nt, np.dtype(ctype), n * K, K)
            if cfg is None:  # one series does not fit
                assert 2 * (nt + 1) * np.dtype(ctype).itemsize > gpu.smem_limit, (nt, ctype)
                continue
            _, threads_of, smem_of = cfg[:3]
            for name in ("rfft_pad", "irfft_unpad"):
                assert threads_of[name] <= 1024 and smem_of[name] <= gpu.smem_limit, (
                    sm_count, nt, ctype, K, n, name, threads_of, smem_of)
    finally:
        gpu.sm_count = saved
        gpu._fused.clear()


def test_fused_inverse_fits_between_the_wave_rules(gpu):
    """Series counts at which a complex128 forward block takes twice the
    series in one buffer (many waves of blocks of 4) but blocks of 8 would
    not make many waves: the inverse keeps the forward's 4 series in one
    buffer, within the shared memory a block may have (it had asked for two
    buffers of 8 series, 258 KB at Nt = 1000, and failed at launch: 100 x 24
    series at the big size).  Forward and inverse against NumPy."""
    rng = np.random.default_rng()
    nt = 1000
    saved = gpu.sm_count
    try:
        gpu.sm_count = 1  # one multiprocessor: 4 blocks are many waves
        for n, K in ((1, 16), (2, 10), (1, 24)):
            gpu._fused.clear()
            S_of, _, smem_of, _, _, _, in_place = gpu._fused_config(nt, np.dtype(np.complex128), n * K, K)
            assert S_of == {"rfft_pad": 4, "irfft_unpad": 4} and all(in_place.values()), (n, K, S_of, in_place)
            assert max(smem_of.values()) <= gpu.smem_limit, (n, K, smem_of)
            x = rng.standard_normal((n, nt, K))
            out = cupy.full((nt + 1, n, K), np.nan, np.complex128)
            gpu.pad_rfft(cupy.asarray(x), out)
            assert rel_err(out.get(), np.fft.rfft(x, n=2 * nt, axis=1).transpose(1, 0, 2)) < 1e-13, (n, K)
            yh = rng.standard_normal((nt + 1, n, K)) + 1j * rng.standard_normal((nt + 1, n, K))
            y = cupy.full((n, nt, K), np.nan)
            gpu.irfft_unpad(cupy.asarray(yh), y, np.float64)
            assert rel_err(y.get(), np.fft.irfft(yh, n=2 * nt, axis=0)[:nt].transpose(1, 0, 2)) < 1e-12, (n, K)
    finally:
        gpu.sm_count = saved
        gpu._fused.clear()


@pytest.mark.parametrize("nt", [21, 1000])
def test_pad_rfft_in_place_takes_pass_threads(gpu, nt):
    """The complex128 forward in one buffer runs with the fewest threads that
    do a pass at once (pass_threads: 64 for Nt = 21 where the rule of the
    other transforms gives 96, 128 against 192, 224 and 416 at Nt = 1000),
    not a power of two: against NumPy, K = 1, 3 and 16, a partial last
    block."""
    from fftmatvec.backend.fused_fft import pass_threads

    rng = np.random.default_rng()
    saved = gpu.sm_count
    try:
        gpu.sm_count = 1  # one multiprocessor: many waves of blocks
        for n, K in ((203, 1), (37, 3), (41, 16)):
            gpu._fused.clear()
            S_of, threads_of, _, _, _, radices, in_place = gpu._fused_config(nt, np.dtype(np.complex128), n * K, K)
            assert in_place["rfft_pad"], (n, K)
            assert threads_of["rfft_pad"] == pass_threads(nt, S_of["rfft_pad"], list(radices)), (n, K, threads_of)
            x = rng.standard_normal((n, nt, K))
            out = cupy.full((nt + 1, n, K), np.nan, np.complex128)
            gpu.pad_rfft(cupy.asarray(x), out)
            assert rel_err(out.get(), np.fft.rfft(x, n=2 * nt, axis=1).transpose(1, 0, 2)) < 1e-13, (n, K)
    finally:
        gpu.sm_count = saved
        gpu._fused.clear()


@pytest.mark.parametrize("blocks", [1, 3, None])
@pytest.mark.parametrize("nt", [7, 10, 500, 1000])
def test_pad_rfft_staged_loop(gpu, monkeypatch, nt, blocks):
    """From float64 into complex64 with K = 1, pad_rfft's blocks loop over
    groups of S series and stage the next group's samples while they
    transform the current one: with the grid capped at 1 and 3 blocks (and
    uncapped), S > 1 (one multiprocessor counted), a partial last group, an
    input aligned to 16 bytes (copied in 16-byte pieces) and one a sample off
    (copied a sample at a time), against NumPy; output poisoned with NaN
    first.  The staged kernel is the one launched, and only there: not for
    K = 3, nor from float32, nor when one wave of blocks holds every group."""
    launched = record_kernel_builds(monkeypatch)
    monkeypatch.setattr(gpu, "fused_max_blocks", blocks)
    monkeypatch.setattr(gpu, "sm_count", 1)
    monkeypatch.setattr(gpu, "_resident_blocks", lambda fn, threads, smem=0: 2)  # uncapped: 2 blocks, 3+ groups
    gpu._fused.clear()
    try:
        rng = np.random.default_rng()
        n = 203
        x = rng.standard_normal((n, nt, 1))
        ref = np.fft.rfft(x, n=2 * nt, axis=1).transpose(1, 0, 2)
        S = gpu._fused_config(nt, np.dtype(np.complex64), n, 1)[0]["rfft_pad"]
        assert S > 1 and n % S and n // S >= 3 * (blocks or 1)
        x_view = cupy.concatenate([cupy.zeros(1), cupy.asarray(x).ravel()])[1:].reshape(x.shape)
        for src in (cupy.asarray(x), x_view):
            out = cupy.full((nt + 1, n, 1), np.nan, np.complex64)
            launched.clear()
            gpu.pad_rfft(src, out, np.float32)
            assert [e.split(", ")[6] for e in launched if e.startswith("rfft_pad")] == ["1"], launched
            assert rel_err(out.get(), ref) < 1e-5, src.data.ptr % 16
        for src in (cupy.asarray(rng.standard_normal((67, nt, 3))), cupy.asarray(x, np.float32)):
            launched.clear()
            gpu.pad_rfft(src, cupy.empty((nt + 1,) + src.shape[::2], np.complex64), np.float32)
            assert [e.split(", ")[6] for e in launched if e.startswith("rfft_pad")] == ["0"], launched
        if blocks is None:  # one wave: the kernel that does not loop
            monkeypatch.setattr(gpu, "sm_count", n)
            out = cupy.full((nt + 1, n, 1), np.nan, np.complex64)
            launched.clear()
            gpu.pad_rfft(cupy.asarray(x), out, np.float32)
            assert [e.split(", ")[6] for e in launched if e.startswith("rfft_pad")][-1] == "0", launched
            assert rel_err(out.get(), ref) < 1e-5
    finally:
        gpu._fused.clear()


@pytest.mark.parametrize("real", [np.float64, np.float32])
def test_fused_transforms_unaligned_views(gpu, real):
    """The fused transforms read and write samples in pairs where a pair is
    aligned: views that start one sample off (even Nt, K = 1) must take the
    one-sample path and give the same results."""
    rng = np.random.default_rng()
    n, nt = 9, 500
    cplx = np.result_type(real, np.complex64)
    tol = 1e-5 if real == np.float32 else 1e-13
    x = rng.standard_normal((n, nt, 1)).astype(real)
    x_view = cupy.concatenate([cupy.zeros(1, real), cupy.asarray(x).ravel()])[1:].reshape(x.shape)
    assert x_view.data.ptr % (2 * x.itemsize) != 0
    out = cupy.full((nt + 1, n, 1), np.nan, cplx)
    gpu.pad_rfft(x_view, out)
    assert rel_err(out.get(), np.fft.rfft(x.astype(np.float64), n=2 * nt, axis=1).transpose(1, 0, 2)) < tol
    yh = (rng.standard_normal((nt + 1, n, 1)) + 1j * rng.standard_normal((nt + 1, n, 1))).astype(cplx)
    y_view = cupy.full(n * nt + 1, np.nan, real)[1:].reshape(n, nt, 1)
    gpu.irfft_unpad(cupy.asarray(yh), y_view, real)
    yref = np.fft.irfft(yh.astype(np.complex128), n=2 * nt, axis=0)[:nt].transpose(1, 0, 2)
    assert rel_err(y_view.get(), yref) < 10 * tol


@pytest.mark.parametrize("shape", [(5, 7, 6), (3, 40, 12), (17, 5, 9)], ids=lambda s: "x".join(map(str, s)))
def test_engine_all_fft_layouts(layout_gpu, rng, shape):
    nd, nm, nt = shape
    f = rng.standard_normal(shape)
    op = BTTOperator(f, device=layout_gpu)
    for K in (1, 3):
        for adjoint in (False, True):
            x = rng.standard_normal((nd if adjoint else nm, nt, K))
            for _ in range(3):
                y = op.rmatvec(x) if adjoint else op.matvec(x)
                assert rel_err(y, dense_product(f, x, adjoint)) < 1e-12
            timer = layout_gpu.timer()  # the separately timed stages (contract calls)
            y = (op.rmatvec if adjoint else op.matvec)(x, timer=timer)
            assert rel_err(y, dense_product(f, x, adjoint)) < 1e-12


def test_naive_matvec_matches(gpu, rng):
    nd, nm, nt = 4, 9, 10
    f = rng.standard_normal((nd, nm, nt))
    op = BTTOperator(f, device=gpu)
    Fhat = op.engine.Fhat[np.dtype(np.complex128)]
    for adjoint in (False, True):
        x = rng.standard_normal((nd if adjoint else nm, nt, 3))
        y = gpu.naive_matvec(Fhat, cupy.asarray(x), adjoint).get()
        assert rel_err(y, dense_product(f, x, adjoint)) < 1e-12


def test_fft_matrix_chunks_and_memory_check(gpu, rng):
    f = rng.standard_normal((7, 5, 6))
    for dt in (np.complex64, np.complex128):
        Fhat = gpu.fft_matrix(f, dt)
        ref = np.fft.rfft(f, n=12, axis=-1).transpose(2, 0, 1).astype(dt)
        assert Fhat.dtype == dt and Fhat.shape == (7, 7, 5)
        np.testing.assert_allclose(Fhat.get(), ref, rtol=0, atol=1e-5 if dt == np.complex64 else 1e-12)
    huge = np.broadcast_to(np.zeros(1), (100_000, 100_000, 1000))  # 16 PB of Fhat
    with pytest.raises(FftmatvecError, match="needs .* bytes"):
        gpu.fft_matrix(huge, np.complex128)


@pytest.mark.parametrize("rows_a_block", [1, 2, 3])
def test_fft_matrix_blocks_through_pinned_buffers(gpu, rng, monkeypatch, rows_a_block):
    """Blocks of 1-3 rows (a short last block; each of the two buffer pairs
    used again) of a column slab of a larger ``f`` (not contiguous, float32)
    give the one-block ``Fhat`` bit for bit, and the float64 transform."""
    from fftmatvec.backend import gpu as gpu_module

    whole = rng.standard_normal((7, 13, 9)).astype(np.float32)
    before = whole.copy()
    f = whole[:, 2:11]
    one_block = gpu.fft_matrix(f, np.complex128)
    monkeypatch.setattr(gpu_module, "UPLOAD_BYTES", rows_a_block * 9 * 9 * 8)
    Fhat = gpu.fft_matrix(f, np.complex128)
    assert cupy.array_equal(Fhat, one_block)
    ref = np.fft.rfft(f.astype(np.float64), n=18, axis=-1).transpose(2, 0, 1)
    assert rel_err(Fhat.get(), ref) < 1e-14
    assert np.array_equal(whole, before)


def test_fft_matrices_round_complex64_from_complex128_and_check_memory(gpu, rng):
    f = rng.standard_normal((4, 9, 11))
    both = gpu.fft_matrices(f, [np.complex64, np.complex128])
    for dt in (np.complex64, np.complex128):
        assert cupy.array_equal(both[np.dtype(dt)], gpu.fft_matrix(f, dt))
    huge = np.broadcast_to(np.zeros(1), (10_000, 100_000, 1000))  # 12 PB in two copies
    with pytest.raises(FftmatvecError, match="complex128 and complex64 needs .* bytes"):
        gpu.fft_matrices(huge, [np.complex64, np.complex128])


def test_auto_precision_on_the_gpu_measures_as_the_cpu(gpu, rng):
    """The same probes on both devices: the errors of each code agree within
    4x (single-precision kernels differ), the chosen codes meet the tolerance
    on fresh vectors and only their copies of Fhat stay."""
    from fftmatvec.conditioning import gaussian_rows
    from fftmatvec.tuning import measure, synthetic_matrix

    seed = int(rng.integers(2**31))
    probe = gaussian_rows((seed, 0, 1), 3, 40, 33, cupy)  # the GPU's probes are the host's
    np.testing.assert_allclose(probe.get(), gaussian_rows((seed, 0, 1), 3, 40, 33), rtol=1e-13, atol=1e-13)
    f = synthetic_matrix(7, 45, 33, cond=1e2, seed=seed)
    options = dict(probes=2, repeats=2, seed=seed)
    cpu = measure(f, **options)
    op = BTTOperator(f, device="gpu", precision="auto", tolerance=1e-6, auto_options=options)
    assert op.tuning.device == "gpu" and len(op.tuning.entries) == 64
    for e in op.tuning.entries:
        ref = cpu.entry(e.direction, e.code).error
        assert (e.error == 0.0) if e.code == "ddddd" else (ref / 4 <= e.error <= 4 * ref), (e.direction, e.code)
    assert set(op.engine.Fhat) == {op.precision.sbgemv, op.adjoint_precision.sbgemv}
    m = rng.standard_normal((45, 33))
    assert rel_err(op.matvec(cupy.asarray(m)).get(), BTTOperator(f).matvec(m)) <= 3e-6


def test_device_uniforms_are_numpys_stream(gpu, rng):
    """native/random.cu draws NumPy's PCG64 doubles bit for bit, from any offset, for runs shorter and
    longer than one draw a thread, and leaves the host's stream where it was; gaussian_rows on the
    device then transforms the host's uniforms."""
    from fftmatvec.backend.pcg64 import device_uniforms
    from fftmatvec.conditioning import gaussian_rows

    key = [int(rng.integers(2**31)), 2 << 20]
    for offset, n in ((0, 0), (0, 1), (0, 7), (3, 4097), (2**40 + 5, 100_003), (11, 3_000_017)):
        bits = np.random.PCG64(np.random.SeedSequence(key))
        before = bits.state
        drawn = device_uniforms(bits, offset, n).get()
        assert bits.state == before
        expect = np.random.PCG64(np.random.SeedSequence(key))
        expect.advance(offset)
        assert np.array_equal(drawn, np.random.Generator(expect).random(n)), (offset, n)
    on_device = gaussian_rows((key[0], 3), 5, 37, 1001, cupy)
    np.testing.assert_allclose(on_device.get(), gaussian_rows((key[0], 3), 5, 37, 1001), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("shape", [(5, 23, 9), (23, 5, 9), (6, 7, 9)], ids=lambda s: "x".join(map(str, s)))
def test_conditioning_on_the_gpu_is_the_hosts(gpu, rng, shape):
    """The singular values of Fhat taken on the device (batched QR and SVD) give the host's norm and
    condition, exact and estimated (wide, tall and square frequencies)."""
    from fftmatvec.conditioning import conditioning

    f = rng.standard_normal(shape)
    on_host, on_device = CPUBackend().fft_matrix(f, np.complex128), gpu.fft_matrix(f, np.complex128)
    for exact in (True, False):
        host = conditioning(f, Fhat=on_host, exact=exact)
        device = conditioning(f, backend=gpu, Fhat=on_device, exact=exact)
        assert device.exact == exact and device.method == host.method
        assert device.frobenius == host.frobenius
        assert abs(device.norm - host.norm) <= 1e-12 * host.norm, exact
        assert abs(device.cond - host.cond) <= 1e-10 * host.cond, exact


def test_shared_memory_opt_in_counts_static(gpu):
    """A kernel with 40 KB of static shared memory launched with 16 KB of
    dynamic shared memory needs the opt-in although 16 KB is under 48 KB."""
    from fftmatvec.backend.kernels import allow_shared_memory

    src = r"""
    extern "C" __global__ void fill(float* out) {
        __shared__ float fixed[10240];
        extern __shared__ float dyn[];
        fixed[threadIdx.x] = threadIdx.x;
        dyn[threadIdx.x] = 1.0f;
        __syncthreads();
        out[threadIdx.x] = fixed[threadIdx.x] + dyn[threadIdx.x];
    }
    """
    fn = cupy.RawKernel(src, "fill")
    assert fn.shared_size_bytes == 40960
    out = cupy.zeros(32, np.float32)
    allow_shared_memory(fn, 16384)
    fn((1,), (32,), (out,), shared_mem=16384)
    assert np.array_equal(out.get(), np.arange(32) + 1.0)


def test_measurement_helpers(gpu):
    bw = gpu.copy_bandwidth(nbytes=64 << 20, repeats=3)
    assert 1e10 < bw < 1e14
    timer = gpu.timer()
    with timer("x"):
        cupy.ones(1000).sum()
    assert timer.times["x"][0] > 0
    assert select_device(0) == 0


@pytest.mark.parametrize("name,is_p2q,vector", [("test_mat", False, "test_obs_vec_SOTI.h5"),
                                                ("test_mat_qoi", True, "test_qoi_vec_SOTI.h5")])
@pytest.mark.parametrize("code", ["ddddd", "dssdd"])
def test_reference_fixture(gpu, reference_dir, name, is_p2q, vector, code):
    from fftmatvec.io import read_vector

    ref_dir = reference_dir
    op = BTTOperator.from_matrix_dir(ref_dir / name, device=gpu, precision=code)
    m, _ = read_vector(ref_dir / "test_param_vec_SOTI.h5", "param", qoi=False, expect_n=op.Nm, expect_nt=op.Nt)
    y, _ = read_vector(ref_dir / vector, "data", qoi=is_p2q, expect_n=op.Nd, expect_nt=op.Nt)
    for _ in range(3):  # eager, recorded, replayed
        assert rel_err(op.matvec(m), y) < (1e-6 if code == "ddddd" else 1e-5)
