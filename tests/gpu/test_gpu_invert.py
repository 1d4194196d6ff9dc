"""The inversion on the GPU (``fftmatvec invert --device gpu``): the MAP point
and the QoI band the CPU gives, with every product of ``F``, ``F^T``,
``F^T F`` and ``Q``, the priors and the solvers' vectors on the device.
Skipped without CuPy or a GPU."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import write_inversion_config
from gputools import require_gpu

require_gpu()

from fftmatvec import BTTOperator, ReplicatedOperator  # noqa: E402
from fftmatvec.backend.arrays import matmul_each, to_host  # noqa: E402
from fftmatvec.cli import main  # noqa: E402
from fftmatvec.inversion import (  # noqa: E402
    DataSpaceCholesky,
    LowRankPosterior,
    MaternPrior,
    WhiteNoise,
    WhitePrior,
    qoi_forecast,
    solve_map,
)
from fftmatvec.io import read_vector  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tsunami-gpu")
    assert main(["generate", str(write_inversion_config(folder)), "--quiet"]) == 0
    return folder


@pytest.mark.parametrize("method, tol", [("cholesky-data", 1e-10), ("cg-data", 1e-8), ("cg-parameter", 1e-8)])
def test_inversion_on_the_gpu_equals_the_cpu(model_dir, method, tol):
    # the GPU sums each product in another order: rounding, amplified by the conditioning over the CG
    # iterations (as the four-rank test in tests/unit/test_invert.py), stays below the tolerances
    results = {}
    for device in ("cpu", "gpu"):
        out = f"{method}-{device}"
        cfg = write_inversion_config(model_dir, method=method, out=out)
        assert main(["invert", str(cfg), "--quiet", "--device", device]) == 0
        summary = json.loads((model_dir / out / "summary.json").read_text())
        results[device] = [read_vector(model_dir / out / name)[0] for name in ("map.h5", "qoi_mean.h5", "qoi_std.h5")]
        assert summary["device"] == device, summary.get("device")
    for cpu, gpu in zip(results["cpu"], results["gpu"]):
        assert np.linalg.norm(gpu - cpu) <= tol * np.linalg.norm(cpu)


PRIORS = {
    "white": lambda xp: WhitePrior((12, 7), std=np.linspace(0.5, 1.5, 12)[:, None], mean=0.3, xp=xp),
    "matern-1d": lambda xp: MaternPrior(12, 7, std=1.3, corr_length=2.0, mean=0.3, xp=xp),
    "matern-2d-time": lambda xp: MaternPrior((3, 4), 7, std=1.3, corr_length=2.0, time_corr_length=3.0,
                                             mean=np.linspace(-1, 1, 12)[:, None], xp=xp),
    # a grid axis longer than DENSE_DCT_MAX["cupy"]: the FFT-based DCT of cupyx
    "matern-2d-long": lambda xp: MaternPrior((2, 2100), 7, std=1.3, corr_length=200.0, xp=xp),
}


@pytest.mark.parametrize("kind", PRIORS)
def test_a_prior_on_the_gpu_equals_the_host(kind):
    cupy = require_gpu()
    host, device = PRIORS[kind](np), PRIORS[kind](cupy)
    x = np.random.default_rng(5).standard_normal(host.dims + (3,))
    for method in ("sqrt", "apply", "inv"):
        y = getattr(device, method)(cupy.asarray(x))
        assert isinstance(y, cupy.ndarray), method
        np.testing.assert_allclose(y.get(), getattr(host, method)(x), rtol=1e-12, atol=1e-12 * abs(y).max().item())
    draw = device.sample(np.random.default_rng(9), K=2)
    assert isinstance(draw, cupy.ndarray)
    np.testing.assert_allclose(draw.get(), host.sample(np.random.default_rng(9), K=2), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("shape", [(1, 5, 7), (3, 75, 500), (40, 1, 2), (2, 9, 1), (0, 4, 3)])
@pytest.mark.parametrize("transpose", [False, True])
def test_matmul_each_calls_cublas_as_numpy_multiplies(shape, transpose):
    """The direct cuBLAS call (row-major data through a column-major GEMM,
    ``C`` shared by the batch) against NumPy, also on a strided input, and
    left alone in another stream's and pointer mode's state; float32 takes
    ``cupy.matmul``."""
    cupy = require_gpu()
    from cupy_backends.cuda.libs import cublas

    rng = np.random.default_rng(11)
    lead, n, m = shape
    C, x = rng.standard_normal((n, n)), rng.standard_normal(shape)
    want = np.matmul(C.T if transpose else C, x)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        got = matmul_each(cupy.asarray(C), cupy.asarray(x), transpose=transpose)
        wide = cupy.zeros((lead, n, 2 * m))
        wide[:, :, ::2] = cupy.asarray(x)
        strided = matmul_each(cupy.asarray(C), wide[:, :, ::2], transpose=transpose)
    stream.synchronize()
    for y in (got, strided):
        assert isinstance(y, cupy.ndarray) and y.shape == shape
        np.testing.assert_allclose(y.get(), want, rtol=1e-12, atol=1e-12 * max(1.0, abs(want).max(initial=0)))
    handle = cupy.cuda.device.get_cublas_handle()
    before = cublas.getPointerMode(handle)
    cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_DEVICE)  # alpha and beta still read from the host
    try:
        again = matmul_each(cupy.asarray(C), cupy.asarray(x), transpose=transpose)
        assert cublas.getPointerMode(handle) == cublas.CUBLAS_POINTER_MODE_DEVICE
    finally:
        cublas.setPointerMode(handle, before)
    np.testing.assert_array_equal(again.get(), got.get())
    single = matmul_each(cupy.asarray(C, np.float32), cupy.asarray(x, np.float32), transpose=transpose)
    assert single.dtype == np.float32
    np.testing.assert_allclose(single.get(), want, rtol=1e-4, atol=1e-4 * max(1.0, abs(want).max(initial=0)))


@pytest.mark.parametrize("method", ["cg-parameter", "cg-data", "cholesky-data"])
def test_the_inversion_keeps_its_vectors_on_the_gpu(method):
    # operator, prior, noise and data on the GPU: every solver and the QoI band return device arrays,
    # equal to the host's; the per-entry noise std lives on the device too
    cupy = require_gpu()
    rng = np.random.default_rng(11)
    decay = np.exp(-np.arange(7) / 2.0)
    f, q = rng.standard_normal((3, 12, 7)) * decay, rng.standard_normal((2, 12, 7)) * decay
    d = rng.standard_normal((3, 7))
    results = {}
    for xp, device in ((np, "cpu"), (cupy, "gpu")):
        F, Q = (ReplicatedOperator(BTTOperator(a, device=device)) for a in (f, q))
        assert F.xp is xp
        prior = PRIORS["matern-1d"](xp)
        noise = WhiteNoise.relative(xp.asarray(d), 0.05, per_entry=True)
        options = {} if method == "cholesky-data" else dict(rtol=1e-12, maxiter=200)
        result = solve_map(F, prior, noise, xp.asarray(d), method=method, **options)
        posterior = (DataSpaceCholesky(F, prior, noise) if method == "cholesky-data"
                     else LowRankPosterior(F, prior, noise, 21))
        forecast = qoi_forecast(Q, result.m, posterior)
        for value in (result.m, forecast.mean, forecast.std, noise.std):
            assert isinstance(value, xp.ndarray)
        results[device] = [to_host(v) for v in (result.m, forecast.mean, forecast.std)]
    for cpu, gpu in zip(results["cpu"], results["gpu"]):
        assert np.linalg.norm(gpu - cpu) <= 1e-9 * np.linalg.norm(cpu)
