"""``fftmatvec invert``: a whole inversion from a validated configuration.

Reads the maps and data, builds noise and prior, finds the MAP point with the
configured method, forecasts the QoIs with posterior bands, and writes
``map.h5``, ``qoi_mean.h5``, ``qoi_std.h5``, ``summary.json`` and PNG plots
into ``[output] dir`` (every file atomically).

Under MPI the operators are distributed over the process grid (each rank
holds its slab of ``Fhat`` and does its share of every product) while the
inversion's vectors are replicated on every rank (see
:class:`ReplicatedOperator`), so the solvers, priors and outputs are those of
one process.  The vectors live where the products run (the operator's
``xp``: on the GPU with ``--device gpu``) and come to the host to be written.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np

from ..backend.arrays import to_host
from ..errors import ConfigError
from ..io import atomic_path, read_attrs, read_meta, read_vector, write_vector
from ..io.meta import block_path
from .cg import dot, gram
from .noise import WhiteNoise
from .prior import MaternPrior, WhitePrior
from .qoi import LowRankPosterior, QoIForecast, qoi_forecast
from .solve import DataSpaceCholesky, solve_map

Log = Callable[[str], None]

#: Seconds between CG's progress lines (the first iteration's is always written): a line per
#: iteration was two thousand lines in three seconds on a GPU (the 2-D example).
PROGRESS_SECONDS = 1.0


def _prior(cfg: dict, matrix: str, Nm: int, Nt: int, m0: Any, xp: ModuleType):
    p = cfg["prior"]
    if p["kind"] == "white":
        return WhitePrior((Nm, Nt), std=p["std"], mean=m0, xp=xp)
    attrs = read_attrs(block_path(matrix, read_meta(matrix), 0))
    if p["shape"]:  # the config's grid, with its spacing
        shape, spacing = p["shape"], p["spacing"]
    else:  # the grid the model stored with the matrix, else a line of Nm points
        shape = [int(n) for n in np.atleast_1d(attrs.get("param_shape", [Nm]))]
        spacing = [float(h) for h in np.atleast_1d(attrs.get("param_spacing", [p["spacing"]]))]
    if int(np.prod(shape)) != Nm:
        raise ConfigError(f"prior.shape: {shape} has {int(np.prod(shape))} points but the matrix has Nm={Nm}")
    time_corr = p["time_correlation"] or None
    return MaternPrior(shape, Nt, std=p["std"], corr_length=p["correlation_length"], spacing=spacing,
                       mean=m0, time_corr_length=time_corr, xp=xp)


def _write_summary(path: Path, summary: dict) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(summary, indent=1, default=float) + "\n")


def run_inversion(
    cfg: dict[str, dict[str, Any]],
    *,
    make_operator: Callable[..., Any],
    is_root: bool = True,
    agree: Callable[[Any], Any] = lambda value: value,
    log: Log = print,
    resume: bool = False,
) -> dict[str, Any]:
    """Run the inversion of ``cfg`` (from :func:`fftmatvec.config.load`).

    Parameters
    ----------
    make_operator : callable ``(matrix_dir, precision=..., adjoint_precision=..., tolerance=...) -> operator``
        Builds ``F`` and ``Q`` (dims ``(Nm, Nt)``, whole replicated vectors of
        the operator's ``xp``, NumPy when it has none).
    is_root : bool
        Whether this rank writes the outputs and logs.
    agree : callable
        Returns rank 0's value of a scalar or small array on every rank (the
        identity in one process), so that every rank's solver takes the same
        branches although each computes its inner products locally.
    log : callable
        Progress output (rank 0 only; a no-op with ``--quiet``).
    resume : bool
        Continue CG from ``[output] dir/checkpoint.npz``.

    Returns
    -------
    The summary written to ``summary.json``.
    """
    t_start = time.perf_counter()

    def inner(x: np.ndarray, y: np.ndarray) -> float:
        return agree(dot(x, y))

    op_cfg, out_dir = cfg["operator"], Path(cfg["output"]["dir"])
    timings: dict[str, float] = {}

    t0 = time.perf_counter()
    codes = dict(precision=op_cfg["precision"], adjoint_precision=op_cfg["adjoint_precision"],
                 tolerance=op_cfg["tolerance"])
    F = make_operator(op_cfg["matrix"], **codes)
    Q = None
    if op_cfg["qoi_matrix"]:
        Q = make_operator(op_cfg["qoi_matrix"], **codes)
        if Q.dims != F.dims:
            raise ConfigError(f"operator.qoi_matrix: dims {Q.dims} differ from the p2o map's {F.dims}")
    timings["setup_operators"] = time.perf_counter() - t0
    Nm, Nt = F.dims
    Nd = F.dimsd[0]
    precision_run = {name: _codes(op, op_cfg) for name, op in (("F", F), ("Q", Q)) if op is not None}
    log(f"operators ready in {timings['setup_operators']:.2f} s: Nd={Nd} Nm={Nm} Nt={Nt}"
        + (f" Nq={Q.dimsd[0]}" if Q else "") + ", precision "
        + ", ".join(f"{name} {c['forward']} / {c['adjoint']}" for name, c in precision_run.items()))

    xp = getattr(F, "xp", np)
    data = cfg["data"]
    d = xp.asarray(read_vector(data["observations"], "data", expect_n=Nd, expect_nt=Nt)[0])
    m_true = read_vector(data["truth"], "param", expect_n=Nm, expect_nt=Nt)[0] if data["truth"] else None
    q_true = None
    if data["qoi_truth"] and Q is not None:
        q_true = read_vector(data["qoi_truth"], "data", expect_n=Q.dimsd[0], expect_nt=Nt)[0]
    mean = cfg["prior"]["mean"]
    m0 = float(mean) if not isinstance(mean, str) else xp.asarray(
        read_vector(mean, "param", expect_n=Nm, expect_nt=Nt)[0])

    noise_cfg = cfg["noise"]
    if noise_cfg["std"] is not None:
        noise = WhiteNoise(noise_cfg["std"])
    else:
        noise = WhiteNoise.relative(d, noise_cfg["relative"], inner=inner)
    prior = _prior(cfg, op_cfg["matrix"], Nm, Nt, m0, xp)

    if is_root:
        out_dir.mkdir(parents=True, exist_ok=True)
    solver = cfg["solver"]
    method = solver["method"]
    options: dict[str, Any] = {}
    if method.startswith("cg"):
        t_cg = last_line = time.perf_counter()

        def progress(it: int, res: float, seconds: float) -> None:
            nonlocal last_line
            now = time.perf_counter()
            if it == 1 or now - last_line >= PROGRESS_SECONDS:
                last_line = now
                log(f"  CG {it:4d}  residual {res:.3e}  {now - t_cg:7.2f} s")

        checkpoint = out_dir / "checkpoint.npz"
        if resume and not checkpoint.exists():
            raise ConfigError(f"--resume: no checkpoint at {checkpoint}")
        saves = is_root and bool(solver["checkpoint_every"] or solver["checkpoint_seconds"])  # rank 0 writes
        options = dict(rtol=solver["rtol"], maxiter=solver["maxiter"], callback=progress,
                       checkpoint=checkpoint if saves else None,
                       checkpoint_every=solver["checkpoint_every"] if saves else 0,
                       checkpoint_seconds=solver["checkpoint_seconds"] if saves else 0.0,
                       resume=checkpoint if resume else None)
        options.update(dict(inner_m=inner, inner_d=inner) if method == "cg-parameter" else dict(inner_d=inner))
    log(f"solving for the MAP point with {method}")
    t0 = time.perf_counter()
    chol = None
    if method == "cholesky-data":
        chol = DataSpaceCholesky(F, prior, noise)
        m_map = chol.solve(d)
        timings["offline_setup"] = chol.setup_time
        timings["online_solve"] = chol.solve_time
        log(f"  data-space matrix formed and factored in {chol.setup_time:.2f} s (offline); "
            f"solve {chol.solve_time * 1e3:.2f} ms (online)")
        cg_info = None
    else:
        result = solve_map(F, prior, noise, d, method=method, **options)
        m_map = result.m
        cg_info = {"iterations": result.cg.iterations, "converged": result.cg.converged,
                   "residuals": result.cg.residuals, "bnorm": result.cg.bnorm}
        log(f"  {'converged' if result.cg.converged else 'NOT converged'} after {result.cg.iterations} iterations"
            f" (relative residual {result.cg.residuals[-1] / result.cg.bnorm if result.cg.bnorm else 0.0:.1e})")
    timings["map"] = time.perf_counter() - t0

    forecast = None
    if Q is not None:
        t0 = time.perf_counter()
        posterior = chol if chol is not None else LowRankPosterior(
            F, prior, noise, solver["rank"], gram=lambda X, Y: agree(gram(X, Y)))
        forecast = qoi_forecast(Q, m_map, posterior)
        forecast = QoIForecast(to_host(forecast.mean), to_host(forecast.std))
        timings["qoi"] = time.perf_counter() - t0
        kind = "exact" if chol is not None else f"rank-{solver['rank']}"
        log(f"QoI forecast with {kind} posterior std in {timings['qoi']:.2f} s")

    m_map = to_host(m_map)
    summary: dict[str, Any] = {
        "config": {k: v for k, v in cfg.items() if k != "model"},
        "sizes": {"Nd": Nd, "Nm": Nm, "Nt": Nt, "Nq": Q.dimsd[0] if Q else None},
        "grid": getattr(F, "grid_shape", [1, 1]),
        "device": getattr(F, "device", "cpu"),
        "precision": precision_run["F"],
        "qoi_precision": precision_run.get("Q"),
        "solver": {"method": method, "cg": cg_info},
        "noise_std": float(noise.std.max()),
    }
    if m_true is not None:
        summary["errors"] = {"map_vs_truth": _rel(m_map, m_true),
                             "prior_mean_vs_truth": _rel(to_host(prior.mean), m_true)}
    if forecast is not None and q_true is not None:
        # before the wave arrives truth, mean and std are all at rounding level:
        # an absolute slack at 1e-9 of the signal keeps rounding out of the count
        slack = 1e-9 * np.abs(q_true).max()
        inside = np.abs(q_true - forecast.mean) <= 1.96 * forecast.std + slack
        summary.setdefault("errors", {})["qoi_vs_truth"] = _rel(forecast.mean, q_true)
        summary["errors"]["qoi_band_coverage"] = float(inside.mean())

    if is_root:
        write_vector(out_dir / "map.h5", m_map, "param")
        if forecast is not None:
            write_vector(out_dir / "qoi_mean.h5", forecast.mean, "data", qoi=True)
            write_vector(out_dir / "qoi_std.h5", forecast.std, "data", qoi=True)
        if cfg["output"]["plots"]:
            t0 = time.perf_counter()
            _plots(out_dir, m_map, m_true, forecast, q_true, cg_info, Nt, op_cfg["matrix"])
            timings["plots"] = time.perf_counter() - t0
        timings["total"] = time.perf_counter() - t_start
        summary["timings"] = timings
        _write_summary(out_dir / "summary.json", summary)
        log(f"wrote {out_dir}/ in {timings['total']:.2f} s total")
        if "errors" in summary:
            log("  " + ", ".join(f"{k} {v:.3g}" for k, v in summary["errors"].items()))
    return summary


def _codes(op: Any, op_cfg: dict[str, Any]) -> dict[str, str]:
    """``{"forward": ..., "adjoint": ...}``: the precision codes ``op`` runs
    (the config's where it does not say)."""
    return {"forward": str(getattr(op, "precision", op_cfg["precision"])),
            "adjoint": str(getattr(op, "adjoint_precision", op_cfg["adjoint_precision"] or op_cfg["precision"]))}


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _plots(out: Path, m_map, m_true, forecast, q_true, cg_info, Nt: int, matrix: str) -> None:
    from .. import plots

    attrs = read_attrs(block_path(matrix, read_meta(matrix), 0))
    dt = float(attrs.get("dt_obs", 1.0))
    times = dt * np.arange(1, Nt + 1)
    plots.plot_parameters(out / "map.png", m_map, m_true, times)
    if forecast is not None:
        plots.plot_qoi(out / "qoi.png", forecast.mean, forecast.std, q_true, times)
    if cg_info is not None:
        plots.plot_convergence(out / "convergence.png", cg_info["residuals"])
