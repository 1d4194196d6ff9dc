"""The transforms of the GPU backend (stages 1-2 and 4-5): padding, casts
and layout changes, cuFFT plans, and the fused native transforms.

* ``pad_rfft`` and ``irfft_unpad``: one native kernel each (``native/fft.cu``)
  that pads, casts, transforms in shared memory and writes the other layout,
  so each reads its input once and writes its output once, for every ``Nt``
  whose prime factors are 2, 3, 5 and 7 (:func:`~.fused_fft.fft_radices`);
* other lengths, and the separately timed stages, use cuFFT on batches of
  *contiguous* series (its strided axis-0 mode was 2-5x slower), with native
  kernels (``native/glue.cu``) for the padding, the layout changes and the ``1/L``.

Layouts and scaling are those of :mod:`fftmatvec.backend.base`.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..errors import FftmatvecError
from . import kernels
from .base import Array
from .fused_fft import fft_radices, fused_in_place, fused_row_stride, pass_threads, pass_twiddles
from .kernels import COMPLEX_OF, REAL_OF


def _real_of(dtype: Any) -> np.dtype:
    """The real dtype of a complex one; a real dtype itself."""
    dtype = np.dtype(dtype)
    return REAL_OF.get(dtype, dtype)


class GPUTransforms:
    """Stages 1-2 and 4-5 of :class:`~fftmatvec.backend.gpu.GPUBackend`, which
    this class is mixed into and which provides the device's facts
    (``sm_count``, ``smem_limit``), ``_run_kernel``, ``_resident_blocks``,
    ``_contiguous``, ``scratch`` and the launch cache ``_launch``.

    Attributes
    ----------
    fft_layout : dict
        How the transforms of the product run: ``"fused"`` (default,
        ``$FFTMATVEC_R2C``/``$FFTMATVEC_C2R``) the native kernels where the
        length allows them; ``"cs"``/``"cc"``/``"ss"`` (forward) and
        ``"sc"``/``"cc"``/``"ss"`` (inverse) the cuFFT layouts.
    fused_smem_target, fused_threads : int
        Shared memory (bytes) and threads per block of the fused transforms
        (``fused_threads`` None: by size); measured on an H200 in
        ``benchmarks/results/h200-probe-fused-fft.jsonl``.
    release_spectra : bool
        Each block of an inverse that reads tiled spectra
        (:attr:`~fftmatvec.backend.gpu_products.GPUProducts.tiled_spectra`) drops its tile from the L2 unwritten once
        it has read it (``discard.global.L2``; compute capability 8.0 or
        higher), so that the dead spectra are neither written back nor
        holding L2 room while the next product streams ``Fhat``
        (``$FFTMATVEC_RELEASE_SPECTRA=0`` turns it off).  So does the
        inverse after a one-vector forward product with the product's input
        spectra when they are kept in the L2 and take
        :attr:`fwd_release_min_bytes` or more.
    fwd_release_min_bytes : int
        Smallest forward spectra (bytes) that the inverse after the product
        drops (default 16 MB: the middle size's 4 MB gain nothing).
    rfft_keep_max_bytes : int
        ``rfft_pad`` keeps its spectra in the L2 (evict-last) up to this many
        bytes (default: the L2's size).
    fused_max_blocks : int or None
        Most thread blocks of a forward transform that loops over groups of
        series (from float64 into complex64, ``K = 1``; None: as many as fit
        on the device at once).  It loops only when there are more groups
        than blocks.
    """

    # set by GPUBackend
    _cupy: Any
    sm_count: int
    smem_limit: int
    _launch: dict[tuple, Any]

    def _set_up_transforms(self, l2_bytes: int) -> None:
        """The transforms' settings (measured on an H200) and plan caches."""
        # rfft_pad stores its spectra at evict-last priority in the L2 when they are at most this many bytes, so
        # that more of them are in the L2 for the forward product kernel and fewer of their lines go back to
        # memory in the middle of its stream of Fhat: the big dssdd product
        # 973.4-973.7 against 994.7-995.0 us of device time (the kernel 926.6-927.0 against 949.4-949.8 us),
        # the middle ddddd one 108.7-108.8 against 109.4-109.5 us
        # (benchmarks/results/h200-probe-kernels-rfftkeep-stop25-*)
        self.rfft_keep_max_bytes = l2_bytes
        # the inverse drops each tile of the adjoint's spectra from the L2 unwritten once it has read it, so that
        # they are not written back, nor hold L2 room, while the next product streams Fhat: the big ddssd adjoint
        # 971.3-971.8 against 980.7-980.9 us back to back, the middle one 56.6-56.8 against 57.6-57.9 us
        # (benchmarks/results/h200-launch-ab-release-stop35.jsonl).  Dropping the forward's input spectra after
        # the product too cost the forward products 0.3-2.6 us back to back, the big ddddd one up to 13 us
        # (h200-launch-ab-release-both-stop35.jsonl): the next transform overwrites them in the L2 anyway, and the
        # drops delay the small inverse after it.
        self.release_spectra = os.environ.get("FFTMATVEC_RELEASE_SPECTRA", "1") != "0"
        # The forward's kept input spectra, dirty in the L2 after the product, cost the adjoint after it their
        # write-back in its stream of Fhat: the big complex64 adjoint took 956.3-957.1 us after a forward product
        # against 932.3-932.9 with them dropped by the forward's inverse, the pair 1902.1-1903.4 against
        # 1881.5-1882.9 (h200-l2-state-other-stop59.jsonl).  The drops cost the big dssdd forward 3 us when
        # forwards repeat (947.7-948.7 against 944.6-945.2 back to back) and the middle ones 1-2 us
        # (h200-launch-ab-drop-stop59.jsonl).  The middle size's 4 MB gain nothing: the pair took 116.48-116.72
        # us kept, 116.67-116.93 dropped (h200-l2-state-drop-mid-stop59.jsonl); hence only big spectra
        self.fwd_release_min_bytes = 16 << 20
        # "fused": native/fft.cu where the length allows it, else cuFFT in the "auto"/"sc" layouts;
        # "auto": cuFFT, "cs" for small transforms (one launch fewer), "cc" for large ones (measured faster)
        self.fft_layout = {"r2c": os.environ.get("FFTMATVEC_R2C", "fused"),
                           "c2r": os.environ.get("FFTMATVEC_C2R", "fused")}
        self.fused_smem_target = 64 << 10  # shared memory per block of a fused transform (bytes)
        self.fused_threads: int | None = None  # threads per block of a fused transform (None: by size)
        self.fused_max_blocks: int | None = None  # blocks of a looping forward transform (None: all that fit)
        self._fused: dict[tuple, Any] = {}
        self._plans: dict[tuple, Any] = {}

    # -- the five stages -------------------------------------------------
    def pad(self, x: Array, out: Array) -> None:
        n, nt, K = x.shape
        if out.shape[1:] != (n, K) or out.shape[0] < nt:
            raise ValueError(f"pad: out {out.shape} does not fit x {x.shape}")
        if not x.flags.c_contiguous:
            x = self._cupy.ascontiguousarray(x)
        self._contiguous(out, "pad output")
        self._transpose("pad", x, out, n, nt, K, 1.0)

    def unpad(self, x_pad: Array, out: Array) -> None:
        n, nt, K = out.shape
        self._unpad(x_pad, out, 1.0)

    def _unpad(self, x_pad: Array, out: Array, scale: float) -> None:
        n, nt, K = out.shape
        if x_pad.shape[1:] != (n, K) or x_pad.shape[0] < nt:
            raise ValueError(f"unpad: x_pad {x_pad.shape} does not fit out {out.shape}")
        self._contiguous(x_pad, "unpad input")
        if not out.flags.c_contiguous:
            tmp = self.scratch(out.shape, out.dtype, "unpad-out")
            self._transpose("unpad", x_pad, tmp, n, nt, K, scale)
            out[...] = tmp
            return
        self._transpose("unpad", x_pad, out, n, nt, K, scale)

    def _transpose(self, which: str, src: Array, dst: Array, n: int, nt: int, K: int, scale: float) -> None:
        key = (which, n, nt, K, src.dtype, dst.dtype)
        cfg = self._launch.get(key)
        if cfg is None:
            TT = max(1, -(-32 // K))
            grid = (-(-nt // TT), -(-n // 32))
            if K > 128 or grid[1] > 65535:  # rare shapes: CuPy's strided copy
                cfg = ("fallback",)
            else:
                smem = 32 * (TT * K + 1) * src.dtype.itemsize
                fn = kernels.kernel("glue.cu", f"{which}_kernel", src.dtype, dst.dtype)
                cfg = (fn, grid, (32, 8), smem, TT)
            self._launch[key] = cfg
        if cfg[0] == "fallback":
            if which == "pad":
                dst[:nt] = src.transpose(1, 0, 2)
            else:
                dst[...] = src[:nt].transpose(1, 0, 2) * dst.dtype.type(scale)
            return
        fn, grid, block, smem, TT = cfg
        args = [src, dst, np.int32(n), np.int32(nt), np.int32(K), np.int32(TT)]
        if which == "unpad":
            args.append(dst.dtype.type(scale))
        self._run_kernel(fn, grid, block, tuple(args), smem)

    def _ccast(self, src: Array, dst: Array, scale: float) -> None:
        """dst = scale * src, complex, any precisions; both contiguous, same size."""
        n = src.size
        rdt = REAL_OF[np.dtype(dst.dtype)]
        fn = kernels.kernel("glue.cu", "ccast_kernel", src.dtype, dst.dtype)
        blocks = int(min(-(-n // 256), self.sm_count * 16)) or 1
        self._run_kernel(fn, (blocks,), (256,), (src, dst, np.int64(n), rdt.type(scale)))

    # -- FFTs ------------------------------------------------------------
    # cuFFT is fast on batches of contiguous series and slow on the strided
    # time-major layout (measured on an H200: a (2000, 5000) float64 transform
    # along axis 0 took 0.36 ms, 4.5x the bytes / bandwidth time), so the
    # transforms read or write series-major scratch arrays (B = n*K series of
    # length L or Nf, contiguous) and native kernels do the layout changes,
    # fused with the padding, the casts and the 1/L.  Plan layouts:
    #   "ss": strided in and out (time-major <-> frequency-major, no scratch)
    #   "cs": contiguous in, strided out (R2C: series-major -> frequency-major)
    #   "sc": strided in, contiguous out (C2R: frequency-major -> series-major)
    #   "cc": contiguous in and out, plus a transpose kernel
    def _plan(self, kind: str, layout: str, L: int, B: int, real: np.dtype, stride: int | None = None):
        """cuFFT plan for B series of length L; the strided side ("s") of the
        layout has stride ``stride`` (default B) and distance 1."""
        stride = B if stride is None else stride
        key = (kind, layout, L, B, real, stride)
        plan = self._plans.get(key)
        if plan is None:
            from cupy.cuda import cufft

            nf = L // 2 + 1
            if L * max(B, stride) >= 2**31:
                raise FftmatvecError(f"FFT of {B} series of length {L} exceeds cuFFT's 32-bit layout")
            double = real == np.float64
            n_in, n_out = (L, nf) if kind == "r2c" else (nf, L)
            ins = (stride, 1) if layout[0] == "s" else (1, n_in)  # (stride, distance)
            outs = (stride, 1) if layout[1] == "s" else (1, n_out)
            if kind == "r2c":
                t = cufft.CUFFT_D2Z if double else cufft.CUFFT_R2C
            else:
                t = cufft.CUFFT_Z2D if double else cufft.CUFFT_C2R
            plan = cufft.PlanNd([L], [n_in], ins[0], ins[1], [n_out], outs[0], outs[1], t, B, "C", 0, n_out)
            self._plans[key] = plan
        return plan

    def _r2c_layout(self, B: int, L: int) -> str:
        mode = self.fft_layout["r2c"]
        if mode in ("auto", "fused"):
            mode = "cs" if B * L < (1 << 22) else "cc"
        return mode

    def _exec(self, plan, a: Array, out: Array, kind: str) -> None:
        from cupy.cuda import cufft

        plan.fft(a, out, cufft.CUFFT_FORWARD if kind == "r2c" else cufft.CUFFT_INVERSE)

    def _rowcopy(self, src: Array, dst: Array, B: int, C: int, ibs: int, obs: int, scale: float) -> None:
        fn = kernels.kernel("glue.cu", "rowcopy_kernel", src.dtype, dst.dtype)
        blocks = int(min(B, self.sm_count * 16))
        threads = 256 if C >= 256 else 32 * -(-C // 32)
        self._run_kernel(fn, (blocks,), (threads,), (src, dst, np.int32(B), np.int32(C), np.int64(ibs), np.int64(obs),
                                                     _real_of(dst.dtype).type(scale)))

    def _btranspose(self, src: Array, dst: Array, R: int, C: int, ldi: int, ldo: int, batches: int = 1,
                    ibs: int = 0, obs: int = 0, scale: float = 1.0) -> None:
        """dst[b*obs + c*ldo + r] = scale * src[b*ibs + r*ldi + c] (cast to dst's type)."""
        grid = (-(-C // 32), -(-R // 32), batches)
        if grid[1] > 65535 or batches > 65535:
            raise FftmatvecError(f"transpose of {batches} x {R} x {C} is too large for one launch")
        fn = kernels.kernel("glue.cu", "btranspose_kernel", src.dtype, dst.dtype)
        self._run_kernel(fn, grid, (32, 8), (src, dst, np.int32(R), np.int32(C), np.int64(ldi), np.int64(ldo),
                                             np.int64(ibs), np.int64(obs), _real_of(dst.dtype).type(scale)))

    def _series_pad(self, x: Array, P: Array) -> None:
        """P[j*K + k, t] = x[j, t, k] for t < Nt (cast); P's other columns untouched."""
        n, nt, K = x.shape
        L = P.shape[1]
        if K == 1:
            self._rowcopy(x, P, n, nt, nt, L, 1.0)
        else:
            self._btranspose(x, P, nt, K, K, L, batches=n, ibs=nt * K, obs=K * L)

    def _series_unpad(self, S: Array, out: Array, scale: float) -> None:
        """out[j, t, k] = scale * S[j*K + k, t] for t < Nt (cast)."""
        n, nt, K = out.shape
        L = S.shape[1]
        if K == 1:
            self._rowcopy(S, out, n, nt, L, nt, scale)
        else:
            self._btranspose(S, out, K, nt, L, K, batches=n, ibs=K * L, obs=nt * K, scale=scale)

    def _r2c_series(self, P: Array, out: Array) -> None:
        """Forward transform of the series-major P (B, L) into frequency-major out (Nf, B)."""
        B, L = P.shape
        mode = self._r2c_layout(B, L)
        if mode == "cs":
            self._exec(self._plan("r2c", "cs", L, B, np.dtype(P.dtype)), P, out, "r2c")
        else:
            H = self.scratch((B, L // 2 + 1), out.dtype, "r2c-series")
            self._exec(self._plan("r2c", "cc", L, B, np.dtype(P.dtype)), P, H, "r2c")
            self._btranspose(H, out, B, L // 2 + 1, L // 2 + 1, B)

    def _c2r_series(self, x_hat: Array, S: Array) -> None:
        """Unnormalised inverse transform of frequency-major x_hat (Nf, B), any
        complex precision, into the series-major S (B, L); x_hat may be overwritten."""
        B, L = S.shape
        nf = L // 2 + 1
        want = COMPLEX_OF[np.dtype(S.dtype)]
        mode = self.fft_layout["c2r"]
        if mode in ("sc", "fused"):
            src = x_hat
            if x_hat.dtype != want or not x_hat.flags.c_contiguous:
                src = self.scratch(x_hat.shape, want, "irfft-in")
                if x_hat.flags.c_contiguous:
                    self._ccast(x_hat, src, 1.0)
                else:
                    src[...] = x_hat
            self._exec(self._plan("c2r", "sc", L, B, np.dtype(S.dtype)), src, S, "c2r")
        else:
            T = self.scratch((B, nf), want, "c2r-series")
            self._btranspose(x_hat.reshape(nf, B), T, nf, B, B, nf)
            self._exec(self._plan("c2r", "cc", L, B, np.dtype(S.dtype)), T, S, "c2r")

    def rfft(self, x_pad: Array, out: Array) -> None:
        L = x_pad.shape[0]
        B = int(np.prod(x_pad.shape[1:]))
        want = COMPLEX_OF[np.dtype(x_pad.dtype)]
        if (out.shape != (L // 2 + 1,) + x_pad.shape[1:] or out.dtype not in REAL_OF
                or out.dtype.itemsize > want.itemsize):
            raise ValueError(f"rfft: out {out.shape} {out.dtype} does not fit x_pad {x_pad.shape} {x_pad.dtype}")
        self._contiguous(x_pad, "rfft input")
        self._contiguous(out, "rfft output")
        if out.dtype != want:  # transformed in x_pad's precision, rounded into out
            full = self.scratch(out.shape, want, "rfft-out")
            self.rfft(x_pad, full)
            self._ccast(full, out, 1.0)
            return
        if self.fft_layout["r2c"] == "ss":
            self._exec(self._plan("r2c", "ss", L, B, np.dtype(x_pad.dtype)), x_pad, out, "r2c")
            return
        P = self.scratch((B, L), x_pad.dtype, "rfft-transposed")
        self._btranspose(x_pad.reshape(L, B), P, L, B, B, L)
        self._r2c_series(P, out.reshape(L // 2 + 1, B))

    def irfft(self, x_hat: Array, out: Array) -> None:
        """Inverse transform, scaled by ``1/L``.  ``x_hat`` may be overwritten
        (cuFFT's complex-to-real transforms use it as work space)."""
        L = out.shape[0]
        B = int(np.prod(out.shape[1:]))
        if x_hat.shape != (L // 2 + 1,) + out.shape[1:]:
            raise ValueError(f"irfft: x_hat {x_hat.shape} does not fit out {out.shape}")
        self._contiguous(out, "irfft output")
        if self.fft_layout["c2r"] == "ss":
            src = x_hat
            want = COMPLEX_OF[np.dtype(out.dtype)]
            if x_hat.dtype != want or not x_hat.flags.c_contiguous:
                src = self.scratch(x_hat.shape, want, "irfft-in")
                src[...] = x_hat
            self._exec(self._plan("c2r", "ss", L, B, np.dtype(out.dtype)), src, out, "c2r")
            view = out.reshape(-1)
            if view.size % 2 == 0:
                view = view.view(COMPLEX_OF[np.dtype(out.dtype)])
                self._ccast(view, view, 1.0 / L)
            else:
                out *= out.dtype.type(1.0 / L)
            return
        S = self.scratch((B, L), out.dtype, "irfft-series")
        self._c2r_series(x_hat, S)
        self._btranspose(S, out.reshape(L, B), B, L, L, B, scale=1.0 / L)

    def pad_rfft(self, x: Array, out: Array, dtype: Any = None) -> None:
        """Stages 1-2 fused: one native kernel (``native/fft.cu``) where ``Nt``
        allows it, computing in ``dtype`` and rounding into ``out`` as it
        stores; else ``x`` (n, Nt, K) padded into a series-major scratch
        (zero tails made once), one contiguous cuFFT, frequency-major ``out``."""
        n, nt, K = x.shape
        L = 2 * nt
        real = np.dtype(dtype) if dtype is not None else REAL_OF.get(np.dtype(out.dtype))
        if (out.shape != (nt + 1, n, K) or out.dtype not in REAL_OF or real not in COMPLEX_OF
                or out.dtype.itemsize > COMPLEX_OF[real].itemsize):
            raise ValueError(f"pad_rfft: x {x.shape} does not fit out {out.shape} {out.dtype} "
                             f"(transform in {real})")
        if self.fft_layout["r2c"] == "ss":
            x_pad = self.scratch((L, n, K), real, "pad", zero=True)
            self.pad(x, x_pad)
            self.rfft(x_pad, out)
            return
        if not x.flags.c_contiguous:
            x = self._cupy.ascontiguousarray(x)
        self._contiguous(out, "pad_rfft output")
        if self.fft_layout["r2c"] == "fused" and self._fused_transform("rfft_pad", x, out, COMPLEX_OF[real], n * K,
                                                                       K, nt, None):
            return
        P = self.scratch((n * K, L), real, "series-pad", zero=True)
        self._series_pad(x, P)
        full = out if out.dtype == COMPLEX_OF[real] else self.scratch(out.shape, COMPLEX_OF[real], "rfft-out")
        self._r2c_series(P, full.reshape(nt + 1, n * K))
        if full is not out:
            self._ccast(full, out, 1.0)

    def irfft_unpad(self, x_hat: Array, out: Array, dtype: Any, drop: Array | None = None) -> None:
        """Stages 4-5 fused: one native kernel (``native/fft.cu``) where ``Nt``
        allows it; else one cuFFT into a series-major scratch, then one unpad
        pass that applies ``1/L`` and the cast.  ``x_hat`` may be overwritten.
        ``drop``: scratch that nothing reads again, which the native kernel
        drops from the L2 unwritten (``discard.global.L2``) before it starts."""
        n, nt, K = out.shape
        L = 2 * nt
        real = np.dtype(dtype)
        if x_hat.shape != (nt + 1, n, K):
            raise ValueError(f"irfft_unpad: x_hat {x_hat.shape} does not fit out {out.shape}")
        if (self.fft_layout["c2r"] == "fused" and out.flags.c_contiguous and x_hat.flags.c_contiguous
                and self._fused_transform("irfft_unpad", x_hat, out, COMPLEX_OF[real], n * K, K, nt, 1.0 / L,
                                          drop=drop)):
            return
        if self.fft_layout["c2r"] == "ss":
            y_pad = self.scratch((L, n, K), real, "unpad")
            self.irfft(x_hat, y_pad)
            self._unpad(y_pad, out, 1.0)
            return
        S = self.scratch((n * K, L), real, "series-unpad")
        self._c2r_series(x_hat.reshape(nt + 1, n * K), S)
        if not out.flags.c_contiguous:
            tmp = self.scratch(out.shape, out.dtype, "unpad-out")
            self._series_unpad(S, tmp, 1.0 / L)
            out[...] = tmp
            return
        self._series_unpad(S, out, 1.0 / L)

    def _fused_config(self, M: int, ctype: np.dtype, B: int, K: int) -> tuple | None:
        """Launch set-up of the fused transforms (native/fft.cu) for length
        ``2 M`` in complex ``ctype`` over ``B = n K`` series, or None when
        ``M`` is not supported (a prime factor above 7, or one series does not
        fit in shared memory): ``(S, threads, smem, twp, twl, radices,
        in_place)``, :meth:`_fused_plan`'s with the twiddle tables ``twp``
        (:func:`pass_twiddles`) and ``twl`` on the device, computed in float64
        and rounded once."""
        key = (M, ctype, B, K)
        if key not in self._fused:
            cfg = plan = self._fused_plan(M, ctype, B, K)
            if plan is not None:
                S_of, threads_of, smem_of, radices, in_place_of = plan
                twp = self._cupy.asarray(pass_twiddles(list(radices)).astype(ctype))
                twl = self._cupy.asarray(np.exp(-1j * np.pi * np.arange(M + 1) / M).astype(ctype))  # L = 2 M
                cfg = (S_of, threads_of, smem_of, twp, twl, radices, in_place_of)
            self._fused[key] = cfg
        return self._fused[key]

    def _fused_plan(self, M: int, ctype: np.dtype, B: int, K: int) -> tuple | None:
        """The host's part of :meth:`_fused_config` (no device work, so any
        thread may ask): ``(S, threads, smem, radices, in_place)`` with ``S``
        (series per block), ``threads``, ``smem`` (bytes of shared memory per
        block) and ``in_place`` (passes in one buffer) by kernel name
        (``"rfft_pad"``, ``"irfft_unpad"``), or None."""
        radices = fft_radices(M)
        per_series = 2 * (M + 1) * ctype.itemsize  # two ping-pong buffers
        if radices is not None and per_series <= self.smem_limit:
            # series per block: a power of two within the shared-memory target, small enough for two blocks
            # per multiprocessor (1000 series of Nt = 500 in float32: 6.3 us with S = 4 against 8.0-8.5 with
            # S = 8, benchmarks/results/h200-probe-fftvar.jsonl), and at most 16: the two lanes of a pair in
            # native/fft.cu's PairItem, e and e ^ S, must be in one group of 32.  With K > 1 a block's series
            # may belong to more than one parameter: with one series a block for odd K (stop 16) the forward
            # transform of 5000 x 3 series took 373 us, now 124 us (5000 x 4: 158 us;
            # benchmarks/results/h200-kodd-device-times-{before-,}stop17.txt)
            S = 1
            while (2 * S * per_series <= max(self.fused_smem_target, per_series) and 2 * S <= 16
                   and S < -(-B // (2 * self.sm_count))):
                S *= 2
            # complex128 with K >= 4 over many waves of blocks: a block's series read and write their samples in
            # runs of min(S, K) values, so twice the series in one buffer (the shared memory of two buffers of S)
            # and 512 threads for the forward (fewer since stop 49, below): 5000 x 16 series 792 against 942 us
            # with S = 2 and 256 threads (benchmarks/results/h200-probe-fftsweep-stop28.jsonl)
            wide = (ctype.itemsize == 16 and K >= 4 and self.fused_threads is None and 2 * S <= 16
                    and -(-B // (2 * S)) >= 4 * self.sm_count and fused_in_place(M, 2 * S, 512, radices))
            S *= 2 if wide else 1
            threads = self.fused_threads or int(min(512, max(32, 32 * -(-(S * M) // 64))))
            inverse_threads, inverse_S = threads, S
            if (wide and K >= 8 and 2 * S <= 16 and fused_in_place(M, 2 * S, 1024, radices)
                    and -(-B // (2 * S)) >= 4 * self.sm_count):
                # the inverse with 8 or more right-hand sides: twice the forward's series in one buffer, 1024
                # threads: 5000 x K series 472.6, 698.4 and 875.9 us against 493.8, 722.4 and 953.9 for K = 8, 12
                # and 16 (benchmarks/results/h200-probe-fftsweep-kwide-stop31.jsonl; the forward was slower that
                # way: 909.2 against 791.7 us with K = 16, h200-probe-fftsweep-wide-stop28.jsonl).  One buffer
                # needs many waves of such blocks (in_place_of, below): two buffers of 8 series of Nt = 1000 are
                # 258 KB, more than a block may have (100 x 24 series failed at launch before, stop 53)
                inverse_threads, inverse_S = 1024, 2 * S
            elif self.fused_threads is None and ctype.itemsize == 16 and not wide:
                # complex128: rfft_pad over many waves of blocks takes 256 threads (fewer in one buffer, below), so
                # that three blocks share a multiprocessor (two of 512 by registers): 62 us against 65 us with 512
                # at the big size, while the middle size's 250 blocks keep 512 (6.5 against 7.1 us); irfft_unpad
                # always takes 256, the block size its register budget is set for (native/fft.cu): 70 against 86 us
                # and 6.3 against 8.0 us (benchmarks/results/h200-fft-pairs-ab.jsonl)
                inverse_threads = min(threads, 256)
                if -(-B // S) >= 4 * self.sm_count:
                    threads = inverse_threads
            threads_of = {"rfft_pad": threads, "irfft_unpad": inverse_threads}
            S_of = {"rfft_pad": S, "irfft_unpad": inverse_S}
            # complex128 over many waves of blocks runs in one buffer where it may: half the shared memory, so
            # four blocks of 256 share a multiprocessor instead of three; 5000 x 16 series 943 against 1045 us
            # forward and 1007 against 1162 inverse, 5000 series 53.1 against 53.7 and 57.2 against 65.7.
            # One wave (the middle size's 1000 series: 6.5 against 6.0 us) and complex64 (two blocks of 512 by
            # registers either way: 39.9 against 38.7 us at the big size) keep two buffers
            # (benchmarks/results/h200-fft-ab-inplace-stop21.jsonl)
            in_place_of = {name: (ctype.itemsize == 16 and -(-B // S_of[name]) >= 4 * self.sm_count  # many waves
                                  and fused_in_place(M, S_of[name], n, radices)) for name, n in threads_of.items()}
            smem_of = {name: (1 if in_place else 2) * S_of[name] * fused_row_stride(M, S_of[name], ctype.itemsize)
                       * ctype.itemsize for name, in_place in in_place_of.items()}
            if in_place_of["rfft_pad"] and self.fused_threads is None:
                # the complex128 forward in one buffer takes the fewest threads that do a pass at once: its register
                # budget (native/fft.cu: blocks_of<1024, NT>) then holds a radix-10 butterfly with no spills.
                # 5000 x 16 series 731.9 against 766.5 us (416 threads, 70 registers, against 512, 64 registers
                # and 32 bytes spilled a thread), 5000 series 46.5 against 50.0 (224 against 256 threads);
                # K = 2, 4 and 8 faster too (benchmarks/results/h200-probe-fftsweep-regs-{big,big16,bigK}-stop49
                # .jsonl).  Not the inverse: its spills cost less than fewer threads (the same files)
                threads_of["rfft_pad"] = pass_threads(M, S_of["rfft_pad"], radices)
            return S_of, threads_of, smem_of, tuple(radices), in_place_of
        return None

    def _fused_transform(self, which: str, src: Array, dst: Array, ctype: np.dtype, B: int, K: int, M: int,
                         scale: float | None, tiled: bool = False, drop: Array | None = None) -> bool:
        """Run ``which`` ("rfft_pad" or "irfft_unpad", native/fft.cu) from ``src``
        to ``dst``; False (nothing done) when the length is not supported.
        A ``tiled`` inverse drops each tile of ``src`` from the L2 once it has
        read it when :attr:`release_spectra`; an inverse drops ``drop``
        (:meth:`irfft_unpad`) first."""
        cfg = self._fused_config(M, np.dtype(ctype), B, K)
        if cfg is None or B == 0:
            return cfg is not None
        _, threads_of, _, twp, twl, _, _ = cfg
        plan = cfg[:3] + cfg[5:]  # the config without its twiddle tables
        fn, blocks, smem = self._fused_kernel(which, src.dtype, dst.dtype, ctype, B, K, M, plan)
        kernels.allow_shared_memory(fn, smem)
        args = [src, dst, twp, twl, np.int32(B), np.int32(K)]
        if which == "rfft_pad":  # its spectra kept in the L2 when they fit
            args.append(np.int32(dst.nbytes <= self.rfft_keep_max_bytes))
        else:
            args += [REAL_OF[np.dtype(ctype)].type(scale), np.int32(tiled), np.int32(self.release_spectra)]
            args += [src if drop is None else drop, np.int64(0 if drop is None else drop.nbytes)]
        self._run_kernel(fn, (blocks,), (threads_of[which],), tuple(args), smem)
        return True

    def _fused_kernel(self, which: str, src: np.dtype, dst: np.dtype, ctype: np.dtype, B: int, K: int, M: int,
                      plan: tuple) -> tuple[Any, int, int]:
        """The kernel :meth:`_fused_transform` launches from ``src`` to ``dst``
        (dtypes) for the set-up ``plan`` (:meth:`_fused_plan`'s), its blocks
        and its bytes of shared memory.  No device work: any thread may ask."""
        S_of, threads_of, smem_of, radices, in_place_of = plan
        S, threads, smem = S_of[which], threads_of[which], smem_of[which]
        groups = -(-B // S)
        # rfft_pad from samples wider than the transform's reals (float64 into complex64), K = 1: blocks loop over
        # groups of series, staging the next group's samples in shared memory behind the transform's buffers
        # (16-byte aligned: StagingOffset in native/fft.cu) while they transform the current one.  Only when there
        # are more groups than blocks: one wave has nothing to overlap the staging with (the middle size's 1000
        # series: 5.57 us staged against 5.39, benchmarks/results/h200-fft-ab-staged-forward-stop27.jsonl)
        staged_smem = -(-smem // 16) * 16 + S * M * src.itemsize
        if (which == "rfft_pad" and K == 1 and 2 * src.itemsize > np.dtype(ctype).itemsize
                and staged_smem <= self.smem_limit):
            fn = self._fft_kernel(which, src, dst, ctype, S, threads, in_place_of[which], True, M, radices)
            blocks = min(groups, self.sm_count * self._resident_blocks(fn, threads, staged_smem),
                         self.fused_max_blocks or groups)
            if blocks < groups:
                return fn, blocks, staged_smem
        return self._fft_kernel(which, src, dst, ctype, S, threads, in_place_of[which], False, M, radices), groups, smem

    def _build_transform_ahead(self, which: str, n: int, nt: int, K: int, src: Any, dst: Any, real: Any) -> None:
        """Start building the kernel of :meth:`pad_rfft` (``which`` "rfft_pad")
        or :meth:`irfft_unpad` ("irfft_unpad") for ``(n, Nt, K)`` blocks from
        dtype ``src`` to ``dst``, transformed in the real dtype ``real``, where
        that call would run the fused transform (:func:`kernels.build_ahead`)."""
        ctype = COMPLEX_OF[np.dtype(real)]
        layout = self.fft_layout["r2c" if which == "rfft_pad" else "c2r"]
        plan = self._fused_plan(nt, ctype, n * K, K) if layout == "fused" and n * K else None
        if plan is not None:
            kernels.build_ahead(lambda: self._fused_kernel(which, np.dtype(src), np.dtype(dst), ctype, n * K, K, nt,
                                                           plan))

    @staticmethod
    def _fft_kernel(which: str, src: np.dtype, dst: np.dtype, ctype: np.dtype, S: int, threads: int, in_place: bool,
                    staged: bool, M: int, radices: list[int]):
        """The ``native/fft.cu`` kernel ``which`` for these dtypes and launch set-up."""
        flags = (int(in_place),) + ((int(staged),) if which == "rfft_pad" else ())
        return kernels.kernel("fft.cu", which, src, ctype, dst, S.bit_length() - 1, threads, *flags, M, *radices)


__all__ = ["GPUTransforms"]
