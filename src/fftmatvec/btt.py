"""One rank's BTT engine: ``Fhat`` of a local slab and the local stages 1-5.

The engine knows nothing of ranks: it maps a padded-and-cast input block to
the unpadded partial result.  :mod:`fftmatvec.operator` adds the data
movement between ranks around it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, ContextManager

import numpy as np

from .backend import Backend
from .errors import FftmatvecError
from .layout import block_range
from .precision import Precision

Array = Any


def _no_timer(stage: str) -> ContextManager[None]:
    return contextlib.nullcontext()


def _with_k(a: Array) -> Array:
    """``a`` (n, Nt, K) as it is, or (n, Nt) as (n, Nt, 1)."""
    return a if a.ndim == 3 else a.reshape(a.shape + (1,))


@dataclass
class _Workspace:
    """Buffers of one (direction, precision, K) configuration, made once.
    (The padded time series are the backend's scratch: see
    :meth:`~fftmatvec.backend.base.Backend.pad_rfft`.)"""

    x_hat: Array  # (Nf, n_in, K) complex, Precision.sbgemv_in
    y_hat: Array  # (Nf, n_out, K) complex, SBGEMV precision
    y: Array  # (n_out, Nt, K) real, reduce precision
    replay: bool = False  # run through the backend's replayer (recordings of the launches)
    x_in: Array = None  # (n_in, Nt, K) pad precision: a fixed input buffer for replays of the stages
    direct: Callable[[Array, Array], None] | None = None  # the backend's one-call product, if it has one
    launch: Callable[[Array, Array], None] | None = None  # the untimed product x -> y (LocalBTT.launcher)


class LocalBTT:
    """Local BTT engine for the slab ``f[I, J, :]``.

    Parameters
    ----------
    f : (nd, nm, Nt) float64 array
        First block column of the local slab, SOTI (``f[i, j, t]``).
    backend : Backend
        Where ``Fhat`` lives and the stages run.
    sbgemv_dtypes : iterable of complex dtypes
        Precisions in which ``Fhat`` is kept (one copy each; normally one).
    name : str
        What ``f`` is called in errors (``"f"``, ``"aux"``).

    Raises :class:`~fftmatvec.errors.FftmatvecError` when ``f`` holds NaN or
    Inf, or a copy of ``Fhat`` overflows its precision: each copy is checked
    where it lives, on a GPU without reading ``f`` on the host.

    Attributes
    ----------
    Fhat : dict[numpy.dtype, array]
        ``(Nf, nd, nm)`` complex, frequency-major, per kept precision.
    """

    def __init__(self, f: np.ndarray, backend: Backend, sbgemv_dtypes, name: str = "f") -> None:
        if f.ndim != 3:
            raise ValueError(f"{name} must have shape (nd, nm, Nt), got {f.shape}")
        self.nd, self.nm, self.Nt = f.shape
        self.L = 2 * self.Nt
        self.Nf = self.Nt + 1
        self.backend = backend
        with np.errstate(invalid="ignore", over="ignore"):  # bad values are reported below, by name
            self.Fhat = backend.fft_matrices(f, sbgemv_dtypes)
        self._workspaces: dict[tuple[bool, str, int], _Workspace] = {}
        checks = {dtype: backend.finite_check(a) for dtype, a in self.Fhat.items()}
        overflowed = [dtype.name for dtype, finite in checks.items() if not finite()]
        if overflowed:  # NaN or Inf in f spreads to every frequency; a finite f can only overflow
            if not np.all(np.isfinite(f)):
                raise FftmatvecError(f"{name} contains NaN or Inf")
            raise FftmatvecError(f"the transform of {name} overflows {' and '.join(overflowed)}: scale {name} "
                                 "or keep Fhat in complex128")

    def keep(self, sbgemv_dtypes) -> None:
        """Keep ``Fhat`` only in ``sbgemv_dtypes`` (a subset of the kept
        ones), freeing the other copy and every workspace (e.g. after the
        measurement of ``precision="auto"``, which runs all 32 codes)."""
        keep = set(map(np.dtype, sbgemv_dtypes))
        if not keep <= set(self.Fhat):
            raise ValueError(f"cannot keep {sorted(map(str, keep))}: Fhat is kept in {sorted(map(str, self.Fhat))}")
        self.Fhat = {dt: a for dt, a in self.Fhat.items() if dt in keep}
        self._workspaces.clear()

    @property
    def nbytes(self) -> int:
        """Bytes of all kept ``Fhat`` copies."""
        return sum(a.nbytes for a in self.Fhat.values())

    def build_ahead(self, adjoint: bool, prec: Precision, K: int) -> None:
        """Start building, in the background, the device code of the products
        ``(adjoint, prec, K)`` (:meth:`~fftmatvec.backend.base.Backend.build_ahead`),
        for a caller about to make several workspaces: their builds then run
        at once instead of one after the other."""
        if (adjoint, prec.code, K) not in self._workspaces:
            self.backend.build_ahead(self.Fhat[prec.sbgemv], K, prec, adjoint)

    def workspace(self, adjoint: bool, prec: Precision, K: int) -> _Workspace:
        key = (adjoint, prec.code, K)
        if key not in self._workspaces:
            be = self.backend
            n_in, n_out = (self.nd, self.nm) if adjoint else (self.nm, self.nd)
            Fhat = self.Fhat[prec.sbgemv]
            be.build_ahead(Fhat, K, prec, adjoint)  # the product's kernels build while this thread goes on
            direct = be.direct_plan(Fhat, K, prec, adjoint)
            replay = be.use_replay(Fhat.nbytes)
            ws = _Workspace(
                x_hat=be.empty((self.Nf, n_in, K), prec.sbgemv_in),
                y_hat=be.empty((self.Nf, n_out, K), prec.sbgemv),
                y=be.empty((n_out, self.Nt, K), prec.reduce),
                replay=replay,
                x_in=be.empty((n_in, self.Nt, K), prec.pad) if replay and direct is None else None,
                direct=direct,
            )
            work = self._work(ws, Fhat, prec, adjoint)
            if not replay:
                ws.launch = work
            elif direct is not None:  # a recorded launch costs the host less than a launch (docs/gpu-kernels.md)
                ws.launch = be.replayer(work)
            else:  # fixed buffers: the backend may record the stages once and replay them
                ws.launch = be.replayer(work, ws.x_in, ws.y)
            self._workspaces[key] = ws
        return self._workspaces[key]

    def launcher(self, adjoint: bool, prec: Precision, K: int) -> Callable[[Array, Array], None]:
        """``launch(x, y)``: :meth:`apply`'s untimed product of an ``(n_in,
        Nt, K)`` input ``x`` (``(n_in, Nt)`` for ``K = 1``; pad precision,
        C-contiguous) into ``y`` (reduce precision, C-contiguous, of the
        result's shape), with no look-ups of its own: for a caller that
        launches many products of one configuration."""
        return self.workspace(adjoint, prec, K).launch

    def apply(
        self,
        x: Array,
        prec: Precision,
        adjoint: bool = False,
        timer: Callable[[str], ContextManager[None]] = _no_timer,
        out: Array | None = None,
    ) -> Array:
        """Local partial product, stages pad to unpad.

        Parameters
        ----------
        x : (nm, Nt, K) real (forward) or (nd, Nt, K) real (adjoint), SOTI
            Input block on this backend, already rounded to the pad precision
            and C-contiguous; ``(n, Nt)`` is taken as ``K = 1``.
        prec : Precision
        adjoint : bool
            ``F^T`` instead of ``F``.
        timer : callable, optional
            ``timer(stage)`` context manager wrapped around each stage.
        out : (nd, Nt, K) or (nm, Nt, K) array, optional
            Where to write the result (the reduce precision, C-contiguous;
            ``(n, Nt)`` when ``K = 1``); with no ``timer`` only.

        Returns
        -------
        (nd, Nt, K) or (nm, Nt, K) real array in the reduce precision:
        ``out``, or else a workspace buffer, overwritten by the next call of
        the same kind.
        """
        be = self.backend
        ws = self.workspace(adjoint, prec, x.shape[2] if x.ndim == 3 else 1)
        if timer is _no_timer:
            y = ws.y if out is None else out
            ws.launch(x, y)
            return y
        if out is not None:
            raise ValueError("apply: out= is for untimed products")
        Fhat = self.Fhat[prec.sbgemv]
        x = _with_k(x)
        y_pad = self._timed_forward_transform(x, ws, prec, timer)
        with timer("sbgemv"):
            be.sbgemv(Fhat, ws.x_hat, out=ws.y_hat, adjoint=adjoint)
        with timer("ifft"):
            be.irfft(ws.y_hat, out=y_pad)
        with timer("unpad"):
            be.unpad(y_pad, out=ws.y)
        return ws.y

    def product(self, x: Array, prec: Precision, adjoint: bool, out: Array) -> Callable[[], None]:
        """The device work of one untimed product from ``x`` into ``out``
        (as :meth:`apply`'s arguments) as a call without arguments, for
        :meth:`~fftmatvec.backend.base.Backend.recorded`: no recordings of
        its own, no host work but the launches."""
        work = self._untimed(adjoint, prec, x.shape[2] if x.ndim == 3 else 1)
        return lambda: work(x, out)

    def normal_work(self, second: "LocalBTT", prec: Precision, adjoint_prec: Precision,
                    K: int) -> Callable[[Array, Array], None]:
        """``work(x, z)``: ``z = G^T (F x)``, this engine's forward product of
        ``x`` (``(nm, Nt, K)``, ``prec``'s pad precision, C-contiguous) in
        ``prec``, then ``second``'s adjoint product in ``adjoint_prec`` into
        ``z`` (``(nm, Nt, K)``, its reduce precision), the cast between them
        included, with no recordings of its own (as :meth:`product`).
        ``second`` is this engine for ``F^T F``.  The buffer between the
        passes is this call's own."""
        be = self.backend
        forward, adjoint = self._untimed(False, prec, K), second._untimed(True, adjoint_prec, K)
        y = be.empty((self.nd, self.Nt, K), prec.reduce)
        x2 = y if prec.reduce == adjoint_prec.pad else be.empty(y.shape, adjoint_prec.pad)

        def work(x: Array, z: Array) -> None:
            forward(x, y)
            if x2 is not y:
                be.copy_into(y, x2)
            adjoint(x2, z)

        return work

    def normal_launcher(self, second: "LocalBTT", prec: Precision, adjoint_prec: Precision,
                        K: int) -> Callable[[Array, Array], None]:
        """``launch(x, z)``: :meth:`normal_work` with :meth:`launcher`'s
        preconditions, one replay of both products where each alone would be
        replayed."""
        be = self.backend
        work = self.normal_work(second, prec, adjoint_prec, K)
        passes = (self.workspace(False, prec, K), second.workspace(True, adjoint_prec, K))
        if not all(ws.replay for ws in passes):
            return work
        if all(ws.direct is not None for ws in passes):  # as workspace(): one-kernel products need no fixed buffers
            return be.replayer(work)
        return be.replayer(work, be.empty((self.nm, self.Nt, K), prec.pad),
                           be.empty((self.nm, self.Nt, K), adjoint_prec.reduce))

    def _untimed(self, adjoint: bool, prec: Precision, K: int) -> Callable[[Array, Array], None]:
        """``work(x, y)``: the untimed product of ``K`` right-hand sides from
        ``x`` into ``y`` (as :meth:`apply`'s arguments), with no recordings
        of its own."""
        ws = self.workspace(adjoint, prec, K)
        return self._work(ws, self.Fhat[prec.sbgemv], prec, adjoint)

    def _work(self, ws: _Workspace, Fhat: Array, prec: Precision, adjoint: bool) -> Callable[[Array, Array], None]:
        """``work(x, y)``: the untimed product from ``x`` into ``y``, the
        backend's one-call product where it has one (which needs only the
        arrays' addresses: no reshapes, which cost the host microseconds),
        else the stages."""
        if ws.direct is not None:
            return ws.direct
        return lambda x, y: self._run(_with_k(x), ws, Fhat, prec, adjoint, _with_k(y))

    def _timed_forward_transform(self, x: Array, ws: _Workspace, prec: Precision,
                                 timer: Callable[[str], ContextManager[None]]) -> Array:
        """Stages 1 and 2 one by one, each timed, into ``ws.x_hat``, through the
        time-major scratch of :meth:`~fftmatvec.backend.base.Backend.pad_rfft`
        (rows ``Nt:`` zero).  Returns the time-major ``(L, n_out, K)`` scratch
        (that of ``irfft_unpad``) for the inverse transform."""
        be, K = self.backend, ws.y.shape[2]
        x_pad = be.scratch((self.L, ws.x_hat.shape[1], K), prec.fft, "pad", zero=True)
        with timer("pad"):
            be.pad(x, out=x_pad)
        with timer("fft"):
            be.rfft(x_pad, out=ws.x_hat)
        return be.scratch((self.L, ws.y.shape[0], K), prec.ifft, "unpad")

    def apply_rows(
        self,
        x: Array,
        prec: Precision,
        chunks: int,
        on_chunk: Callable[[Array, Any], None],
        timer: Callable[[str], ContextManager[None]] = _no_timer,
    ) -> Array:
        """Forward partial product by chunks of block rows, each handed over
        as soon as it is done (design.md section 4: the reduction of one chunk
        overlapping the computation of the next).

        Stages 1-2 run once for the whole input; then, chunk by chunk of the
        local block rows ``I`` (``chunks`` nearly equal ranges of
        :func:`~fftmatvec.layout.block_range`), the product with the rows of
        ``Fhat`` (read in place), the inverse transform and the unpad of those
        rows.  ``on_chunk(y_rows, mark)`` gets the finished rows (a contiguous
        view of the result) and the backend's :meth:`~fftmatvec.backend.base.Backend.mark`
        of the work producing them; it is called for chunk ``c`` after the
        work of chunk ``c + 1`` has been queued, so a device is never left
        idle while the host starts a reduction.

        With a ``timer`` the stages run one after another over all chunks
        (each stage timed once per product, as in :meth:`apply`) and
        ``on_chunk`` is not called: the caller reduces the whole result.

        Returns the ``(nd, Nt, K)`` result buffer, as :meth:`apply`.
        """
        be = self.backend
        K = x.shape[2]
        ws = self.workspace(False, prec, K)
        Fhat = self.Fhat[prec.sbgemv]
        C = min(max(1, int(chunks)), max(1, self.nd))
        bounds = [(i0, i0 + n) for i0, n in (block_range(self.nd, C, c) for c in range(C)) if n > 0]
        parts = []  # (Fhat rows, y_hat chunk, y rows), each contiguous but Fhat's
        yh_flat = ws.y_hat.reshape(-1)
        for i0, i1 in bounds:
            yh = yh_flat[self.Nf * i0 * K:self.Nf * i1 * K].reshape(self.Nf, i1 - i0, K)
            parts.append((Fhat[:, i0:i1], yh, ws.y[i0:i1]))
        if timer is not _no_timer:
            y_pad = self._timed_forward_transform(x, ws, prec, timer)
            with timer("sbgemv"):
                for F_rows, yh, _ in parts:
                    be.sbgemv(F_rows, ws.x_hat, out=yh, adjoint=False)
            yp_flat = y_pad.reshape(-1)  # cut chunk-major, as y_hat's chunks
            y_pads = [yp_flat[self.L * i0 * K:self.L * i1 * K].reshape(self.L, i1 - i0, K) for i0, i1 in bounds]
            with timer("ifft"):
                for (_, yh, _), yp in zip(parts, y_pads):
                    be.irfft(yh, out=yp)
            with timer("unpad"):
                for (_, _, y), yp in zip(parts, y_pads):
                    be.unpad(yp, out=y)
            return ws.y
        be.pad_rfft(x, ws.x_hat, prec.fft)
        pending = None
        for F_rows, yh, y in parts:
            be.sbgemv_irfft_unpad(F_rows, ws.x_hat, yh, y, prec.ifft, adjoint=False)
            mark = be.mark()
            if pending is not None:
                on_chunk(*pending)
            pending = (y, mark)
        if pending is not None:
            on_chunk(*pending)
        return ws.y

    def _run(self, x: Array, ws: _Workspace, Fhat: Array, prec: Precision, adjoint: bool, y: Array) -> None:
        """The untimed stages, through the backend's fused calls, into ``y``."""
        be = self.backend
        be.pad_rfft(x, ws.x_hat, prec.fft)
        be.sbgemv_irfft_unpad(Fhat, ws.x_hat, ws.y_hat, y, prec.ifft, adjoint, x_hat_spent=True)
