"""The single-process BTT operator against float64 direct references."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import scipy.sparse.linalg as spla
from conftest import direct_btt, direct_btt_adjoint, rel_err

from fftmatvec import ALL_CODES, BTTOperator, ConfigError, FftmatvecError
from fftmatvec.backend.base import all_finite
from fftmatvec.backend.cpu import CPUBackend
from fftmatvec.backend.threads import map_slices
from fftmatvec.bench import dense_matrix
from fftmatvec.io import read_vector
from fftmatvec.precision import parse
from fftmatvec.vector import DistVector

SHAPES = [  # (Nd, Nm, Nt): odd, prime, degenerate, tall and wide
    (5, 7, 6),
    (3, 11, 13),
    (1, 1, 1),
    (1, 9, 7),
    (6, 1, 5),
    (4, 3, 1),
    (13, 5, 17),
    (2, 31, 8),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_forward_and_adjoint_match_direct_sums(shape, rng):
    f = rng.standard_normal(shape)
    nd, nm, nt = shape
    m, d = rng.standard_normal((nm, nt)), rng.standard_normal((nd, nt))
    op = BTTOperator(f)
    assert op.matvec(m).shape == (nd, nt)
    assert rel_err(op.matvec(m), direct_btt(f, m)) < 1e-13
    assert rel_err(op.rmatvec(d), direct_btt_adjoint(f, d)) < 1e-13


@pytest.mark.parametrize("shape", SHAPES[:4], ids=lambda s: "x".join(map(str, s)))
def test_dense_matrix_reference_agrees(shape, rng):
    f = rng.standard_normal(shape)
    m = rng.standard_normal(shape[1:])
    assert rel_err(dense_matrix(f) @ m.ravel(), direct_btt(f, m).ravel()) < 1e-13


def test_adjoint_identity(rng):
    f = rng.standard_normal((7, 10, 9))
    op = BTTOperator(f)
    m, d = rng.standard_normal((10, 9)), rng.standard_normal((7, 9))
    Fm = op.matvec(m)
    lhs, rhs = np.vdot(Fm, d), np.vdot(m, op.rmatvec(d))
    # relative to ||F m|| ||d||, not |lhs|: the inner product can cancel to almost nothing
    assert abs(lhs - rhs) <= 1e-13 * np.linalg.norm(Fm) * np.linalg.norm(d)


def test_normal_and_aux_normal(rng):
    f, g = rng.standard_normal((4, 6, 5)), rng.standard_normal((4, 6, 5))
    op = BTTOperator(f, aux=g)
    m = rng.standard_normal((6, 5))
    F, G = dense_matrix(f), dense_matrix(g)
    assert rel_err(op.normal(m).ravel(), F.T @ F @ m.ravel()) < 1e-13
    assert rel_err(op.aux_normal(m).ravel(), G.T @ F @ m.ravel()) < 1e-13
    with pytest.raises(FftmatvecError, match="auxiliary"):
        BTTOperator(f).aux_normal(m)


@pytest.mark.parametrize("codes", [("ddddd", "ddddd"), ("dssdd", "ddssd"), ("sssss", "dssds"), ("ddsss", "sdddd")])
def test_normal_in_one_process_equals_the_grid_path(rng, codes):
    """F^T F m and G^T F m of arrays run as one local call of two passes (the
    cast between them from the forward's result precision to the adjoint's
    pad precision); the same products of a DistVector still take the grid
    path: bit for bit equal, for one vector, a batch and a float32 strided
    view."""
    f, g = rng.standard_normal((5, 9, 7)), rng.standard_normal((5, 9, 7))
    op = BTTOperator(f, aux=g, precision=codes[0], adjoint_precision=codes[1])
    inputs = (rng.standard_normal((9, 7)), rng.standard_normal((9, 7, 3)),
              rng.standard_normal((9, 14)).astype(np.float32)[:, ::2])
    for m in inputs:
        for chain in (op.normal, op.aux_normal):
            local = chain(m)
            assert local.dtype == np.float64 and local.shape == m.shape
            np.testing.assert_array_equal(local, chain(DistVector.from_global(m)).gather(root=None))
    bad = inputs[0].copy()
    bad[4, 2] = np.nan
    with pytest.raises(FftmatvecError, match="NaN"):
        op.normal(bad)
    with pytest.raises(ConfigError, match="shape"):
        op.normal(inputs[0][:, :5])


def test_batched_rhs_equals_loop(rng):
    f = rng.standard_normal((3, 8, 7))
    op = BTTOperator(f)
    M, D = rng.standard_normal((8, 7, 5)), rng.standard_normal((3, 7, 5))
    Y, Z = op.matvec(M), op.rmatvec(D)
    assert Y.shape == (3, 7, 5) and Z.shape == (8, 7, 5)
    for k in range(5):
        assert rel_err(Y[:, :, k], direct_btt(f, M[:, :, k])) < 1e-13
        assert rel_err(Z[:, :, k], direct_btt_adjoint(f, D[:, :, k])) < 1e-13


def _stage_error_level(code: str) -> float:
    """Expected relative error scale: the unit roundoff of the lowest stage."""
    return np.finfo(np.float32).eps if "s" in code else np.finfo(np.float64).eps


@pytest.mark.parametrize("code", ALL_CODES)
def test_every_precision_code(code, rng):
    nd, nm, nt = 5, 23, 16
    f = rng.standard_normal((nd, nm, nt))
    m, d = rng.standard_normal((nm, nt)), rng.standard_normal((nd, nt))
    op = BTTOperator(f, precision=code)
    level = _stage_error_level(code)
    for got, ref in ((op.matvec(m), direct_btt(f, m)), (op.rmatvec(d), direct_btt_adjoint(f, d))):
        assert got.dtype == np.float64
        err = rel_err(got, ref)
        assert err < 200 * level
        if "s" in code:  # really computed in single somewhere: not at double accuracy
            assert err > 10 * np.finfo(np.float64).eps


def test_stage_dtypes_really_used(rng):
    op = BTTOperator(rng.standard_normal((2, 3, 4)), precision="dssdd")
    op.matvec(rng.standard_normal((3, 4)))
    ws = op.engine.workspace(False, op.precision, 1)
    assert ws.x_hat.dtype == np.complex64 and ws.y_hat.dtype == np.complex64
    scratch = {(key[0], key[2]): key[1] for key in op.backend._scratch}  # (shape, tag) -> dtype
    assert scratch[((8, 3, 1), "pad")] == np.float32 and scratch[((8, 2, 1), "unpad")] == np.float64
    assert list(op.engine.Fhat) == [np.dtype(np.complex64)]


def test_fft_output_kept_in_product_precision(rng):
    """Where the product runs in a lower precision than the FFT (ddssd), the
    transform is computed in float64 and its output kept in complex64 for the
    product: what the product's input cast would give, so the result equals
    the stages run one by one with the cast in the product."""
    f = rng.standard_normal((3, 4, 5))
    d = rng.standard_normal((3, 5))
    op = BTTOperator(f, adjoint_precision="ddssd")
    got = op.rmatvec(d)
    ws = op.engine.workspace(True, op.adjoint_precision, 1)
    assert ws.x_hat.dtype == np.complex64
    assert op.backend._scratch[((10, 3, 1), np.dtype(np.float64), "pad")] is not None  # the transform in float64
    staged = op.rmatvec(d, timer=lambda stage: contextlib.nullcontext())
    assert np.array_equal(got, staged)
    assert [parse(c).sbgemv_in for c in ("ddssd", "dssdd", "dsddd", "ddddd")] == [
        np.dtype(np.complex64), np.dtype(np.complex64), np.dtype(np.complex64), np.dtype(np.complex128)]


def test_separate_adjoint_precision(rng):
    f = rng.standard_normal((3, 5, 6))
    op = BTTOperator(f, precision="dssdd", adjoint_precision="ddddd")
    d = rng.standard_normal((3, 6))
    assert rel_err(op.rmatvec(d), direct_btt_adjoint(f, d)) < 1e-13
    assert set(op.engine.Fhat) == {np.dtype(np.complex64), np.dtype(np.complex128)}


def test_scipy_linear_operator(rng):
    f = rng.standard_normal((4, 6, 5))
    A = BTTOperator(f).aslinearoperator()
    F = dense_matrix(f)
    x, y, X = rng.standard_normal(30), rng.standard_normal(20), rng.standard_normal((30, 3))
    assert A.shape == (20, 30)
    assert rel_err(A.matvec(x), F @ x) < 1e-13
    assert rel_err(A.rmatvec(y), F.T @ y) < 1e-13
    assert rel_err(A.matmat(X), F @ X) < 1e-13
    # a SciPy solver runs on it unchanged: least squares via LSQR
    b = F @ x
    sol = spla.lsqr(A, b, atol=1e-14, btol=1e-14, iter_lim=2000)[0]
    assert rel_err(F @ sol, b) < 1e-8


def test_plans_and_buffers_reused(rng):
    op = BTTOperator(rng.standard_normal((3, 4, 5)))
    m = rng.standard_normal((4, 5))
    op.matvec(m)
    ws = op.engine.workspace(False, op.precision, 1)
    op.matvec(m)
    assert op.engine.workspace(False, op.precision, 1) is ws
    assert len(op.engine._workspaces) == 1


@pytest.mark.parametrize("code", ["ddddd", "dssds"])
def test_engine_writes_into_out(code, rng):
    """``LocalBTT.apply(out=...)`` gives the workspace result in the caller's
    array, for either direction; a timed product refuses ``out``."""
    from fftmatvec.precision import parse

    f = rng.standard_normal((3, 8, 6))
    op = BTTOperator(f, precision=code, adjoint_precision=code)
    prec = parse(code)
    for adjoint, n_in, n_out in ((False, 8, 3), (True, 3, 8)):
        x = rng.standard_normal((n_in, 6, 2)).astype(prec.pad)
        want = op.engine.apply(x, prec, adjoint=adjoint).copy()
        out = np.full((n_out, 6, 2), np.nan, prec.reduce)
        assert op.engine.apply(x, prec, adjoint=adjoint, out=out) is out
        np.testing.assert_array_equal(out, want)
        with pytest.raises(ValueError, match="untimed"):
            op.engine.apply(x, prec, adjoint=adjoint, timer=op.backend.timer(), out=out)


def test_inputs_not_modified(rng):
    f = rng.standard_normal((3, 4, 5))
    m = rng.standard_normal((4, 5))
    f0, m0 = f.copy(), m.copy()
    BTTOperator(f).matvec(m)
    assert np.array_equal(f, f0) and np.array_equal(m, m0)


@pytest.mark.parametrize("name", ["test_mat", "test_mat_qoi"])
def test_reference_fixture(reference_dir, name):
    op = BTTOperator.from_matrix_dir(reference_dir / name)
    m, _ = read_vector(reference_dir / "test_param_vec_SOTI.h5", "param")
    expected = "test_qoi_vec_SOTI.h5" if name.endswith("qoi") else "test_obs_vec_SOTI.h5"
    d, _ = read_vector(reference_dir / expected, "data")
    assert (op.Nd, op.Nm, op.Nt) == (15, 289, 10)
    assert rel_err(op.matvec(m), d) < 1e-6


def test_bad_inputs(rng):
    f = rng.standard_normal((3, 4, 5))
    op = BTTOperator(f)
    with pytest.raises(ConfigError, match="precision code"):
        BTTOperator(f, precision="ddxdd")
    with pytest.raises(ValueError, match=r"\(4, 5\)"):
        op.matvec(rng.standard_normal((5, 4)))
    bad = rng.standard_normal((4, 5))
    bad[2, 3] = np.nan
    with pytest.raises(FftmatvecError, match="NaN"):
        op.matvec(bad)
    f_bad = f.copy()
    f_bad[0, 0, 0] = np.inf
    with pytest.raises(FftmatvecError, match="NaN or Inf"):
        BTTOperator(f_bad)
    with pytest.raises(ValueError, match="shape"):
        BTTOperator(rng.standard_normal((3, 4)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_bad_matrix_values_fail_the_set_up_by_name(rng, bad):
    """The engine checks ``Fhat`` (where it lives), not ``f`` on the host: a
    bad value anywhere in ``f`` or ``aux`` still names the array, and a
    finite ``f`` whose transform overflows complex64 is refused too."""
    f = rng.standard_normal((3, 4, 5))
    for at in [(0, 0, 0), (2, 3, 4), (1, 2, 3)]:
        f_bad = f.copy()
        f_bad[at] = bad
        for precision in ("ddddd", "dssdd", "auto"):
            with pytest.raises(FftmatvecError, match="^f contains NaN or Inf$"):
                BTTOperator(f_bad, precision=precision, tolerance=1e-3 if precision == "auto" else None)
        with pytest.raises(FftmatvecError, match="^aux contains NaN or Inf$"):
            BTTOperator(f, aux=f_bad)
    big = f * 1e38
    big[1, 2] = 1e38  # finite in float64; that series' zero frequency (5e38) passes complex64's 3.4e38
    with pytest.raises(FftmatvecError, match="transform of f overflows complex64"):
        BTTOperator(big, precision="dssdd")
    assert rel_err(BTTOperator(big).matvec(np.ones((4, 5))), direct_btt(big, np.ones((4, 5)))) < 1e-13


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, None])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_finite_check_finds_each_bad_value(rng, bad, dtype):
    v = rng.standard_normal((7, 11, 3)).astype(dtype)
    if bad is not None:
        v[rng.integers(7), rng.integers(11), rng.integers(3)] = bad
    assert all_finite(np, v) == (bad is None)
    assert CPUBackend().finite_check(v)() == (bad is None)


@pytest.mark.parametrize("n, workers", [(0, 4), (1, 4), (7, 1), (7, 3), (5, 1000)])
def test_map_slices_covers_the_range_in_order(n, workers):
    seen = []
    out = map_slices(lambda s: (seen.append(s), (s.start, s.stop))[1], n, workers)
    assert len(out) == max(1, min(workers, n)) == len(seen)
    assert out[0][0] == 0 and out[-1][1] == n
    assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(out[:-1], out[1:]))  # in order, none empty
    assert sorted(out) == out


def test_frobenius_in_threads_matches_the_definition(rng, monkeypatch):
    from fftmatvec.backend import threads
    from fftmatvec.conditioning import _frobenius

    def by_definition(f):  # f_t sits in Nt - t block rows of F
        return sum((f.shape[2] - t) * np.sum(f[:, :, t] ** 2) for t in range(f.shape[2])) ** 0.5

    f = rng.standard_normal((3, 11, 7))
    for n_threads in (1, 2, 5, 64):
        monkeypatch.setattr(threads, "cores_per_rank", lambda: n_threads)
        for slab in (f, f[:, 1:10], f[1:, ::2]):  # whole, a column slab, strided
            assert abs(_frobenius(slab) - by_definition(slab)) <= 1e-14 * by_definition(slab)


@pytest.mark.parametrize("threaded_from", [0, 1 << 40])
def test_cpu_copy_into_in_threads_equals_one_assignment(rng, monkeypatch, threaded_from):
    from fftmatvec.backend import cpu

    monkeypatch.setattr(cpu, "THREADED_COPY_BYTES", threaded_from)
    be = CPUBackend(workers=3)
    z = rng.standard_normal((7, 5, 6)) + 1j * rng.standard_normal((7, 5, 6))
    assert np.array_equal(be.copy_as(z, np.complex64), z.astype(np.complex64))
    x = rng.standard_normal((6, 10))[:, ::2]  # strided, read in C order into another shape
    assert np.array_equal(be.copy_as(x, np.float32, (5, 6)), x.astype(np.float32).reshape(5, 6))


def test_map_slices_runs_under_the_callers_errstate():
    import warnings

    big = np.full(8, 1e308)
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        map_slices(lambda s: big[s] * 10, 8, 4)
    with np.errstate(over="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert all(np.isinf(part).all() for part in map_slices(lambda s: big[s] * 10, 8, 4))


def test_map_slices_inside_map_slices_runs_in_the_calling_thread():
    """A pool's thread does not wait on the pool (it could wait for ever)."""
    import threading

    def outer(s):
        me = threading.current_thread()
        return map_slices(lambda t: (t.stop - t.start, threading.current_thread() is me), 10, 4)

    parts = map_slices(outer, 6, 3)
    assert len(parts) == 3
    for inner in parts:
        assert [size for size, _ in inner] == [2, 3, 2, 3] and all(same for _, same in inner)


def test_finite_check_when_the_sum_overflows():
    big = np.full((4, 5), np.finfo(np.float64).max / 2)  # finite, but their sum overflows to inf
    assert all_finite(np, big)
    big[1, 2] = np.nan
    assert not all_finite(np, big)
    opposite = np.array([np.inf, -np.inf, 1.0])  # sums to NaN
    assert not all_finite(np, opposite)


@pytest.mark.parametrize("code", ["ddddd", "dssds", "sssss"])
@pytest.mark.parametrize("K", [None, 3])
def test_out_receives_the_product(code, K, rng):
    f = rng.standard_normal((3, 5, 7))
    op = BTTOperator(f, precision=code)
    ref_F, ref_FT = op.matvec, op.rmatvec
    m = rng.standard_normal((5, 7) + ((K,) if K else ()))
    d = rng.standard_normal((3, 7) + ((K,) if K else ()))
    for product, v, n in ((ref_F, m, 3), (ref_FT, d, 5)):
        out = np.full((n, 7) + v.shape[2:], np.nan)
        assert product(v, out=out) is out
        np.testing.assert_array_equal(out, product(v))
        assert not np.isnan(out).any()


@pytest.mark.parametrize("Ks", [(None,), (2,), (None, 2, 3)])
def test_each_product_returns_its_own_array(Ks, rng):
    """Results are new arrays (the one-process path hands out an array made
    ahead during the previous product of its direction): kept results stay as
    they were, also when the batch size changes from one product to the next."""
    f = rng.standard_normal((3, 5, 7))
    op = BTTOperator(f)
    for product, n in ((op.matvec, 5), (op.rmatvec, 3)):
        inputs = [rng.standard_normal((n, 7) + ((K,) if K else ())) for K in Ks * 3]
        results = [product(v) for v in inputs]
        for i, (v, y) in enumerate(zip(inputs, results)):
            np.testing.assert_array_equal(y, product(v.copy()))
            assert not any(np.may_share_memory(y, other) for other in results[i + 1:])


def test_results_made_ahead_up_to_a_share_of_fhat(rng, monkeypatch):
    """A result array is made ahead (during the previous product) when it is
    at most 16 MB or at most 1/64 of ``Fhat``'s bytes, whichever is larger.
    With the 16 MB floor taken away the share alone decides: the forward
    result (3 x 16 float64) is below 1/64 of this ``Fhat`` (17 x 3 x 200
    complex128), the adjoint's (200 x 16) is above it."""
    import fftmatvec.operator as operator

    monkeypatch.setattr(operator, "_SPARE_MAX_BYTES", 0)
    op = BTTOperator(rng.standard_normal((3, 200, 16)))
    assert 3 * 16 * 8 <= op.engine.Fhat[op.precision.sbgemv].nbytes / 64 < 200 * 16 * 8
    y = op.matvec(rng.standard_normal((200, 16)))
    d = op.rmatvec(rng.standard_normal((3, 16)))
    assert d.shape == (200, 16) and op.normal(rng.standard_normal((200, 16))).shape == (200, 16)
    forward = (1, False)  # one pass, the forward: F^T d and F^T F m end in results of F^T d's size
    assert set(op._spares) == {forward}
    assert op._spares[forward].shape == y.shape and not np.may_share_memory(op._spares[forward], y)


def test_inputs_of_a_signature_seen_before_are_checked_and_cast(rng):
    """The one-process path works out what an input's type, shape, dtype and
    strides imply once per signature: later inputs are still checked for
    NaN/Inf and shape, inputs of another layout or dtype are cast, and more
    signatures than it keeps give the same products."""
    f = rng.standard_normal((3, 5, 7))
    op = BTTOperator(f)
    m = rng.standard_normal((5, 7))
    ref = direct_btt(f, m)
    for _ in range(3):
        assert rel_err(op.matvec(m), ref) < 1e-13
    bad = m.copy()
    bad[4, 6] = np.inf
    with pytest.raises(FftmatvecError, match="NaN or Inf"):
        op.matvec(bad)
    with pytest.raises(ConfigError, match=r"\(5, 7\)"):
        op.matvec(rng.standard_normal((5, 6)))
    wide = np.zeros((5, 14))
    wide[:, ::2] = m
    for same in (np.asfortranarray(m), m.tolist(), wide[:, ::2]):
        assert rel_err(op.matvec(same), ref) < 1e-13
    m32 = m.astype(np.float32)
    assert rel_err(op.matvec(m32), direct_btt(f, m32.astype(np.float64))) < 1e-13
    for K in range(1, 22):  # more signatures than an operator keeps
        mk = rng.standard_normal((5, 7, K))
        yk = op.matvec(mk)
        assert yk.shape == (3, 7, K)
        assert rel_err(yk[:, :, K - 1], direct_btt(f, mk[:, :, K - 1])) < 1e-13
    assert rel_err(op.matvec(m), ref) < 1e-13


def test_out_is_checked(rng):
    f = rng.standard_normal((3, 5, 7))
    op = BTTOperator(f)
    m = rng.standard_normal((5, 7))
    for bad, needle in ((np.empty((3, 6)), "shape"), (np.empty((3, 7), np.float32), "float64"),
                        (np.empty((7, 3)).T, "C-contiguous"), ([[0.0] * 7] * 3, "numpy array")):
        with pytest.raises(ConfigError, match=needle):
            op.matvec(m, out=bad)
    square = BTTOperator(rng.standard_normal((4, 4, 7)))
    v = rng.standard_normal((4, 7))
    with pytest.raises(ConfigError, match="overlaps the input"):
        square.matvec(v, out=v)
    with pytest.raises(ConfigError, match="without a grid or a timer"):
        op.matvec(m, timer=op.backend.timer(), out=np.empty((3, 7)))


def test_each_call_checks_its_input_and_out(rng):
    """Every call checks its input's signature and its ``out``, not only a
    signature's first: after valid calls, inputs of another layout or dtype
    still give the product, an ``out`` right after the input is taken, and
    one that overlaps the input by one row, is read-only, has other strides
    or another dtype is refused, each time."""
    f = rng.standard_normal((4, 4, 7))
    op = BTTOperator(f)
    buf = rng.standard_normal((9, 7))
    m, fresh = buf[:4], np.empty((4, 7))
    ref = direct_btt(f, m)
    for inp in (m, np.asfortranarray(m), m.astype(np.float32), m):
        assert rel_err(op.matvec(inp, out=fresh), ref) < 1e-6
        assert rel_err(op.matvec(inp), ref) < 1e-6
    assert rel_err(op.matvec(m, out=buf[4:8]), ref) < 1e-13  # adjacent to the input, apart from it
    read_only = np.empty((4, 7))
    read_only.flags.writeable = False
    for bad, needle in ((buf[3:7], "overlaps the input"), (read_only, "writable"),
                        (np.empty((7, 4)).T, "C-contiguous"), (np.empty((4, 7), np.float32), "float64")):
        with pytest.raises(ConfigError, match=needle):
            op.matvec(m, out=bad)
        assert rel_err(op.matvec(m, out=fresh), ref) < 1e-13


@pytest.mark.parametrize("code", ["ddddd", "dssds", "sssss"])
@pytest.mark.parametrize("K", [None, 3])
def test_prepared_product_reads_its_input_at_each_call(code, K, rng):
    """A prepared product equals matvec/rmatvec on the input's current
    values (refilled in place between calls; the casts to the pad precision
    and back to float64 are part of its work), writes its one ``out`` and
    leaves the input as it was."""
    nd, nm, nt = 4, 9, 11
    f = rng.standard_normal((nd, nm, nt))
    op = BTTOperator(f, precision=code)
    for adjoint, n_in, n_out in ((False, nm, nd), (True, nd, nm)):
        v = rng.standard_normal((n_in, nt) + ((K,) if K else ()))
        run = op.prepare(v, adjoint=adjoint)
        assert run.input is v and run.out.shape == (n_out, nt) + v.shape[2:] and run.out.dtype == np.float64
        product = op.rmatvec if adjoint else op.matvec
        for _ in range(3):
            v[...] = rng.standard_normal(v.shape)
            kept = v.copy()
            assert run() is run.out
            np.testing.assert_array_equal(run.out, product(v))
            np.testing.assert_array_equal(v, kept)
        if code == "ddddd" and K is None:  # and against the float64 direct sums
            ref = direct_btt_adjoint(f, v) if adjoint else direct_btt(f, v)
            assert rel_err(run.out, ref) < 1e-12


@pytest.mark.parametrize("codes", [("ddddd", "ddddd"), ("dssdd", "ddssd"), ("sssss", "dssds"), ("ddsss", "sdddd")])
@pytest.mark.parametrize("K", [None, 2])
def test_prepared_normal_product_equals_normal(codes, K, rng):
    """``prepare(normal=True)`` is ``F^T F m`` as :meth:`BTTOperator.normal`
    computes it, bit for bit, for forward and adjoint codes whose result and
    pad precisions differ (the cast between the passes is its work), and the
    float64 direct sums in ``ddddd``."""
    nd, nm, nt = 3, 8, 13
    f = rng.standard_normal((nd, nm, nt))
    op = BTTOperator(f, precision=codes[0], adjoint_precision=codes[1])
    m = rng.standard_normal((nm, nt) + ((K,) if K else ()))
    out = np.full(m.shape, np.nan)
    run = op.prepare(m, normal=True, out=out)
    assert run.input is m and run.out is out
    for _ in range(2):
        m[...] = rng.standard_normal(m.shape)
        kept = m.copy()
        assert run() is out
        np.testing.assert_array_equal(out, op.normal(m))
        np.testing.assert_array_equal(m, kept)
    if codes[0] == "ddddd" and K is None:
        assert rel_err(out, direct_btt_adjoint(f, direct_btt(f, m))) < 1e-12
    with pytest.raises(ConfigError, match="shape"):
        op.prepare(m, normal=True, out=np.empty((nd, nt) + m.shape[2:]))
    with pytest.raises(ConfigError, match="adjoint"):
        op.prepare(rng.standard_normal((nd, nt)), adjoint=True, normal=True)


def test_prepared_product_of_a_strided_float32_view(rng):
    """An input that is not the pad precision's contiguous array (a float32
    transposed view) is cast into the prepared product's own buffer at each
    call: refills through the view are seen, the view's base is untouched."""
    f = rng.standard_normal((3, 6, 9))
    op = BTTOperator(f)
    base = rng.standard_normal((9, 6)).astype(np.float32)
    m = base.T  # (6, 9), not C-contiguous
    base[0, 0] = np.nan  # the values at prepare time are not the product's input
    run = op.prepare(m)
    for _ in range(2):
        base[...] = rng.standard_normal(base.shape)
        kept = base.copy()
        np.testing.assert_array_equal(run(), op.matvec(m))
        np.testing.assert_array_equal(base, kept)


def test_prepared_product_into_out_and_its_checks(rng):
    f = rng.standard_normal((3, 5, 7))
    op = BTTOperator(f)
    m = rng.standard_normal((5, 7))
    out = np.full((3, 7), np.nan)
    run = op.prepare(m, out=out)
    assert run() is out
    np.testing.assert_array_equal(out, op.matvec(m))
    for bad, needle in ((np.empty((3, 6)), "shape"), (np.empty((3, 7), np.float32), "float64"),
                        (np.empty((7, 3)).T, "C-contiguous")):
        with pytest.raises(ConfigError, match=needle):
            op.prepare(m, out=bad)
    with pytest.raises(ConfigError, match="shape"):
        op.prepare(rng.standard_normal((3, 7)))
    with pytest.raises(ConfigError, match="array of the operator's backend"):
        op.prepare([[0.0] * 7] * 5)
    square = BTTOperator(rng.standard_normal((4, 4, 7)))
    v = rng.standard_normal((4, 7))
    with pytest.raises(ConfigError, match="overlaps the input"):
        square.prepare(v, out=v)
