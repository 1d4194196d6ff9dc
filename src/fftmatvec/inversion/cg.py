"""Conjugate gradients with an injectable inner product and checkpoints.

The solver touches vectors only through ``+``, ``-``, scalar ``*`` and the
``inner`` argument, and every branch (convergence, breakdown, NaN/Inf) tests
scalars returned by ``inner``.  With ``inner`` an all-reduced dot product over
the blocks a rank holds, the same code runs distributed and all ranks take the
same branches.

Vectors may be NumPy or CuPy arrays: the solver keeps them where ``b`` is
(a checkpoint holds host copies).

Stopping rule: ``||r_k|| <= rtol * ||b||`` with ``r_k`` the recursively
updated residual and ``||.|| = sqrt(inner(., .))`` (the plain Euclidean norm by
default, not the preconditioned norm).
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fftmatvec.backend.arrays import array_module, to_host
from fftmatvec.errors import ConfigError, FftmatvecError

Array = Any  # a NumPy or CuPy array
Inner = Callable[[Array, Array], float]
Callback = Callable[[int, float, float], None]


def dot(x: Array, y: Array) -> float:
    """Euclidean inner product over all entries of ``x`` and ``y`` (any shape)."""
    return float(array_module(x).vdot(x, y))


def gram(X: Array, Y: Array) -> np.ndarray:
    """Block inner product ``X^T Y`` summed over all axes but the last.

    Parameters
    ----------
    X : (..., k) float64
    Y : (..., l) float64, same leading shape and module as ``X``

    Returns
    -------
    (k, l) float64, NumPy (a small matrix, for the host's eigensolvers)
    """
    return to_host(X.reshape(-1, X.shape[-1]).T @ Y.reshape(-1, Y.shape[-1]))


@dataclass
class CGResult:
    """Outcome of :func:`cg`.

    Attributes
    ----------
    x : array, shape of ``b``
        Final iterate.
    converged : bool
        ``||r|| <= rtol * ||b||`` was reached within ``maxiter`` iterations.
    iterations : int
        Iterations done in total (including those before a resume).
    residuals : list of float
        ``||r_k||`` for ``k = 0 .. iterations``.
    bnorm : float
        ``||b||``.
    time : float
        Seconds spent, including the run before a resume.
    """

    x: Array
    converged: bool
    iterations: int
    residuals: list[float]
    bnorm: float
    time: float


def cg(
    A: Callable[[Array], Array],
    b: Array,
    *,
    x0: Array | None = None,
    M: Callable[[Array], Array] | None = None,
    rtol: float = 1e-6,
    maxiter: int = 1000,
    inner: Inner = dot,
    callback: Callback | None = None,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 0,
    checkpoint_seconds: float = 0.0,
    resume: str | os.PathLike | None = None,
) -> CGResult:
    """Solve ``A x = b`` by (preconditioned) conjugate gradients.

    Parameters
    ----------
    A : callable, array -> array of the same shape
        Symmetric positive definite operator.
    b : array of any shape, float64
        Right-hand side.
    x0 : array, shape of ``b``, optional
        Initial guess (zero by default).  Not allowed with ``resume``.
    M : callable, optional
        Symmetric positive definite preconditioner, ``z = M r`` (approximates
        ``A^{-1}``).  ``None``: plain CG.
    rtol : float
        Stop when ``||r|| <= rtol * ||b||``.
    maxiter : int
        Total iteration limit, counted from the first start (a resumed run
        keeps counting).  Running out is not an error: ``converged`` is False.
    inner : callable ``(x, y) -> float``
        The only inner product used (see the module docstring).
    callback : callable ``(iteration, residual_norm, seconds)``, optional
        Called after every iteration (after any checkpoint of that iteration).
    checkpoint : path, optional
        Where the state is saved (``.npz``, written to a temporary file in
        the same folder, then renamed over ``checkpoint``).
    checkpoint_every : int
        Save every that many iterations; 0 never.
    checkpoint_seconds : float
        Also save after the first iteration that ends this many seconds after
        the last save (or this call's start); 0 never.  Time suits devices
        of different speed: an iteration takes milliseconds on a GPU and
        tenths of a second on a few CPU cores.
    resume : path, optional
        Continue from a checkpoint of the same problem; the iterates equal an
        uninterrupted run's bit for bit.

    Returns
    -------
    CGResult

    Raises
    ------
    FftmatvecError
        ``b`` or an iterate holds NaN/Inf, ``A`` or ``M`` is not positive
        definite, or a checkpoint cannot be read or belongs to another ``b``.
    ConfigError
        Inconsistent arguments.
    """
    if rtol < 0 or maxiter < 0 or checkpoint_every < 0 or not checkpoint_seconds >= 0:
        raise ConfigError("cg: rtol, maxiter, checkpoint_every and checkpoint_seconds must be >= 0")
    if (checkpoint_every or checkpoint_seconds) and checkpoint is None:
        raise ConfigError("cg: checkpoint_every and checkpoint_seconds need a checkpoint path")
    if resume is not None and x0 is not None:
        raise ConfigError("cg: give either x0 or resume, not both")

    bnorm = math.sqrt(inner(b, b))
    if not math.isfinite(bnorm):
        raise FftmatvecError("cg: the right-hand side contains NaN or Inf")
    start = last_save = time.perf_counter()
    if resume is not None:
        x, r, p, rz, it, residuals, before = _load(resume, b, bnorm)
    else:
        x = array_module(b).zeros_like(b) if x0 is None else x0
        r = b if x0 is None else b - A(x0)
        p = r if M is None else M(r)
        rr = inner(r, r)
        rz = rr if M is None else inner(r, p)
        _check_residual(rr, rz, 0)
        it, residuals, before = 0, [math.sqrt(rr)], 0.0

    while residuals[-1] > rtol * bnorm and it < maxiter:
        q = A(p)
        pq = inner(p, q)
        if not math.isfinite(pq):
            raise FftmatvecError(f"cg: NaN or Inf in A p at iteration {it + 1}")
        if pq <= 0:
            raise FftmatvecError(
                f"cg: A is not positive definite (p^T A p = {pq:.3e} at iteration {it + 1})")
        alpha = rz / pq
        x = x + alpha * p
        r = r - alpha * q
        z = r if M is None else M(r)
        rr = inner(r, r)
        rz_new = rr if M is None else inner(r, z)
        _check_residual(rr, rz_new, it + 1)
        p = z + (rz_new / rz) * p
        rz = rz_new
        it += 1
        residuals.append(math.sqrt(rr))
        now = time.perf_counter()
        elapsed = before + now - start
        if (checkpoint_every and it % checkpoint_every == 0) or (
                checkpoint_seconds and now - last_save >= checkpoint_seconds):
            _save(checkpoint, x=to_host(x), r=to_host(r), p=to_host(p), rz=rz, iteration=it, residuals=residuals,
                  bnorm=bnorm, elapsed=elapsed)
            last_save = time.perf_counter()
        if callback is not None:
            callback(it, residuals[-1], elapsed)

    return CGResult(x, residuals[-1] <= rtol * bnorm, it, residuals, bnorm,
                    before + time.perf_counter() - start)


def _check_residual(rr: float, rz: float, it: int) -> None:
    """Raise on a non-finite residual or ``r^T M r < 0`` at iteration ``it``."""
    if not (math.isfinite(rr) and math.isfinite(rz)):
        raise FftmatvecError(f"cg: NaN or Inf in the residual at iteration {it}")
    if rz < 0:
        raise FftmatvecError(
            f"cg: M is not positive definite (r^T M r = {rz:.3e} at iteration {it})")


def _save(path: str | os.PathLike, **state) -> None:
    """Write ``state`` to ``path`` atomically (temporary file + ``os.replace``)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **state)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _load(path: str | os.PathLike, b: Array, bnorm: float):
    """Read a checkpoint of :func:`cg` for right-hand side ``b``; the vectors
    come back in ``b``'s module."""
    try:
        with np.load(path) as z:
            state = {k: z[k] for k in z.files}
        x, r, p = state["x"], state["r"], state["p"]
        rz, it = float(state["rz"]), int(state["iteration"])
        residuals, saved_bnorm = state["residuals"].tolist(), float(state["bnorm"])
        elapsed = float(state["elapsed"])
    except (OSError, ValueError, KeyError) as exc:
        raise FftmatvecError(f"cg: cannot resume from {path}: {exc}") from exc
    if x.shape != b.shape or saved_bnorm != bnorm:
        raise FftmatvecError(
            f"cg: checkpoint {path} was written for another right-hand side "
            f"(shape {x.shape}, ||b|| = {saved_bnorm!r}; now {b.shape}, {bnorm!r})")
    xp = array_module(b)
    return xp.asarray(x), xp.asarray(r), xp.asarray(p), rz, it, residuals, elapsed
