"""Tests of the tsunami test problem (fftmatvec.models.tsunami)."""

import numpy as np
import pytest

from fftmatvec import io
from fftmatvec.backend import threads
from fftmatvec.errors import ConfigError
from fftmatvec.models import tsunami
from fftmatvec.models.tsunami import build_model, default_config, validate_model_config

SMALL_1D = dict(length=100e3, nx=100, param_nx=6, n_sensors=4, n_qoi=2, nt=30, dt_obs=10.0)
TINY_2D = dict(dim=2, length=60e3, width=50e3, nx=12, ny=10, param_nx=3, param_ny=4,
               n_sensors=3, n_qoi=2, nt=8, dt_obs=10.0)


def btt_apply(f, m):
    """Causal block-Toeplitz product: y[i, t] = sum_j sum_{s<=t} f[i, j, t-s] m[j, s]."""
    nt = f.shape[2]
    y = np.zeros((f.shape[0], nt))
    for lag in range(nt):
        y[:, lag:] += f[:, :, lag] @ m[:, :nt - lag]
    return y


def rel_err(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


# ------------------------------------------------------------ discretisation


def test_convergence_under_grid_refinement():
    """Sensor responses converge at about second order toward the finest grid."""
    base = dict(SMALL_1D, n_qoi=1, nt=40)
    ref = build_model({**base, "nx": 1600}).p2o("adjoint")
    errs = [rel_err(build_model({**base, "nx": nx}).p2o("adjoint"), ref)
            for nx in (100, 200, 400)]
    orders = np.log2(np.array(errs[:-1]) / errs[1:])
    assert np.all(orders > 1.5), (errs, orders)
    assert errs[-1] < 0.01


def test_time_invariance():
    """An impulse during interval s gives the response to interval 0, shifted by s."""
    model = build_model(SMALL_1D)
    f, fq = model.impulse_responses()
    w = np.random.default_rng(0).standard_normal(model.Nm)
    s = 7
    m = np.zeros((model.Nm, model.Nt))
    m[:, s] = w
    d, q = model.forward(m)
    np.testing.assert_array_equal(d[:, :s], 0.0)
    scale = np.abs(d).max()
    np.testing.assert_allclose(d[:, s:], np.einsum("ijt,j->it", f[:, :, :-s], w),
                               rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(q[:, s:], np.einsum("ijt,j->it", fq[:, :, :-s], w),
                               rtol=0, atol=1e-12 * np.abs(q).max())


@pytest.mark.parametrize("config", [SMALL_1D, TINY_2D], ids=["1d", "2d"])
def test_btt_map_equals_direct_simulation(config):
    model = build_model(config)
    f, fq = model.impulse_responses()
    m = np.random.default_rng(1).standard_normal((model.Nm, model.Nt))
    d, q = model.forward(m)
    assert rel_err(btt_apply(f, m), d) < 1e-12
    assert rel_err(btt_apply(fq, m), q) < 1e-12


@pytest.mark.parametrize("config", [SMALL_1D, TINY_2D], ids=["1d", "2d"])
def test_forward_and_adjoint_impulses_agree(config):
    model = build_model(config)
    f_fwd, fq_fwd = model.impulse_responses("forward")
    f_adj, fq_adj = model.impulse_responses("adjoint")
    assert f_fwd.shape == (model.Nd, model.Nm, model.Nt)
    assert fq_fwd.shape == (model.Nq, model.Nm, model.Nt)
    assert np.abs(f_fwd).max() > 0 and np.abs(fq_fwd).max() > 0
    assert rel_err(f_adj, f_fwd) < 1e-13
    assert rel_err(fq_adj, fq_fwd) < 1e-13
    assert rel_err(model.p2o(), f_fwd) < 1e-13      # auto picks one of the two
    assert rel_err(model.p2q(), fq_fwd) < 1e-13


@pytest.mark.parametrize("n_threads", [2, 3, 1000])
def test_adjoint_impulses_in_threads_equal_one_thread(monkeypatch, n_threads):
    """The observers split over threads (uneven groups; more threads than
    observers) give the one-thread responses bit for bit."""
    model = build_model(TINY_2D)
    monkeypatch.setattr(threads, "cores_per_rank", lambda: 1)
    one = model.impulse_responses("adjoint")
    monkeypatch.setattr(threads, "cores_per_rank", lambda: n_threads)
    split = model.impulse_responses("adjoint")
    for a, b in zip(one, split):
        assert np.array_equal(a, b) and np.abs(a).max() > 0


def test_arrival_at_the_deep_water_wave_speed():
    """The pulse from the offshore edge of the patch reaches the offshore sensor
    (all in deep water) after the travel time gap / sqrt(g h)."""
    model = build_model(dict(SMALL_1D, nx=200, source_x=[0.6, 0.8], sponge_width=0.0))
    gap = model.param_coords[0, 0] - model.param_spacing[0] - model.sensor_coords[0, 0]
    travel = gap / np.sqrt(tsunami.G * model.cfg.depth_deep)
    response = np.abs(model.p2o()[0, 0])
    arrival = (np.argmax(response > 1e-2 * response.max()) + 1) * model.dt_obs
    assert 0.9 * travel < arrival < 1.2 * travel + model.dt_obs


# ------------------------------------------------------------ stability


def test_energy_bounded_over_long_run():
    cfg = dict(nx=200, param_nx=20, sponge_width=0.0, nt=20, dt_obs=60.0)
    model = build_model(cfg)
    m = np.zeros((model.Nm, 2000))
    m[:, :20] = model.true_parameter()
    e = model.energy(m)[20:]                       # source off: energy conserved
    assert 0.9 < e.min() / e[0] and e.max() / e[0] < 1.1
    model.dt *= 1.25                               # past the CFL limit it blows up
    assert not np.all(model.energy(m[:, :50])[20:] < 1.1 * e[0])
    absorbing = build_model({**cfg, "sponge_width": 0.15})
    assert absorbing.energy(m)[-1] < 1e-6 * e[0]


def test_cfl_violation_raises():
    model = build_model(SMALL_1D)
    with pytest.raises(ConfigError, match=r"model\.substeps: CFL"):
        build_model({**SMALL_1D, "substeps": model.substeps - 1})
    assert build_model({**SMALL_1D, "substeps": model.substeps + 1}).courant < model.courant


# ------------------------------------------------------------ parameters and data


def test_true_parameter_final_uplift():
    model = build_model(SMALL_1D)
    m = model.true_parameter()
    assert m.shape == (model.Nm, model.Nt) and np.all(m >= 0)
    cfg = model.cfg
    centre, radius = cfg.rupture_center[0] * cfg.length, cfg.rupture_radius[0] * cfg.length
    uplift = np.exp(-0.5 * ((model.param_coords[:, 0] - centre) / radius) ** 2)
    np.testing.assert_allclose(m.sum(axis=1) * model.dt_obs, uplift, atol=1e-12)


def test_pressure_sensors_scale_height():
    height = build_model(SMALL_1D).p2o()
    pressure = build_model({**SMALL_1D, "sensor_kind": "pressure"}).p2o()
    assert rel_err(pressure, tsunami.RHO * tsunami.G * height) < 1e-14


def test_noise_levels():
    model = build_model(SMALL_1D)
    d = np.random.default_rng(2).standard_normal((model.Nd, 5000))
    d_obs, sigma = model.add_noise(d)
    assert sigma == pytest.approx(0.01 * np.abs(d).max())
    assert np.std(d_obs - d) == pytest.approx(sigma, rel=0.05)
    d_obs, sigma = build_model({**SMALL_1D, "noise_std": 0.5, "noise_rel": 0.0}).add_noise(d)
    assert sigma == 0.5 and np.std(d_obs - d) == pytest.approx(0.5, rel=0.05)


def test_default_geometry():
    one = build_model({})
    assert (one.Nm, one.Nd, one.Nq, one.Nt) == (150, 8, 1, 150)
    two = build_model({"dim": 2})
    assert (two.Nm, two.Nd, two.Nq, two.Nt) == (3000, 80, 30, 500)
    assert two.param_coords.shape == (3000, 2)
    patch = two.param_coords.reshape(*two.param_shape, 2)
    np.testing.assert_allclose(np.diff(patch[:, 0, 0]), two.param_spacing[0])
    np.testing.assert_allclose(np.diff(patch[0, :, 1]), two.param_spacing[1])
    assert two.courant <= two.cfg.cfl
    assert np.all(two.depth[0] > two.depth[-1])                 # deep offshore, shelf at coast


# ------------------------------------------------------------ configuration


@pytest.mark.parametrize("table, key", [
    ({"nx_cells": 100}, "nx_cells"),                            # unknown key
    ({"nx": "100"}, "nx"),                                      # wrong type
    ({"nx": 100.0}, "nx"),
    ({"dim": True}, "dim"),
    ({"length": "far"}, "length"),
    ({"source_x": [0.3]}, "source_x"),
    ({"rupture_center": [0.5, 0.5]}, "rupture_center"),
    ({"sensor_kind": 1}, "sensor_kind"),
    ({"ny": 100}, "ny"),                                        # 2-D key in 1-D
    ({"dim": 3}, "dim"),                                        # out of range
    ({"nx": 2}, "nx"),
    ({"cfl": 1.5}, "cfl"),
    ({"source_x": [0.8, 0.2]}, "source_x"),
    ({"sensor_kind": "gps"}, "sensor_kind"),
    ({"noise_std": 0.1}, "noise_rel"),                          # both noise levels set
    ({"param_nx": 1000}, "param_nx"),                           # finer than the grid
])
def test_config_rejected_with_key(table, key):
    with pytest.raises(ConfigError, match=rf"model\.{key}\b"):
        build_model(table)


def test_config_defaults_and_conversion():
    for dim in (1, 2):
        cfg = validate_model_config({"dim": dim})
        assert cfg == validate_model_config(default_config(dim))
    cfg = validate_model_config({"length": 50000, "source_x": [0, 1]})
    assert cfg.length == 50000.0 and isinstance(cfg.length, float)
    assert cfg.source_x == (0.0, 1.0) and cfg.width is None


# ------------------------------------------------------------ generate


def test_generate_writes_readable_files(tmp_path):
    model = build_model(SMALL_1D)
    paths = tsunami.generate(SMALL_1D, tmp_path / "out")
    f, meta = io.read_matrix(paths["p2o"])
    fq, meta_q = io.read_matrix(paths["p2q"])
    assert (meta.Nd, meta.Nm, meta.Nt, meta.is_p2q) == (model.Nd, model.Nm, model.Nt, False)
    assert (meta_q.Nd, meta_q.is_p2q) == (model.Nq, True)
    assert rel_err(f, model.p2o()) < 1e-13
    m_true, info = io.read_vector(paths["m_true"], "param")
    assert info.n == model.Nm and rel_err(m_true, model.true_parameter()) == 0
    d_true, _ = io.read_vector(paths["d_true"], "data", qoi=False)
    d_obs, _ = io.read_vector(paths["d_obs"], "data", qoi=False)
    q_true, info_q = io.read_vector(paths["q_true"], "data", qoi=True)
    assert info_q.n == model.Nq
    assert rel_err(btt_apply(f, m_true), d_true) < 1e-12
    assert rel_err(btt_apply(fq, m_true), q_true) < 1e-12
    assert 0 < rel_err(d_obs, d_true) < 0.1
    assert paths["model"].is_file()
