"""The BTT operator ``F``: products with ``F``, ``F^T``, ``F^T F`` and ``G^T F``.

:class:`BTTOperator` couples the local engine (:class:`~fftmatvec.btt.LocalBTT`)
with a process grid that moves the blocks between ranks.  In one process
(the default grid) inputs and outputs are whole SOTI arrays.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, ContextManager

import numpy as np

from . import precision as _precision
from .backend import Backend, get_backend
from .backend.base import all_finite
from .btt import LocalBTT, _no_timer
from .errors import ConfigError, FftmatvecError, collective
from .grid import SerialGrid
from .tuning import MEASURED_DTYPES, AutoRequest
from .vector import DistVector

_F64 = np.dtype(np.float64)
# Results of a one-process product into a new array get the array allocated
# after the previous product of the same direction and shape was launched, so
# the allocation (microseconds of host time on a GPU) overlaps the device's
# work instead of delaying the launch; one such array per direction is kept.
# Up to 16 MB, and up to 1/64 of Fhat's bytes: the big adjoint's 40 MB
# result (Nm x Nt float64, against 4 GB) took 3.6-17.1 us to allocate, and
# the big ddssd F^T d waited for 979.2-1002.9 us made ahead against
# 983.0-1021.6 (benchmarks/results/h200-probe-resultalloc-stop51{,-b,-c}.jsonl).
_SPARE_MAX_BYTES = 16 << 20
_SPARE_FHAT_SHARE = 1 / 64
# Signatures of one-process inputs whose checks and look-ups an operator keeps (_LocalCall).
_LOCAL_CALLS_MAX = 16
# The product kind of _local_product for F^T F m (G^T F m): the forward pass, then the adjoint pass.
_NORMAL = "normal"

Array = Any


class BTTOperator:
    """A block-triangular Toeplitz parameter-to-observable map.

    ``y_i(t) = sum_j sum_{s<=t} f_ij(t-s) m_j(s)``, ``F`` of shape
    ``(Nd*Nt, Nm*Nt)`` applied with FFTs and never formed.

    Parameters
    ----------
    f : (Nd, Nm, Nt) float64 array
        First block column, SOTI.  Use :meth:`from_matrix_dir` for files.
    precision : str
        Five-letter code for ``F`` products (design.md section 3).
    adjoint_precision : str, optional
        Code for ``F^T`` products; default: the same as ``precision``.
    tolerance : float, optional
        With ``precision="auto"`` (and/or ``adjoint_precision="auto"``):
        measure all 32 codes on this operator, through its products on its
        grid, and keep, for ``F`` and for ``F^T`` separately, the fastest
        whose relative error against all-double is at most ``tolerance``
        (:mod:`fftmatvec.tuning`, docs/precision.md).  Collective.  The
        measurement is kept as :attr:`tuning`.
    device : {"cpu", "gpu", "auto"} or Backend
    aux : (Nd, Nm, Nt) float64 array, optional
        First block column of a second BTT ``G`` of the same shape, for
        :meth:`aux_normal` (the C++ code's auxiliary matrix).
    grid : grid object, optional
        Process grid (:mod:`fftmatvec.grid`); default the one-process grid.
        With a grid, ``f`` and ``aux`` may be the full arrays (each rank cuts
        its slab) and vectors are the local blocks.  On a GPU backend the
        grid's collectives are fitted to it (``grid.use_device``: NCCL where
        it can run).
    reduce_chunks : int, optional
        Forward products (:meth:`matvec`) in this many chunks of the local
        block rows, the reduction of each chunk started as soon as it is done
        so that it overlaps the computation of the next (design.md section 4;
        :meth:`fftmatvec.btt.LocalBTT.apply_rows`).  Default
        ``$FFTMATVEC_REDUCE_CHUNKS``, else 1 (one reduction after the product).
    auto_options : dict, optional
        For ``precision="auto"``: keywords of
        :meth:`fftmatvec.tuning.AutoRequest.run` (``probes``, ``repeats``,
        ``seed``, ``exact``, ``require_bound``, ``tie``).

    Attributes
    ----------
    dims : (Nm, Nt)
    dimsd : (Nd, Nt)
    shape : (Nd*Nt, Nm*Nt)
    tuning : fftmatvec.tuning.Tuning or None
        The measurement behind ``precision="auto"`` (table, Pareto front, choice).
    """

    def __init__(
        self,
        f: np.ndarray,
        *,
        precision: str = _precision.DEFAULT,
        adjoint_precision: str | None = None,
        device: "str | Backend" = "cpu",
        aux: np.ndarray | None = None,
        grid: Any = None,
        shape: tuple[int, int, int] | None = None,
        tolerance: float | None = None,
        reduce_chunks: int | None = None,
        auto_options: dict[str, Any] | None = None,
    ) -> None:
        self.grid = grid if grid is not None else SerialGrid()
        self._one_process = isinstance(self.grid, SerialGrid)  # products skip votes and collectives
        if reduce_chunks is None:
            reduce_chunks = os.environ.get("FFTMATVEC_REDUCE_CHUNKS", "1")
        try:
            self.reduce_chunks = int(reduce_chunks)
        except (TypeError, ValueError):
            raise ConfigError(f"reduce_chunks must be a positive integer, got {reduce_chunks!r}") from None
        if self.reduce_chunks < 1:
            raise ConfigError(f"reduce_chunks must be a positive integer, got {reduce_chunks!r}")
        # precision="auto": Fhat in both precisions until every code has been measured (below)
        auto = AutoRequest.parse(precision, adjoint_precision, tolerance)
        self.tuning = None
        if auto is None:
            self.precision = _precision.parse(precision)
            self.adjoint_precision = _precision.parse(adjoint_precision or precision)
            dtypes = {self.precision.sbgemv, self.adjoint_precision.sbgemv}
        else:
            self.precision = self.adjoint_precision = _precision.parse(_precision.DEFAULT)  # until chosen
            dtypes = set(MEASURED_DTYPES)
        self._spares: dict[tuple, Any] = {}  # per product kind, the next result's array (_LocalCall)
        self._local_calls: dict[tuple, _LocalCall] = {}  # per input signature (_local_product)
        # Everything that can fail on one rank only (device, shapes, NaN in a
        # slab, out of memory) is voted on before the first product.
        with collective(_comm(self.grid), "setting up the operator") as vote:
            self.backend = get_backend(device)
            if shape is None and np.ndim(f) != 3:
                raise ConfigError(f"f must have shape (Nd, Nm, Nt), got {np.shape(f)}")
            self.Nd, self.Nm, self.Nt = map(int, shape if shape is not None else np.shape(f))
            vote.share((self.Nd, self.Nm, self.Nt))
            f = self._local_slab(f, "f")
            self.engine = LocalBTT(f, self.backend, dtypes)
            self.aux_engine = None
            if aux is not None:
                aux = self._local_slab(aux, "aux")
                self.aux_engine = LocalBTT(aux, self.backend, dtypes if auto else {self.adjoint_precision.sbgemv},
                                           name="aux")
            self.backend.synchronize()
        vote.agreed("the operator sizes (Nd, Nm, Nt)")
        use_device = getattr(self.grid, "use_device", None)
        if use_device is not None:  # GPU: NCCL collectives where they can run (collective, voted)
            use_device(self.backend)
        if auto is not None:
            self.tuning = auto.run(self.engine, f, self.grid, (self.Nd, self.Nm, self.Nt), **(auto_options or {}))
            self.precision = _precision.parse(self.tuning.forward)
            self.adjoint_precision = _precision.parse(self.tuning.adjoint)
            self.engine.keep({self.precision.sbgemv, self.adjoint_precision.sbgemv})
            if self.aux_engine is not None:
                self.aux_engine.keep({self.adjoint_precision.sbgemv})

    @classmethod
    def from_matrix_dir(
        cls, matrix_dir: "str | os.PathLike", *, aux_dir: "str | os.PathLike | None" = None, grid: Any = None, **kwargs
    ) -> "BTTOperator":
        """Build from an FFTMatvec matrix directory, reading only this rank's slab.

        Every rank reads ``meta_adj`` and the hyperslab ``f[I_r, J_c, :]`` of
        the files of its block rows ``I_r`` (a rank with no block rows opens
        none).  Collective: a missing, corrupt or inconsistent file on any
        rank raises the same :class:`~fftmatvec.errors.FileFormatError`
        (``"reading matrix ... failed on rank r: ..."``) on every rank.

        ``aux_dir`` is an optional second matrix directory of the same shape.
        Other keyword arguments as for the constructor.
        """
        from .io import read_matrix_slab, read_meta

        grid = grid if grid is not None else SerialGrid()
        with collective(_comm(grid), f"reading matrix {matrix_dir}") as vote:
            meta = read_meta(matrix_dir)
            rows, cols = grid.row_block(meta.Nd), grid.col_block(meta.Nm)
            f = read_matrix_slab(matrix_dir, rows, cols, meta=meta)
            aux = None
            if aux_dir is not None:
                aux_meta = read_meta(aux_dir)
                if (aux_meta.Nd, aux_meta.Nm, aux_meta.Nt) != (meta.Nd, meta.Nm, meta.Nt):
                    raise FftmatvecError(
                        f"{aux_dir}: auxiliary matrix is {aux_meta.Nd}x{aux_meta.Nm}x{aux_meta.Nt}, "
                        f"but {matrix_dir} is {meta.Nd}x{meta.Nm}x{meta.Nt}"
                    )
                aux = read_matrix_slab(aux_dir, rows, cols, meta=aux_meta)
            vote.share((meta.Nd, meta.Nm, meta.Nt))
        vote.agreed(f"the sizes in {matrix_dir}/binary/meta_adj")
        op = cls(f, aux=aux, grid=grid, shape=(meta.Nd, meta.Nm, meta.Nt), **kwargs)
        op.meta = meta
        return op

    def _local_slab(self, f: Any, name: str) -> np.ndarray:
        """This rank's slab ``f[I_r, J_c, :]``: ``f`` itself when it has the
        slab's shape, cut from ``f`` when it is the whole ``(Nd, Nm, Nt)``
        array.  Local work only (inside the set-up vote); its values are
        checked by the engine, on its transform (:class:`LocalBTT`)."""
        (i0, nd), (j0, nm) = self.grid.row_block(self.Nd), self.grid.col_block(self.Nm)
        shape = np.shape(f)
        if shape == (self.Nd, self.Nm, self.Nt) and (nd, nm) != (self.Nd, self.Nm):
            f = f[i0:i0 + nd, j0:j0 + nm]
        elif shape != (nd, nm, self.Nt):
            raise ConfigError(
                f"{name} must have shape {(nd, nm, self.Nt)} (the local slab) or "
                f"{(self.Nd, self.Nm, self.Nt)} (the whole matrix), got {shape}"
            )
        return f

    # -- shapes ------------------------------------------------------------
    @property
    def dims(self) -> tuple[int, int]:
        return (self.Nm, self.Nt)

    @property
    def dimsd(self) -> tuple[int, int]:
        return (self.Nd, self.Nt)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.Nd * self.Nt, self.Nm * self.Nt)

    # -- products ----------------------------------------------------------
    # Under a process grid every rank of the grid calls every product.  Inputs
    # live on their holders (parameter vectors on grid row 0, data vectors on
    # grid column 0); other ranks pass None (or anything: it is ignored).
    # Outputs: the holder's block of the result; on ranks that do not hold
    # the output space an empty (0, Nt[, K]) float64 array.  A DistVector in
    # gives a DistVector out.  Input checks (shape, NaN/Inf) are voted on by
    # all ranks before the first broadcast, so a bad block on one rank raises
    # the same error everywhere.

    def matvec(self, m: Array, timer: Callable[[str], ContextManager[None]] = _no_timer, *,
               out: Array | None = None) -> Array:
        """``y = F m``.

        m : (Nm, Nt) or (Nm, Nt, K) float, SOTI, or a parameter-space
        :class:`~fftmatvec.vector.DistVector` (under a grid: the local block
        ``J_c`` on grid row 0, None elsewhere).  Returns (Nd, Nt[, K])
        float64 in the same array library as ``m`` (under a grid: block
        ``I_r`` on grid column 0, ``(0, Nt[, K])`` elsewhere), or a
        data-space DistVector.

        out : array, optional
            Where to write the result instead of a new array (no grid, array
            input, no ``timer``): C-contiguous float64 of the result's
            shape and array library, not overlapping ``m``.  A loop that
            reuses its input and ``out`` replays one recorded product with
            no allocation (:meth:`prepare` checks ``out`` once, not at each
            call).
        """
        if self._one_process and timer is _no_timer and not isinstance(m, DistVector):
            return self._local_product(m, adjoint=False, out=out)
        prec = self.precision
        chunked = self.reduce_chunks > 1 and self.engine.nd > 1
        start = None if chunked or timer is not _no_timer else (lambda x: self.engine.apply(x, prec))
        x, finish, y = self._prepare(m, "param", prec, "F m", out, start=start)
        with self._comm_timer(timer)("bcast"):
            x = self.grid.col_bcast(x)
        if chunked:
            started = []
            y = self.engine.apply_rows(x, prec, self.reduce_chunks,
                                       lambda rows, mark: started.append(self.grid.row_ireduce(rows, after=mark)),
                                       timer=timer)
            with self._comm_timer(timer)("reduce"):
                if timer is not _no_timer:  # stages timed one by one: reduce the whole result
                    y = self.grid.row_reduce(y)
                else:
                    for request in started:
                        request.wait()
                    y = y if self.grid.holds_data() else None
            return finish(y, "data")
        if y is None:
            y = self.engine.apply(x, prec, adjoint=False, timer=timer)
        with self._comm_timer(timer)("reduce"):
            y = self.grid.row_reduce(y)
        return finish(y, "data")

    def rmatvec(self, d: Array, timer: Callable[[str], ContextManager[None]] = _no_timer, *,
                out: Array | None = None) -> Array:
        """``m = F^T d``.

        d : (Nd, Nt) or (Nd, Nt, K) float, SOTI, or a data-space DistVector
        (under a grid: block ``I_r`` on grid column 0).  Returns (Nm, Nt[, K])
        float64 (under a grid: block ``J_c`` on grid row 0, empty elsewhere),
        or a parameter-space DistVector.  ``out`` as for :meth:`matvec`.
        """
        if self._one_process and timer is _no_timer and not isinstance(d, DistVector):
            return self._local_product(d, adjoint=True, out=out)
        prec = self.adjoint_precision
        start = None if timer is not _no_timer else (lambda x: self.engine.apply(x, prec, adjoint=True))
        x, finish, m = self._prepare(d, "data", prec, "F^T d", out, start=start)
        with self._comm_timer(timer)("bcast"):
            x = self.grid.row_bcast(x)
        if m is None:
            m = self.engine.apply(x, prec, adjoint=True, timer=timer)
        with self._comm_timer(timer)("reduce"):
            m = self.grid.col_reduce(m)
        return finish(m, "param")

    def prepare(self, v: Array, *, adjoint: bool = False, normal: bool = False,
                out: Array | None = None) -> "PreparedProduct":
        """``F v`` (``F^T v`` with ``adjoint``, ``F^T F v`` with ``normal``)
        made ready to run many times on the same arrays: the lowest-latency
        product, for a loop that refills ``v`` in place (one product per new
        observation, one ``F^T F`` per iteration of a solver).

        What a product checks and sets up happens here, once: the shapes of
        ``v`` and ``out``, the cast of ``v`` to the pad precision and of the
        result to float64 (on the device, as part of the product's work),
        and on a GPU the recording of all that work as one CUDA graph (this
        runs the product twice).  A call of the prepared product then
        launches that work and nothing else; :meth:`matvec` spends about
        two microseconds of host time before each launch on a GPU (its
        checks and look-ups, docs/gpu.md).

        Parameters
        ----------
        v : (Nm, Nt) or (Nm, Nt, K) float array, SOTI; (Nd, Nt[, K]) with ``adjoint``
            An array of the operator's backend (a CuPy array on a GPU), held
            by the prepared product: each call reads its values then.  They
            are not checked (NaN or Inf propagate to the result), and those
            it holds now do not matter.
        adjoint : bool
        normal : bool
            ``F^T F v``: the forward product in :attr:`precision`, then the
            adjoint in :attr:`adjoint_precision`, with :meth:`normal`'s
            result bit for bit, as one recording on a GPU.
        out : float64 array of the result's shape, optional
            Where each call writes the result (C-contiguous, apart from
            ``v``); default a new array.

        Returns
        -------
        PreparedProduct
            ``run()`` computes the product of ``v``'s current values into
            ``out`` and returns ``out``.

        Raises
        ------
        ConfigError
            On a process grid (a product there runs collectives at each
            call), for a DistVector or an array of another library, for a
            ``v`` or ``out`` that :meth:`matvec` would refuse, and for both
            ``adjoint`` and ``normal``.
        """
        what = "F^T F m" if normal else "F^T d" if adjoint else "F m"
        if adjoint and normal:
            raise ConfigError("prepare: normal=True is F^T F m, whose input is a parameter vector; "
                              "it takes no adjoint=True")
        if not self._one_process:
            raise ConfigError(f"prepare: {what} on a {self.grid.pr}x{self.grid.pc} process grid runs collectives "
                              "at each call; prepare takes an operator without a grid (use matvec/rmatvec)")
        be = self.backend
        kind = type(v).__name__
        native = False
        if not isinstance(v, DistVector):
            v, native = self._checked(v, self.Nd if adjoint else self.Nm, what,
                                      check_values=False)
        if not native:
            raise ConfigError(f"prepare: {what} takes an array of the operator's backend "
                              f"({be.xp.__name__}), got {kind}")
        shape = (self.Nm if adjoint or normal else self.Nd, self.Nt) + v.shape[2:]
        if out is None:
            out = be.empty(shape, _F64)
        else:
            self._check_out(out, v, shape, True, what)
        first = self.adjoint_precision if adjoint else self.precision
        last = self.adjoint_precision if adjoint or normal else self.precision
        x = v if v.dtype == first.pad and v.flags.c_contiguous else be.empty(v.shape, first.pad)
        y = out if last.reduce == _F64 else be.empty(shape, last.reduce)
        if normal:
            K = v.shape[2] if v.ndim == 3 else 1
            chain = self.engine.normal_work(self.engine, self.precision, self.adjoint_precision, K)
            product = functools.partial(chain, x, y)
        else:
            product = self.engine.product(x, first, adjoint, y)

        def work() -> None:
            if x is not v:
                be.copy_into(v, x)
            product()
            if y is not out:
                be.copy_into(y, out)

        return PreparedProduct(be.recorded(work), v, out)

    def normal(self, m: Array) -> Array:
        """``F^T F m`` with one all-reduce between the passes; input and
        output as for :meth:`matvec` input."""
        return self._chain(m, self.engine, "F^T F m")

    def aux_normal(self, m: Array) -> Array:
        """``G^T F m`` for the auxiliary BTT ``G``; input and output as for
        :meth:`matvec` input."""
        if self.aux_engine is None:
            raise FftmatvecError("aux_normal needs an auxiliary matrix (aux= or aux_dir=)")
        return self._chain(m, self.aux_engine, "G^T F m")

    def _chain(self, m: Array, second: LocalBTT, what: str) -> Array:
        if self._one_process and not isinstance(m, DistVector):
            # the two local products as one call (their host work is most of a small product's latency:
            # the grid path below cost F^T F 16-30 us more than matvec then rmatvec, docs/gpu.md)
            return self._local_product(m, _NORMAL, engine=second)
        fwd, adj = self.precision, self.adjoint_precision
        x, finish, y = self._prepare(m, "param", fwd, what, start=lambda x: self.engine.apply(x, fwd))
        if y is None:
            y = self.engine.apply(self.grid.col_bcast(x), fwd, adjoint=False)
        y = self.grid.row_reduce(y, all=True).astype(adj.pad, copy=False)
        z = second.apply(y, adj, adjoint=True)
        z = self.grid.col_reduce(z)
        return finish(z, "param")

    def _comm_timer(self, timer: Callable[[str], ContextManager[None]]) -> Callable[[str], ContextManager[None]]:
        """``timer`` for the communication stages ("bcast", "reduce"), only
        when there is more than one rank to talk to."""
        return timer if self.grid.size > 1 else _no_timer

    def _prepare(self, v: Array, space: str, prec: _precision.Precision, what: str, out: Array | None = None,
                 start: Callable[[Array], Array] | None = None):
        """Check an input block, move it to the backend in the pad precision.

        Every rank of the grid takes part.  Holders of ``space`` check their
        block (shape, NaN/Inf) and share ``K``; the vote makes a failure on
        one rank fail all ranks before any broadcast or reduction, and gives
        the other ranks ``K`` to size their receive buffers.

        ``start(x)``, when given, launches the local product of the prepared
        input.  Where the input needs no broadcast (every rank holds its
        block: ``pr == 1`` for parameters, ``pc == 1`` for data) and its
        device values are checked, it is called inside the vote, before the
        check is read, so that the product runs while the host waits for
        the check (46 us of a 2 ms product on an H200 before,
        benchmarks/grid_parts.py).

        Returns the ``(n_local, Nt, K)`` array (pad precision, contiguous; an
        uninitialised receive buffer on non-holders), ``finish(y,
        out_space)``, which turns the reduced result (None on ranks that do
        not hold ``out_space``) into the caller's form, and ``start``'s
        result (None where it was not called).
        """
        be, grid = self.backend, self.grid
        n = self.Nm if space == "param" else self.Nd
        _, n_local = grid.block(space, n)
        holder = grid.holds(space)
        broadcast = (grid.pr if space == "param" else grid.pc) > 1
        dist = isinstance(v, DistVector)
        if dist:  # metadata is agreed on every rank: checks need no vote
            if v.space != space or (v.n, v.Nt) != (n, self.Nt) or v.grid.shape != grid.shape:
                raise ConfigError(f"{what}: expected a {space}-space vector of shape {(n, self.Nt)} on a "
                                  f"{grid.pr}x{grid.pc} grid, got {v!r}")
            v = v.local
        native = v is None or be.is_native(v)
        started = None
        with collective(_comm(grid), f"checking the input of {what}") as vote:
            if out is not None:
                raise ConfigError(f"{what}: out= is for array products without a grid or a timer; "
                                  "here the result is returned")
            if holder:
                v, _ = self._checked(v, n_local, what)
                # device values, on a grid: checked before the first collective (in one process NaN propagates)
                finite = be.finite_check(v) if grid.size > 1 and not isinstance(v, np.ndarray) else None
                x = be.xp.ascontiguousarray(be.asarray(v if v.ndim == 3 else v[:, :, None], dtype=prec.pad))
                if finite is not None and start is not None and not broadcast:
                    started = start(x)  # queued on the device while the host waits for the check
                if finite is not None and not finite():
                    raise FftmatvecError("input vector contains NaN or Inf")
                vote.share((v.shape[2] if v.ndim == 3 else None,))
        shared = vote.agreed(f"the batch size K of the input of {what}")
        K = shared[0] if shared is not None else None  # None: no rank holds blocks (n == 0)
        batched = K is not None
        if not holder:
            x = be.empty((n_local, self.Nt, K or 1), prec.pad)

        def finish(y: Array | None, out_space: str) -> Array:
            n_out = self.Nm if out_space == "param" else self.Nd
            if grid.holds(out_space):
                out = self._result(y, batched, native)
            else:
                xp = be.xp if native else np
                out = xp.empty((0, self.Nt) + ((K,) if batched else ()), dtype=np.float64)
            if dist:
                return DistVector._wrap(out, grid, out_space, n_out, self.Nt, K)
            return out

        return x, finish, started

    def _checked(self, v: Array, n_local: int, what: str, check_values: bool = True) -> tuple[Array, bool]:
        """An input block as an array of this backend or NumPy, its shape
        ``(n_local, Nt[, K])`` checked, and NaN/Inf checked on host data
        (device data is checked by :meth:`_prepare` on a grid only: the check
        costs a wait, so in one process NaN propagates to the result); no
        values are checked without ``check_values``.  Returns the array and
        whether it is the backend's own (not NumPy's)."""
        if v is None:
            raise ConfigError(f"{what}: this rank holds input blocks but got None")
        be = self.backend
        native = be.is_native(v)
        v = v if native else np.asarray(v)
        shape = v.shape
        if len(shape) not in (2, 3) or shape[0] != n_local or shape[1] != self.Nt:
            expected = (n_local, self.Nt)
            raise ConfigError(f"input must have shape {expected} or {expected + ('K',)}, got {shape}")
        if check_values and isinstance(v, np.ndarray) and not all_finite(np, v):
            raise FftmatvecError("input vector contains NaN or Inf")
        return v, native

    def _result(self, y: Array, batched: bool, native: bool) -> Array:
        """The caller's float64 copy of an engine result ``y`` (n, Nt, K) (a
        workspace buffer): ``(n, Nt)`` unless ``batched``, on the device when
        the input was a device array, else on the host."""
        shape = y.shape if batched else y.shape[:2]
        if native:
            return self.backend.copy_as(y, np.float64, shape)
        return self.backend.to_host(y).astype(np.float64).reshape(shape)

    def _local_product(self, v: Array, adjoint: bool | str, out: Array | None = None,
                       engine: LocalBTT | None = None) -> Array:
        """``F v``, ``F^T v`` (``adjoint=True``) or ``G^T F v`` (``adjoint=``
        :data:`_NORMAL`; ``G`` is ``engine``, ``F`` for ``F^T F``) in one
        process, with the checks of the grid path and none of its votes,
        broadcasts or reductions (the latency of small products is mostly
        this host-side work), into ``out`` if given.  ``engine`` replaces the
        operator's own in an adjoint product (``aux_normal``'s ``G^T``).

        What does not change between calls with inputs of one signature (type,
        shape, dtype, strides) is checked and looked up once, by the
        signature's :class:`_LocalCall`."""
        try:
            call = self._local_calls[adjoint, engine, type(v), v.shape, v.dtype, v.strides]
        except (KeyError, AttributeError):  # a signature not seen yet, or not an array
            v, call = self._local_call(v, adjoint, engine)
        return call(v, out)

    def _local_call(self, v: Array, adjoint: bool | str, engine: LocalBTT | None) -> tuple[Array, "_LocalCall"]:
        """``v`` as an array (its shape checked) and the :class:`_LocalCall` of
        its signature, made and kept (up to :data:`_LOCAL_CALLS_MAX`)."""
        second = self.engine if engine is None else engine
        if adjoint == _NORMAL:
            passes, n_in = ((self.engine, False), (second, True)), self.Nm
            what = "F^T F m" if second is self.engine else "G^T F m"
        else:
            passes, n_in = ((second, adjoint),), self.Nd if adjoint else self.Nm
            what = "F^T d" if adjoint else "F m"
        v, native = self._checked(v, n_in, what, check_values=False)
        call = _LocalCall(self, v, native, passes, what)
        if len(self._local_calls) >= _LOCAL_CALLS_MAX:
            self._local_calls.clear()
        self._local_calls[adjoint, engine, type(v), v.shape, v.dtype, v.strides] = call
        return v, call

    def _check_out(self, out: Array, v: Array, shape: tuple[int, ...], native: bool, what: str) -> None:
        """``out`` must be what the product would return (array library,
        float64, ``shape``), C-contiguous, writable and apart from the input
        ``v`` (the one-kernel product writes its first rows while other blocks
        still read the input)."""
        xp = self.backend.xp if native else np
        if not isinstance(out, xp.ndarray):
            raise ConfigError(f"{what}: out must be a {xp.__name__} array (as the result of this input), "
                              f"got {type(out).__name__}")
        if out.shape != shape or out.dtype != np.float64:
            raise ConfigError(f"{what}: out must be float64 of shape {shape}, got {out.dtype} {out.shape}")
        if not out.flags.c_contiguous or (xp is np and not out.flags.writeable):
            raise ConfigError(f"{what}: out must be C-contiguous and writable")
        if xp.may_share_memory(out, v):
            raise ConfigError(f"{what}: out overlaps the input")

    # -- views ---------------------------------------------------------------
    def aslinearoperator(self):
        """A :class:`scipy.sparse.linalg.LinearOperator` on flattened SOTI
        vectors (``m.ravel()``), with ``matvec``, ``rmatvec`` and ``matmat``
        (one batched product for all columns)."""
        from .linop import as_scipy

        return as_scipy(self)


class _LocalCall:
    """One-process products of inputs of one signature: array type, shape,
    dtype and strides (:meth:`BTTOperator._local_product`).  ``passes`` is
    ``((engine, adjoint),)`` for ``F m`` or ``F^T d``, or the forward pass
    then the adjoint pass of ``F^T F m`` (``G^T F m``).

    Made from the first such input, whose shape :meth:`BTTOperator._checked`
    has checked: the result's shape, whether the input must be cast to the
    pad precision or made contiguous, and the engines' launch are worked out
    here once.  A call does only what depends on the values or on ``out``:
    the NaN/Inf check of host values, the check of ``out``, the cast and the
    launch.  The host time before a middle-size product's launch on a GPU
    is most of what a waited-for product costs above one queued back to back
    (docs/gpu.md)."""

    __slots__ = ("op", "passes", "what", "native", "check_host_values", "shape", "cast", "launch",
                 "spare_key", "spare_next")

    def __init__(self, op: BTTOperator, v: Array, native: bool, passes: tuple[tuple[LocalBTT, bool], ...],
                 what: str) -> None:
        self.op, self.native, self.what = op, native, what
        self.passes = tuple((engine, adjoint, op.adjoint_precision if adjoint else op.precision)
                            for engine, adjoint in passes)
        (first, _, prec), (last, last_adjoint, last_prec) = self.passes[0], self.passes[-1]
        self.check_host_values = isinstance(v, np.ndarray)
        self.shape = (op.Nm if last_adjoint else op.Nd, op.Nt) + v.shape[2:]
        self.cast = not native or v.dtype != prec.pad or not v.flags.c_contiguous
        # a device input and a float64 result: the engines write the caller's array themselves
        into_caller = native and last_prec.reduce == _F64
        K = v.shape[2] if v.ndim == 3 else 1
        self.launch = None
        if into_caller:
            self.launch = (last.launcher(last_adjoint, last_prec, K) if len(passes) == 1
                           else first.normal_launcher(last, prec, last_prec, K))
        spare_max = max(_SPARE_MAX_BYTES, last.Fhat[last_prec.sbgemv].nbytes * _SPARE_FHAT_SHARE)
        self.spare_key = (len(passes), last_adjoint)
        self.spare_next = into_caller and np.prod(self.shape) * _F64.itemsize <= spare_max

    def __call__(self, v: Array, out: Array | None) -> Array:
        op, be = self.op, self.op.backend
        if self.check_host_values and not all_finite(np, v):
            raise FftmatvecError("input vector contains NaN or Inf")
        if out is not None:
            op._check_out(out, v, self.shape, self.native, self.what)
        x = be.xp.ascontiguousarray(be.asarray(v, dtype=self.passes[0][2].pad)) if self.cast else v
        if self.launch is not None:
            if out is not None:
                self.launch(x, out)
                return out
            spare = op._spares.pop(self.spare_key, None)
            y = spare if spare is not None and spare.shape == self.shape else be.empty(self.shape, _F64)
            self.launch(x, y)
            if self.spare_next:  # the next result's array, made while y's runs
                op._spares[self.spare_key] = be.empty(self.shape, _F64)
            return y
        y = x
        for i, (engine, adjoint, prec) in enumerate(self.passes):
            if i:  # the forward's result in the adjoint's pad precision
                y = be.xp.ascontiguousarray(be.asarray(y, dtype=prec.pad))
            y = engine.apply(y, prec, adjoint=adjoint)
        if out is None:
            return op._result(y, v.ndim == 3, self.native)
        if self.native:
            be.copy_into(y, out)  # rounded to float64 in the copy
        else:
            np.copyto(out, be.to_host(y).reshape(self.shape))
        return out


class PreparedProduct:
    """A product of a :class:`BTTOperator` on fixed arrays, made by
    :meth:`BTTOperator.prepare`.  Each call reads ``input``'s current values,
    writes the result into ``out`` and returns ``out``, with no checks,
    allocations or set-up on the host: on a GPU one launch of a recording.

    Attributes
    ----------
    input : array
        The caller's input array, read at each call (refill it in place).
    out : array
        The float64 result, overwritten by each call.
    """

    __slots__ = ("input", "out", "_run")

    def __init__(self, run: Callable[[], None], input: Array, out: Array) -> None:
        self._run, self.input, self.out = run, input, out

    def __call__(self) -> Array:
        self._run()
        return self.out


def _comm(grid: Any) -> Any:
    """The communicator votes run on: the grid's, None for one process."""
    return getattr(grid, "comm", None)
