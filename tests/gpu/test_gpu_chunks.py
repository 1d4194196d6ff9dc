"""GPU: forward products by chunks of block rows (``reduce_chunks``) and the
forward kernel on a block of rows of ``Fhat`` read in place.

Skipped without CuPy or a visible GPU.  References: ``numpy`` products in
float64 and the CPU backend's one-piece product.
"""

import numpy as np
import pytest

from gputools import require_gpu

cupy = require_gpu()

from fftmatvec import BTTOperator  # noqa: E402
from fftmatvec.backend.cpu import CPUBackend  # noqa: E402
from fftmatvec.backend.gpu import GPUBackend  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu():
    return GPUBackend()


@pytest.fixture(scope="module")
def native_gpu():
    be = GPUBackend()
    be.blas_min_k = {key: 10**6 for key in be.blas_min_k}
    be.fwd_splits = 3
    return be


@pytest.fixture
def rng():
    return np.random.default_rng(20240612)


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.linalg.norm((a - b).ravel()) / np.linalg.norm(b.ravel()))


@pytest.mark.parametrize("ta,tx", [(np.complex128, np.complex128), (np.complex64, np.complex64),
                                   (np.complex64, np.complex128)], ids=["zz", "cc", "cz"])
@pytest.mark.parametrize("which", ["default", "native"])
def test_sbgemv_on_row_blocks(gpu, native_gpu, rng, ta, tx, which):
    be = gpu if which == "default" else native_gpu
    tol = 1e-13 if ta == np.complex128 else 2e-5
    for nf, nd, nm in ((3, 9, 33), (4, 7, 64), (2, 100, 5000), (5, 6, 1)):
        A = (rng.standard_normal((nf, nd, nm)) + 1j * rng.standard_normal((nf, nd, nm))).astype(ta)
        A_dev = cupy.asarray(A)
        for K in (1, 3, 6):
            x = (rng.standard_normal((nf, nm, K)) + 1j * rng.standard_normal((nf, nm, K))).astype(tx)
            x_dev = cupy.asarray(x)
            for i0, i1 in ((0, 1), (1, 4), (3, nd), (0, nd)):
                out = cupy.full((nf, i1 - i0, K), np.nan, dtype=ta)
                be.sbgemv(A_dev[:, i0:i1], x_dev, out, adjoint=False)
                ref = A[:, i0:i1].astype(np.complex128) @ x.astype(ta).astype(np.complex128)
                assert rel(out.get(), ref) < tol, (nf, nd, nm, K, i0, i1)
    with pytest.raises(ValueError, match="contiguous"):
        be.sbgemv(A_dev[:, 1:3], cupy.zeros((nf, 2, 1), tx), cupy.zeros((nf, nm, 1), ta), adjoint=True)


@pytest.mark.parametrize("shape", [(5, 7, 6), (12, 300, 20), (40, 9, 11), (50, 1000, 16)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("code", ["ddddd", "dssdd"])
@pytest.mark.parametrize("chunks", [2, 3, 4])
def test_chunked_forward_vs_cpu(gpu, rng, shape, code, chunks):
    nd, nm, nt = shape
    f = rng.standard_normal(shape)
    op = BTTOperator(f, precision=code, device=gpu, reduce_chunks=chunks)
    op_c = BTTOperator(f, precision="ddddd", device=CPUBackend(workers=1))
    tol = 1e-13 if code == "ddddd" else 2e-5
    for K in (None, 3):
        x = rng.standard_normal((nm, nt) if K is None else (nm, nt, K))
        ref = op_c.matvec(x)
        for _ in range(2):
            assert rel(op.matvec(x), ref) < tol
        timer = gpu.timer()
        assert rel(op.matvec(x, timer=timer), ref) < tol
        assert {"pad", "fft", "sbgemv", "ifft", "unpad"} <= set(timer.times)
    # device input and output
    x = cupy.asarray(rng.standard_normal((nm, nt)))
    y = op.matvec(x)
    assert isinstance(y, cupy.ndarray) and rel(y.get(), op_c.matvec(x.get())) < tol
