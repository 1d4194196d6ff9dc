"""Mixed precision you can trust: conditioning, measured Pareto front, automatic choice.

For one operator this module

1. computes the quantities of the error model of design.md section 3
   (:mod:`fftmatvec.conditioning`: ``||F||`` from the singular values of
   ``Fhat``, exactly with a batched SVD when that is cheap, otherwise
   estimated);
2. measures, for each of the 32 precision codes and for ``F`` and ``F^T``,
   the relative error against ``ddddd`` on random probe vectors (maximum over
   the probes) and the median time of one product (:func:`measure`), with
   the predicted bound :func:`fftmatvec.precision.error_bound` beside it;
3. marks the Pareto front of time versus error and picks, separately for
   ``F`` and ``F^T``, the fastest code whose measured error (and, if asked,
   predicted bound) meets a tolerance (:meth:`Tuning.choose`, :func:`tune`);
   codes within :data:`TIE` (3%) of the fastest time count as equally fast
   and the most accurate of them is taken.

``BTTOperator(f, precision="auto", tolerance=1e-7)`` runs :meth:`AutoRequest.run`
on its own engine (:class:`~fftmatvec.btt.LocalBTT`), which keeps ``Fhat`` in
both complex precisions while every code runs through it (one transform: the
complex64 copy is rounded from the complex128 one), then only in those of
the chosen codes.  On a process grid each product is the distributed one
(:func:`measure_engine`).  Only the public backend interface is used
(``asarray``, ``copy_as``, ``to_host``, ``sbgemv``, ``synchronize`` and the
array module's sums), so the same code measures on the CPU and on a GPU.

See docs/precision.md.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable

import numpy as np

from . import precision as _precision
from .backend import Backend, get_backend
from .btt import LocalBTT
from .errors import ConfigError, collective
from .conditioning import (Conditioning, conditioning, finite_or_none, gaussian_rows, grid_allreduce,
                           grid_conditioning)
from .grid import SerialGrid
from .precision import ALL_CODES, DEFAULT, DIRECTIONS, error_bound, model_sizes, parse, validate_tolerance

#: Relative time difference below which two codes count as equally fast
#: (:meth:`Tuning.choose` then prefers the more accurate one).
TIE = 0.03


# -- measurement -----------------------------------------------------------------
@dataclass(frozen=True)
class Measurement:
    """One code in one direction.

    Attributes
    ----------
    direction : "forward" (``F m``) or "adjoint" (``F^T d``)
    code : str
    error : float
        Largest relative error ``||y - y_ref|| / ||y_ref||`` over the probes,
        ``y_ref`` the ``ddddd`` product (so ``ddddd`` itself has 0); the
        first probe's for a code past :func:`measure_engine`'s ``time_below``
        there.
    time : float
        Median seconds of one product (``K = 1``, input already on the
        device in the pad precision, device synchronised around the call);
        NaN for a code not timed (:func:`measure_engine`'s ``time_below``).
    bound : float
        :func:`~fftmatvec.precision.error_bound` with the probes' ``kappa``.
    pareto : bool
        On the Pareto front of time versus error (no other code is at least
        as fast and at least as accurate, and strictly better in one).
    meets : bool
        Meets the tolerance of the :class:`Tuning` it belongs to.
    """

    direction: str
    code: str
    error: float
    time: float
    bound: float
    pareto: bool = False
    meets: bool = False

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["time_s"] = d.pop("time")
        return {k: finite_or_none(v) for k, v in d.items()}


def pareto_front(times: Iterable[float], errors: Iterable[float]) -> list[bool]:
    """For points ``(time, error)``, whether each is on the Pareto front (not
    dominated: no other point has ``time <=`` and ``error <=`` with one strict)."""
    pts = list(zip(map(float, times), map(float, errors)))
    return [
        not any(t2 <= t and e2 <= e and (t2 < t or e2 < e) for t2, e2 in pts)
        for t, e in pts
    ]


@dataclass
class Tuning:
    """Measurements of every code for one operator, and the choice for a tolerance.

    Attributes
    ----------
    entries : list[Measurement]
        One per (direction, code) measured.
    conditioning : Conditioning
    kappa : dict[str, float]
        Per direction, the product condition used in the bounds: the largest
        ``norm ||x|| / ||F x||`` over the probes.
    sizes : dict
        ``Nd, Nm, Nt, pr, pc``.
    device : str
        Backend name.
    probes, repeats : int
    tolerance : float or None
        Set by :meth:`choose`.
    forward, adjoint : str or None
        The chosen codes (None for a direction not measured).
    met : dict[str, bool]
        Whether the chosen code of each direction meets the tolerance (False:
        no code did, the all-double ``ddddd`` was taken).
    require_bound : bool
        Whether the predicted bound had to meet the tolerance too.
    tie : float
        Relative time difference treated as a tie by :meth:`choose`.
    """

    entries: list[Measurement]
    conditioning: Conditioning
    kappa: dict[str, float]
    sizes: dict[str, int]
    device: str
    probes: int
    repeats: int
    tolerance: float | None = None
    forward: str | None = None
    adjoint: str | None = None
    met: dict[str, bool] = field(default_factory=dict)
    require_bound: bool = False
    tie: float = TIE

    @property
    def directions(self) -> list[str]:
        return [d for d in DIRECTIONS if any(e.direction == d for e in self.entries)]

    def table(self, direction: str) -> list[Measurement]:
        """The entries of one direction, fastest first."""
        return sorted((e for e in self.entries if e.direction == direction),
                      key=lambda e: (math.isnan(e.time), e.time, e.error))

    def entry(self, direction: str, code: str) -> Measurement:
        for e in self.entries:
            if e.direction == direction and e.code == code:
                return e
        raise KeyError((direction, code))

    def chosen(self, direction: str) -> str | None:
        return self.forward if direction == "forward" else self.adjoint

    def speedup(self, direction: str) -> float:
        """Time of ``ddddd`` over the time of the chosen code."""
        return self.entry(direction, DEFAULT).time / self.entry(direction, self.chosen(direction)).time

    def choose(self, tolerance: float, require_bound: bool = False, tie: float = TIE) -> "Tuning":
        """A copy with the fastest code per direction whose measured error
        (and predicted bound, if ``require_bound``) is at most ``tolerance``;
        a code that was not timed cannot be chosen.

        Codes whose median time is within ``tie`` (relative) of the fastest
        admissible one count as equally fast (timing noise); among those the
        most accurate is taken.  ``tie=0`` takes the strictly fastest.  Either
        way the choice lies on the Pareto front.  When no code qualifies
        (``require_bound`` with a tolerance below the all-double bound),
        ``ddddd`` is taken and ``met[direction]`` is False.
        """
        tol = validate_tolerance(tolerance)
        _check_tie(tie)
        entries, chosen, met = [], {}, {}
        for e in self.entries:
            ok = e.error <= tol and (not require_bound or e.bound <= tol) and not math.isnan(e.time)
            entries.append(replace(e, meets=bool(ok)))
        for d in self.directions:
            ok = [e for e in entries if e.direction == d and e.meets]
            met[d] = bool(ok)
            if not ok:
                chosen[d] = DEFAULT
                continue
            fastest = min(e.time for e in ok)
            near = [e for e in ok if e.time <= fastest * (1 + tie)]
            chosen[d] = min(near, key=lambda e: (e.error, e.time)).code
        return replace(
            self, entries=entries, tolerance=tol, require_bound=bool(require_bound), met=met, tie=float(tie),
            forward=chosen.get("forward"), adjoint=chosen.get("adjoint"),
        )

    # -- output -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: keys ``forward``, ``adjoint``, ``table`` (one entry per
        code and direction) and the context (tolerance, sizes, kappa, ...)."""
        return {
            "forward": self.forward,
            "adjoint": self.adjoint,
            "tolerance": self.tolerance,
            "require_bound": self.require_bound,
            "tie": self.tie,
            "met": self.met,
            "device": self.device,
            "sizes": self.sizes,
            "probes": self.probes,
            "repeats": self.repeats,
            "kappa": {k: finite_or_none(v) for k, v in self.kappa.items()},
            "conditioning": self.conditioning.to_dict(),
            "constants": dict(_precision.CONSTANTS),
            "table": [e.to_dict() for d in self.directions for e in self.table(d)],
        }

    def format(self) -> str:
        """The human-readable table of both directions and the choice."""
        s, c = self.sizes, self.conditioning
        lines = [
            f"Nm={s['Nm']} Nd={s['Nd']} Nt={s['Nt']} grid {s['pr']}x{s['pc']}  device={self.device}  "
            f"probes={self.probes} repeats={self.repeats}",
            f"||F|| <= {c.norm:.4g}  ||F||_F = {c.frobenius:.4g}  cond(Fhat) = {c.cond:.3g}  "
            f"({'exact' if c.exact else 'estimated'}: {c.method})",
        ]
        for d in self.directions:
            name = "F m" if d == "forward" else "F^T d"
            ref = self.entry(d, DEFAULT).time
            lines += [
                "",
                f"{name} ({d}): kappa = {self.kappa[d]:.3g} (probes), {c.kappa(d):.3g} (a priori)",
                f"  {'code':<6} {'bound':>9} {'error':>9} {'time [ms]':>10} {'vs ddddd':>8}  front  meets",
            ]
            for e in self.table(d):
                mark = "<- chosen" if e.code == self.chosen(d) and self.tolerance is not None else ""
                meets = ("yes" if e.meets else "no") if self.tolerance is not None else "-"
                timed = f"{'-':>10} {'-':>8}" if math.isnan(e.time) else f"{e.time * 1e3:10.3f} {ref / e.time:7.2f}x"
                lines.append(
                    f"  {e.code:<6} {e.bound:9.2e} {e.error:9.2e} {timed}"
                    f"  {'*' if e.pareto else ' ':^5}  {meets:<5} {mark}".rstrip()
                )
        if self.tolerance is not None:
            lines.append("")
            rule = "measured error and predicted bound" if self.require_bound else "measured error"
            for d in self.directions:
                e = self.entry(d, self.chosen(d))
                name = "F  " if d == "forward" else "F^T"
                note = "" if self.met.get(d) else f"  (NO code meets {self.tolerance:g}: all-double kept)"
                lines.append(
                    f"chosen for {name}: {e.code}  error {e.error:.2e}  bound {e.bound:.2e}  "
                    f"{e.time * 1e3:.3f} ms = {self.speedup(d):.2f}x ddddd  ({rule} <= {self.tolerance:g}; "
                    f"times within {self.tie:.0%} tie){note}"
                )
        return "\n".join(lines)

    def plot(self, path: str) -> str:
        """Save the time-versus-error plot with the Pareto front (PNG, Agg)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        dirs = self.directions
        fig, axes = plt.subplots(1, len(dirs), figsize=(6.5 * len(dirs), 5), squeeze=False)
        for ax, d in zip(axes[0], dirs):
            tab = [e for e in self.table(d) if not math.isnan(e.time)]
            positive = [e.error for e in tab if e.error > 0]
            floor = (min(positive) if positive else float(np.finfo(np.float64).eps)) / 10  # ddddd's 0
            t = np.array([e.time * 1e3 for e in tab])
            err = np.array([max(e.error, floor) for e in tab])
            front = np.array([e.pareto for e in tab])
            ax.scatter(t[~front], err[~front], c="0.6", s=18, label="code")
            order = np.argsort(t[front])
            ax.plot(t[front][order], err[front][order], "o-", c="C0", label="Pareto front")
            for n, (e, x, y) in enumerate((e, x, y) for e, x, y in zip(tab, t, err) if e.pareto):
                text = e.code + (" (reference, error 0)" if e.error == 0 else "")
                ax.annotate(text, (x, y), textcoords="offset points", xytext=(4, 5 if n % 2 else -11), fontsize=8)
            if self.tolerance is not None:
                ax.axhline(self.tolerance, c="C3", ls="--", lw=1, label=f"tolerance {self.tolerance:g}")
                pick = self.entry(d, self.chosen(d))
                ax.scatter([pick.time * 1e3], [max(pick.error, floor)], s=140, facecolors="none",
                           edgecolors="C3", linewidths=2, label=f"chosen {pick.code}")
            ax.set_yscale("log")
            ax.set(xlabel="median time per product [ms]", ylabel="max relative error vs ddddd over the probes",
                   title=("F m" if d == "forward" else "F^T d") + f"  ({self.device}, Nm={self.sizes['Nm']}, "
                   f"Nd={self.sizes['Nd']}, Nt={self.sizes['Nt']})")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return str(path)


def _check_tie(tie: Any) -> None:
    if isinstance(tie, bool) or not isinstance(tie, (int, float)) or not 0 <= tie < 1:
        raise ConfigError(f"tie must be a number in [0, 1), got {tie!r}")


def measure(f: np.ndarray, *, backend: "str | Backend" = "cpu", pr: int = 1, pc: int = 1, **options: Any) -> Tuning:
    """Measure error and time of each code on the operator of ``f``, in one process.

    Parameters
    ----------
    f : (Nd, Nm, Nt) float64, SOTI
        The whole first block column.
    backend : Backend or device name
    pr, pc : int
        Grid shape for the model's ``n_inner``/``n_reduce`` only (the bound a
        grid of that shape would have; the products run in this process).
        To measure on a grid, ``BTTOperator(..., grid=grid, precision="auto")``.
    **options
        ``codes``, ``directions``, ``probes``, ``repeats``, ``seed``,
        ``exact``, ``time_below``: as for :func:`measure_engine` (every code
        is timed by default).

    Returns
    -------
    Tuning
        Without a choice; call :meth:`Tuning.choose`.
    """
    be = get_backend(backend)
    f = np.asarray(f, dtype=np.float64)
    if f.ndim != 3:
        raise ConfigError(f"f must have shape (Nd, Nm, Nt), got {f.shape}")
    engine = LocalBTT(f, be, MEASURED_DTYPES)
    return measure_engine(engine, f, SerialGrid(), shape=f.shape, pr=pr, pc=pc, **options)


#: The precisions of ``Fhat`` an engine keeps while every code is measured.
MEASURED_DTYPES = (np.dtype(np.complex64), np.dtype(np.complex128))


def measure_engine(
    engine: LocalBTT,
    f: np.ndarray,
    grid: Any,
    *,
    shape: tuple[int, int, int],
    codes: Iterable[str] = ALL_CODES,
    directions: Iterable[str] = DIRECTIONS,
    probes: int = 3,
    repeats: int = 5,
    seed: int = 0,
    exact: bool | None = None,
    pr: int | None = None,
    pc: int | None = None,
    time_below: float | None = None,
) -> Tuning:
    """Measure error and time of each code through the products of a process grid.

    Collective over ``grid``: every rank calls it with its own slab.  Each
    product is the distributed one (broadcast of the input blocks, the local
    product, the reduction in the code's stage-5 precision), so the errors
    include the reduction's and the times its communication.

    Parameters
    ----------
    engine : LocalBTT
        This rank's engine, ``Fhat`` kept in complex64 and complex128
        (:data:`MEASURED_DTYPES`); its workspaces of every code stay until
        :meth:`~fftmatvec.btt.LocalBTT.keep`.
    f : (nd, nm, Nt) float64
        This rank's slab of the first block column (for ``||F||_F``).
    grid : process grid
        :class:`~fftmatvec.grid.SerialGrid` for one process.
    shape : (Nd, Nm, Nt)
        Of the whole operator.
    codes : iterable of str
        Default all 32.  ``ddddd`` is always the reference.
    directions : iterable of "forward", "adjoint"
    probes : int
        Random Gaussian probe vectors per direction (the error is the
        maximum over them).  Probe ``p`` of direction ``i`` is fixed by
        ``(seed, i, p)`` whatever the grid (:func:`gaussian_rows`).
    repeats : int
        Timed products per code (the median is kept), taken round-robin over
        the codes in a shuffled order so that drift does not favour one.  On
        a grid each product starts after a barrier and counts the slowest
        rank's time.
    seed : int
        Seed of the probes and of the order.
    exact : bool, optional
        Passed to :func:`conditioning` in one process; on a grid the norm is
        estimated (``exact=True`` is a ConfigError).
    pr, pc : int, optional
        Grid shape of the error model; default the grid's.
    time_below : float, optional
        Time only the codes whose measured error is at most this (``ddddd``
        always); the others get a NaN time and stay off the Pareto front.
        A code already past it on the first probe is not probed again: its
        error is that probe's, a lower bound.  A choice for a tolerance needs
        no more (``precision="auto"``).

    Returns
    -------
    Tuning
        The same on every rank (rank 0's), without a choice.
    """
    be = engine.backend
    Nd, Nm, Nt = map(int, shape)
    pr, pc = grid.pr if pr is None else int(pr), grid.pc if pc is None else int(pc)
    codes = [parse(c).code for c in codes]
    directions = list(dict.fromkeys(directions))
    for d in directions:
        model_sizes(d, 1, 1)
    for name, v in (("probes", probes), ("repeats", repeats)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise ConfigError(f"{name} must be a positive integer, got {v!r}")
    probes, repeats = int(probes), int(repeats)
    if exact and grid.size > 1:
        raise ConfigError("exact singular values need the whole matrix in one process; on a grid use exact=None")
    for d in directions:  # every code's kernels, built in the background and at once
        for code in codes:
            engine.build_ahead(d == "adjoint", parse(code), 1)
    with collective(getattr(grid, "comm", None), "preparing the precision measurement"):
        for d in directions:  # every code's buffers (out of memory fails every rank here, not mid-product)
            for code in codes:
                engine.workspace(d == "adjoint", parse(code), 1)
    # the power iteration's estimate of ||F|| needs a few digits: it reads the complex64 copy, half the bytes
    Fhat, single = engine.Fhat[np.dtype(np.complex128)], engine.Fhat[np.dtype(np.complex64)]
    if grid.size == 1:
        cond = conditioning(f, backend=be, Fhat=Fhat, exact=exact, seed=seed, power_Fhat=single)
    else:
        cond = grid_conditioning(be, f, single, grid, (Nd, Nm, Nt), seed)
    order, xp = np.random.default_rng(seed), be.xp
    entries: list[Measurement] = []
    kappa: dict[str, float] = {}
    for i, d in enumerate(directions):
        adjoint = d == "adjoint"
        space = "data" if adjoint else "param"
        row0, n_local = grid.block(space, Nd if adjoint else Nm)
        holds_in, holds_out = grid.holds(space), grid.holds("param" if adjoint else "data")
        drawn = [gaussian_rows((seed, i, p), row0, n_local, Nt, xp) for p in range(probes)] if holds_in else []
        inputs = {dt: [xp.ascontiguousarray(x[:, :, None], dtype=dt) for x in drawn]
                  or [be.empty((n_local, Nt, 1), dt)] * probes for dt in (np.dtype(np.float32), np.dtype(np.float64))}

        def product(x: Any, prec: Any) -> Any:
            """The result block as float64 on the device (a copy: engine outputs are workspace buffers,
            reused), None where the rank holds none; the errors' sums run there, not on host copies."""
            y = _grid_product(engine, grid, x, prec, adjoint)
            return be.copy_as(y, np.float64) if holds_out else None

        # per probe: ||x||^2, ||F x||^2, then per code ||y - F x||^2 (local sums, then summed over the grid)
        sums = np.zeros((2 + len(codes), probes))
        refs = []
        for p in range(probes):
            refs.append(product(inputs[np.dtype(np.float64)][p], parse(DEFAULT)))
            sums[0, p] = float(xp.sum(drawn[p] ** 2)) if drawn else 0.0
            sums[1, p] = float(xp.sum(refs[p] ** 2)) if holds_out else 0.0

        def probe(p: int, coded: Iterable[int]) -> np.ndarray:
            """Probe ``p`` through the codes ``coded``: its column of ``sums``, summed over the grid."""
            for c in coded:
                prec = parse(codes[c])
                y = product(inputs[prec.pad][p], prec)
                sums[2 + c, p] = float(xp.sum((y - refs[p]) ** 2)) if holds_out else 0.0
            return grid_allreduce(grid, np.ascontiguousarray(sums[:, p]))

        def relative(column: np.ndarray) -> np.ndarray:
            """From one probe's summed squares: its product condition ``norm ||x|| / ||F x||``,
            then each code's relative error."""
            norms = np.sqrt(column)
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.where(norms[1] > 0, np.concatenate([[cond.norm * norms[0]], norms[2:]]) / norms[1], math.inf)

        # a code past time_below on the first probe cannot meet it: the other probes skip it (its error
        # stays that probe's, a lower bound), which changes no choice (Tuning.choose)
        first = relative(probe(0, range(len(codes))))
        kept = [c for c, e in enumerate(first[1:]) if time_below is None or codes[c] == DEFAULT or e <= time_below]
        worst = np.max([first] + [relative(probe(p, kept)) for p in range(1, probes)], axis=0)
        kappa[d] = float(worst[0])
        errors = {code: float(worst[1 + c]) for c, code in enumerate(codes)}
        timed = [c for c, code in enumerate(codes)
                 if time_below is None or code == DEFAULT or errors[code] <= time_below]
        times = np.full((repeats, len(codes)), math.nan)
        for r in range(repeats):
            for c in order.permutation(timed):
                prec = parse(codes[c])
                x = inputs[prec.pad][0]
                be.synchronize()
                grid.barrier()
                t0 = time.perf_counter()
                _grid_product(engine, grid, x, prec, adjoint)
                be.synchronize()
                times[r, c] = time.perf_counter() - t0
        med = np.median(grid_allreduce(grid, times, op="max"), axis=0)
        front = [False] * len(codes)
        for c, on_front in zip(timed, pareto_front(med[timed], [errors[codes[c]] for c in timed])):
            front[c] = on_front
        n_inner, n_reduce = model_sizes(d, Nd, Nm, pr, pc)
        for code, t, on_front in zip(codes, med, front):
            bound = error_bound(code, kappa=kappa[d], Nt=Nt, n_inner=n_inner, n_reduce=n_reduce)
            entries.append(Measurement(d, code, errors[code], float(t), bound, pareto=on_front))
    result = Tuning(
        entries=entries,
        conditioning=cond,
        kappa=kappa,
        sizes={"Nd": Nd, "Nm": Nm, "Nt": Nt, "pr": pr, "pc": pc},
        device=be.name,
        probes=probes,
        repeats=repeats,
    )
    comm = getattr(grid, "comm", None)
    return result if comm is None else comm.bcast(result, root=0)


def _grid_product(engine: LocalBTT, grid: Any, x: Any, prec: Any, adjoint: bool) -> Any:
    """The distributed product of ``x`` (this rank's input block, a receive
    buffer where the rank holds none) in ``prec``: the result's block on its
    holders, None elsewhere (the stages of :meth:`BTTOperator.matvec` /
    ``rmatvec`` without their checks, chunks and timers)."""
    if adjoint:
        return grid.col_reduce(engine.apply(grid.row_bcast(x), prec, adjoint=True))
    return grid.row_reduce(engine.apply(grid.col_bcast(x), prec))


def tune(
    f: np.ndarray,
    tolerance: float,
    *,
    require_bound: bool = False,
    tie: float = TIE,
    **kwargs: Any,
) -> Tuning:
    """:func:`measure` then :meth:`Tuning.choose`: the fastest codes for ``F``
    and ``F^T`` that meet ``tolerance`` (relative error against all-double).

    Other keyword arguments as for :func:`measure`.
    """
    tol = validate_tolerance(tolerance)  # before the (long) measurement
    _check_tie(tie)
    return measure(f, **kwargs).choose(tol, require_bound=require_bound, tie=tie)


def _is_auto(code: Any) -> bool:
    return isinstance(code, str) and code.strip().lower() == "auto"


@dataclass(frozen=True)
class AutoRequest:
    """What ``precision="auto"`` asks of :class:`~fftmatvec.operator.BTTOperator`.

    Attributes
    ----------
    tolerance : float
        Relative error against all-double.
    forward, adjoint : str or None
        A code given for that direction (kept, not measured); None where it
        is chosen by measurement.
    """

    tolerance: float
    forward: str | None
    adjoint: str | None

    @classmethod
    def parse(cls, precision: Any, adjoint_precision: Any, tolerance: Any) -> "AutoRequest | None":
        """The request of the operator's arguments; None when neither
        ``precision`` nor ``adjoint_precision`` is "auto" and no tolerance is
        given.  ``precision`` "auto" chooses the code of ``F``;
        ``adjoint_precision`` "auto", or None with ``precision="auto"``,
        that of ``F^T``.

        Raises :class:`ConfigError` for a tolerance without "auto" or "auto"
        without a valid tolerance, before anything is computed.
        """
        fwd_auto = _is_auto(precision)
        adj_auto = _is_auto(adjoint_precision) or (fwd_auto and adjoint_precision is None)
        if tolerance is None and not (fwd_auto or adj_auto):
            return None
        if not (fwd_auto or adj_auto):
            raise ConfigError(
                f"tolerance={tolerance!r} is used only with precision='auto' (got precision={precision!r})"
            )
        if tolerance is None:
            raise ConfigError("precision='auto' needs a tolerance, e.g. tolerance=1e-7 (relative error)")
        return cls(
            tolerance=validate_tolerance(tolerance),
            forward=None if fwd_auto else parse(precision).code,
            adjoint=None if adj_auto else parse(adjoint_precision if adjoint_precision is not None else precision).code,
        )

    @property
    def directions(self) -> list[str]:
        """The directions to measure."""
        return [d for d, code in (("forward", self.forward), ("adjoint", self.adjoint)) if code is None]

    def run(self, engine: LocalBTT, f: np.ndarray, grid: Any, shape: tuple[int, int, int], *,
            require_bound: bool = False, tie: float = TIE, time_all: bool = False, **options: Any) -> Tuning:
        """:func:`measure_engine` (collective; ``options`` are its keywords)
        then :meth:`Tuning.choose`.  Only the codes whose measured error
        meets the tolerance are timed, unless ``time_all`` (the whole table,
        as ``fftmatvec precision`` prints it).  Returns the :class:`Tuning`
        whose ``forward``/``adjoint`` are the codes to use (given ones kept);
        warns where no code met the tolerance and ``ddddd`` was taken."""
        _check_tie(tie)
        result = measure_engine(engine, f, grid, shape=shape, directions=self.directions,
                                time_below=None if time_all else self.tolerance, **options)
        result = result.choose(self.tolerance, require_bound=require_bound, tie=tie)
        result = replace(result, forward=self.forward or result.forward, adjoint=self.adjoint or result.adjoint)
        for d in self.directions:
            if not result.met[d]:
                warnings.warn(
                    f"precision='auto': no code meets tolerance {self.tolerance:g} for "
                    f"{'F' if d == 'forward' else 'F^T'}; using the all-double {DEFAULT}",
                    RuntimeWarning,
                    stacklevel=3,
                )
        return result


# -- test operators ----------------------------------------------------------------
def synthetic_matrix(
    Nd: int,
    Nm: int,
    Nt: int,
    *,
    cond: float = 1e3,
    rank: int | None = None,
    seed: int = 0,
) -> np.ndarray:
    """A random ``f`` (Nd, Nm, Nt) whose ``Fhat[k]`` have a controlled condition.

    ``f[i, j, t] = sum_r U[i, r] s_r V[j, r] g_r(t)`` with orthonormal columns
    ``U``, ``V``, singular scales ``s_r`` log-spaced from 1 to ``1/cond`` and
    decaying random impulse responses ``g_r`` with ``g_r(0) = 1`` and a tail
    of l1 norm 1/2, so that ``1/2 <= |ghat_r(k)| <= 3/2``: every ``Fhat[k] =
    U diag(s_r ghat_r(k)) V^T`` has condition within a factor 3 of ``cond``
    (``rank < min(Nd, Nm)`` makes every ``Fhat[k]`` rank deficient).
    """
    rng = np.random.default_rng(seed)
    for name, v in (("Nd", Nd), ("Nm", Nm), ("Nt", Nt)):
        if int(v) != v or v < 1:
            raise ConfigError(f"{name} must be a positive integer, got {v!r}")
    if not (np.isfinite(cond) and cond >= 1):
        raise ConfigError(f"cond must be a number >= 1, got {cond!r}")
    R = min(Nd, Nm) if rank is None else int(rank)
    if not 1 <= R <= min(Nd, Nm):
        raise ConfigError(f"rank must be in 1..{min(Nd, Nm)}, got {rank!r}")
    U = np.linalg.qr(rng.standard_normal((Nd, R)))[0]
    V = np.linalg.qr(rng.standard_normal((Nm, R)))[0]
    s = np.logspace(0, -math.log10(cond), R) if R > 1 else np.ones(1)
    g = np.zeros((R, Nt))
    g[:, 0] = 1.0
    if Nt > 1:
        tau = rng.uniform(1.0, max(2.0, Nt / 4), R)
        tail = rng.standard_normal((R, Nt - 1)) * np.exp(-np.arange(1, Nt) / tau[:, None])
        tail *= 0.5 / np.maximum(np.abs(tail).sum(axis=1, keepdims=True), 1e-300)
        g[:, 1:] = tail
    # (Nd*Nm, R) @ (R, Nt), one block row at a time to bound the temporary
    f = np.empty((Nd, Nm, Nt))
    W = V.T  # (R, Nm)
    for i in range(Nd):
        f[i] = (W * (U[i] * s)[:, None]).T @ g
    return f
