"""The per-frequency products of the GPU backend (stage 3), and products
small enough to run in one kernel.

* ``sbgemv`` reads ``Fhat`` in place, once, with 16-byte streaming loads
  (``native/sbgemv.cu``), the input's cast fused into the load;
* several right-hand sides: in the same kernels, or for forward products from
  :attr:`GPUProducts.gemm_min_k` in ``native/sbgemm.cu`` (on the tensor cores in
  3M complex products: complex64 in 3xTF32, complex128 in float64; ``Fhat``
  and X staged in shared memory; without tensor cores on CUDA cores), up to
  :attr:`GPUProducts.blas_min_k`, cuBLAS's batched GEMM from there; adjoint
  products from :attr:`GPUProducts.adj_tensor_min_k` to 16 right-hand sides
  on the tensor cores too (``sbgemm_adj_tc``);
* small products (``Nt`` up to 32, one right-hand side) skip the stages:
  :meth:`GPUProducts.direct_plan` runs all five in one kernel
  (``native/direct.cu``, direct DFTs), since there three kernels cost more in
  launches than in work.

Choices measured on an H200, see benchmarks/results/h200-*.jsonl.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np

from . import kernels
from .base import Array
from .graphs import PreparedLaunch
from .kernels import COMPLEX_OF, REAL_OF

# lane layouts of native/sbgemm.cu by (dtype, right-hand sides per block KB): (KL, CL, TR, U, V, MINB) =
# right-hand-side lanes, column lanes, rows per lane, columns per lane and step, steps per staged chunk
# of X, blocks of 256 threads per multiprocessor the registers are capped for
_GEMM_TILES = {
    (np.dtype(np.complex64), 16): (2, 4, 2, 2, 2, 2), (np.dtype(np.complex64), 8): (1, 8, 2, 4, 1, 2),
    (np.dtype(np.complex64), 4): (1, 8, 2, 4, 2, 2), (np.dtype(np.complex64), 2): (1, 8, 2, 4, 4, 2),
    (np.dtype(np.complex128), 16): (2, 4, 2, 2, 4, 1), (np.dtype(np.complex128), 8): (2, 4, 2, 2, 4, 2),
    (np.dtype(np.complex128), 4): (1, 8, 2, 2, 4, 2), (np.dtype(np.complex128), 2): (1, 8, 2, 2, 8, 2),
}


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def _round_up(n: int, step: int) -> int:
    return -(-n // step) * step



def tc_x_stride(dtype: Any, KB: int) -> int:
    """Row stride (elements) of ``X`` staged in shared memory by ``sbgemm_tc``
    and ``sbgemm_adj_tc`` for ``KB`` right-hand sides: 16 bytes of padding in
    complex64, 32 in complex128, so that the lanes of a fragment load fall in
    distinct banks (``XS`` of native/sbgemm.cu)."""
    return KB + (4 if np.dtype(dtype) == np.complex64 else 2)


class GPUProducts:
    """Stage 3 of :class:`~fftmatvec.backend.gpu.GPUBackend`, which this class
    is mixed into and which provides the device's facts (``sm_count``,
    ``smem_limit``, ``tensor_cores``, ``mbarriers``, ...), ``_run_kernel``,
    ``_resident_blocks``, ``_contiguous``, ``scratch``, the launch cache
    ``_launch``, and from :class:`~.gpu_transforms.GPUTransforms` the cast
    ``_ccast`` (before cuBLAS) and the fused inverse transform
    (``_fused_transform``, ``_fused_config``, ``fft_layout``) that
    :meth:`sbgemv_irfft_unpad` runs after the product.

    Attributes
    ----------
    blas_min_k : dict[(numpy.dtype, bool), int]
        Smallest number of right-hand sides for which the per-frequency
        product (of ``Fhat``'s dtype, adjoint or not) goes to cuBLAS (batched
        GEMM) instead of the native kernel.
    gemm_min_k : dict[numpy.dtype, int]
        Smallest number of right-hand sides for which a forward product (below
        ``blas_min_k``) takes ``native/sbgemm.cu`` instead of the one-column
        kernels.
    gemm_tiles : dict[(numpy.dtype, int), tuple]
        Lane layout of ``sbgemm_fwd`` per dtype and right-hand sides per
        block (:data:`_GEMM_TILES`).
    gemm_splits : int or None
        Column splits of ``sbgemm_fwd`` and ``sbgemm_staged`` (None: chosen by size).
    gemm_staged : dict[numpy.dtype, tuple or None]
        Tile ``(TM, TN, BK, NS, MINB)`` of ``sbgemm_staged``, which takes forward
        products with 9-16 right-hand sides when set (None: ``sbgemm_fwd``).
    gemm_tensor : dict[numpy.dtype, tuple or None]
        Tile ``(BK, NS, MINB)`` of ``sbgemm_tc`` (on the tensor cores: complex64
        as 3xTF32, about float32's accuracy; complex128 in float64), which takes
        the forward products of ``native/sbgemm.cu`` before ``sbgemm_staged``
        and ``sbgemm_fwd`` when set and :attr:`tensor_cores` (complex64) or
        :attr:`tensor_cores_f64` (complex128) is true.
    gemm_tensor_pipe : dict[numpy.dtype, tuple or None]
        Tile ``(BK, NS, MINB, CW)`` of ``sbgemm_tc_pipe`` (complex64 only),
        ``sbgemm_tc`` with its chunks brought in by CW warps of their own and
        the copy engine, which takes those products before ``sbgemm_tc`` (after
        ``sbgemm_wg_pipe`` where that one runs) when set, :attr:`gemm_tensor`
        is set too, :attr:`mbarriers` is true, ``Fhat`` is 16-byte aligned with
        ``Nm`` even and its warps and shared memory fit
        (``$FFTMATVEC_GEMM_PIPE=0`` unsets it, and so turns both pipes off).
    gemm_pipe_few_rows : dict[numpy.dtype, tuple or None]
        Tile of ``sbgemm_tc_pipe`` that replaces :attr:`gemm_tensor_pipe`'s
        for 9-16 right-hand sides on at most 64 rows (where
        ``sbgemm_wg_pipe`` does not run), when set.
    gemm_warpgroup : dict[numpy.dtype, tuple or None]
        Tile ``(NS, SW)`` of ``sbgemm_wg_pipe`` (complex64 only: Hopper's
        warpgroup MMA in 3xTF32, chunks brought in as ``sbgemm_tc_pipe``'s,
        NS stages, SW warps that split ``X``), which takes the products with
        9-16 right-hand sides and 65-128 rows before ``sbgemm_tc_pipe`` where
        that one could run and :attr:`warpgroup_mma` is true
        (``$FFTMATVEC_GEMM_WG=0`` unsets it).
    gemm_spread : bool
        ``sbgemm_wg_pipe`` with at least as many frequencies as resident
        blocks spreads its chunks evenly over that many blocks instead of
        taking a block a frequency, two blocks adding their sums of a
        frequency they share (``$FFTMATVEC_GEMM_SPREAD=0`` turns it off;
        :attr:`gemm_splits`, when set, too).
    adj_tensor : dict[numpy.dtype, tuple or None]
        Tile ``(W, KS, NS, MINB)`` of ``sbgemm_adj_tc`` (the adjoint on the
        tensor cores, as ``sbgemm_tc``), which takes adjoint products with
        :attr:`adj_tensor_min_k` to 16 right-hand sides before cuBLAS when set
        and the tensor cores for the dtype are there.
    adj_tensor_min_k : dict[numpy.dtype, int]
        Fewest right-hand sides of an adjoint product for ``sbgemm_adj_tc``.
    tiled_spectra : bool
        The adjoint product with one right-hand side writes its spectra in
        tiles of the inverse transform's series per block, which the inverse
        then reads one contiguous run at a time
        (:meth:`sbgemv_irfft_unpad`; ``$FFTMATVEC_TILED_SPECTRA=0`` turns it
        off).
    early_loads : int
        Loads of ``Fhat`` per thread that the one-vector product kernels
        (``sbgemv_fwd``, ``sbgemv_adj_flat``) ask the L2 for before they wait
        for the transform, when launched programmatically
        (``$FFTMATVEC_EARLY_LOADS``).
    direct_max_nt, direct_max_work, direct_max_smem : int
        When :meth:`direct_plan` takes a product (one kernel instead of
        three): ``Nt`` up to ``direct_max_nt`` (``$FFTMATVEC_DIRECT_MAX_NT``,
        default 32; 0 turns it off), ``n_in Nf Nt`` up to ``direct_max_work``,
        shared memory up to ``direct_max_smem`` bytes.
    """

    # set by GPUBackend
    _cupy: Any
    sm_count: int
    smem_limit: int
    tensor_cores: bool
    tensor_cores_f64: bool
    mbarriers: bool
    warpgroup_mma: bool
    programmatic_launch: bool
    _launch: dict[tuple, Any]

    def _set_up_products(self, l2_bytes: int) -> None:
        """The products' settings (measured on an H200) and launch caches."""
        # measured on an H200 at Nm=5000, Nd=100, Nt=1000 (benchmarks/gpu_probe.py, part kgemm,
        # benchmarks/results/h200-probe-gemm-stop15.jsonl and h200-probe-kgemm-stop20.jsonl): the native
        # kernels win up to these K (exclusive), cuBLAS's batched GEMM from there.  The complex64 forward on the
        # tensor cores reads Fhat once per 16 right-hand sides, and cuBLAS's time hardly grows with K: 2401.9
        # against 3559.5 us at K = 32, 1258.4 against 3480.5 at 16 (h200-probe-kgemm-stop53.jsonl)
        c64, c128 = np.dtype(np.complex64), np.dtype(np.complex128)
        self.blas_min_k = {(c64, False): 33 if self.tensor_cores else 17, (c64, True): 9,
                           (c128, False): 17 if self.tensor_cores_f64 else 3, (c128, True): 9}
        # forward products with gemm_min_k <= K < blas_min_k take native/sbgemm.cu, the others of
        # fewer right-hand sides the one-column kernels; complex64 on the tensor cores from K = 2: sbgemm_tc
        # (benchmarks/results/h200-gemm-ab-stop18.jsonl: 1.18x the floor at K = 8, 1.61x at K = 16), or
        # sbgemm_tc_pipe before it (gemm_tensor_pipe, below), at K = 2 1017.5 against the one-column kernels'
        # 1050.4 us alone (h200-probe-kgemm-stop53.jsonl) and the big dssdd product 1067.0-1068.1 against
        # 1137.6-1142.5 us through the bench (h200-bench-ab-fwd2-stop53.jsonl); without them sbgemm_fwd for
        # K = 3-8 (1.48-1.99x, against 1.96-2.05x for the one-column kernels and 3.7x for cuBLAS) and
        # sbgemm_staged for K = 9-16 (2.05x);
        # complex128 K = 3-16: sbgemm_tc in float64 from compute capability 9.0
        # (h200-probe-gemmvar-stop20{,-b}.jsonl: 1.09-1.12x at K = 4, 1.23-1.25x at K = 16, against
        # cuBLAS's 1.19 and 1.24-1.31x in the same runs), else cuBLAS (faster than the CUDA-core kernels)
        self.gemm_min_k = {c64: 2 if self.tensor_cores else 3, c128: 3}
        self.gemm_tiles = dict(_GEMM_TILES)
        self.gemm_splits: int | None = None
        # sbgemm_staged (Fhat staged in shared memory too) for 9-16 right-hand sides: (TM, TN, BK, NS, MINB)
        # (benchmarks/results/h200-probe-gemmvar-stop16.jsonl: 5 rows a thread at Nd = 100; complex128
        # 2.39x at best against cuBLAS's 1.25x)
        self.gemm_staged: dict[np.dtype, tuple | None] = {c64: (5, 4, 32, 3, 2), c128: None}
        # sbgemm_tc (on the tensor cores) before both: (BK, NS, MINB); complex128: one block of 7 warps a
        # multiprocessor, chunks of 32 columns (h200-probe-gemmvar-stop20{,-b}.jsonl: 1.23-1.25x at K = 16,
        # against 1.25-1.27x for two blocks with chunks of 16 and 1.34-1.36x for one; more stages were slower)
        self.gemm_tensor: dict[np.dtype, tuple | None] = {c64: (32, 3, 2), c128: (32, 3, 1)}
        # sbgemm_tc_pipe (sbgemm_tc with its chunks brought in by warps of their own) before sbgemm_tc:
        # (BK, NS, MINB, CW); h200-gemm-ab-pipe-tiles-stop44-b.jsonl: chunks of 64 columns, one block of 14
        # computing warps a multiprocessor, at the big size K = 16 1.57-1.58x the floor against sbgemm_tc's
        # 1.86-1.90x, K = 8 1.20x against 1.39x, K = 4 1.19x against 1.36x
        self.gemm_tensor_pipe: dict[np.dtype, tuple | None] = {c64: (64, 3, 1, 1), c128: None}
        if os.environ.get("FFTMATVEC_GEMM_PIPE", "1") == "0":
            self.gemm_tensor_pipe = {c64: None, c128: None}
        # ... but chunks of 32 columns in two blocks a multiprocessor for 9-16 right-hand sides on up to 64 rows
        # (h200-gemm-ab-pipe-tile-sizes-stop46.jsonl, K = 16: 103.5-103.7 against 113.6-114.0 us at 50 rows and 501
        # frequencies, 766.2-776.6 against 868.6-897.9 at 50 rows and 1001, 68.4-73.1 against 83.7-84.0 at 20
        # rows; h200-gemm-ab-pipe-tile-rows-stop46.jsonl: at 64 rows 121.5-122.5 against 118.6-119.0 us with 501
        # frequencies, 892-918 against 969-1021 with 1001; slower from 80 rows on, 163 against 145 us at 80; and
        # 8-34% slower with 8 or fewer)
        self.gemm_pipe_few_rows: dict[np.dtype, tuple | None] = {c64: (32, 3, 2, 1), c128: None}
        # sbgemm_wg_pipe (wgmma) before sbgemm_tc_pipe for 9-16 right-hand sides and 65-128 rows: (NS, SW);
        # h200-gemm-ab-wg-chains-stop45.jsonl: at the big size 1.37x the floor at K = 16 against sbgemm_tc_pipe's
        # 1.49-1.54x, 1.38-1.41x at K = 12 against 1.61x); four warps that split X into quarter-chunk slots (stop
        # 47, h200-gemm-ab-wg-quarters{,-sw}-stop47.jsonl: 13 of 15 rounds at K = 10-16 faster than three warps
        # and half-chunk slots, by 1.7% in the median; three warps with quarters 7.7% slower in the median)
        self.gemm_warpgroup: dict[np.dtype, tuple | None] = {c64: (3, 4), c128: None}
        if os.environ.get("FFTMATVEC_GEMM_WG", "1") == "0":
            self.gemm_warpgroup = {c64: None, c128: None}
        # sbgemm_wg_pipe's chunks spread evenly over the resident blocks where there are at least as many
        # frequencies as blocks, instead of a block a frequency (whose last wave leaves multiprocessors idle)
        self.gemm_spread = os.environ.get("FFTMATVEC_GEMM_SPREAD", "1") != "0"
        # sbgemm_adj_tc (the adjoint on the tensor cores) for adj_tensor_min_k <= K <= 16, before cuBLAS and
        # the one-column kernels: (W, KS, NS, MINB) (benchmarks/results/h200-probe-adjvar-tiles-stop33.jsonl, two
        # runs: 1.30-1.31x the floor in complex128 and 1.55-1.63x in complex64 at K = 16, 1.09-1.10 and 1.21x
        # at K = 8, against cuBLAS's 1.59-1.60 and 3.08-3.15x); in complex64 from K = 3 on, where it is faster
        # than the one-column kernels (h200-probe-kgemm-stop52.jsonl, kgemm part: K = 3 and 4 1219.2 and 1208.5
        # us against 1306.1 and 1329.9, K = 2 1236.3 against 1179.4; through the bench, `ddssd` F^T d with K = 3
        # 1306.2 against 1390.5 and 1401.9 us, h200-bench-ab-adjfew-stop52.jsonl); in complex128 from K = 5 (alone
        # 4.9% and 2.4% faster at K = 3 and 4, but `ddddd` F^T d through the bench 1-3% slower there, the same files)
        self.adj_tensor: dict[np.dtype, tuple | None] = {c64: (4, 4, 3, 2), c128: (4, 2, 3, 2)}
        self.adj_tensor_min_k = {c64: 3, c128: 5}
        self.real_gemm = {np.dtype(np.complex64): False, np.dtype(np.complex128): False}
        self.fwd_splits: int | None = None  # column splits of the forward kernel (None: automatic)
        # threads that share a row group of the forward kernel (None: automatic)
        self.fwd_lanes: int | None = None
        self.adj_flat = True  # balanced adjoint kernel for one right-hand side
        self.adj_flat_max_bytes = 512 << 20  # ... below this many bytes of Fhat (the blocked one from there)
        self.adj_row_slices = 0  # row slices of the blocked adjoint's blocks (0: by size, _adj_config)
        # the one-column adjoint kernels store their result at evict-last priority in the L2 when it is at most
        # this many bytes, so that more of it is still there for the inverse transform: the big ddssd adjoint
        # 983 against 990 us of device time, the middle ddddd one 103 against 105.5 us; the big ddddd one's
        # 80 MB, more than the L2, 2079 against 2069 us (benchmarks/results/h200-probe-kernels-adjstore-stop25-*)
        self.adj_keep_max_bytes = l2_bytes
        # the inverse transform reading tiles took 34.6 against 40.2 us of device time for the big ddssd one,
        # 4.5 against 4.8 us at the middle size (benchmarks/results/h200-probe-tiles-stop30.jsonl); the middle
        # ddssd product 57.2-57.4 against 58.6-59.2 us back to back, the big ones, whose adjoint then stores its
        # spectra in 32-byte runs, level (ddssd, 40 MB) or slower (ddddd, 80 MB: past the L2, so not tiled)
        # (benchmarks/results/h200-launch-ab-tiles-stop30.jsonl)
        self.tiled_spectra = os.environ.get("FFTMATVEC_TILED_SPECTRA", "1") != "0"
        # two loads a thread asked for before the wait: the middle size's dssdd F m 63.5-64.1 us waited for, against
        # 66.1-68.8 with none, 64.6-67.4 with four, 66.8-70.0 launched plainly; more fill the L2 beyond what the
        # kernel reads before it is evicted (six: 67.6-70.2, sixteen: 81.2-81.4; ddssd F^T d 66.3-66.5 with two,
        # 67.0-68.3 plainly; benchmarks/results/h200-launch-ab-mid-stop29-*.jsonl, launch_ab.py)
        self.early_loads = int(os.environ.get("FFTMATVEC_EARLY_LOADS", 2))
        # the one-kernel product of direct_plan: Nt up to this (0: never), one block's DFT work
        # (n_in Nf Nt multiply-adds) and shared memory (bytes) up to these
        self.direct_max_nt = int(os.environ.get("FFTMATVEC_DIRECT_MAX_NT", 32))
        self.direct_max_work = 1 << 17
        self.direct_max_smem = 100 << 10
        self._tensor_maps: dict[tuple, Array] = {}  # _rows_map's

    def direct_plan(self, Fhat: Array, K: int, prec: Any, adjoint: bool) -> Callable[[Array, Array], None] | None:
        """The whole product in one kernel (``native/direct.cu``: direct DFTs,
        no intermediate arrays) for one right-hand side when ``Nt`` is at most
        :attr:`direct_max_nt` and one block's DFT work and shared memory are
        small; None otherwise."""
        shape = self._direct_shape(Fhat, K, prec, adjoint)
        if shape is None:
            return None
        threads, OPB, smem = shape
        nf, nd, nm = Fhat.shape
        M, n_out = nf - 1, nm if adjoint else nd
        fn = self._direct_kernel(M, np.dtype(Fhat.dtype), prec, adjoint, threads)
        kernels.allow_shared_memory(fn, smem)
        k = np.arange(2 * M)
        twf = self._cupy.asarray(np.exp(-1j * np.pi * k / M).astype(prec.fft_hat))  # exp(-2 pi i k / L)
        twi = self._cupy.asarray(np.exp(1j * np.pi * k / M).astype(prec.ifft_hat))
        tail = (twf, twi, np.int32(nd), np.int32(nm), np.int32(OPB))
        return PreparedLaunch(fn, (-(-n_out // OPB),), (threads,), smem, 2, (Fhat,) + tail)  # run(x, out)

    def _direct_shape(self, Fhat: Array, K: int, prec: Any, adjoint: bool) -> tuple[int, int, int] | None:
        """``btt_direct``'s launch shape for :meth:`direct_plan`'s arguments,
        None where it does not apply: threads, output series per block (forward:
        one row, so there are ``nd`` blocks, each with a warp per frequency and
        a thread per input series and group of frequencies of its DFTs, up to
        640 threads (more would leave too few registers); adjoint: 8
        consecutive columns, so the reads of ``Fhat``'s columns fill 128-byte
        lines) and bytes of shared memory."""
        nf, nd, nm = Fhat.shape
        M, L = nf - 1, 2 * (nf - 1)
        n_in, n_out = (nd, nm) if adjoint else (nm, nd)
        if (K != 1 or M > self.direct_max_nt or n_in * nf * M > self.direct_max_work or nd * nm == 0
                or not Fhat.flags.c_contiguous):
            return None
        ts, tf, ti = np.dtype(Fhat.dtype), prec.fft_hat, prec.ifft_hat
        OPB = 8 if adjoint else 1
        OPB = min(max(OPB, -(-n_out // (4 * self.sm_count))), n_out)
        per_thread = (nf + 1) // 2 if nf < 16 else 8  # frequencies per DFT thread: FQ of direct.cu
        dft_threads = n_in * -(-nf // per_thread)
        threads = 256 if adjoint else 32 * min(20, max(4, OPB * nf, -(-dft_threads // 32)))

        def a16(nbytes: int) -> int:
            return -(-nbytes // 16) * 16

        smem = (a16(nf * n_in * ts.itemsize) + a16(OPB * nf * ti.itemsize) + a16(L * tf.itemsize)
                + a16(L * ti.itemsize) + n_in * (M | 1) * REAL_OF[tf].itemsize)
        return (threads, OPB, smem) if smem <= min(self.smem_limit, self.direct_max_smem) else None

    @staticmethod
    def _direct_kernel(M: int, ts: np.dtype, prec: Any, adjoint: bool, threads: int):
        """The ``btt_direct`` instantiation for ``Nt = M``, ``Fhat`` in ``ts``, ``prec`` and ``threads``."""
        return kernels.kernel("direct.cu", "btt_direct", prec.pad, prec.fft_hat, ts, prec.ifft_hat, prec.reduce,
                              int(adjoint), M, threads)

    def build_ahead(self, Fhat: Array, K: int, prec: Any, adjoint: bool) -> None:
        """Start building, in background threads, the kernels that the product
        of :meth:`direct_plan`'s arguments will launch first: ``btt_direct``
        where it applies, else the fused transforms of its stages 1-2 and 4-5
        as :class:`~fftmatvec.btt.LocalBTT` runs them (:meth:`pad_rfft` from
        the pad precision into ``prec.sbgemv_in``, :meth:`irfft_unpad` from
        ``prec.sbgemv`` into the reduce precision), and for one right-hand
        side the one-column product kernel between them (every threshold of
        :meth:`sbgemv`'s other routes is 2 right-hand sides or more), as for
        arrays aligned to 16 bytes (the engine's workspaces are)."""
        nf, nd, nm = Fhat.shape
        ta = np.dtype(Fhat.dtype)
        shape = self._direct_shape(Fhat, K, prec, adjoint)
        if shape is not None:
            kernels.build_ahead(lambda: self._direct_kernel(nf - 1, ta, prec, adjoint, shape[0]))
            return
        n_in, n_out = (nd, nm) if adjoint else (nm, nd)
        self._build_transform_ahead("rfft_pad", n_in, nf - 1, K, prec.pad, prec.sbgemv_in, prec.fft)
        if K == 1 and nf * nd * nm:
            make = self._adj_config if adjoint else self._fwd_config
            kernels.build_ahead(lambda: make(nf, nd, nm, 1, ta, np.dtype(prec.sbgemv_in)))
        self._build_transform_ahead("irfft_unpad", n_out, nf - 1, K, prec.sbgemv, prec.reduce, prec.ifft)

    # -- stage 3 ---------------------------------------------------------
    def sbgemv(self, Fhat: Array, x_hat: Array, out: Array, adjoint: bool) -> None:
        self._sbgemv(Fhat, x_hat, out, adjoint, 0)

    def sbgemv_irfft_unpad(self, Fhat: Array, x_hat: Array, y_hat: Array, out: Array, dtype: Any,
                           adjoint: bool, x_hat_spent: bool = False) -> None:
        """Stages 3-5 as the base class, but where the adjoint product with
        one right-hand side runs in a one-column kernel and the inverse in
        the fused one, ``y_hat`` is laid out in tiles of the inverse's series
        per block (``fmv::spectrum_index``): each block of the inverse then
        reads its spectra in one run instead of a run of a few values per
        frequency.  With :attr:`release_spectra` each block of the inverse
        then drops its tile from the L2 unwritten once it has read it; the
        inverse after a one-vector forward product drops the product's spent
        input spectra when they are kept in the L2 and take
        :attr:`fwd_release_min_bytes` or more."""
        tile = self._spectra_tile(Fhat, x_hat, y_hat, out, dtype, adjoint)
        if not tile:
            drops = (x_hat_spent and self.release_spectra and not adjoint and x_hat.ndim == 3 and x_hat.shape[2] == 1
                     and self.fwd_release_min_bytes <= x_hat.nbytes <= self.rfft_keep_max_bytes)
            self.sbgemv(Fhat, x_hat, out=y_hat, adjoint=adjoint)
            self.irfft_unpad(y_hat, out, dtype, drop=x_hat if drops else None)
            return
        n, nt, _ = out.shape
        self._sbgemv(Fhat, x_hat, y_hat, True, tile)
        self._fused_transform("irfft_unpad", y_hat, out, COMPLEX_OF[np.dtype(dtype)], n, 1, nt, 1.0 / (2 * nt),
                              tiled=True)

    def _spectra_tile(self, Fhat: Array, x_hat: Array, y_hat: Array, out: Array, dtype: Any, adjoint: bool) -> int:
        """The tile width in which :meth:`sbgemv_irfft_unpad` lays out
        ``y_hat``: the fused inverse's series per block, when that is 2 or
        more, both stages run as native kernels that take tiles, and the
        spectra fit the L2 (``adj_keep_max_bytes``); else 0."""
        K = x_hat.shape[2] if x_hat.ndim == 3 else 0
        if not (self.tiled_spectra and adjoint and K == 1 and out.ndim == 3 and out.size
                and self.fft_layout["c2r"] == "fused" and out.flags.c_contiguous and y_hat.flags.c_contiguous):
            return 0
        ta = np.dtype(Fhat.dtype)
        if self.adj_tensor_min_k.get(ta, 17) <= K or K >= self.blas_min_k.get((ta, True), 1):
            return 0  # not a one-column kernel
        if y_hat.nbytes > self.adj_keep_max_bytes:  # tiles' short stores cost when they go past the L2 to memory
            return 0
        n, nt, _ = out.shape
        if y_hat.shape != (nt + 1, n, 1):  # (the stages one by one say what does not fit)
            return 0
        cfg = self._fused_config(nt, COMPLEX_OF[np.dtype(dtype)], n, 1)
        S = cfg[0]["irfft_unpad"] if cfg is not None else 0
        return S if S >= 2 else 0

    def _sbgemv(self, Fhat: Array, x_hat: Array, out: Array, adjoint: bool, spectra_tile: int) -> None:
        """:meth:`sbgemv`; an adjoint with one right-hand side in a one-column kernel stores ``out`` in tiles of
        ``spectra_tile`` columns when that is not 0."""
        nf, nd, nm = Fhat.shape
        n_in, n_out = (nd, nm) if adjoint else (nm, nd)
        K = x_hat.shape[2] if x_hat.ndim == 3 else 0
        if x_hat.shape != (nf, n_in, K) or out.shape != (nf, n_out, K) or out.dtype != Fhat.dtype:
            raise ValueError(
                f"sbgemv{' (adjoint)' if adjoint else ''}: Fhat {Fhat.shape} {Fhat.dtype}, "
                f"x_hat {x_hat.shape}, out {out.shape} {out.dtype}: expected x_hat {(nf, n_in, 'K')}, "
                f"out {(nf, n_out, 'K')} of Fhat's dtype"
            )
        if Fhat.dtype not in REAL_OF:
            raise ValueError(f"sbgemv: Fhat must be complex64 or complex128, got {Fhat.dtype}")
        for a, what in ((x_hat, "x_hat"), (out, "out")):
            self._contiguous(a, f"sbgemv {what}")
        self._row_stride(Fhat, adjoint)
        if out.size == 0:  # no rows (a launch of no threads is an error)
            return
        ta = np.dtype(Fhat.dtype)
        if adjoint and self.adj_tensor_min_k[ta] <= K <= 16 and self._sbgemm_adj_native(Fhat, x_hat, out):
            return
        if K >= self.blas_min_k[(ta, bool(adjoint))]:
            self._sbgemm_blas(Fhat, x_hat, out, adjoint)
            return
        if not adjoint and K >= self.gemm_min_k[ta]:
            self._sbgemm_native(Fhat, x_hat, out)
            return
        S = self._sbgemv_cols(Fhat, x_hat, out, adjoint, 0, nm, None, spectra_tile)
        if S > 1:
            self._sum_splits(self.scratch((S,) + out.shape, ta, "sbgemv-splits"), out, S)

    @staticmethod
    def _row_stride(Fhat: Array, adjoint: bool) -> int:
        """Rows per frequency in ``Fhat``'s memory (``lda``): ``nd`` for a
        C-contiguous ``Fhat``; the forward product also takes a block of rows
        ``Fhat_full[:, i0:i1, :]`` of a C-contiguous ``Fhat_full`` in place."""
        nf, nd, nm = Fhat.shape
        if Fhat.flags.c_contiguous or nf == 0 or nd == 0 or nm == 0:
            return nd
        isz = Fhat.dtype.itemsize
        s0, s1, s2 = Fhat.strides
        if (not adjoint and s2 == isz and (nd == 1 or s1 == nm * isz) and s0 % (nm * isz) == 0
                and s0 >= nd * nm * isz):
            return s0 // (nm * isz)
        raise ValueError("sbgemv Fhat must be C-contiguous" + ("" if adjoint else
                         " or a block of rows [:, i0:i1, :] of a C-contiguous array"))

    def _sum_splits(self, part: Array, out: Array, S: int) -> None:
        n = out.size
        red = kernels.kernel("sbgemv.cu", "sum_splits", out.dtype)
        blocks = int(min(-(-n // 256), self.sm_count * 8))
        self._run_kernel(red, (blocks,), (256,), (part, out, np.int64(n), np.int32(S)))

    def _sbgemv_cols(self, Fhat, x_hat, out, adjoint, col0, col1, part, spectra_tile=0):
        """Native product over the columns [col0, col1) of ``Fhat``.

        Adjoint: writes ``out[:, col0:col1]`` (in tiles of ``spectra_tile`` columns when not 0,
        :meth:`sbgemv_irfft_unpad`).  Forward: partial sums over
        those columns; written to ``out`` (one split) or to ``part`` (S splits
        of ``out``'s shape; a scratch buffer when ``part`` is None).  Returns
        the number of splits written (1: ``out`` holds the result)."""
        nf, nd, nm = Fhat.shape
        K = x_hat.shape[2]
        ta = np.dtype(Fhat.dtype)
        lda = self._row_stride(Fhat, adjoint)
        aligned = (Fhat.data.ptr | x_hat.data.ptr | out.data.ptr) % 16 == 0  # 16-byte vector loads allowed
        key = ("adj" if adjoint else "fwd", nf, nd, nm, K, ta, x_hat.dtype, aligned, col0, col1, part is None, lda,
               self.fwd_splits, self.fwd_lanes, self.adj_flat, self.adj_flat_max_bytes, self.adj_keep_max_bytes,
               self.adj_row_slices,
               self.programmatic_launch, self.early_loads, spectra_tile)
        cfg = self._launch.get(key)
        if cfg is None:
            extra = {"spectra_tile": spectra_tile} if adjoint else {"lda": lda}
            make = self._adj_config if adjoint else self._fwd_config
            cfg = self._launch[key] = make(nf, nd, nm, K, ta, np.dtype(x_hat.dtype), VEC=None if aligned else 1,
                                           col0=col0, col1=col1, S=1 if part is not None else None, **extra)
        fn, grid, block, smem, tail, S = cfg
        dst = out if S == 1 and part is None else (part if part is not None else
                                                    self.scratch((S,) + out.shape, ta, "sbgemv-splits"))
        self._run_kernel(fn, grid, block, (Fhat, x_hat, dst) + tail, smem)
        return S if part is None else 1

    @staticmethod
    def _kb(K: int) -> int:
        return 1 if K == 1 else min(16, _pow2_at_least(K))

    def _fwd_config(self, nf, nd, nm, K, ta, tx, R=None, U=None, VEC=None, KB=None, S=None, col0=0, col1=None,
                    lda=None, lanes=None):
        c128 = ta == np.complex128
        KB = KB or self._kb(K)
        if KB > 8 and c128:
            KB = 8
        col1 = nm if col1 is None else col1
        if VEC is None:
            VEC = 2 if (not c128 and nm % 2 == 0 and col0 % 2 == 0 and KB <= 2) else 1
        ncol = col1 - col0
        if KB == 1 and nf * nd * ncol * ta.itemsize >= (1 << 30):
            # one right-hand side and 1 GiB of Fhat or more: groups of four warps, two rows a group, two loads in
            # flight per row and lane, built to 64 registers (kernels.REGISTER_TARGETS): at the big size
            # 1801.7-1805.5 us against 1837.0-1839.7 us with one row pair and one load (complex128), 902.3-905.0
            # against 910.4-911.9 us with four rows and one load (complex64), each at the compiler's own register
            # count (benchmarks/results/h200-probe-regsloads-stop26*.jsonl)
            auto = 2, 2, 128
        else:
            # complex64 below 1 GiB of Fhat: two loads in flight per lane, not four (middle size: 48.9 us against
            # 52.1 us; big size: 943 against 931 us, benchmarks/results/h200-probe-fused-io.jsonl)
            auto = ((2 if c128 else 1) if KB == 1 else {2: 4, 4: 2, 8: 2 if not c128 else 1, 16: 2}[KB],
                    (4 if c128 else 2) if KB == 1 else (2 if KB <= 8 else 1), 32)
        if R is None:
            R = auto[0] if nd >= auto[0] else min(auto[0], _pow2_at_least(nd))
        U = U or auto[1]
        threads = 256
        G = min(threads, _pow2_at_least(lanes or self.fwd_lanes or auto[2]),
                _pow2_at_least(max(1, -(-ncol // (VEC * U)))))
        fn = kernels.kernel("sbgemv.cu", "sbgemv_fwd", ta, tx, R, U, VEC, KB)
        rowgroups = nf * (-(-nd // R))
        S = S or self.fwd_splits
        if S is None:  # split the columns while there are under two warps per warp slot (large Fhat only);
            # measured on an H200 at Nm=1000, Nd=50, Nt=500 (benchmarks/results/h200-probe-chunks.jsonl):
            # one split is fastest there (1.14x floor complex128, 1.24x complex64) and the earlier target of
            # eight warps per slot chose four (1.19-1.26x, 1.34-1.42x)
            S = 1
            slots = self.sm_count * self._resident_blocks(fn, threads) * threads // 32
            big = nf * nd * ncol * ta.itemsize >= 32 << 20
            while big and rowgroups * S * G // 32 < 2 * slots and ncol // (2 * S) >= 2 * G * VEC * U // 4 and S < 64:
                S *= 2
        cw = -(-ncol // S)
        cw += cw % VEC
        groups = rowgroups * S
        grid = (-(-groups // (threads // G)), -(-K // KB))
        smem = threads // 32 * R * KB * ta.itemsize if G > 32 else 0
        tail = (np.int32(nf), np.int32(nd), np.int32(nm), np.int32(K), np.int32(G), np.int32(S), np.int32(cw),
                np.int32(col0), np.int32(col1), np.int32(nd if lda is None else lda), np.int32(self._early()))
        return fn, grid, (threads,), smem, tail, S

    def _early(self) -> int:
        """``early`` of the one-vector product kernels: prefetches before the wait pay only when the kernel
        can start during the transform."""
        return self.early_loads if self.programmatic_launch else 0

    def _adj_config(self, nf, nd, nm, K, ta, tx, U=None, VEC=None, KB=None, CT=None, flat=None, T=256,
                    col0=0, col1=None, S=None, keep=None, spectra_tile=0):
        c128 = ta == np.complex128
        col1 = nm if col1 is None else col1
        ncol = col1 - col0
        if keep is None:
            keep = nf * ncol * K * ta.itemsize <= self.adj_keep_max_bytes
        KB = KB or self._kb(K)
        if KB > 8 and c128:
            KB = 8
        if VEC is None:
            VEC = 2 if (not c128 and nm % 2 == 0 and col0 % 2 == 0 and ncol % 2 == 0 and KB <= 2) else 1
        if flat is None:
            # the blocked kernel for large launches (measured faster at 1-8 GB of Fhat), else the
            # balanced one (no idle last wave when there are few blocks per multiprocessor)
            flat = K == 1 and self.adj_flat and nf * nd * ncol * ta.itemsize < self.adj_flat_max_bytes
        if flat:  # one right-hand side: balanced column ranges, one block per resident slot
            # eight rows in flight when the vector is wider than Fhat (complex128 into a complex64 product:
            # 52.3 us against 56.0 us with four at the middle size, benchmarks/results/h200-probe-fused-io.jsonl)
            U = U or (8 if np.dtype(tx).itemsize > ta.itemsize else 4)
            fn = kernels.kernel("sbgemv.cu", "sbgemv_adj_flat", ta, tx, U, VEC)
            units = nf * (ncol // VEC)
            P = max(1, min(self.sm_count * self._resident_blocks(fn, T), -(-units // T)))
            per = -(-units // P)
            tail = (np.int32(nf), np.int32(nd), np.int32(nm), np.int64(per), np.int32(col0), np.int32(col1),
                    np.int32(self._early()), np.int32(keep), np.int32(spectra_tile))
            return fn, (P,), (T,), 0, tail, 1
        if U is None:
            U = 8 if KB == 1 else (4 if KB <= 4 else 2)
        cols = -(-ncol // VEC)
        CT = CT or min(128, 32 * -(-cols // 32))
        tiles = -(-cols // CT)
        # one right-hand side: four row slices where each has 16 rows or more, so that a block takes a quarter
        # of the time and the last wave's blocks end closer together: the big ddssd adjoint 983.5-984.7 against
        # 992.7-993.2 us back to back, ddddd 1939.4-1940.6 against 1954.5-1959.6 (eight slices, 1024 threads:
        # 1315.2-1316.7; benchmarks/results/h200-launch-ab-adj-slices-stop50.jsonl); on a second machine
        # ddssd 984.9-985.5 against 992.5-992.9, ddddd 1938.5-1939.3 against 1950.3-1950.8 in three rounds of
        # four (1965.2 in the fourth; h200-launch-ab-adj-slices-b-stop50.jsonl); more slices where there are
        # too few blocks to fill the device
        RS = 4 if KB == 1 and nd >= 64 and CT * 4 <= 1024 else 1
        target = 2 * self.sm_count * 2048
        isz = ta.itemsize
        CH = int(max(1, min(nd, 16384 // (KB * isz))))
        while (RS < 16 and CT * RS < 1024 and nf * tiles * CT * RS < target and nd >= 16 * RS
               and (CH * KB + CT * 2 * RS * VEC * KB) * isz <= 40960):
            RS *= 2
        RS = self.adj_row_slices or RS
        smem = (CH * KB + (CT * RS * VEC * KB if RS > 1 else 0)) * isz
        fn = kernels.kernel("sbgemv.cu", "sbgemv_adj", ta, tx, U, VEC, KB)
        grid = (nf * tiles, -(-K // KB))
        tail = (np.int32(nf), np.int32(nd), np.int32(nm), np.int32(K), np.int32(RS), np.int32(CH), np.int32(col0),
                np.int32(col1), np.int32(keep), np.int32(spectra_tile))
        return fn, grid, (CT * RS,), smem, tail, 1

    def _sbgemm_native(self, Fhat: Array, x_hat: Array, out: Array) -> None:
        """Forward product with several right-hand sides through ``sbgemm_fwd``
        or ``sbgemm_staged`` (``Fhat`` read once per 16 right-hand sides, 3M
        complex products)."""
        nf, nd, nm = Fhat.shape
        K = x_hat.shape[2]
        ta = np.dtype(Fhat.dtype)
        lda = self._row_stride(Fhat, False)
        aligned = Fhat.data.ptr % 16 == 0  # 16-byte copies of complex64 pairs allowed
        KB = min(16, _pow2_at_least(max(2, K)))
        x_pairs = K % 2 == 0 and (x_hat.dtype != ta or x_hat.data.ptr % 16 == 0)  # (a cast X is a fresh buffer)
        key = ("gemm", nf, nd, nm, K, ta, x_hat.dtype, lda, aligned, x_pairs, self.gemm_splits,
               self.gemm_tensor.get(ta), self.gemm_tensor_pipe.get(ta), self.gemm_pipe_few_rows.get(ta),
               self.gemm_warpgroup.get(ta), self.gemm_spread,
               self.gemm_staged.get(ta), self.gemm_tiles.get((ta, KB)))
        cfg = self._launch.get(key)
        if cfg is None:
            cfg = self._launch[key] = self._gemm_config(nf, nd, nm, K, KB, ta, np.dtype(x_hat.dtype), lda, aligned,
                                                        x_pairs)
        fn, grid, block, smem, tail, S, kind = cfg
        if kind != "sbgemm_fwd" and x_hat.dtype != ta:  # sbgemm_tc and sbgemm_staged copy X as it is
            xc = self.scratch(x_hat.shape, ta, "gemm-in")
            self._ccast(x_hat, xc, 1.0)
            x_hat = xc
        dst = out if S == 1 else self.scratch((S,) + out.shape, ta, "sbgemm-splits")
        if kind == "sbgemm_wg_pipe" and self._wg_shares_pieces(tail):
            dst.data.memset_async(0, dst.nbytes)
        if kind in ("sbgemm_tc_pipe", "sbgemm_wg_pipe"):  # and the tensor map of Fhat by which they copy
            self._run_kernel(fn, grid, block, (Fhat, x_hat, dst, self._rows_map(Fhat, lda)) + tail, smem)
        else:
            self._run_kernel(fn, grid, block, (Fhat, x_hat, dst) + tail, smem)
        if S > 1:
            self._sum_splits(dst, out, S)

    def tensor_cores_for(self, dtype: Any) -> bool:
        """Whether ``sbgemm_tc`` and ``sbgemm_adj_tc`` can run in complex ``dtype`` here."""
        return self.tensor_cores if np.dtype(dtype) == np.complex64 else self.tensor_cores_f64

    def _gemm_splits(self, fn, blocks: int, threads: int, nm: int, BX: int, smem: int = 0) -> int:
        """Column splits so that the last wave of ``blocks * S`` blocks is nearly full, when that fills the
        machine at least 8% better than one split: each split costs its blocks a pipeline fill and a slice of
        partial sums (benchmarks/results/h200-probe-gemmvar-stop20-splits.jsonl: at 7.6 waves of sbgemm_tc in
        complex128, three splits for a 4% fuller last wave took 1.27 against 1.19x the floor;
        h200-probe-gemmvar-stop19-wgmma.jsonl: at 2.5 waves of complex64 blocks, a 12% fuller one took 1.79
        against 1.85x)."""
        if self.gemm_splits is not None:
            return self.gemm_splits
        resident = self.sm_count * self._resident_blocks(fn, threads, smem)

        def fill(s: int) -> float:  # slots of the waves per block
            return -(-blocks * s // resident) * resident / (blocks * s)

        S = min(range(1, 5), key=lambda s: (fill(s), s))
        S = S if fill(1) > 1.08 * fill(S) else 1
        return max(1, min(S, nm // (4 * BX)))

    def _gemm_pipe_config(self, nf, nd, nm, K, lda, x_pairs, tile):
        """Launch of ``sbgemm_tc_pipe`` (complex64, tile ``(BK, NS, MINB,
        CW)``; ``x_pairs`` as for ``sbgemm_tc``), or None where its warps or
        its shared memory do not fit.  Its computing warps, row tiles of 16
        times phases of the k-steps, take as many phases as fit beside the CW
        warps that copy in blocks of 256 threads (MINB > 1) or 512."""
        BK, NS, MINB, CW = tile
        KB = 8 if K <= 8 else 16
        MT = -(-nd // 16)
        MAXT = 256 if MINB > 1 else 512
        P = next((p for p in (4, 2, 1) if 32 * (MT * p + CW) <= MAXT and (BK // 8) % p == 0), None)
        if P is None:
            return None
        stage = _round_up(BK // 16 * _round_up(nd * 128, 1024) + BK * tc_x_stride(np.complex64, KB) * 8, 1024)
        smem = 16 * NS + 1024 + max(NS * stage, (P - 1) * 32 * MT * KB * 4)
        if smem > self.smem_limit:
            return None
        VX = 2 if x_pairs else 1
        fn = kernels.kernel("sbgemm.cu", "sbgemm_tc_pipe", KB, BK, NS, P, CW, VX, MAXT, MINB)
        kernels.allow_shared_memory(fn, smem)
        threads = 32 * (MT * P + CW)
        S = self._gemm_splits(fn, nf, threads, nm, BK, smem)
        cw = _round_up(-(-nm // S), BK)  # splits end on chunks (a tensor copy's box does not stop at a split's end)
        tail = (np.int32(nf), np.int32(nd), np.int32(nm), np.int32(K), np.int32(S), np.int32(cw), np.int32(lda))
        return fn, (nf * S, -(-K // KB)), (threads,), smem, tail, S, "sbgemm_tc_pipe"

    def _gemm_wg_config(self, nf, nd, nm, K, lda, x_pairs, tile):
        """Launch of ``sbgemm_wg_pipe`` (complex64, 9-16 right-hand sides,
        65-128 rows, tile ``(NS, SW)``; ``x_pairs`` as for ``sbgemm_tc``), or
        None where its shared memory does not fit even with two stages."""
        NS, SW = tile
        stage = _round_up(4 * _round_up(nd * 128, 1024) + 64 * tc_x_stride(np.complex64, 16) * 8, 1024)

        def smem_of(ns: int) -> int:  # barriers, the alignment of the stages, the stages and bsplit's four slots
            return 8 * (2 * ns + 8) + 1024 + ns * stage + 4 * 8192

        NS = next((ns for ns in (NS, 2) if smem_of(ns) <= self.smem_limit), None)
        if NS is None:
            return None
        smem = smem_of(NS)
        VX = 2 if x_pairs else 1
        fn = kernels.kernel("sbgemm.cu", "sbgemm_wg_pipe", NS, SW, VX, arch="sm_90a")
        kernels.allow_shared_memory(fn, smem)
        threads = 32 * (9 + SW)
        resident = self.sm_count * self._resident_blocks(fn, threads, smem)
        spread = self.gemm_spread and self.gemm_splits is None and nf >= resident
        S = 1 if spread else self._gemm_splits(fn, nf, threads, nm, 64, smem)
        cw = _round_up(-(-nm // S), 64)  # splits end on chunks, as sbgemm_tc_pipe's
        units = nf * S * (cw // 64)  # chunks of 64 columns
        # a block a piece (frequency and split), or the chunks spread evenly over the resident blocks, a block
        # taking one piece's chunks at least (so that two blocks share a piece at most)
        per = max(cw // 64, -(-units // resident)) if spread else cw // 64
        tail = (np.int32(nf), np.int32(nd), np.int32(nm), np.int32(K), np.int32(S), np.int32(cw), np.int32(lda),
                np.int32(per))
        return fn, (-(-units // per), -(-K // 16)), (threads,), smem, tail, S, "sbgemm_wg_pipe"

    @staticmethod
    def _wg_shares_pieces(tail: tuple) -> bool:
        """Whether the blocks of a ``sbgemm_wg_pipe`` launch (its arguments
        after the tensor map, :meth:`_gemm_wg_config`) share pieces: chunks
        a block (``per``) not a whole number of a piece's (``cw / 64``).  The
        two blocks of a shared piece add their sums to a zeroed result."""
        cw, per = int(tail[5]), int(tail[7])
        return per % (cw // 64) != 0

    def _rows_map(self, Fhat: Array, lda: int) -> Array:
        """The tensor map of ``Fhat`` (complex64, ``lda`` rows a frequency) in
        boxes of all its rows and 16 columns, on the device, made once per
        address and shape (tensormap.rows_map).  The maps are kept for the
        backend's life, never dropped: a recorded product reads its map at
        each replay (128 bytes a map; an address reused by another array of
        the same shape has the same map)."""
        from .tensormap import rows_map

        nf, nd, nm = Fhat.shape
        key = (Fhat.data.ptr, nf, nd, nm, lda)
        tmap = self._tensor_maps.get(key)
        if tmap is None:
            tmap = self._tensor_maps[key] = self._cupy.asarray(rows_map(Fhat.data.ptr, (nf, nd, nm), lda, nd))
        return tmap

    def _gemm_config(self, nf, nd, nm, K, KB, ta, tx, lda, aligned, x_pairs):
        """Launch of ``sbgemm_wg_pipe`` or ``sbgemm_tc_pipe`` where they can
        run (:attr:`gemm_warpgroup`, :attr:`gemm_tensor_pipe`,
        :attr:`gemm_pipe_few_rows`), else of
        ``sbgemm_tc`` (:attr:`gemm_tensor` set, tensor cores
        present, ``nd <= 256``; 8 or 16 right-hand sides a block), else of
        ``sbgemm_staged`` (16 right-hand sides a block, rows that fit one
        block, :attr:`gemm_staged` set; ``aligned``, ``x_pairs``: ``Fhat`` and
        ``X`` may be copied by 16-byte pairs of complex64), else of
        ``sbgemm_fwd``: lane layout by (dtype, KB), blocks of at most 8 warps
        (the kernel's launch bounds) and at least 4 (the staging of X assumes
        128 threads)."""
        tensor = self.gemm_tensor.get(ta)
        c64 = ta == np.complex64
        pipe = self.gemm_tensor_pipe.get(ta)
        if pipe is not None and tensor is not None and self.mbarriers and c64 and aligned and nm % 2 == 0:
            warpgroup = self.gemm_warpgroup.get(ta)
            if warpgroup is not None and self.warpgroup_mma and K > 8 and 64 < nd <= 128:
                cfg = self._gemm_wg_config(nf, nd, nm, K, lda, x_pairs, warpgroup)
                if cfg is not None:
                    return cfg
            few_rows = self.gemm_pipe_few_rows.get(ta)
            if few_rows is not None and K > 8 and nd <= 64:
                pipe = few_rows
            cfg = self._gemm_pipe_config(nf, nd, nm, K, lda, x_pairs, pipe)
            if cfg is not None:
                return cfg
        if tensor is not None and self.tensor_cores_for(ta) and nd <= 256:
            KB = 8 if K <= 8 else 16  # fewer right-hand sides are zero columns: the same time as 8
            MT = -(-nd // 16)
            XS = tc_x_stride(ta, KB)

            def phases(BK: int) -> int:  # of the k-steps: about 8 warps a block
                return max(1, min(4, 8 // MT, BK // 8))

            def smem_of(BK: int, NS: int) -> int:
                return max(NS * (nd * (BK + 4) + BK * XS) * ta.itemsize,
                           (phases(BK) - 1) * 32 * MT * KB * REAL_OF[ta].itemsize)

            # the tile, else fewer stages, else shorter chunks, as many rows need (up to 256 fit in one of them)
            BK, NS, MINB = tensor
            BK, NS = next(((bk, ns) for bk, ns in ((BK, NS), (BK, 2), (16, NS), (16, 2))
                           if smem_of(bk, ns) <= self.smem_limit), (BK, NS))
            P = phases(BK)
            smem = smem_of(BK, NS)
            if smem <= self.smem_limit:
                VA = 2 if c64 and aligned and nm % 2 == 0 else 1
                VX = 2 if c64 and x_pairs else 1
                MAXT, MINB = (256, MINB) if 32 * MT * P <= 256 else (512, 1)
                fn = kernels.kernel("sbgemm.cu", "sbgemm_tc", ta, KB, BK, NS, P, VA, VX, MAXT, MINB)
                kernels.allow_shared_memory(fn, smem)
                S = self._gemm_splits(fn, nf, 32 * MT * P, nm, BK, smem)
                cw = -(-nm // S)
                cw += cw % VA
                tail = (np.int32(nf), np.int32(nd), np.int32(nm), np.int32(K), np.int32(S), np.int32(cw),
                        np.int32(lda))
                return fn, (nf * S, -(-K // KB)), (32 * MT * P,), smem, tail, S, "sbgemm_tc"
        staged = self.gemm_staged.get(ta)
        if KB == 16 and staged is not None:
            TM, TN, BK, NS, MINB = staged
            RG = -(-nd // TM)
            real = REAL_OF[ta].itemsize
            AS, XS = BK + 16 // ta.itemsize, 4 * TN + 16 // ta.itemsize
            P = 256 // (4 * RG) if 4 * RG <= 256 else 0
            smem = max(NS * (RG * TM * AS + BK * XS) * ta.itemsize, max(P - 1, 0) * 4 * RG * TM * TN * 2 * real)
            if P >= 1 and smem <= self.smem_limit:
                VA = 2 if ta == np.complex64 and aligned and nm % 2 == 0 else 1
                VX = 2 if ta == np.complex64 and x_pairs else 1
                fn = kernels.kernel("sbgemm.cu", "sbgemm_staged", ta, TM, TN, BK, NS, VA, VX, MINB)
                kernels.allow_shared_memory(fn, smem)
                S = self._gemm_splits(fn, nf, 256, nm, BK, smem)
                cw = -(-nm // S)
                cw += cw % VA
                tail = (np.int32(nf), np.int32(nd), np.int32(nm), np.int32(K), np.int32(S), np.int32(cw),
                        np.int32(lda))
                return fn, (nf * S, -(-K // (4 * TN))), (256,), smem, tail, S, "sbgemm_staged"
        KL, CL, TR, U, V, MINB = self.gemm_tiles[(ta, KB)]
        rows_per_warp = 32 // (KL * CL) * TR
        row_warps = -(-nd // rows_per_warp)
        nrb = -(-row_warps // 8)
        warps = max(4, -(-row_warps // nrb))
        fn = kernels.kernel("sbgemm.cu", "sbgemm_fwd", ta, tx, KB, KL, CL, TR, U, V, MINB)
        real = REAL_OF[ta].itemsize
        BX = CL * U * V
        smem = 2 * BX * ((KB + 16 // ta.itemsize) * ta.itemsize + (KB + 16 // real) * real)
        S = self._gemm_splits(fn, nf * nrb, 32 * warps, nm, BX)
        cw = -(-nm // S)
        grid = (nf * nrb * S, -(-K // KB))
        tail = (np.int32(nf), np.int32(nd), np.int32(nm), np.int32(K), np.int32(nrb), np.int32(S), np.int32(cw),
                np.int32(lda))
        return fn, grid, (32 * warps,), smem, tail, S, "sbgemm_fwd"

    def _sbgemm_adj_native(self, Fhat: Array, x_hat: Array, out: Array) -> bool:
        """Adjoint product with several right-hand sides through ``sbgemm_adj_tc``
        (on the tensor cores); False, with nothing done, where that does not
        apply (:meth:`_adj_tensor_config`)."""
        nf, nd, nm = Fhat.shape
        K = x_hat.shape[2]
        ta = np.dtype(Fhat.dtype)
        key = ("gemm-adj", nf, nd, nm, K, ta, x_hat.dtype, self.adj_tensor.get(ta), self.gemm_splits)
        if key not in self._launch:
            self._launch[key] = self._adj_tensor_config(nf, nd, nm, K, ta, np.dtype(x_hat.dtype))
        cfg = self._launch[key]
        if cfg is None:
            return False
        fn, grid, block, smem, tail = cfg
        self._run_kernel(fn, grid, block, (Fhat, x_hat, out) + tail, smem)
        return True

    def _adj_tensor_config(self, nf, nd, nm, K, ta, tx) -> tuple | None:
        """Launch of ``sbgemm_adj_tc``: tile ``(W, KS, NS, MINB)`` of
        :attr:`adj_tensor` (W warps a block, tiles of 16 W columns, chunks of
        8 KS rows, NS of them staged, registers capped for MINB blocks a
        multiprocessor), 8 or 16 right-hand sides a block, column splits in
        whole tiles; None where it does not apply (no tile or tensor cores for
        the dtype, or the staged ``X[f]`` and chunks do not fit in shared memory)."""
        tile = self.adj_tensor.get(ta)
        if tile is None or not self.tensor_cores_for(ta):
            return None
        W, KS, NS, MINB = tile
        KB = 8 if K <= 8 else 16
        BI, BJ = 8 * KS, 16 * W
        VA = 2 if ta == np.complex64 and nm % 2 == 0 else 1  # 16-byte copies of complex64 pairs
        AS = BJ + (8 if ta == np.complex64 else 0)
        smem = (max(1, -(-nd // BI)) * BI * tc_x_stride(ta, KB) + NS * BI * AS) * ta.itemsize
        if smem > self.smem_limit:
            return None
        fn = kernels.kernel("sbgemm.cu", "sbgemm_adj_tc", ta, tx, KB, W, KS, NS, VA, MINB)
        kernels.allow_shared_memory(fn, smem)
        S = self._gemm_splits(fn, nf, 32 * W, nm, BJ, smem)
        cw = -(-nm // (BJ * S)) * BJ
        tail = (np.int32(nf), np.int32(nd), np.int32(nm), np.int32(K), np.int32(S), np.int32(cw))
        return fn, (nf * S, -(-K // KB)), (32 * W,), smem, tail

    def _sbgemm_blas(self, Fhat: Array, x_hat: Array, out: Array, adjoint: bool) -> None:
        """Batched GEMM through cuBLAS, ``Fhat`` read in place (no conjugate
        transpose of it is ever formed).  With :attr:`real_gemm` the forward
        product runs as a real GEMM on the interleaved view of ``Fhat``
        (``[re im]`` pairs) against an expanded real copy of ``x`` (cuBLAS's
        complex64 GEMM is slow for few columns)."""
        cp = self._cupy
        nf, nd, nm = Fhat.shape
        K = x_hat.shape[2]
        ta = np.dtype(Fhat.dtype)
        xc = x_hat
        if x_hat.dtype != Fhat.dtype:
            xc = self.scratch(x_hat.shape, Fhat.dtype, "blas-in")
            self._ccast(x_hat, xc, 1.0)
        if adjoint:
            self._adjoint_gemm(Fhat, xc, out)
            return
        if self.real_gemm.get(ta, False):
            real = REAL_OF[ta]
            Xr = self.scratch((nf, nm, 2, K, 2), real, "realgemm-x")
            Xr[:, :, 0, :, 0] = xc.real
            Xr[:, :, 1, :, 0] = -xc.imag
            Xr[:, :, 0, :, 1] = xc.imag
            Xr[:, :, 1, :, 1] = xc.real
            cp.matmul(Fhat.view(real), Xr.reshape(nf, 2 * nm, 2 * K), out=out.view(real))
            return
        cp.matmul(Fhat, xc, out=out)

    def _adjoint_gemm(self, Fhat: Array, x_hat: Array, out: Array) -> None:
        """``out[f] = Fhat[f]^H x_hat[f]`` for every frequency in one strided
        batched cuBLAS call on the row-major buffers as they are.  Read
        column-major, ``x_hat[f]`` is ``A`` (K x nd), ``Fhat[f]`` is ``B``
        (nm x nd) and ``out[f]`` is ``C`` (K x nm), and ``C = A B^H`` (cuBLAS's
        ``op = C`` on ``B``), so neither input is conjugated or transposed in
        memory.  x_hat must have ``Fhat``'s dtype."""
        from cupy.cuda import cublas, device

        nf, nd, nm = Fhat.shape
        K = x_hat.shape[2]
        one, zero = np.ones(1, Fhat.dtype), np.zeros(1, Fhat.dtype)
        gemm = cublas.zgemmStridedBatched if Fhat.dtype == np.complex128 else cublas.cgemmStridedBatched
        handle = device.get_cublas_handle()
        cublas.setStream(handle, self._cupy.cuda.get_current_stream().ptr)
        mode = cublas.getPointerMode(handle)
        cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
        try:
            gemm(handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_C, K, nm, nd, one.ctypes.data, x_hat.data.ptr, K,
                 nd * K, Fhat.data.ptr, nm, nd * nm, zero.ctypes.data, out.data.ptr, K, nm * K, nf)
        finally:
            cublas.setPointerMode(handle, mode)


__all__ = ["GPUProducts", "tc_x_stride"]
