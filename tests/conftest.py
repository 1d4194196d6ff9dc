"""Shared fixtures: seeded random generators, the C++ reference data, dense references."""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


def _fixture_dir() -> Path | None:
    candidates = (os.environ.get("FFTMATVEC_FIXTURES"), REPO.parent / "shared" / "fixtures", REPO / "inputs" / "reference")
    for candidate in candidates:
        if not candidate:
            continue
        path = Path(candidate)
        for p in (path, path / "fftmatvec-reference"):
            if (p / "test_mat").is_dir():
                return p
    return None


@pytest.fixture
def reference_dir() -> Path:
    """The FFTMatvec C++ reference data (``test_mat``, ``test_mat_qoi``, vectors)."""
    path = _fixture_dir()
    if path is None:
        pytest.skip("reference fixture not found: set FFTMATVEC_FIXTURES (inputs/reference is a copy)")
    return path


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A fresh seed per test run, printed on failure through the test id's node."""
    seed = int.from_bytes(os.urandom(4), "little") if os.environ.get("FFTMATVEC_SEED") is None else int(os.environ["FFTMATVEC_SEED"])
    request.node.user_properties.append(("seed", seed))
    print(f"seed={seed} (rerun with FFTMATVEC_SEED={seed})")
    return np.random.default_rng(seed)


@pytest.fixture
def model_times(monkeypatch) -> None:
    """``precision="auto"`` measures errors as always but times by a model
    (1 per double-precision stage, 0.6 per single), so that a test's choice
    does not hang on this machine's timing noise at test sizes."""
    import dataclasses

    import fftmatvec.tuning as tuning

    measured = tuning.measure_engine

    def with_model_times(*args, **kwargs):
        t = measured(*args, **kwargs)
        model = [e if math.isnan(e.time) else dataclasses.replace(e, time=sum(1.0 if c == "d" else 0.6 for c in e.code))
                 for e in t.entries]
        return dataclasses.replace(t, entries=model)

    monkeypatch.setattr(tuning, "measure_engine", with_model_times)


def direct_btt(f: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``F m`` by the defining double sum (float64), f (Nd, Nm, Nt), m (Nm, Nt)."""
    nd, nm, nt = f.shape
    y = np.zeros((nd, nt))
    for t in range(nt):
        for s in range(t + 1):
            y[:, t] += f[:, :, t - s] @ m[:, s]
    return y


def direct_btt_adjoint(f: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``F^T d`` by the defining double sum, d (Nd, Nt)."""
    nd, nm, nt = f.shape
    m = np.zeros((nm, nt))
    for s in range(nt):
        for t in range(s, nt):
            m[:, s] += f[:, :, t - s].T @ d[:, t]
    return m


def dense_btt(f: np.ndarray) -> np.ndarray:
    """The dense ``(Nd*Nt, Nm*Nt)`` matrix of ``f`` (Nd, Nm, Nt) in float64:
    block (i, j) is lower-triangular Toeplitz, entry (t, s) = f[i, j, t - s]."""
    nd, nm, nt = f.shape
    F = np.zeros((nd, nt, nm, nt))
    for t in range(nt):
        for s in range(t + 1):
            F[:, t, :, s] = f[:, :, t - s]
    return F.reshape(nd * nt, nm * nt)


def rel_err(a, b) -> float:
    """``||a - b|| / ||b||`` over all entries (real or complex host arrays; 0/0 is 0)."""
    a, b = np.asarray(a), np.asarray(b)
    nb = np.linalg.norm(b.ravel())
    return float(np.linalg.norm((a - b).ravel()) / (nb if nb else 1.0))


def benchmark_module(name: str) -> ModuleType:
    """The script ``benchmarks/<name>.py`` loaded as a module (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The small 1-D tsunami-style inversion of the tests of `fftmatvec generate` and `fftmatvec invert`.
SMALL_MODEL = """
[model]
dim = 1
nx = 200
nt = 60
param_nx = 40
n_sensors = 5
n_qoi = 2
qoi_x = [0.8, 0.9]
noise_std = 0.01
noise_rel = 0.0
seed = 3

[generate]
dir = "model"
"""

INVERT = """
[operator]
matrix = "model/p2o"
qoi_matrix = "model/p2q"

[data]
observations = "model/d_obs.h5"
truth = "model/m_true.h5"
qoi_truth = "model/q_true.h5"

[noise]
std = 0.01

[prior]
kind = "{kind}"
std = 0.005
correlation_length = 40e3

[solver]
method = "{method}"
rtol = 1e-11
maxiter = {maxiter}
checkpoint_every = {checkpoint_every}
rank = 310

[output]
dir = "{out}"
plots = {plots}
"""


def write_inversion_config(folder: Path, *, kind="matern", method="cholesky-data", maxiter=2000,
                 checkpoint_every=0, out="out", plots="false") -> Path:
    """A config of the small 1-D tsunami-style model (``[model]`` and
    ``[generate]`` into ``folder/model``) and its inversion into
    ``folder/out``: ``fftmatvec generate`` and ``fftmatvec invert`` take it."""
    path = folder / f"{method}-{out}.toml"
    path.write_text(SMALL_MODEL + INVERT.format(kind=kind, method=method, maxiter=maxiter,
                                                checkpoint_every=checkpoint_every, out=out, plots=plots))
    return path
