"""The inversion on the GPU (``fftmatvec invert --device gpu``): the MAP point
and the QoI band the CPU gives, with every product of ``F``, ``F^T``,
``F^T F`` and ``Q`` on the device.  Skipped without CuPy or a GPU."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import write_inversion_config
from gputools import require_gpu

require_gpu()

from fftmatvec.cli import main  # noqa: E402
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
