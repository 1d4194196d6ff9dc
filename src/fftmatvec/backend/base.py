"""The backend interface: everything the math needs from an array library.

The engine (:mod:`fftmatvec.btt`) calls only these methods, with buffers it
allocated once at set-up through :meth:`Backend.empty`/:meth:`Backend.zeros`.
Layouts are fixed here so that every backend agrees:

* padded time series are **time-major** ``(L, n, K)``: the FFT runs along
  axis 0 and writes frequency-major ``(Nf, n, K)``, the layout the
  per-frequency product reads, so no transpose pass is needed;
* ``Fhat`` is frequency-major ``(Nf, nd, nm)``;
* SOTI vectors are ``(n, Nt, K)``.

The FFT is unnormalised forward and scaled by ``1/L`` backward on every
backend, so ``irfft(Fhat * rfft(x))`` is the causal convolution with no
further scaling.
"""

from __future__ import annotations

import abc
import cmath
import contextlib
from types import ModuleType
from typing import Any, Callable, Iterator

import numpy as np

from .threads import map_slices

Array = Any  # numpy.ndarray or cupy.ndarray


def all_finite(xp: ModuleType, a: Array) -> bool:
    """Whether ``a`` (an array of ``xp``) holds no NaN or Inf.  Its sum is
    finite when every element is, and NaN or Inf otherwise, unless the sum
    overflows: one pass with no temporary array, and the element-wise test
    only after an overflow."""
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow or inf - inf is an answer here, not a warning
        total = complex(a.sum())
    return cmath.isfinite(total) or bool(xp.isfinite(a).all())


class Backend(abc.ABC):
    """One array library: NumPy/SciPy on the CPU, CuPy on a GPU.

    Subclasses set ``self._scratch = {}`` (the arrays of :meth:`scratch`).
    """

    name: str
    xp: ModuleType

    # -- arrays ----------------------------------------------------------
    def empty(self, shape: tuple[int, ...], dtype: Any) -> Array:
        return self.xp.empty(shape, dtype=dtype)

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Array:
        return self.xp.zeros(shape, dtype=dtype)

    def asarray(self, a: Any, dtype: Any = None) -> Array:
        """``a`` on this backend's device (no copy when already there)."""
        return self.xp.asarray(a, dtype=dtype)

    def copy_as(self, a: Array, dtype: Any, shape: tuple[int, ...] | None = None) -> Array:
        """A new C-contiguous array holding ``a``'s values cast to ``dtype``,
        reshaped to ``shape`` (same size; default ``a.shape``)."""
        out = self.empty(a.shape if shape is None else shape, dtype)
        self.copy_into(a, out)
        return out

    @abc.abstractmethod
    def to_host(self, a: Array) -> np.ndarray:
        """``a`` as a NumPy array."""

    def is_native(self, a: Any) -> bool:
        """Whether ``a`` already is an array of this backend."""
        return isinstance(a, self.xp.ndarray)

    def synchronize(self) -> None:
        """Wait until queued device work is done (no-op on the CPU)."""

    def mark(self) -> Any:
        """A marker of the device work queued so far on the current stream (a
        CUDA event on the GPU; None on the CPU, where work is done when queued).
        Non-blocking collectives take it as ``after=`` to wait for exactly that
        work (:meth:`fftmatvec.collectives.Collectives.ireduce`)."""
        return None

    def finite_check(self, a: Array) -> Callable[[], bool]:
        """Start checking ``a`` (an array of this backend) for NaN and Inf;
        the call returned answers whether it holds none (:func:`all_finite`).
        Here the check runs at once; on a GPU it is queued, and the answer
        waits for it alone, not for device work queued after it."""
        ok = all_finite(self.xp, a)
        return lambda: ok

    @contextlib.contextmanager
    def capture(self) -> Iterator[None]:
        """Context in which a repeated sequence of calls may be recorded and
        replayed (CUDA graphs); a plain context on the CPU."""
        yield

    def use_replay(self, nbytes: int) -> bool:
        """Whether the engine should run a product of ``nbytes`` of ``Fhat``
        through :meth:`replay` (a fixed input buffer, one recording); no on the CPU."""
        return False

    def recorded(self, work: Callable[[], None]) -> Callable[[], None]:
        """A call that runs ``work``, the device work of one product on fixed
        buffers, with as little host work as the backend allows: on a GPU the
        launch of one recording of it (made here, running ``work`` twice),
        ``work`` itself where it cannot be recorded and on the CPU.  ``work``
        must not allocate or synchronise once it has run once."""
        return work

    def replayer(self, fn: Callable[[Array, Array], None], x_fixed: Array | None = None,
                 y_fixed: Array | None = None) -> Callable[[Array, Array], None]:
        """``run(x, y)``: ``fn(x, y)``, the device work of one product from
        ``x`` into ``y``, run with as little host work per call as the
        backend allows.

        A backend may record ``fn``'s work once and replay the recording on
        later calls: per pair of buffers ``(x, y)`` that comes back, or by
        copying a new input into ``x_fixed``, replaying the recording made on
        ``(x_fixed, y_fixed)`` and copying ``y_fixed`` to ``y`` (same dtypes
        and sizes; ``(n, Nt)`` and ``(n, Nt, 1)`` are the same buffer to a
        copy).  ``fn`` must not allocate or synchronise once it has run once.
        The CPU returns ``fn`` itself.
        """
        return fn

    # -- the five stages -------------------------------------------------
    def pad(self, x: Array, out: Array) -> None:
        """Stage 1: ``out[:Nt] = x`` transposed to time-major and cast.

        x : (n, Nt, K) real, SOTI.  out : (L, n, K) real, rows ``Nt:`` are
        zero from set-up and never written.
        """
        nt = x.shape[1]
        out[:nt] = x.transpose(1, 0, 2)

    @abc.abstractmethod
    def rfft(self, x_pad: Array, out: Array) -> None:
        """Stage 2: real FFT along axis 0.

        x_pad : (L, n, K) real, whose precision the transform runs in.
        out : (L//2 + 1, n, K) complex of the same precision or a lower one
        (rounded as it is stored).
        """

    @abc.abstractmethod
    def sbgemv(self, Fhat: Array, x_hat: Array, out: Array, adjoint: bool) -> None:
        """Stage 3: per-frequency product, one GEMM per frequency over K.

        Fhat : (Nf, nd, nm) complex, frequency-major.
        forward : x_hat (Nf, nm, K) -> out (Nf, nd, K), ``out[k] = Fhat[k] @ x_hat[k]``.
        adjoint : x_hat (Nf, nd, K) -> out (Nf, nm, K), ``out[k] = Fhat[k]^H @ x_hat[k]``.
        ``x_hat`` may have another precision than ``Fhat``; the product
        runs in ``Fhat``'s precision and ``out`` has ``Fhat``'s dtype.
        ``Fhat`` is read in place (never transposed or conjugated as a copy).
        """

    @abc.abstractmethod
    def irfft(self, x_hat: Array, out: Array) -> None:
        """Stage 4: inverse real FFT along axis 0, length ``out.shape[0]``.

        x_hat : (Nf, n, K) complex, any precision; it is cast to the
        precision of ``out`` first.  out : (L, n, K) real.
        """

    def pad_rfft(self, x: Array, out: Array, dtype: Any = None) -> None:
        """Stages 1 and 2: ``x`` (n, Nt, K) real, zero-padded to ``L = 2 Nt``
        and transformed in the real precision ``dtype`` (default: ``out``'s)
        into ``out`` (Nt + 1, n, K) complex, of that precision or a lower one
        (rounded as it is stored).  Here :meth:`pad` into a time-major
        scratch array (rows ``Nt:`` zero from when it is made, never written)
        and :meth:`rfft`; backends may fuse the two (the GPU one does).
        """
        n, nt, K = x.shape
        real = dtype if dtype is not None else np.finfo(out.dtype).dtype
        x_pad = self.scratch((2 * nt, n, K), real, "pad", zero=True)
        self.pad(x, out=x_pad)
        self.rfft(x_pad, out=out)

    def irfft_unpad(self, x_hat: Array, out: Array, dtype: Any) -> None:
        """Stages 4 and 5: the inverse transform of ``x_hat`` (Nt + 1, n, K),
        complex of any precision, computed in the real precision ``dtype``,
        then unpadded into ``out`` (n, Nt, K) and cast to its dtype.  Here
        :meth:`irfft` into a time-major scratch array and :meth:`unpad`;
        backends may fuse the two.  ``x_hat`` may be overwritten.
        """
        n, nt, K = out.shape
        y_pad = self.scratch((2 * nt, n, K), dtype, "unpad")
        self.irfft(x_hat, out=y_pad)
        self.unpad(y_pad, out=out)

    def sbgemv_irfft_unpad(self, Fhat: Array, x_hat: Array, y_hat: Array, out: Array, dtype: Any,
                           adjoint: bool, x_hat_spent: bool = False) -> None:
        """Stages 3-5: :meth:`sbgemv` of ``x_hat`` into the scratch spectrum
        ``y_hat`` (Nf, n_out, K), then :meth:`irfft_unpad` into ``out``
        (n_out, Nt, K) in the real precision ``dtype``.  A backend may lay
        ``y_hat`` out its own way between the two (the GPU one does for the
        adjoint with one right-hand side), so it holds nothing defined after.
        With ``x_hat_spent`` nothing reads ``x_hat`` after this call (the
        whole product's spectra, not those a block of rows shares with the
        next): a backend may drop it from its caches unwritten (the GPU one
        does after a big forward product), so it too holds nothing defined
        after.
        """
        self.sbgemv(Fhat, x_hat, out=y_hat, adjoint=adjoint)
        self.irfft_unpad(y_hat, out, dtype)

    def direct_plan(self, Fhat: Array, K: int, prec: Any, adjoint: bool) -> Callable[[Array, Array], None] | None:
        """A function ``run(x, out)`` doing all five stages at once, where
        the backend has a faster way for this problem (the GPU one: one kernel
        for small ones); None where it has not (here, always).  Made once per
        workspace, so that a product pays no set-up.

        Fhat : (Nf, nd, nm) complex, C-contiguous, the product's ``Fhat``.
        prec : :class:`~fftmatvec.precision.Precision`; each stage rounds as
        in the staged product.  ``run`` takes ``x`` (n_in, Nt, K) in the pad
        precision and ``out`` (n_out, Nt, K) in the reduce precision, both
        C-contiguous, and checks nothing.
        """
        return None

    def build_ahead(self, Fhat: Array, K: int, prec: Any, adjoint: bool) -> None:
        """Start building, in the background, the device code that the product
        of :meth:`direct_plan`'s arguments will need, so that its first launch
        waits less (the GPU one compiles kernels in other threads); return at
        once.  Nothing to build here."""

    def copy_into(self, a: Array, out: Array) -> None:
        """``out[...] = a`` for arrays of the same size (cast to ``out``'s
        dtype, ``a`` read in C order)."""
        out[...] = a.reshape(out.shape)

    def scratch(self, shape: tuple[int, ...], dtype: Any, tag: str, zero: bool = False) -> Array:
        """A work array the backend keeps for reuse across calls, one per
        ``(shape, dtype, tag)``; ``zero``: zero-filled when first made (for
        arrays whose untouched part must stay zero)."""
        key = (tuple(shape), np.dtype(dtype), tag)
        buf = self._scratch.get(key)
        if buf is None:
            buf = self._scratch[key] = (self.zeros if zero else self.empty)(shape, dtype)
        return buf

    def unpad(self, x_pad: Array, out: Array) -> None:
        """Stage 5: ``out = x_pad[:Nt]`` transposed back to SOTI and cast.

        x_pad : (L, n, K) real.  out : (n, Nt, K) real.
        """
        nt = out.shape[1]
        out[...] = x_pad[:nt].transpose(1, 0, 2)

    # -- set-up and measurement ------------------------------------------
    def fft_matrix(self, f: np.ndarray, dtype: Any) -> Array:
        """``Fhat`` of one slab: rfft of ``f`` zero-padded to ``L = 2 Nt``.

        f : (nd, nm, Nt) float64 on the host.  Returns (Nt+1, nd, nm) of
        complex ``dtype`` on this backend, frequency-major.  Computed in
        float64 and rounded once, block row by block row (one thread a core,
        each with one block row's temporary memory).
        """
        nd, nm, nt = f.shape
        Fhat = self.empty((nt + 1, nd, nm), dtype)

        def transform(rows: slice) -> None:
            for i in range(rows.start, rows.stop):
                row = np.fft.rfft(np.asarray(f[i], dtype=np.float64), n=2 * nt, axis=-1)
                Fhat[:, i, :] = self.asarray(row.T.astype(dtype))

        map_slices(transform, nd)
        return Fhat

    def fft_matrices(self, f: np.ndarray, dtypes: Any) -> dict[np.dtype, Array]:
        """``Fhat`` of one slab in each complex dtype of ``dtypes``, from one
        transform: with complex128 among them the other copy is rounded from
        it, which gives the values :meth:`fft_matrix` gives (both round the
        float64 transform once).  Checks the memory of all copies first
        (:meth:`check_free`)."""
        dtypes = sorted(set(map(np.dtype, dtypes)), key=lambda dt: -dt.itemsize)
        nd, nm, nt = f.shape
        need = (nt + 1) * nd * nm * sum(dt.itemsize for dt in dtypes)
        self.check_free(need, f"Fhat of {nd}x{nm}x{nt + 1} in {' and '.join(dt.name for dt in dtypes)}")
        first = self.fft_matrix(f, dtypes[0])
        return {dtypes[0]: first, **{dt: self.copy_as(first, dt) for dt in dtypes[1:]}}

    def check_free(self, nbytes: int, what: str) -> None:
        """Raise :class:`~fftmatvec.errors.FftmatvecError` naming ``what`` and
        the bytes when ``nbytes`` of new arrays would not fit (the GPU's free
        memory; host memory is not checked)."""

    @abc.abstractmethod
    def copy_bandwidth(self, nbytes: int = 1 << 30, repeats: int = 5) -> float:
        """Measured copy bandwidth in bytes/s, counting bytes read plus written
        (per backend: median or best of ``repeats`` copies of an ``nbytes`` array)."""

    @abc.abstractmethod
    def naive_matvec(self, Fhat: Array, x: Array, adjoint: bool) -> Array:
        """The naive pipeline of this array library, for comparison in
        benchmarks: library FFTs without plan reuse and a batched product
        reading ``Fhat`` (Nf, nd, nm) in place.  x : (n, Nt, K) SOTI."""

    @abc.abstractmethod
    def timer(self) -> "StageTimer":
        """A fresh :class:`StageTimer` using this backend's clock."""


class StageTimer:
    """Accumulates wall time per named stage (host clock, device synchronised).

    Use ``with timer("fft"): ...``; :attr:`times` maps stage name to the list
    of measured seconds.
    """

    def __init__(self, synchronize=lambda: None) -> None:
        self._synchronize = synchronize
        self.times: dict[str, list[float]] = {}

    @contextlib.contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        import time

        self._synchronize()
        t0 = time.perf_counter()
        yield
        self._synchronize()
        self.times.setdefault(stage, []).append(time.perf_counter() - t0)
