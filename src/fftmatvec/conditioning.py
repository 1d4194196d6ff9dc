"""What the error model needs to know about an operator: ``||F||``, ``||F||_F``, the condition of ``Fhat``.

:func:`conditioning` takes the singular values of every frequency's
``Fhat[k]`` when that is cheap and estimates them otherwise (sampled
frequencies, a power iteration on all of them); on a process grid
:func:`grid_conditioning` estimates ``||F||`` through the grid's collectives.
:func:`gaussian_rows` draws the random vectors both use, the same on every
grid.  The measurement of the precision codes (:mod:`fftmatvec.tuning`) uses
them; see docs/precision.md.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .backend import Backend, get_backend
from .backend.arrays import array_module, to_host
from .backend.pcg64 import device_uniforms
from .backend.threads import map_slices
from .errors import ConfigError, FftmatvecError
from .grid import SerialGrid
from .precision import model_sizes

#: Largest ``Nf * min(nd, nm)**2 * max(nd, nm)`` (about the flops of the
#: batched SVD) for which :func:`conditioning` computes every frequency's
#: singular values; beyond it they are estimated.  2e9 takes a few seconds on
#: two cores (QR of each ``Fhat[k]^H`` first, then the SVD of the small
#: triangle): e.g. ``Nm=1000, Nd=50, Nt=500`` is exact, the headline
#: ``Nm=5000, Nd=100, Nt=1000`` (5e10) is estimated.
EXACT_SVD_WORK = 2e9

#: Frequencies whose full SVD is taken when estimating (evenly spaced, both ends).
SAMPLED_FREQUENCIES = 16

#: Steps of the batched power iteration for ``max_k sigma_max(Fhat[k])`` when estimating.
POWER_STEPS = 30

#: Key of the power iteration's start vector, apart from the probes' keys ``(seed, direction, probe)``.
_POWER_KEY = 1 << 20


@dataclass(frozen=True)
class Conditioning:
    """What the error model needs to know about ``Fhat``.

    Attributes
    ----------
    norm : float
        ``max_k sigma_max(Fhat[k])``: the 2-norm of the circulant embedding
        of ``F``, an upper bound of ``||F||_2 = ||F^T||_2``.
    cond : float
        ``max_k sigma_max(Fhat[k]) / sigma_min(Fhat[k])`` over the
        ``min(nd, nm)`` singular values of each frequency: design.md's
        ``kappa(Fhat)``.  Infinite when some ``Fhat[k]`` is rank deficient.
        A diagnostic: the error of a product does not scale with it.
    frobenius : float
        ``||F||_F`` of the BTT operator, ``sqrt(sum_t (Nt - t) ||f[:, :, t]||^2)``.
    kappa_forward, kappa_adjoint : float
        A-priori product condition at a random Gaussian input:
        ``norm * sqrt(n_in) / frobenius`` with ``n_in = Nm*Nt`` for ``F`` and
        ``Nd*Nt`` for ``F^T`` (``E ||F x||^2 = ||F||_F^2`` for unit white ``x``).
        The measured product condition ``norm ||x|| / ||F x||`` of the probes
        concentrates here.
    exact : bool
        Whether ``norm`` and ``cond`` come from every frequency's SVD.
    method : str
        How they were obtained.
    """

    norm: float
    cond: float
    frobenius: float
    kappa_forward: float
    kappa_adjoint: float
    exact: bool
    method: str

    def kappa(self, direction: str) -> float:
        """The a-priori product condition of ``direction`` ("forward"/"adjoint")."""
        model_sizes(direction, 1, 1)  # validates the name
        return self.kappa_forward if direction == "forward" else self.kappa_adjoint

    def to_dict(self) -> dict[str, Any]:
        return {k: finite_or_none(v) for k, v in asdict(self).items()}


def _singular_values(A: Any) -> np.ndarray:
    """Singular values of a stack ``(k, p, q)`` (a NumPy or CuPy array),
    largest first, on the host.

    For a wide or tall stack the QR factor of the long side is taken first
    (``np.linalg.svd`` of a 50 x 1000 complex matrix is ~10x slower than a
    QR plus the SVD of the 50 x 50 triangle); same singular values.  A NumPy
    stack is split over threads (LAPACK runs without the GIL); a CuPy stack
    is factored on its device, batched (cuSOLVER), and only the values come
    back.
    """
    xp = array_module(A)
    p, q = A.shape[1:]

    def values(B: Any) -> Any:
        if max(p, q) >= 2 * min(p, q):
            B = xp.linalg.qr(B.conj().transpose(0, 2, 1) if p < q else B, mode="r")
        return xp.linalg.svd(B, compute_uv=False)

    if xp is not np:
        return to_host(values(A))
    return np.concatenate(map_slices(lambda ks: values(A[ks]), len(A)))


def _frobenius(f: np.ndarray) -> float:
    """``||F||_F`` from ``f`` (nd, nm, Nt) on the host, its columns split over
    threads (a single-threaded pass took 0.6 s of a GPU set-up's 3 s at
    ``Nm=5000, Nd=100, Nt=1000``, docs/precision.md)."""
    nt = f.shape[2]
    energy = sum(map_slices(lambda cols: np.einsum("ijt,ijt->t", f[:, cols], f[:, cols]), f.shape[1]))
    return float(math.sqrt(float(np.dot(nt - np.arange(nt), energy))))  # energy[t] = ||f[:, :, t]||^2


def conditioning(
    f: np.ndarray,
    *,
    backend: "str | Backend" = "cpu",
    Fhat: Any = None,
    exact: bool | None = None,
    seed: int = 0,
    power_Fhat: Any = None,
) -> Conditioning:
    """Norm and condition of ``F`` from the singular values of ``Fhat``.

    Parameters
    ----------
    f : (nd, nm, Nt) float64, SOTI
        First block column (for ``||F||_F``, and ``Fhat`` when not given).
    backend : Backend or device name
        Where ``Fhat`` lives (used when estimating).
    Fhat : (Nf, nd, nm) complex array on ``backend``, optional
        ``rfft(pad(f))`` if already computed (an engine's ``Fhat`` copy).
    exact : bool, optional
        Force the full batched SVD (True) or the estimate (False); default:
        exact when ``Nf * min(nd, nm)**2 * max(nd, nm) <= EXACT_SVD_WORK``.
    seed : int
        Start vectors of the power iteration.
    power_Fhat : (Nf, nd, nm) complex array on ``backend``, optional
        The copy the power iteration reads: a complex64 one halves its reads
        (default ``Fhat``, or a complex64 transform of ``f``).

    Estimate: the full SVD at :data:`SAMPLED_FREQUENCIES` evenly spaced
    frequencies (``cond`` is their maximum, a lower bound of the true one)
    and :data:`POWER_STEPS` steps of a power iteration on all frequencies at
    once for ``norm`` (through ``backend.sbgemv``: two reads of ``Fhat`` per
    step).  Both are reported with ``exact=False``.
    """
    be = get_backend(backend)
    f = np.asarray(f, dtype=np.float64)
    if f.ndim != 3:
        raise ConfigError(f"f must have shape (nd, nm, Nt), got {f.shape}")
    nd, nm, nt = f.shape
    nf = nt + 1
    frob = _frobenius(f)
    if not frob > 0:
        raise FftmatvecError("F is zero: relative errors of its products are undefined")
    work = nf * min(nd, nm) ** 2 * max(nd, nm)
    if exact is None:
        exact = work <= EXACT_SVD_WORK

    def freqs(idx) -> Any:
        """``Fhat`` at the frequencies ``idx`` (a slice or indices) in complex128, where ``Fhat`` is."""
        k = np.atleast_1d(np.arange(nf)[idx])
        if Fhat is not None:
            return be.xp.asarray(Fhat[idx if isinstance(idx, slice) else be.xp.asarray(k)], dtype=np.complex128)
        # only the asked frequencies: a DFT of f at those bins
        w = np.exp(-2j * np.pi * np.outer(np.arange(nt), k) / (2 * nt))
        return np.einsum("ijt,tk->kij", f, w)

    if exact:
        chunk = max(1, int((64 << 20) // (16 * nd * nm)))
        if Fhat is None:
            full = np.fft.rfft(f, n=2 * nt, axis=-1).transpose(2, 0, 1)  # (Nf, nd, nm) view
            parts = (np.ascontiguousarray(full[k:k + chunk]) for k in range(0, nf, chunk))
        else:
            parts = (freqs(slice(k, k + chunk)) for k in range(0, nf, chunk))
        smax, cond = 0.0, 0.0
        for A in parts:
            s = _singular_values(A)
            smax = max(smax, float(s[:, 0].max()))
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(s[:, -1] > 0, s[:, 0] / s[:, -1], np.inf)
            cond = max(cond, float(ratio.max()))
        method = f"batched SVD of all {nf} frequencies"
    else:
        idx = np.unique(np.linspace(0, nf - 1, min(SAMPLED_FREQUENCIES, nf)).round().astype(int))
        s = _singular_values(freqs(idx))
        with np.errstate(divide="ignore", invalid="ignore"):
            cond = float(np.where(s[:, -1] > 0, s[:, 0] / s[:, -1], np.inf).max())
        if power_Fhat is None:
            power_Fhat = Fhat if Fhat is not None else be.fft_matrix(f, np.complex64)
        smax = max(float(s[:, 0].max()), _power_norm(be, power_Fhat, seed))
        method = (
            f"estimated: SVD at {len(idx)} of {nf} frequencies, "
            f"{POWER_STEPS} steps of power iteration on all"
        )
    n_norm = smax * math.sqrt(nt) / frob
    return Conditioning(
        norm=smax,
        cond=cond,
        frobenius=frob,
        kappa_forward=n_norm * math.sqrt(nm),
        kappa_adjoint=n_norm * math.sqrt(nd),
        exact=bool(exact),
        method=method,
    )


def _power_norm(be: Backend, Fhat: Any, seed: int, grid: Any = None, col0: int = 0) -> float:
    """``max_k sigma_max(Fhat[k])`` by a power iteration on all frequencies at once.

    On a process grid ``Fhat`` is this rank's block ``(Nf, nd, nm)`` of
    columns ``col0:col0 + nm``; the sums over blocks go through the grid's
    collectives (collective).  The start vector does not depend on the grid.
    """
    xp = be.xp
    grid = SerialGrid() if grid is None else grid
    nf, nd, nm = Fhat.shape
    start = gaussian_rows((seed, _POWER_KEY), col0, nm, 2 * nf, xp)  # each column's real, then imaginary parts
    v = xp.ascontiguousarray((start[:, :nf] + 1j * start[:, nf:]).T[:, :, None]).astype(Fhat.dtype)
    w = be.empty((nf, nd, 1), Fhat.dtype)
    sigma2 = None
    for _ in range(POWER_STEPS):
        nv2 = grid.row_reduce(xp.sum(xp.abs(v) ** 2, axis=1, keepdims=True), all=True)
        v /= xp.where(nv2 > 0, xp.sqrt(nv2), 1)
        _partial(be, Fhat, v, w, adjoint=False)  # w = F v, ||w|| -> sigma_max from below
        w = grid.row_reduce(w, all=True)
        sigma2 = grid.col_reduce(xp.sum(xp.abs(w) ** 2, axis=1), all=True)
        _partial(be, Fhat, w, v, adjoint=True)  # v = F^H F v
        v = grid.col_reduce(v, all=True)
    be.synchronize()
    return math.sqrt(float(be.to_host(sigma2).max()))


def _partial(be: Backend, Fhat: Any, x: Any, out: Any, adjoint: bool) -> None:
    """``out = Fhat x`` (``Fhat^H x``) of this rank's block; zero where the
    rank holds no block rows or columns (its part of a sum over the grid)."""
    if Fhat.size:
        be.sbgemv(Fhat, x, out=out, adjoint=adjoint)
    else:
        out.fill(0)


def grid_conditioning(be: Backend, f: np.ndarray, Fhat: Any, grid: Any, shape: tuple[int, int, int],
                       seed: int) -> Conditioning:
    """:func:`conditioning` on a process grid (collective): ``f`` and
    ``Fhat`` are this rank's slab.  ``norm`` by the power iteration only;
    ``cond`` would need whole frequencies on one rank and is not computed
    (NaN)."""
    Nd, Nm, Nt = shape
    frob = math.sqrt(float(grid_allreduce(grid, np.array([_frobenius(f) ** 2]))[0]))
    if not frob > 0:
        raise FftmatvecError("F is zero: relative errors of its products are undefined")
    smax = _power_norm(be, Fhat, seed, grid, grid.col_block(Nm)[0])
    n_norm = smax * math.sqrt(Nt) / frob
    return Conditioning(
        norm=smax,
        cond=math.nan,
        frobenius=frob,
        kappa_forward=n_norm * math.sqrt(Nm),
        kappa_adjoint=n_norm * math.sqrt(Nd),
        exact=False,
        method=f"on a {grid.pr}x{grid.pc} grid, {POWER_STEPS} steps of power iteration on all "
               "frequencies (cond not computed)",
    )


def gaussian_rows(key: tuple[int, ...], row0: int, n_rows: int, ncols: int, xp: Any = np) -> Any:
    """Rows ``row0:row0 + n_rows`` of a standard Gaussian ``(N, ncols)`` array
    fixed by ``key``, the same values whichever rows are asked for: each rank
    draws its block of a probe, and every grid sees the same probes.

    Box-Muller, both halves: each row takes ``2 * ceil(ncols / 2)`` uniforms
    of a PCG64 stream advanced to its first row (one 64-bit draw a uniform).
    For NumPy the rows are split over threads, each drawing its own from the
    advanced stream and transforming them, so the values do not depend on the
    thread count.  For CuPy the device draws the same uniforms
    (:func:`~fftmatvec.backend.pcg64.device_uniforms`) and transforms them.
    """
    half = -(-ncols // 2)
    if xp is not np:
        bits = np.random.PCG64(np.random.SeedSequence(list(key)))
        uniforms = device_uniforms(bits, 2 * half * row0, n_rows * 2 * half)
        return _box_muller(uniforms.reshape(n_rows, 2, half), ncols, xp)
    gaussians = np.empty((n_rows, ncols))

    def draw(rows: slice) -> None:
        bits = np.random.PCG64(np.random.SeedSequence(list(key)))
        bits.advance(2 * half * (row0 + rows.start))
        stream = np.random.Generator(bits)
        step = max(1, (1 << 20) // (16 * half))  # a few rows at a time: the temporaries stay in the cache
        for r in range(rows.start, rows.stop, step):
            part = slice(r, min(r + step, rows.stop))
            gaussians[part] = _box_muller(stream.random((part.stop - part.start, 2, half)), ncols, np)

    map_slices(draw, n_rows)
    return gaussians


def _box_muller(u: Any, ncols: int, xp: Any) -> Any:
    """Gaussians ``(n, ncols)`` from uniforms ``u (n, 2, ceil(ncols / 2))`` in ``[0, 1)``."""
    radius, angle = xp.sqrt(-2.0 * xp.log1p(-u[:, 0])), 2.0 * math.pi * u[:, 1]
    return xp.concatenate([radius * xp.cos(angle), radius * xp.sin(angle)], axis=1)[:, :ncols]


def grid_allreduce(grid: Any, a: np.ndarray, op: str = "sum") -> np.ndarray:
    """``a`` (host float64, C-contiguous) summed (``op="max"``: its maximum)
    elementwise over the ranks of ``grid`` in place, bit for bit the same on
    every rank (reduced on rank 0, then broadcast: an allreduce may round
    differently on different ranks, and the measurement branches on these
    values, around collectives); ``a`` itself on one process."""
    comm = getattr(grid, "comm", None)
    if comm is None:
        return a
    from mpi4py import MPI

    mpi_op = MPI.SUM if op == "sum" else MPI.MAX
    comm.Reduce(MPI.IN_PLACE if comm.Get_rank() == 0 else a, a if comm.Get_rank() == 0 else None, op=mpi_op, root=0)
    comm.Bcast(a, root=0)
    return a


def finite_or_none(v: Any) -> Any:
    """JSON has no inf/nan: those become None."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v
