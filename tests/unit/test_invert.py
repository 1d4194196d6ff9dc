"""``fftmatvec generate`` + ``fftmatvec invert``: the main job end to end."""

from __future__ import annotations

import json
import re
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import write_inversion_config

from fftmatvec.cli import main
from fftmatvec.io import read_vector, write_vector

REPO = Path(__file__).resolve().parents[2]

@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tsunami")
    assert main(["generate", str(write_inversion_config(folder)), "--quiet"]) == 0
    return folder


def summary(folder: Path, out: str) -> dict:
    return json.loads((folder / out / "summary.json").read_text())


def test_generate_writes_the_model(model_dir):
    for name in ("p2o/binary/meta_adj", "p2q/binary/meta_adj", "m_true.h5", "d_obs.h5", "d_true.h5", "q_true.h5", "model.json"):
        assert (model_dir / "model" / name).exists(), name


def test_recovers_truth_and_band_covers_qoi(model_dir):
    cfg = write_inversion_config(model_dir, out="main", plots="true")
    assert main(["invert", str(cfg), "--quiet"]) == 0
    s = summary(model_dir, "main")
    assert s["errors"]["map_vs_truth"] < 0.9 * s["errors"]["prior_mean_vs_truth"]
    assert s["errors"]["qoi_band_coverage"] > 0.8
    for name in ("map.h5", "qoi_mean.h5", "qoi_std.h5", "map.png", "qoi.png"):
        assert (model_dir / "main" / name).exists(), name
    _, info = read_vector(model_dir / "main" / "qoi_std.h5", "data")
    assert info.qoi and info.n == 2
    assert s["sizes"] == {"Nd": 5, "Nm": 40, "Nt": 60, "Nq": 2} and s["device"] == "cpu"


@pytest.mark.parametrize("kind", ["white", "matern"])
def test_three_methods_agree(model_dir, kind):
    maps, stds = {}, {}
    for method in ("cholesky-data", "cg-data", "cg-parameter"):
        out = f"{kind}-{method}"
        assert main(["invert", str(write_inversion_config(model_dir, kind=kind, method=method, out=out)), "--quiet"]) == 0
        maps[method] = read_vector(model_dir / out / "map.h5")[0]
        stds[method] = read_vector(model_dir / out / "qoi_std.h5")[0]
        if method != "cholesky-data":
            assert summary(model_dir, out)["solver"]["cg"]["converged"]
    ref = maps["cholesky-data"]
    for method in ("cg-data", "cg-parameter"):
        assert np.linalg.norm(maps[method] - ref) <= 1e-7 * np.linalg.norm(ref)  # CG at rtol 1e-11, cond ~1e4
    # low-rank posterior std at full rank (Nd*Nt = 300) against the exact one from the Cholesky factor
    exact = stds["cholesky-data"]
    assert np.linalg.norm(stds["cg-parameter"] - exact) <= 1e-6 * np.linalg.norm(exact)


def test_checkpoint_resume_equals_uninterrupted(model_dir):
    full = write_inversion_config(model_dir, method="cg-parameter", out="full")
    assert main(["invert", str(full), "--quiet"]) == 0
    # "interrupted" after 7 iterations with a checkpoint every 3, then resumed
    cut = write_inversion_config(model_dir, method="cg-parameter", out="resumed", maxiter=7, checkpoint_every=3)
    assert main(["invert", str(cut), "--quiet"]) == 0
    assert (model_dir / "resumed" / "checkpoint.npz").exists()
    assert not summary(model_dir, "resumed")["solver"]["cg"]["converged"]
    again = write_inversion_config(model_dir, method="cg-parameter", out="resumed", checkpoint_every=3)
    assert main(["invert", str(again), "--quiet", "--resume"]) == 0
    a = read_vector(model_dir / "full" / "map.h5")[0]
    b = read_vector(model_dir / "resumed" / "map.h5")[0]
    assert np.array_equal(a, b)
    assert summary(model_dir, "resumed")["solver"]["cg"]["iterations"] == summary(model_dir, "full")["solver"]["cg"]["iterations"]


def test_cg_progress_is_a_line_a_second(model_dir, capsys, monkeypatch):
    """CG's progress: the first iteration, then at most a line every PROGRESS_SECONDS, then one line with
    the iterations and the relative residual."""
    from fftmatvec.inversion import driver

    cfg = write_inversion_config(model_dir, method="cg-parameter", out="progress")
    for seconds, most in ((1e-9, None), (3600.0, 1)):
        monkeypatch.setattr(driver, "PROGRESS_SECONDS", seconds)
        assert main(["invert", str(cfg)]) == 0
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.startswith("  CG ")]
        iterations = summary(model_dir, "progress")["solver"]["cg"]["iterations"]
        assert len(lines) == (iterations if most is None else most) and lines[0].startswith("  CG    1  residual")
        assert re.search(rf"converged after {iterations} iterations \(relative residual \d\.\de-\d+\)", err)
    # zero data and a zero prior mean: nothing to fit (||b|| = 0), converged before the first iteration
    d = read_vector(model_dir / "model" / "d_obs.h5", "data")[0]
    write_vector(model_dir / "zero_d.h5", np.zeros_like(d), "data")
    cfg.write_text(cfg.read_text().replace('"model/d_obs.h5"', '"zero_d.h5"'))
    assert main(["invert", str(cfg)]) == 0
    assert "converged after 0 iterations (relative residual 0.0e+00)" in capsys.readouterr().err


def test_bad_configs_name_the_key(model_dir, capsys):
    good = write_inversion_config(model_dir).read_text()
    cases = [
        ("[prior]\nkind = \"matern\"", "[prior]\nkind = \"gauss\"", "prior.kind"),
        ("[noise]\nstd = 0.01", "[noise]\nstd = \"big\"", "noise.std"),
        ("[solver]\n", "[solver]\ncolour = 3\n", "solver.colour"),
        ("[solver]\n", "[solver]\ncheckpoint_seconds = -5\n", "checkpoint_seconds"),
    ]
    for old, new, key in cases:
        assert old in good
        bad = model_dir / "bad.toml"
        bad.write_text(good.replace(old, new))
        assert main(["invert", str(bad)]) == 2
        assert key in capsys.readouterr().err
    bad.write_text(good.replace("model/d_obs.h5", "model/missing.h5"))
    assert main(["invert", str(bad), "--quiet"]) == 1
    assert "missing.h5" in capsys.readouterr().err
    bad.write_text(good.replace('observations = "model/d_obs.h5"', 'observations = "model/m_true.h5"'))
    assert main(["invert", str(bad), "--quiet"]) == 1
    assert "m_true.h5" in capsys.readouterr().err


def _mpiexec() -> str | None:
    local = Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else shutil.which("mpiexec")


@pytest.mark.timeout(240)
def test_four_ranks_match_one_process(model_dir):
    mpiexec = _mpiexec()
    if mpiexec is None:
        pytest.skip("no mpiexec")
    pytest.importorskip("mpi4py")
    # the grid sums partial products in another order: rounding, amplified by
    # the conditioning over a few hundred CG iterations, stays below the tolerances
    for method, tol in (("cholesky-data", 1e-10), ("cg-parameter", 1e-8)):
        one = write_inversion_config(model_dir, method=method, out=f"one-{method}")
        four = write_inversion_config(model_dir, method=method, out=f"four-{method}")
        assert main(["invert", str(one), "--quiet"]) == 0
        env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
        proc = subprocess.run([mpiexec, "-n", "4", sys.executable, "-m", "fftmatvec", "invert", str(four), "--quiet"],
                              capture_output=True, text=True, env=env, timeout=200)
        assert proc.returncode == 0, proc.stderr
        a = read_vector(model_dir / f"one-{method}" / "map.h5")[0]
        b = read_vector(model_dir / f"four-{method}" / "map.h5")[0]
        assert np.linalg.norm(a - b) <= tol * np.linalg.norm(a)
        assert summary(model_dir, f"four-{method}")["grid"] != [1, 1]


@pytest.mark.timeout(240)
def test_precision_auto_on_four_ranks(model_dir):
    """``precision = "auto"`` in a job of several ranks (a ConfigError before
    stop 63): every rank measures through the grid's products and the job
    runs the codes chosen, the MAP point within the tolerance's reach."""
    mpiexec = _mpiexec()
    if mpiexec is None:
        pytest.skip("no mpiexec")
    pytest.importorskip("mpi4py")
    ref = write_inversion_config(model_dir, out="auto4-ref")
    cfg = write_inversion_config(model_dir, out="auto4")
    cfg.write_text(cfg.read_text().replace("[operator]\n", '[operator]\nprecision = "auto"\ntolerance = 1e-6\n'))
    assert main(["invert", str(ref), "--quiet"]) == 0
    env = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([mpiexec, "-n", "4", sys.executable, "-m", "fftmatvec", "invert", str(cfg), "--quiet"],
                          capture_output=True, text=True, env=env, timeout=200)
    assert proc.returncode == 0, proc.stderr
    done = summary(model_dir, "auto4")
    assert done["grid"] != [1, 1] and all(len(c) == 5 for c in done["precision"].values())
    exact, got = read_vector(model_dir / "auto4-ref" / "map.h5")[0], read_vector(model_dir / "auto4" / "map.h5")[0]
    assert np.linalg.norm(got - exact) <= 1e-3 * np.linalg.norm(exact)


def test_precision_auto_is_chosen_and_reported(model_dir, model_times):
    ref = write_inversion_config(model_dir, out="auto-ref")
    cfg = write_inversion_config(model_dir, out="auto")
    cfg.write_text(cfg.read_text().replace("[operator]\n", '[operator]\nprecision = "auto"\ntolerance = 1e-6\n'))
    assert main(["invert", str(ref), "--quiet"]) == 0
    assert main(["invert", str(cfg), "--quiet"]) == 0
    chosen = summary(model_dir, "auto")["precision"]
    assert len(chosen["forward"]) == 5 and set(chosen["forward"] + chosen["adjoint"]) <= {"s", "d"}
    assert "s" in chosen["forward"]  # 1e-6 is within single precision's reach here
    exact = read_vector(model_dir / "auto-ref" / "map.h5")[0]
    got = read_vector(model_dir / "auto" / "map.h5")[0]
    err = np.linalg.norm(got - exact) / np.linalg.norm(exact)
    assert 1e-12 < err < 1e-3  # really computed in single, and still the same MAP
    assert set(summary(model_dir, "auto")["qoi_precision"]) == {"forward", "adjoint"}  # Q's own choice
    # the chosen codes given in the config: no measurement, the same MAP point bit for bit
    fixed = write_inversion_config(model_dir, out="fixed")
    fixed.write_text(fixed.read_text().replace(
        "[operator]\n", f'[operator]\nprecision = "{chosen["forward"]}"\nadjoint_precision = "{chosen["adjoint"]}"\n'))
    assert main(["invert", str(fixed), "--quiet"]) == 0
    assert summary(model_dir, "fixed")["precision"] == chosen
    np.testing.assert_array_equal(read_vector(model_dir / "fixed" / "map.h5")[0], got)
