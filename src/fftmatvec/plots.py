"""PNG figures of an inversion (matplotlib, imported lazily, Agg backend)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    from .io import atomic_path

    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    _pyplot().close(fig)
    return path


def plot_parameters(path: Path, m_map: np.ndarray, m_true: np.ndarray | None, times: np.ndarray) -> Path:
    """Final uplift (sum over time) of the MAP point and the truth, per parameter.

    m_map, m_true : (Nm, Nt) uplift rate.  times : (Nt,) seconds.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    dt = times[1] - times[0] if len(times) > 1 else 1.0
    ax[0].plot(m_map.sum(axis=1) * dt, label="MAP")
    if m_true is not None:
        ax[0].plot(m_true.sum(axis=1) * dt, "k--", label="truth")
    ax[0].set(xlabel="parameter index", ylabel="total uplift", title="uplift: truth vs MAP")
    ax[0].legend()
    j = int(np.argmax(np.abs(m_map).sum(axis=1)))
    ax[1].plot(times, m_map[j], label="MAP")
    if m_true is not None:
        ax[1].plot(times, m_true[j], "k--", label="truth")
    ax[1].set(xlabel="time (s)", ylabel="uplift rate", title=f"parameter {j} over time")
    ax[1].legend()
    fig.tight_layout()
    return _save(fig, path)


def plot_qoi(path: Path, mean: np.ndarray, std: np.ndarray, truth: np.ndarray | None, times: np.ndarray) -> Path:
    """QoI series with the 95% band (mean +- 1.96 std) and the truth; (Nq, Nt) arrays."""
    plt = _pyplot()
    nq = mean.shape[0]
    shown = range(min(nq, 4))
    fig, axes = plt.subplots(len(shown), 1, figsize=(8, 2.6 * len(shown)), squeeze=False)
    for ax, q in zip(axes[:, 0], shown):
        ax.fill_between(times, mean[q] - 1.96 * std[q], mean[q] + 1.96 * std[q], alpha=0.3, label="95% band")
        ax.plot(times, mean[q], label="forecast")
        if truth is not None:
            ax.plot(times, truth[q], "k--", label="truth")
        ax.set(xlabel="time (s)", ylabel=f"QoI {q}")
        ax.legend(loc="upper left")
    fig.tight_layout()
    return _save(fig, path)


def plot_convergence(path: Path, residuals: list[float]) -> Path:
    """Relative CG residual per iteration (log scale)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    r = np.asarray(residuals)
    ax.semilogy(r / r[0])
    ax.set(xlabel="CG iteration", ylabel="relative residual", title="CG convergence")
    fig.tight_layout()
    return _save(fig, path)
