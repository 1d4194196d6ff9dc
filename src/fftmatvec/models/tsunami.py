"""Tsunami-style test problem: linear shallow-water waves with BTT impulse responses.

Physics (design.md section 6): over a bathymetry ``h`` on a regular 1-D
(``x``) or 2-D (``x``, ``y``) grid,

    eta_t + div(h u) = s(x, t),      u_t + g grad(eta) = 0,

with ``eta`` the surface height, ``u`` the depth-averaged velocity and ``s``
the seafloor uplift rate.  ``x = 0`` is offshore (deep water, a sponge layer
that absorbs outgoing waves), ``x = length`` is a reflecting coast behind a
shallow shelf; in 2-D the along-coast ends ``y = 0`` and ``y = width`` carry
sponges too.

Discretisation: a staggered (Arakawa C) grid, ``eta`` at the cell centres,
``u`` normal to the interior faces (zero on the boundary: walls), and
symplectic Euler in time,

    eta <- a_e (eta - dt div(h u) + dt s),    u <- a_u (u - dt g grad(eta)),

where ``a = 1 / (1 + dt sigma)`` is implicit sponge damping (1 outside the
sponges).  It is stable when the Courant number
``dt sqrt(g max h) sqrt(sum 1/dx_a^2)`` is at most 1; the internal step is
``dt_obs / substeps``.

Parameters: uplift rate on a regular ``param_nx`` (x ``param_ny``) patch of
nodes, interpolated onto the cells by (bi)linear hat functions and constant
over each observation interval ``[t dt_obs, (t+1) dt_obs)``.  Observations:
``eta`` (or bottom pressure ``rho g eta``) at ``Nd`` sensors, interpolated
(bi)linearly from the cell centres, at the end of every interval; QoIs:
``eta`` at ``Nq`` points near the coast.  The map from ``m`` (Nm, Nt) to
``d`` (Nd, Nt) is then exactly block-triangular Toeplitz:

    d_i(t) = sum_j sum_{s <= t} f_ij(t - s) m_j(s).

:meth:`TsunamiModel.p2o` computes the first block column ``f`` either with
one batched forward solve (all ``Nm`` parameter impulses at once) or with one
batched solve of the exact discrete adjoint (all ``Nd`` sensors at once),
whichever batch is smaller; both agree to rounding.

The ``[model]`` configuration table is checked by
:func:`validate_model_config`; its keys, types and defaults are listed in
:data:`SCHEMA` (:func:`default_config` gives the defaults for 1-D or 2-D).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from fftmatvec.backend.threads import map_slices
from fftmatvec.errors import ConfigError
from fftmatvec.io import atomic_path, write_matrix, write_vector

G = 9.81
"""Gravitational acceleration (m/s^2)."""
RHO = 1025.0
"""Sea-water density (kg/m^3); a pressure sensor reports ``RHO * G * eta`` (Pa)."""
SPONGE_STRENGTH = 10.0
"""Peak sponge damping rate in units of ``sqrt(g depth_deep) / sponge width``."""

# name: (kind, 1-D default, 2-D default, meaning); a 1-D default of None marks
# a key valid only with dim = 2.
# Kinds: "int", "float", "str", "range" (two fractions lo <= hi), "dim" (one
# float per axis).
SCHEMA: dict[str, tuple[str, Any, Any, str]] = {
    "dim": ("int", 1, 2, "1 or 2 space dimensions"),
    "length": ("float", 400e3, 300e3, "x extent (m), offshore x=0 to the coast"),
    "width": ("float", None, 600e3, "y extent (m), along the coast"),
    "nx": ("int", 800, 150, "grid cells along x"),
    "ny": ("int", None, 300, "grid cells along y"),
    "depth_deep": ("float", 4000.0, 4000.0, "ocean depth offshore (m)"),
    "depth_shelf": ("float", 200.0, 200.0, "depth on the shelf up to the coast (m)"),
    "shelf_break": ("float", 0.7, 0.7, "x of the shelf break, fraction of length"),
    "shelf_slope": ("float", 0.05, 0.05, "width of the continental slope, fraction of length"),
    "shelf_wiggle": ("float", None, 0.03,
                     "along-coast undulation amplitude of the break, fraction of length"),
    "sponge_width": ("float", 0.15, 0.1, "absorbing layer width, fraction of length (0: none)"),
    "source_x": ("range", [0.35, 0.75], [0.35, 0.75], "x span of the parameter patch"),
    "source_y": ("range", None, [0.1, 0.9], "y span of the parameter patch"),
    "param_nx": ("int", 150, 40, "parameter nodes along x (>= 2)"),
    "param_ny": ("int", None, 75, "parameter nodes along y (>= 2)"),
    "n_sensors": ("int", 8, 80, "Nd: sensors (1-D: evenly spaced; 2-D: seeded uniform)"),
    "sensor_x": ("range", [0.2, 0.95], [0.15, 0.95], "x span of the sensors"),
    "sensor_y": ("range", None, [0.1, 0.9], "y span of the sensors"),
    "sensor_kind": ("str", "height", "height", "'height' (m) or 'pressure' (rho g eta, Pa)"),
    "n_qoi": ("int", 1, 30, "Nq: QoI points, evenly spaced on the segment qoi_x (x qoi_y)"),
    "qoi_x": ("range", [1.0, 1.0], [1.0, 1.0], "x span of the QoI points (1 = coast)"),
    "qoi_y": ("range", None, [0.1, 0.9], "y span of the QoI points"),
    "nt": ("int", 150, 500, "Nt: observation intervals"),
    "dt_obs": ("float", 20.0, 10.0, "observation interval (s)"),
    "cfl": ("float", 0.9, 0.9, "largest Courant number allowed, in (0, 1]"),
    "substeps": ("int", 0, 0, "internal steps per interval; 0: fewest meeting cfl"),
    "noise_std": ("float", 0.0, 0.0, "noise standard deviation, data units"),
    "noise_rel": ("float", 0.01, 0.01,
                  "noise std relative to max |d_true| (if noise_std = 0; not to the RMS, as `[noise] relative`)"),
    "seed": ("int", 0, 0, "seed of the noise (and of the 2-D sensor layout)"),
    "rupture_center": ("dim", [0.55], [0.55, 0.5], "centre of the true uplift, fractions"),
    "rupture_radius": ("dim", [0.04], [0.06, 0.15], "Gaussian radius per axis, fractions"),
    "rupture_uplift": ("float", 1.0, 1.0, "peak final uplift of the true rupture (m)"),
    "rise_time": ("float", 60.0, 60.0, "duration of the uplift pulse (s)"),
}


@dataclass(frozen=True)
class ModelConfig:
    """The validated ``[model]`` table; see :data:`SCHEMA` for the meaning.

    Build it with :func:`validate_model_config`.  Keys valid only in 2-D are
    None in 1-D; ranges are ``(lo, hi)`` tuples, per-axis values tuples of
    length ``dim``.
    """

    dim: int
    length: float
    width: float | None
    nx: int
    ny: int | None
    depth_deep: float
    depth_shelf: float
    shelf_break: float
    shelf_slope: float
    shelf_wiggle: float | None
    sponge_width: float
    source_x: tuple[float, float]
    source_y: tuple[float, float] | None
    param_nx: int
    param_ny: int | None
    n_sensors: int
    sensor_x: tuple[float, float]
    sensor_y: tuple[float, float] | None
    sensor_kind: str
    n_qoi: int
    qoi_x: tuple[float, float]
    qoi_y: tuple[float, float] | None
    nt: int
    dt_obs: float
    cfl: float
    substeps: int
    noise_std: float
    noise_rel: float
    seed: int
    rupture_center: tuple[float, ...]
    rupture_radius: tuple[float, ...]
    rupture_uplift: float
    rise_time: float


def default_config(dim: int = 1) -> dict[str, Any]:
    """The default ``[model]`` table for ``dim`` 1 or 2.

    1-D: 800 cells, ``Nm=150, Nd=8, Nq=1, Nt=150`` (a second or so to generate).
    2-D: 150 x 300 cells, ``Nm=40*75=3000, Nd=80, Nq=30, Nt=500`` (GPU-sized).
    """
    if dim not in (1, 2):
        raise ConfigError(f"model.dim: must be 1 or 2, got {dim!r}")
    col = 1 if dim == 1 else 2
    return {k: copy.copy(spec[col]) for k, spec in SCHEMA.items() if spec[col] is not None}


def validate_model_config(table: Mapping[str, Any]) -> ModelConfig:
    """Check a ``[model]`` table and fill in the defaults of its ``dim``.

    Parameters
    ----------
    table : mapping of key -> value as parsed from TOML; missing keys take
        :func:`default_config` values.

    Raises
    ------
    ConfigError
        Unknown key, key of the other dimension, wrong type or value out of
        range; the message starts with ``model.<key>``.
    """
    dim = table.get("dim", 1)
    _check_kind("dim", dim, "int", 1)
    values = default_config(dim)
    for key in table:
        if key not in SCHEMA:
            raise ConfigError(f"model.{key}: unknown key; valid keys: {', '.join(SCHEMA)}")
        if key not in values:
            raise ConfigError(f"model.{key}: only valid with dim = {3 - dim}")
    values = {k: _check_kind(k, table.get(k, v), SCHEMA[k][0], dim) for k, v in values.items()}
    values.update({k: None for k in SCHEMA if k not in values})
    cfg = ModelConfig(**values)
    _check_ranges(cfg)
    return cfg


def build_model(cfg: ModelConfig | Mapping[str, Any]) -> TsunamiModel:
    """Discretise the model of ``cfg`` (a ModelConfig or a raw ``[model]`` table)."""
    if not isinstance(cfg, ModelConfig):
        cfg = validate_model_config(cfg)
    return TsunamiModel(cfg)


class TsunamiModel:
    """The discretised problem: grid, operators, sensors, QoIs, true rupture.

    Attributes
    ----------
    cfg : ModelConfig
    shape, spacing, extent : tuple, one entry per axis
        Grid cells, cell size (m) and domain size (m).
    depth : ``shape`` float64 — bathymetry at the cell centres (m).
    dt, substeps, courant : internal time step (s), steps per observation
        interval, Courant number (<= cfg.cfl).
    Nm, Nd, Nq, Nt : int
    dt_obs : float — observation interval (s).
    param_shape, param_origin, param_spacing : tuple, one entry per axis
        The parameter patch: node ``k`` along axis ``a`` sits at
        ``param_origin[a] + k * param_spacing[a]``; parameter ``j`` is node
        ``np.unravel_index(j, param_shape)`` (x outer), so ``m.reshape(
        *param_shape, Nt)`` is the patch.
    param_coords : (Nm, dim) float64 — parameter node coordinates (m).
    sensor_coords : (Nd, dim) float64;  qoi_coords : (Nq, dim) float64.

    Raises
    ------
    ConfigError
        If explicit ``substeps`` break the CFL limit, or the parameter
        patch is finer than the grid.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        self.cfg = cfg
        self.extent = (cfg.length,) if cfg.dim == 1 else (cfg.length, cfg.width)
        self.shape = (cfg.nx,) if cfg.dim == 1 else (cfg.nx, cfg.ny)
        self.spacing = tuple(e / n for e, n in zip(self.extent, self.shape))
        self.Nt, self.dt_obs = cfg.nt, cfg.dt_obs

        centres = [(np.arange(n) + 0.5) * d for n, d in zip(self.shape, self.spacing)]
        cells = _mesh(centres)
        self.depth = self._depth(cells).reshape(self.shape)
        divs, faces = [], []
        eye = [sp.identity(n, format="csr") for n in self.shape]
        for a, (n, d) in enumerate(zip(self.shape, self.spacing)):
            div = sp.diags([np.ones(n - 1), -np.ones(n - 1)], [0, -1], shape=(n, n - 1)) / d
            divs.append(_kron_all(eye[:a] + [div] + eye[a + 1:]))
            faces.append(_mesh(centres[:a] + [np.arange(1, n) * d] + centres[a + 1:]))
        div = sp.hstack(divs, format="csr")
        faces = np.concatenate(faces)
        self._h_face = self._depth(faces)[:, None]
        self._Dh = (div @ sp.diags(self._h_face[:, 0])).tocsr()
        self._grad = (-div.T).tocsr()
        self._DhT, self._gradT = self._Dh.T.tocsr(), self._grad.T.tocsr()
        self._cell_area = math.prod(self.spacing)

        wave_speed = math.sqrt(G * self._h_face.max())
        courant_per_dt = wave_speed * math.sqrt(sum(d ** -2 for d in self.spacing))
        needed = math.ceil(cfg.dt_obs * courant_per_dt / cfg.cfl)
        self.substeps = cfg.substeps or needed
        self.dt = cfg.dt_obs / self.substeps
        self.courant = self.dt * courant_per_dt
        if self.substeps < needed:
            raise ConfigError(
                f"model.substeps: CFL condition violated, Courant number {self.courant:.3f} > "
                f"cfl {cfg.cfl} (dt = {self.dt:.4g} s, wave speed {wave_speed:.4g} m/s, "
                f"spacing {self.spacing} m); use substeps >= {needed} or 0 (automatic)")
        self._damp_eta = 1.0 / (1.0 + self.dt * self._sponge(cells))[:, None]
        self._damp_u = 1.0 / (1.0 + self.dt * self._sponge(faces))[:, None]

        spans = [cfg.source_x] + ([cfg.source_y] if cfg.dim == 2 else [])
        self.param_shape = (cfg.param_nx,) if cfg.dim == 1 else (cfg.param_nx, cfg.param_ny)
        self.param_origin = tuple(s[0] * e for s, e in zip(spans, self.extent))
        self.param_spacing = tuple((s[1] - s[0]) * e / (n - 1)
                                   for s, e, n in zip(spans, self.extent, self.param_shape))
        for key, h, d in zip(("param_nx", "param_ny"), self.param_spacing, self.spacing):
            if h < d:
                raise ConfigError(f"model.{key}: parameter spacing {h:.4g} m is finer than "
                                  f"the grid spacing {d:.4g} m; use fewer parameters or "
                                  f"more cells")
        self.param_coords = _mesh([o + h * np.arange(n) for o, h, n in zip(
            self.param_origin, self.param_spacing, self.param_shape)])
        self.Nm = len(self.param_coords)
        self._B = _interp_matrix(cells, self.param_origin, self.param_spacing, self.param_shape)
        self._BT = self._B.T.tocsr()

        self.sensor_coords = self._sensor_points()
        self.qoi_coords = _segment(self._scale([cfg.qoi_x, cfg.qoi_y]), cfg.n_qoi)
        self.Nd, self.Nq = len(self.sensor_coords), len(self.qoi_coords)
        scale = RHO * G if cfg.sensor_kind == "pressure" else 1.0
        self._C = scale * self._cell_interp(self.sensor_coords, centres)
        self._Q = self._cell_interp(self.qoi_coords, centres)
        self._CQ = sp.vstack([self._C, self._Q], format="csr")

    # ------------------------------------------------------------ maps

    def p2o(self, method: str = "auto") -> np.ndarray:
        """Impulse responses parameter -> sensor.

        Parameters
        ----------
        method : "forward" (one batched solve over the Nm parameters),
            "adjoint" (one batched adjoint solve over the Nd sensors) or
            "auto" (the smaller batch).

        Returns
        -------
        f : (Nd, Nm, Nt) float64, SOTI — ``f[i, j, t]``, the first block column.
        """
        return self._impulses(self._C, method)

    def p2q(self, method: str = "auto") -> np.ndarray:
        """Impulse responses parameter -> QoI: (Nq, Nm, Nt) float64, SOTI (see :meth:`p2o`)."""
        return self._impulses(self._Q, method)

    def impulse_responses(self, method: str = "auto") -> tuple[np.ndarray, np.ndarray]:
        """Both maps from one solve: ``(p2o (Nd, Nm, Nt), p2q (Nq, Nm, Nt))``."""
        f = self._impulses(self._CQ, method)
        return f[:self.Nd], f[self.Nd:]

    def forward(self, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Direct time stepping from rest.

        Parameters
        ----------
        m : (Nm, nt) float64, SOTI — uplift rate (m/s) per observation
            interval; any number ``nt >= 1`` of intervals.

        Returns
        -------
        d : (Nd, nt) float64 — sensor data at the end of each interval.
        q : (Nq, nt) float64 — QoIs likewise.
        """
        y = np.hstack([self._CQ @ eta for eta, _ in self._run(m)])
        return y[:self.Nd], y[self.Nd:]

    def energy(self, m: np.ndarray) -> np.ndarray:
        """Wave energy per unit density (m^(dim+3)/s^2) at the end of each interval.

        ``E = 1/2 sum_cells g eta^2 dA + 1/2 sum_faces h u^2 dA`` for the run
        of :meth:`forward`; ``m`` is (Nm, nt).  Returns (nt,) float64.
        """
        return np.array([0.5 * self._cell_area * (G * np.sum(eta ** 2)
                                                  + np.sum(self._h_face * u ** 2))
                         for eta, u in self._run(m)])

    def true_parameter(self) -> np.ndarray:
        """The true rupture: (Nm, Nt) float64, SOTI, uplift rate (m/s).

        A Gaussian patch of final uplift (peak ``rupture_uplift``) times the
        rise-time pulse ``(1 - cos(2 pi t / T)) / T`` on ``[0, T]``, averaged
        exactly over each interval, so ``m.sum(1) * dt_obs`` is the final uplift.
        """
        cfg = self.cfg
        z = [(self.param_coords[:, a] - c * e) / (r * e) for a, (c, r, e) in
             enumerate(zip(cfg.rupture_center, cfg.rupture_radius, self.extent))]
        uplift = cfg.rupture_uplift * np.exp(-0.5 * sum(za ** 2 for za in z))
        s = np.clip(np.arange(self.Nt + 1) * self.dt_obs / cfg.rise_time, 0.0, 1.0)
        fraction = s - np.sin(2 * np.pi * s) / (2 * np.pi)
        return uplift[:, None] * (np.diff(fraction) / self.dt_obs)[None, :]

    def add_noise(self, d: np.ndarray) -> tuple[np.ndarray, float]:
        """``d + sigma * N(0, I)`` with ``sigma = noise_std``, or
        ``noise_rel * max|d|`` when ``noise_std`` is 0; seeded by ``seed``.

        Returns ``(d_obs, sigma)``; ``d_obs`` has the shape of ``d``.
        """
        cfg = self.cfg
        sigma = cfg.noise_std or cfg.noise_rel * float(np.max(np.abs(d), initial=0.0))
        rng = np.random.default_rng([cfg.seed, 1])
        return d + sigma * rng.standard_normal(d.shape), sigma

    def attrs(self) -> dict[str, Any]:
        """Geometry and time attributes stored with the generated files."""
        return {"dim": self.cfg.dim, "dt_obs": self.dt_obs, "dt": self.dt,
                "substeps": self.substeps, "grid_shape": self.shape, "extent": self.extent,
                "param_shape": self.param_shape, "param_origin": self.param_origin,
                "param_spacing": self.param_spacing, "sensor_kind": self.cfg.sensor_kind}

    # ------------------------------------------------------------ time stepping

    def _step(self, eta: np.ndarray, u: np.ndarray, src: np.ndarray | None) -> None:
        """One symplectic-Euler step in place: eta (n_cells, K), u (n_faces, K),
        src (n_cells, K) uplift rate or None."""
        eta -= self.dt * (self._Dh @ u)
        if src is not None:
            eta += self.dt * src
        eta *= self._damp_eta
        u -= (self.dt * G) * (self._grad @ eta)
        u *= self._damp_u

    def _adjoint_step(self, lam_eta: np.ndarray, lam_u: np.ndarray) -> None:
        """The transpose of :meth:`_step` in place.  Afterwards the sensitivity of
        the step's output to its ``src`` is ``dt * lam_eta``."""
        lam_u *= self._damp_u
        change = self._gradT @ lam_u
        change *= self.dt * G  # in place: one temporary and one pass fewer than ``(dt * G) * (...)``
        lam_eta -= change
        lam_eta *= self._damp_eta
        change = self._DhT @ lam_eta
        change *= self.dt
        lam_u -= change

    def _run(self, m: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Step from rest under ``m`` (Nm, nt); yield the state (eta (n_cells, 1),
        u (n_faces, 1), reused buffers) at the end of every interval."""
        m = np.asarray(m, dtype=np.float64)
        if m.ndim != 2 or m.shape[0] != self.Nm or m.shape[1] < 1:
            raise ConfigError(f"m has shape {m.shape}, expected ({self.Nm}, nt >= 1)")
        eta = np.zeros((self._B.shape[0], 1))
        u = np.zeros((self._Dh.shape[1], 1))
        for t in range(m.shape[1]):
            src = self._B @ m[:, t:t + 1]
            for _ in range(self.substeps):
                self._step(eta, u, src)
            yield eta, u

    def _impulses(self, obs: sp.csr_matrix, method: str) -> np.ndarray:
        """Impulse responses (P, Nm, Nt) of the observer ``obs`` (P, n_cells)."""
        if method not in ("auto", "forward", "adjoint"):
            raise ConfigError(f"method {method!r} is not one of 'auto', 'forward', 'adjoint'")
        if method == "forward" or (method == "auto" and self.Nm <= obs.shape[0]):
            return self._forward_impulses(obs)
        return self._adjoint_impulses(obs)

    def _forward_impulses(self, obs: sp.csr_matrix) -> np.ndarray:
        """Batched over parameters: unit uplift rate of parameter j during
        interval 0, observed after every interval."""
        f = np.empty((obs.shape[0], self.Nm, self.Nt))
        eta = np.zeros((self._B.shape[0], self.Nm))
        u = np.zeros((self._Dh.shape[1], self.Nm))
        src = self._B.toarray()
        for t in range(self.Nt):
            for _ in range(self.substeps):
                self._step(eta, u, src if t == 0 else None)
            f[:, :, t] = obs @ eta
        return f

    def _adjoint_impulses(self, obs: sp.csr_matrix) -> np.ndarray:
        """Batched over observers: ``f(t)^T = R^T (P^T)^t obs^T`` with ``P`` one
        interval's propagator and ``R`` its response to the interval's source.
        The observers are split into one group per core, run in threads (the
        sparse products and NumPy's updates release the GIL); each observer's
        response is computed alone, so the split does not change a bit."""
        f = np.empty((obs.shape[0], self.Nm, self.Nt))
        map_slices(lambda rows: self._adjoint_group(obs[rows], f[rows]), obs.shape[0])
        return f

    def _adjoint_group(self, obs: sp.csr_matrix, f: np.ndarray) -> None:
        """:meth:`_adjoint_impulses` of the observers ``obs`` (p, n_cells) into ``f`` (p, Nm, Nt)."""
        lam_eta = obs.T.toarray(order="C")  # (CSC's default is Fortran order: every product copied it)
        lam_u = np.zeros((self._Dh.shape[1], obs.shape[0]))
        for t in range(self.Nt):
            acc = np.zeros((self.Nm, obs.shape[0]))
            for _ in range(self.substeps):
                self._adjoint_step(lam_eta, lam_u)
                acc += self._BT @ lam_eta
            f[:, :, t] = self.dt * acc.T

    # ------------------------------------------------------------ geometry

    def _depth(self, points: np.ndarray) -> np.ndarray:
        """Shelf bathymetry (m) at points (n, dim): deep offshore, a tanh slope
        at the (in 2-D undulating) shelf break, shallow up to the coast."""
        cfg = self.cfg
        x_break = cfg.shelf_break * cfg.length
        if cfg.dim == 2:
            x_break = x_break + cfg.shelf_wiggle * cfg.length * np.sin(
                2 * np.pi * points[:, 1] / cfg.width)
        step = 0.5 * (1 - np.tanh((points[:, 0] - x_break) / (cfg.shelf_slope * cfg.length)))
        return cfg.depth_shelf + (cfg.depth_deep - cfg.depth_shelf) * step

    def _sponge(self, points: np.ndarray) -> np.ndarray:
        """Damping rate (1/s) at points (n, dim): quadratic ramps over
        ``sponge_width`` from x = 0 (and, in 2-D, from y = 0 and y = width)."""
        cfg = self.cfg
        w = cfg.sponge_width * cfg.length
        if w == 0:
            return np.zeros(len(points))
        dist = [points[:, 0]]
        if cfg.dim == 2:
            dist += [points[:, 1], cfg.width - points[:, 1]]
        ramp = np.clip(1 - np.min(dist, axis=0) / w, 0.0, 1.0)
        return SPONGE_STRENGTH * math.sqrt(G * cfg.depth_deep) / w * ramp ** 2

    def _scale(self, spans: list) -> list[tuple[float, float]]:
        """Fractional spans per axis -> metres."""
        return [(lo * e, hi * e) for (lo, hi), e in zip(spans, self.extent)]

    def _sensor_points(self) -> np.ndarray:
        """(Nd, dim): evenly spaced along sensor_x in 1-D, seeded uniform in the
        sensor box in 2-D."""
        cfg = self.cfg
        spans = self._scale([cfg.sensor_x, cfg.sensor_y])
        if cfg.dim == 1:
            return _segment(spans, cfg.n_sensors)
        rng = np.random.default_rng([cfg.seed, 0])
        return np.column_stack([rng.uniform(lo, hi, cfg.n_sensors) for lo, hi in spans])

    def _cell_interp(self, points: np.ndarray, centres: list[np.ndarray]) -> sp.csr_matrix:
        """(P, n_cells) (bi)linear interpolation from the cell centres to
        points (P, dim), clamped to the outermost centres."""
        lo = [c[0] for c in centres]
        hi = [c[-1] for c in centres]
        return _interp_matrix(np.clip(points, lo, hi), lo, self.spacing, self.shape)


def generate(config: Mapping[str, Any] | ModelConfig, outdir: str | Path) -> dict[str, Path]:
    """Build the model and write its maps, true parameter and data.

    Writes, under ``outdir``: ``p2o/`` and ``p2q/`` (matrix directories),
    ``m_true.h5`` (parameter vector), ``d_true.h5``, ``d_obs.h5`` (data
    vectors, the latter with noise; attribute ``noise_std``), ``q_true.h5``
    (data vector, ``qoi=1``) and ``model.json`` (the full configuration with
    the derived geometry).  Geometry and time attributes
    (:meth:`TsunamiModel.attrs`) go into every HDF5 file.

    Returns
    -------
    paths : dict name -> Path, names ``p2o``, ``p2q``, ``m_true``, ``d_obs``,
        ``d_true``, ``q_true``, ``model``.
    """
    model = build_model(config)
    out = Path(outdir)
    paths = {name: out / name for name in ("p2o", "p2q")}
    paths.update({name: out / f"{name}.h5" for name in ("m_true", "d_obs", "d_true", "q_true")})
    paths["model"] = out / "model.json"

    f, fq = model.impulse_responses()
    m_true = model.true_parameter()
    d_true, q_true = model.forward(m_true)
    d_obs, sigma = model.add_noise(d_true)
    attrs = model.attrs()
    sensors = {**attrs, "sensor_coords": model.sensor_coords}
    qois = {**attrs, "qoi_coords": model.qoi_coords}
    write_matrix(paths["p2o"], f, attrs=sensors)
    write_matrix(paths["p2q"], fq, is_p2q=True, attrs=qois)
    write_vector(paths["m_true"], m_true, "param", attrs=attrs)
    write_vector(paths["d_true"], d_true, "data", attrs=sensors)
    write_vector(paths["d_obs"], d_obs, "data", attrs={**sensors, "noise_std": sigma})
    write_vector(paths["q_true"], q_true, "data", qoi=True, attrs=qois)
    summary = {"model": dataclasses.asdict(model.cfg), "noise_std": sigma,
               "Nd": model.Nd, "Nm": model.Nm, "Nq": model.Nq, "Nt": model.Nt,
               "courant": model.courant, **attrs,
               "sensor_coords": model.sensor_coords.tolist(),
               "qoi_coords": model.qoi_coords.tolist()}
    with atomic_path(paths["model"]) as tmp:
        tmp.write_text(json.dumps(summary, indent=1) + "\n")
    return paths


# ---------------------------------------------------------------- helpers


def _check_kind(key: str, value: Any, kind: str, dim: int) -> Any:
    """Return ``value`` converted to its kind (ranges and per-axis lists as
    tuples, ints as floats where a float is wanted); ConfigError otherwise."""
    def is_number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    want = {"int": "an integer", "float": "a number", "str": "a string",
            "range": "a list of two numbers [lo, hi]", "dim": f"a list of {dim} numbers"}[kind]
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "float" and is_number(value):
        return float(value)
    if kind == "str" and isinstance(value, str):
        return value
    if kind in ("range", "dim") and isinstance(value, (list, tuple)) and \
            len(value) == (2 if kind == "range" else dim) and all(map(is_number, value)):
        return tuple(float(v) for v in value)
    raise ConfigError(f"model.{key}: expected {want}, got {type(value).__name__} {value!r}")


def _check_ranges(cfg: ModelConfig) -> None:
    """Value checks beyond the types (None = key unused in this dim); ConfigError
    naming the key."""
    def fractions(v: tuple[float, ...]) -> bool:
        return all(0 <= x <= 1 for x in v)

    checks = [
        (("length", "width", "depth_deep", "depth_shelf", "shelf_slope", "dt_obs",
          "rupture_uplift", "rise_time"), lambda v: v > 0, "> 0"),
        (("nx", "ny"), lambda v: v >= 4, ">= 4"),
        (("param_nx", "param_ny"), lambda v: v >= 2, ">= 2"),
        (("n_sensors", "n_qoi", "nt"), lambda v: v >= 1, ">= 1"),
        (("substeps", "noise_std", "noise_rel"), lambda v: v >= 0, ">= 0"),
        (("sensor_x", "sensor_y", "qoi_x", "qoi_y"), lambda v: fractions(v) and v[0] <= v[1],
         "[lo, hi] with 0 <= lo <= hi <= 1"),
        (("source_x", "source_y"), lambda v: fractions(v) and v[0] < v[1],
         "[lo, hi] with 0 <= lo < hi <= 1"),
        (("shelf_break", "shelf_wiggle"), lambda v: 0 <= v <= 1, "in [0, 1]"),
        (("rupture_center",), fractions, "fractions in [0, 1]"),
        (("sponge_width",), lambda v: 0 <= v < 1, "in [0, 1)"),
        (("cfl",), lambda v: 0 < v <= 1, "in (0, 1]"),
        (("rupture_radius",), lambda v: min(v) > 0, "> 0"),
        (("sensor_kind",), lambda v: v in ("height", "pressure"), "'height' or 'pressure'"),
    ]
    for keys, ok, what in checks:
        for key in keys:
            value = getattr(cfg, key)
            if value is not None and not ok(value):
                raise ConfigError(f"model.{key}: must be {what}, got {value!r}")
    if cfg.noise_std > 0 and cfg.noise_rel > 0:
        raise ConfigError("model.noise_rel: must be 0 when noise_std is set (give one of them)")


def _mesh(axes: list[np.ndarray]) -> np.ndarray:
    """Tensor grid of 1-D coordinates: (prod(len), dim), first axis outermost."""
    return np.stack([g.ravel() for g in np.meshgrid(*axes, indexing="ij")], axis=1)


def _segment(spans: list[tuple[float, float]], n: int) -> np.ndarray:
    """(n, dim) points evenly spaced from (lo_0, lo_1, ...) to (hi_0, hi_1, ...)."""
    return np.column_stack([np.linspace(lo, hi, n) for lo, hi in spans])


def _kron_all(factors: list[sp.spmatrix]) -> sp.csr_matrix:
    """Kronecker product of the factors, first factor outermost."""
    out = factors[0]
    for fac in factors[1:]:
        out = sp.kron(out, fac)
    return sp.csr_matrix(out)


def _interp_matrix(points: np.ndarray, origin: Sequence[float], step: Sequence[float],
                   count: Sequence[int]) -> sp.csr_matrix:
    """(P, prod(count)) values at points (P, dim) of the tensor-product hat
    functions on the regular nodes ``origin[a] + k step[a]``, ``k < count[a]``
    (node index x outer); zero beyond one step outside the nodes."""
    n_pts = len(points)
    idx = np.zeros((n_pts, 1), dtype=np.int64)
    w = np.ones((n_pts, 1))
    for a, (o, h, n) in enumerate(zip(origin, step, count)):
        t = (points[:, a] - o) / h
        k = np.floor(t).astype(np.int64)[:, None] + np.array([0, 1])
        wa = 1.0 - np.abs(t[:, None] - k)
        wa[(k < 0) | (k >= n)] = 0.0
        idx = (idx[:, :, None] * n + np.clip(k, 0, n - 1)[:, None, :]).reshape(n_pts, -1)
        w = (w[:, :, None] * wa[:, None, :]).reshape(n_pts, -1)
    rows = np.repeat(np.arange(n_pts), idx.shape[1])
    out = sp.csr_matrix((w.ravel(), (rows, idx.ravel())), shape=(n_pts, math.prod(count)))
    out.eliminate_zeros()
    return out
