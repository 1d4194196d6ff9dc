"""CuPy backend: native kernels for the transforms and the per-frequency
products (cuFFT plans, made once per buffer shape, where a length has no
native transform), CUDA graphs for replay.

Layouts and scaling are those of :mod:`fftmatvec.backend.base`.  How each
stage runs (choices measured on an H200, see benchmarks/results/h200-*.jsonl):

* transforms of the product (``pad_rfft``, ``irfft_unpad``): one native
  kernel each (``native/fft.cu``) that pads, casts, transforms in shared
  memory and writes the other layout, so each reads its input once and
  writes its output once, for every ``Nt`` whose prime factors are 2, 3, 5
  and 7 (:func:`fft_radices`); other lengths, and the separately timed
  stages, use cuFFT on batches of *contiguous* series (its strided axis-0
  mode was 2-5x slower) with native kernels for the padding, the layout
  changes and the ``1/L``;
* ``sbgemv`` reads ``Fhat`` in place, once, with 16-byte streaming loads
  (``native/sbgemv.cu``), the input's cast fused into the load; several
  right-hand sides in the same kernels, or for forward products from
  :attr:`GPUBackend.gemm_min_k` in ``native/sbgemm.cu`` (on the tensor
  cores in 3M complex products: complex64 in 3xTF32, complex128 in float64;
  ``Fhat`` and X staged in shared memory; without tensor cores on CUDA
  cores), up to :attr:`GPUBackend.blas_min_k`, cuBLAS's batched GEMM from
  there; adjoint products from :attr:`GPUBackend.adj_tensor_min_k` to 16
  right-hand sides on the tensor cores too (``sbgemm_adj_tc``);
* small products (``Nt`` up to 32, one right-hand side) skip all of this:
  :meth:`GPUBackend.direct_plan` runs the five stages in one kernel
  (``native/direct.cu``, direct DFTs), since there three kernels cost more
  in launches than in work;
* :meth:`GPUBackend.replayer` records the engine's stages as CUDA graphs (no
  host launch gaps); :meth:`GPUBackend.capture` records any block of calls;
* on Hopper the kernels are launched programmatically (:mod:`.launch`): a
  product kernel is scheduled while the transform before it still runs and
  asks the L2 for its first bytes of ``Fhat`` until the transform is done.

Nothing is compiled at import; kernels are built on first use
(:mod:`fftmatvec.backend.kernels`).
"""

from __future__ import annotations

import cmath
import contextlib
import os
from typing import Any, Callable, Iterator

import numpy as np

from ..errors import FftmatvecError
from . import kernels, launch
from .base import Array, Backend, StageTimer

_C2R = {np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}
_R2C = {v: k for k, v in _C2R.items()}


def _real_of(dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    return _C2R.get(dtype, dtype)


#: Environment variables that hold the node-local rank under common launchers.
LOCAL_RANK_VARS = (
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID",
    "MV2_COMM_WORLD_LOCAL_RANK",
    "PMI_LOCAL_RANK",
    "PALS_LOCAL_RANKID",
    "SLURM_LOCALID",
    "LOCAL_RANK",
)


def local_rank_from_env() -> int | None:
    """The node-local rank set by the MPI launcher, or ``None``."""
    for var in LOCAL_RANK_VARS:
        value = os.environ.get(var)
        if value is not None and value.strip().isdigit():
            return int(value)
    return None


def select_device(local_rank: int) -> int:
    """Make GPU ``local_rank % device_count`` current for this process; return its id.

    The grid calls this with the rank from ``Split_type(COMM_TYPE_SHARED)``.
    """
    import cupy

    count = cupy.cuda.runtime.getDeviceCount()
    if count < 1:
        raise FftmatvecError("no GPU visible to CuPy")
    dev = int(local_rank) % count
    cupy.cuda.Device(dev).use()
    return dev


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


#: The radices native/fft.cu has butterflies for (``fmv::Dft``).
FFT_BUTTERFLIES = frozenset({2, 3, 4, 5, 7, 8, 10})


def fft_radices(M: int) -> list[int] | None:
    """Radices of the fused transform's complex FFT of length ``M`` (the
    real length is ``2 M``): a 10 for each pair of factors 2 and 5 (one pass
    instead of two: every pass reads and writes the series in shared memory
    once), the other powers of two in 8s, then 4 and 2, and the odd primes
    3, 5 and 7, applied smallest first (the first pass stores with a stride
    of the radix, so small first means fewer shared-memory bank conflicts);
    None when ``M`` has a prime factor above 7 (cuFFT then)."""
    radices = []
    while M % 10 == 0:
        radices.append(10)
        M //= 10
    for r in (8, 4, 2, 5, 3, 7):
        while M % r == 0:
            radices.append(r)
            M //= r
    return sorted(radices) if M == 1 else None


def pass_twiddles(radices: list[int]) -> np.ndarray:
    """The Stockham passes' twiddles in float64, in the order native/fft.cu
    reads them: pass by pass (``NS`` the product of the earlier radices, ``R``
    the pass's radix), ``exp(-2 pi i k r / (NS R))`` for ``k < NS`` and
    ``1 <= r < R``, ``k`` fastest (``M - 1`` values; one unused value for ``M = 1``)."""
    parts = [np.ones(1, np.complex128)] if not radices else []
    NS = 1
    for R in radices:
        r, k = np.arange(1, R)[:, None], np.arange(NS)[None, :]
        parts.append(np.exp(-2j * np.pi * k * r / (NS * R)).ravel())
        NS *= R
    return np.concatenate(parts)


def tc_x_stride(dtype: Any, KB: int) -> int:
    """Row stride (elements) of ``X`` staged in shared memory by ``sbgemm_tc``
    and ``sbgemm_adj_tc`` for ``KB`` right-hand sides: 16 bytes of padding in
    complex64, 32 in complex128, so that the lanes of a fragment load fall in
    distinct banks (``XS`` of native/sbgemm.cu)."""
    return KB + (4 if np.dtype(dtype) == np.complex64 else 2)


def fused_row_stride(M: int, S: int, itemsize: int) -> int:
    """Row stride (elements) of a series in the fused transforms' shared
    memory, the rule of ``Row`` in native/fft.cu: ``M + 1``, padded for
    ``1 < S < P`` (``P = 128 / itemsize``, lanes per shared-memory wavefront)
    to ``ld % P == P / S``, so that the S series met by one warp access
    start in distinct banks."""
    P = 128 // itemsize
    return M + 1 if S == 1 or S >= P else M + 1 + (P // S - (M + 1)) % P


def fused_in_place(M: int, S: int, threads: int, radices: list[int]) -> bool:
    """Whether a fused transform may run its passes in one shared-memory buffer
    (the rule of ``InPlace`` in native/fft.cu): every pass has at most one
    butterfly per thread, which reads its values before any are written."""
    return all(S * (M // R) <= threads for R in radices)


def pass_threads(M: int, S: int, radices: list[int]) -> int:
    """The fewest threads, a multiple of 32, that take every pass's
    butterflies over ``S`` series of a fused transform of length ``2 M`` at
    once (one butterfly a thread, as :func:`fused_in_place` asks)."""
    return 32 * -(-max([S * (M // R) for R in radices] + [S]) // 32)


def _allow_shared_memory(fn: Any, smem: int) -> None:
    """Let kernel ``fn`` take ``smem`` bytes of dynamic shared memory.  A
    kernel must opt in where its static and dynamic shared memory together
    exceed 48 KB (up to :attr:`GPUBackend.smem_limit`); the attribute it
    starts with is what its static shared memory leaves of the 48 KB."""
    if smem and fn.max_dynamic_shared_size_bytes < smem:
        fn.max_dynamic_shared_size_bytes = smem


class _PreparedLaunch:
    """One kernel's launch with its grid, block, shared memory and trailing
    arguments fixed, packed once; a call sets the leading pointer arguments
    and launches through the driver.  (CuPy's generic launch converts every
    argument on each call, microseconds of host time that count when the
    kernel itself takes 3-6 us, as at the fixture size.)

    ``tail`` holds CuPy arrays (passed as pointers, kept alive here) and
    NumPy integer scalars (passed as 32-bit ints)."""

    def __init__(self, fn: Any, grid: tuple[int, ...], block: tuple[int, ...], smem: int, n_ptrs: int,
                 tail: tuple) -> None:
        import ctypes

        import cupy

        self._current_stream = cupy.cuda.get_current_stream
        self._launch = cupy.cuda.driver.launchKernel
        self._fn_ptr = int(fn.kernel.ptr)  # the CUfunction of the RawKernel
        self._fn = fn  # keeps the module (and so the CUfunction) alive
        self._dims = tuple((tuple(grid) + (1, 1))[:3]) + tuple((tuple(block) + (1, 1))[:3])
        self._smem = int(smem)
        self._ptrs = [ctypes.c_void_p() for _ in range(n_ptrs)]
        fixed = []
        for a in tail:
            if isinstance(a, cupy.ndarray):
                fixed.append(ctypes.c_void_p(a.data.ptr))
            elif isinstance(a, np.int32):
                fixed.append(ctypes.c_int32(int(a)))
            else:
                raise TypeError(f"_PreparedLaunch: unsupported argument {a!r}")
        self._tail = tail  # the arrays whose pointers are packed
        self._values = self._ptrs + fixed  # the ctypes values the parameter array points to
        self._params = (ctypes.c_void_p * len(self._values))(*(ctypes.addressof(v) for v in self._values))
        self._params_ptr = ctypes.addressof(self._params)

    def __call__(self, *arrays: Array) -> None:
        for slot, a in zip(self._ptrs, arrays):
            slot.value = a.data.ptr
        self._launch(self._fn_ptr, *self._dims, self._smem, self._current_stream().ptr, self._params_ptr, 0)


class _Recording:
    """A recorded CUDA graph; :meth:`replay` launches it on the current stream."""

    def __init__(self) -> None:
        self.graph = None

    def replay(self) -> None:
        if self.graph is None:
            raise FftmatvecError("nothing was recorded")
        self.graph.launch()


class _Replayer:
    """``run(x, y)``: a product's device work ``fn(x, y)`` through CUDA graphs
    (:meth:`GPUBackend.replayer`).

    The first call runs eagerly (plans, scratch buffers and kernels are
    made there).  A pair of input and output buffers seen a second time
    gets its own recording (up to ``backend.max_graphs``, least recently
    used dropped), so a caller that reuses its input, and whose results come
    back to the same memory (CuPy's pool hands a freed block out again),
    pays no copy.  Otherwise a new input is copied into ``x_fixed``, the
    recording on ``(x_fixed, y_fixed)`` replayed and ``y_fixed`` copied to
    ``y`` (without fixed buffers: ``fn`` runs eagerly).  A recording reads
    and writes the buffers at launch, so results equal eager ones.  A
    capture that fails (an operation that cannot be recorded, e.g. some
    library calls) makes the replayer eager for good (``eager``, ``error``);
    with programmatic launches on, a failed capture is first tried again with
    plain launches, which the backend then keeps (a driver that records no
    programmatic launches: ``GPUBackend._recording``).

    Buffers are told apart by their addresses alone: every ``x`` (and every
    ``y``) of one replayer has the same size and dtype and is C-contiguous
    (the engine's preconditions), so an address names one buffer, and a
    call that finds its recording costs the host two address reads and a
    dictionary look-up before the launch.
    """

    def __init__(self, backend: "GPUBackend", fn: Callable[[Array, Array], None], x_fixed: Array | None,
                 y_fixed: Array | None) -> None:
        self.backend, self.fn, self.x_fixed, self.y_fixed = backend, fn, x_fixed, y_fixed
        self.graphs: dict[tuple[int, int], Any] = {}  # (x, y) addresses -> graph, least recently used first
        self.eager = False
        self.error: str | None = None
        self._seen: set[tuple[int, int]] = set()
        self._warm = False

    def __call__(self, x: Array, y: Array) -> None:
        key = (x.data.ptr, y.data.ptr)
        graph = self.graphs.pop(key, None)
        if graph is not None:
            self.graphs[key] = graph  # most recently used last
            graph.launch()
            return
        self._unrecorded(key, x, y)

    def _unrecorded(self, key: tuple[int, int], x: Array, y: Array) -> None:
        """A pair with no recording: eager, recorded now (seen before), or
        through the fixed buffers' recording."""
        if self.eager:
            self.fn(x, y)
            return
        if key in self._seen:  # these buffers came back: record on them
            self._record(key, x, y)
            return
        if len(self._seen) > 256:
            self._seen.clear()
        self._seen.add(key)
        if self.x_fixed is not None and self.y_fixed is not None and self._warm:
            be, fkey = self.backend, (self.x_fixed.data.ptr, self.y_fixed.data.ptr)
            if x is not self.x_fixed:
                be.copy_into(x, self.x_fixed)
            graph = self.graphs.get(fkey)
            if graph is not None:
                graph.launch()
            else:
                self._record(fkey, self.x_fixed, self.y_fixed)
            if y is not self.y_fixed:
                be.copy_into(self.y_fixed, y)
            return
        self._warm = True
        self.fn(x, y)

    def _record(self, key: tuple[int, int], x: Array, y: Array) -> None:
        rec, exc = self.backend._recording(self.fn, x, y)
        if rec is None:  # cannot record: eager from now on
            self.eager, self.error = True, repr(exc)
            self.fn(x, y)
            return
        self.graphs[key] = rec.graph
        while len(self.graphs) > self.backend.max_graphs:
            self.graphs.pop(next(iter(self.graphs)))


class GPUBackend(Backend):
    """CuPy on one GPU.

    Parameters
    ----------
    device : int, optional
        GPU id.  Default: the node-local rank of the MPI launcher (modulo the
        visible GPUs) when one is set in the environment, else the current
        device.

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
    tensor_cores : bool
        The device runs TF32 ``mma.sync`` (CUDA, compute capability 8.0 or higher).
    tensor_cores_f64 : bool
        The device runs float64 ``mma.sync.m16n8k8`` (CUDA, compute capability 9.0 or higher).
    mbarriers : bool
        The device has shared-memory barriers that asynchronous copies arrive
        on (``mbarrier``, ``cp.async.mbarrier.arrive``: CUDA, compute
        capability 9.0 or higher).
    warpgroup_mma : bool
        The device runs ``wgmma`` (CUDA, compute capability 9.0: code built
        for ``sm_90a`` runs there only).
    graph_max_bytes : int
        ``Fhat`` size up to which the engine records its stages (or its one
        :meth:`direct_plan` kernel) as a CUDA graph and replays it (default:
        always; eager launches measured 18-46% slower per waited-for product
        at the middle benchmark size, 1-2% at the big one, and 1.6 us more
        host time per call at the fixture size, docs/gpu-kernels.md);
        ``$FFTMATVEC_GRAPH_MAX_BYTES`` overrides it.
    fft_layout : dict
        How the transforms of the product run: ``"fused"`` (default,
        ``$FFTMATVEC_R2C``/``$FFTMATVEC_C2R``) the native kernels where the
        length allows them; ``"cs"``/``"cc"``/``"ss"`` (forward) and
        ``"sc"``/``"cc"``/``"ss"`` (inverse) the cuFFT layouts.
    fused_smem_target, fused_threads : int
        Shared memory (bytes) and threads per block of the fused transforms
        (``fused_threads`` None: by size); measured on an H200 in
        ``benchmarks/results/h200-probe-fused-fft.jsonl``.
    tiled_spectra : bool
        The adjoint product with one right-hand side writes its spectra in
        tiles of the inverse transform's series per block, which the inverse
        then reads one contiguous run at a time
        (:meth:`sbgemv_irfft_unpad`; ``$FFTMATVEC_TILED_SPECTRA=0`` turns it
        off).
    release_spectra : bool
        Each block of that inverse drops its tile from the L2 unwritten once
        it has read it (``discard.global.L2``; compute capability 8.0 or
        higher), so that the dead spectra are neither written back nor
        holding L2 room while the next product streams ``Fhat``
        (``$FFTMATVEC_RELEASE_SPECTRA=0`` turns it off).
    fused_max_blocks : int or None
        Most thread blocks of a forward transform that loops over groups of
        series (from float64 into complex64, ``K = 1``; None: as many as fit
        on the device at once).  It loops only when there are more groups
        than blocks.
    smem_limit : int
        Dynamic shared memory (bytes) one block may opt in to on this device.
    programmatic_launch : bool
        The native kernels of a product are launched programmatically
        (:mod:`~fftmatvec.backend.launch`): each may start while the one
        before it ends (CUDA, compute capability 9.0 or higher;
        ``$FFTMATVEC_PDL=0`` turns it off).
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

    name = "gpu"

    def __init__(self, device: int | None = None) -> None:
        import cupy

        self.xp = cupy
        self._cupy = cupy
        if device is None:
            rank = local_rank_from_env()
            device = select_device(rank) if rank is not None else cupy.cuda.runtime.getDevice()
        else:
            device = select_device(device)
        self.device_id = int(device)
        self._device = cupy.cuda.Device(self.device_id)
        props = cupy.cuda.runtime.getDeviceProperties(self.device_id)
        self.sm_count = int(props["multiProcessorCount"])
        attributes = self._device.attributes
        self.smem_limit = int(attributes.get("MaxSharedMemoryPerBlockOptin", 48 << 10))
        self.smem_per_sm = int(attributes.get("MaxSharedMemoryPerMultiprocessor", self.smem_limit))
        # sbgemm_tc's mma.sync: TF32 (complex64) from compute capability 8.0, float64 m16n8k8 (complex128)
        # from 9.0; CUDA only
        cc = int(self._device.compute_capability)
        self.tensor_cores = not kernels.is_hip() and cc >= 80
        self.tensor_cores_f64 = not kernels.is_hip() and cc >= 90
        self.mbarriers = not kernels.is_hip() and cc >= 90
        self.warpgroup_mma = not kernels.is_hip() and cc == 90
        self.device_name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
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
        l2_bytes = int(attributes.get("L2CacheSize", 0))
        self.adj_keep_max_bytes = l2_bytes
        # the inverse transform reading tiles took 34.6 against 40.2 us of device time for the big ddssd one,
        # 4.5 against 4.8 us at the middle size (benchmarks/results/h200-probe-tiles-stop30.jsonl); the middle
        # ddssd product 57.2-57.4 against 58.6-59.2 us back to back, the big ones, whose adjoint then stores its
        # spectra in 32-byte runs, level (ddssd, 40 MB) or slower (ddddd, 80 MB: past the L2, so not tiled)
        # (benchmarks/results/h200-launch-ab-tiles-stop30.jsonl)
        self.tiled_spectra = os.environ.get("FFTMATVEC_TILED_SPECTRA", "1") != "0"
        # rfft_pad's spectra the same, so that more of them are in the L2 for the forward product kernel and
        # fewer of their lines go back to memory in the middle of its stream of Fhat: the big dssdd product
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
        self.graph_max_bytes = int(os.environ.get("FFTMATVEC_GRAPH_MAX_BYTES", 1 << 62))
        self.max_graphs = 4
        self._launcher = launch.ProgrammaticLauncher.load() if not kernels.is_hip() and cc >= 90 else None
        self.programmatic_launch = self._launcher is not None and os.environ.get("FFTMATVEC_PDL", "1") != "0"
        # two loads a thread asked for before the wait: the middle size's dssdd F m 63.5-64.1 us waited for, against
        # 66.1-68.8 with none, 64.6-67.4 with four, 66.8-70.0 launched plainly; more fill the L2 beyond what the
        # kernel reads before it is evicted (six: 67.6-70.2, sixteen: 81.2-81.4; ddssd F^T d 66.3-66.5 with two,
        # 67.0-68.3 plainly; benchmarks/results/h200-launch-ab-mid-stop29-*.jsonl, launch_ab.py)
        self.early_loads = int(os.environ.get("FFTMATVEC_EARLY_LOADS", 2))
        # "fused": native/fft.cu where the length allows it, else cuFFT in the "auto"/"sc" layouts;
        # "auto": cuFFT, "cs" for small transforms (one launch fewer), "cc" for large ones (measured faster)
        self.fft_layout = {"r2c": os.environ.get("FFTMATVEC_R2C", "fused"),
                           "c2r": os.environ.get("FFTMATVEC_C2R", "fused")}
        self.fused_smem_target = 64 << 10  # shared memory per block of a fused transform (bytes)
        self.fused_threads: int | None = None  # threads per block of a fused transform (None: by size)
        self.fused_max_blocks: int | None = None  # blocks of a looping forward transform (None: all that fit)
        self._fused: dict[tuple, Any] = {}
        # the one-kernel product of direct_plan: Nt up to this (0: never), one block's DFT work
        # (n_in Nf Nt multiply-adds) and shared memory (bytes) up to these
        self.direct_max_nt = int(os.environ.get("FFTMATVEC_DIRECT_MAX_NT", 32))
        self.direct_max_work = 1 << 17
        self.direct_max_smem = 100 << 10
        self._plans: dict[tuple, Any] = {}
        self._launch: dict[tuple, tuple] = {}
        self._scratch: dict[tuple, Array] = {}
        self._tensor_maps: dict[tuple, Array] = {}  # _rows_map's
        self._capture_stream = None
        self._copy_stream = None  # finite_check's reads

    # -- arrays ----------------------------------------------------------
    def to_host(self, a: Array) -> np.ndarray:
        return self._cupy.asnumpy(a)

    def copy_into(self, a: Array, out: Array) -> None:
        """As the base class; contiguous arrays of the same dtype are copied
        with one ``cudaMemcpyAsync`` (a few microseconds less host time than
        an elementwise kernel, which counts for small products)."""
        if a.dtype != out.dtype or not (a.flags.c_contiguous and out.flags.c_contiguous) or a.size != out.size:
            out[...] = a.reshape(out.shape)
        elif a.nbytes:
            out.data.copy_from_device_async(a.data, a.nbytes)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Array:
        return self._cupy.ndarray(shape, dtype)  # what cupy.empty returns, without its Python wrapper

    def synchronize(self) -> None:
        self._device.synchronize()

    def mark(self):
        """A CUDA event recorded now on the current stream."""
        ev = self._cupy.cuda.Event(disable_timing=True)
        ev.record()
        return ev

    def free_bytes(self) -> int:
        """Device memory free for new arrays: the driver's free memory plus
        blocks CuPy's pool holds but does not use."""
        free, _ = self._cupy.cuda.runtime.memGetInfo()
        return int(free) + int(self._cupy.get_default_memory_pool().free_bytes())

    @staticmethod
    def _contiguous(a: Array, what: str) -> None:
        if not a.flags.c_contiguous:
            raise ValueError(f"{what} must be C-contiguous")

    def _run_kernel(self, fn: Any, grid: tuple[int, ...], block: tuple[int, ...], args: tuple, smem: int = 0) -> None:
        """Launch native kernel ``fn`` on the current stream, programmatically
        when :attr:`programmatic_launch` (``args``: device arrays and NumPy
        scalars, as :func:`launch.kernel_params` takes them)."""
        if self.programmatic_launch:
            self._launcher(fn, grid, block, args, smem, self._cupy.cuda.get_current_stream().ptr)
        else:
            fn(grid, block, args, shared_mem=smem)

    # -- graphs ----------------------------------------------------------
    def use_replay(self, nbytes: int) -> bool:
        return nbytes <= self.graph_max_bytes

    def finite_check(self, a: Array) -> Callable[[], bool]:
        """As the base class: ``a``'s sum queued now, and the answer read
        after the sum alone has run (an event), by a copy on a stream of its
        own, so that a product queued in between runs meanwhile.  (After an
        overflow of the sum the element-wise test sees ``a`` as it is then.)"""
        cp = self._cupy
        total = a.sum()
        summed = self.mark()

        def answer() -> bool:
            summed.synchronize()
            if self._copy_stream is None:
                self._copy_stream = cp.cuda.Stream(non_blocking=True)
            value = complex(total.get(stream=self._copy_stream))
            return cmath.isfinite(value) or bool(cp.isfinite(a).all())  # (the second test only after an overflow)

        return answer

    def _stream_for_capture(self):
        if self._capture_stream is None:
            self._capture_stream = self._cupy.cuda.Stream(non_blocking=True)
        return self._capture_stream

    @contextlib.contextmanager
    def capture(self) -> Iterator[_Recording]:
        """Record the device work of the body as a CUDA graph.

        The body's work is not executed while it is recorded; it runs once when
        the context exits (so the effect is that of eager mode), and
        ``rec.replay()`` runs it again on the same buffers.  The body must not
        allocate, synchronise or copy to the host.
        """
        rec = _Recording()
        stream = self._stream_for_capture()
        with stream:
            stream.begin_capture()
            try:
                yield rec
            finally:
                graph = stream.end_capture()
        rec.graph = graph
        graph.launch()

    def replayer(self, fn: Callable[[Array, Array], None], x_fixed: Array | None = None,
                 y_fixed: Array | None = None) -> "_Replayer":
        """``fn(x, y)`` through CUDA graphs, one recording per pair of
        buffers that comes back (:class:`_Replayer`)."""
        return _Replayer(self, fn, x_fixed, y_fixed)

    def recorded(self, work: Callable[[], None]) -> Callable[[], None]:
        """As the base class: ``work`` runs once eagerly (plans, scratch
        buffers and kernels are made there), then is recorded as a CUDA graph
        (which runs it once more), and the call returned is the graph's
        launch; ``work`` itself if it cannot be recorded."""
        work()
        rec, _ = self._recording(lambda x, y: work(), None, None)
        return work if rec is None else rec.graph.launch

    def _recording(self, fn: Callable[[Array, Array], None], x: Array, y: Array
                   ) -> tuple[_Recording | None, Exception | None]:
        """``fn(x, y)`` recorded (and run once), or None and the error when it
        cannot be recorded (then nothing ran).  A driver may record no
        programmatic launches: the recording is then tried with plain
        launches, which the backend keeps from then on."""
        try:
            return self._recorded(fn, x, y), None
        except Exception as exc:
            if self.programmatic_launch:
                self.programmatic_launch = False
                try:
                    return self._recorded(fn, x, y), None
                except Exception:
                    self.programmatic_launch = True
            return None, exc

    def _recorded(self, fn: Callable[[Array, Array], None], x: Array, y: Array) -> _Recording:
        with self.capture() as rec:
            fn(x, y)
        return rec

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
        rdt = _C2R[np.dtype(dst.dtype)]
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
        want = _R2C[np.dtype(S.dtype)]
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
        want = _R2C[np.dtype(x_pad.dtype)]
        if (out.shape != (L // 2 + 1,) + x_pad.shape[1:] or out.dtype not in _C2R
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
            want = _R2C[np.dtype(out.dtype)]
            if x_hat.dtype != want or not x_hat.flags.c_contiguous:
                src = self.scratch(x_hat.shape, want, "irfft-in")
                src[...] = x_hat
            self._exec(self._plan("c2r", "ss", L, B, np.dtype(out.dtype)), src, out, "c2r")
            view = out.reshape(-1)
            if view.size % 2 == 0:
                view = view.view(_R2C[np.dtype(out.dtype)])
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
        real = np.dtype(dtype) if dtype is not None else _C2R.get(np.dtype(out.dtype))
        if (out.shape != (nt + 1, n, K) or out.dtype not in _C2R or real not in _R2C
                or out.dtype.itemsize > _R2C[real].itemsize):
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
        if self.fft_layout["r2c"] == "fused" and self._fused_transform("rfft_pad", x, out, _R2C[real], n * K, K, nt,
                                                                       None):
            return
        P = self.scratch((n * K, L), real, "series-pad", zero=True)
        self._series_pad(x, P)
        full = out if out.dtype == _R2C[real] else self.scratch(out.shape, _R2C[real], "rfft-out")
        self._r2c_series(P, full.reshape(nt + 1, n * K))
        if full is not out:
            self._ccast(full, out, 1.0)

    def irfft_unpad(self, x_hat: Array, out: Array, dtype: Any) -> None:
        """Stages 4-5 fused: one native kernel (``native/fft.cu``) where ``Nt``
        allows it; else one cuFFT into a series-major scratch, then one unpad
        pass that applies ``1/L`` and the cast.  ``x_hat`` may be overwritten."""
        n, nt, K = out.shape
        L = 2 * nt
        real = np.dtype(dtype)
        if x_hat.shape != (nt + 1, n, K):
            raise ValueError(f"irfft_unpad: x_hat {x_hat.shape} does not fit out {out.shape}")
        if (self.fft_layout["c2r"] == "fused" and out.flags.c_contiguous and x_hat.flags.c_contiguous
                and self._fused_transform("irfft_unpad", x_hat, out, _R2C[real], n * K, K, nt, 1.0 / L)):
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

    def direct_plan(self, Fhat: Array, K: int, prec: Any, adjoint: bool) -> Callable[[Array, Array], None] | None:
        """The whole product in one kernel (``native/direct.cu``: direct DFTs,
        no intermediate arrays) for one right-hand side when ``Nt`` is at most
        :attr:`direct_max_nt` and one block's DFT work and shared memory are
        small; None otherwise."""
        nf, nd, nm = Fhat.shape
        M = nf - 1
        n_in = nd if adjoint else nm
        if (K != 1 or M > self.direct_max_nt or n_in * nf * M > self.direct_max_work or nd * nm == 0
                or not Fhat.flags.c_contiguous):
            return None
        cfg = self._direct_config(M, nd, nm, adjoint, np.dtype(Fhat.dtype), prec.pad, prec.reduce, prec.fft_hat,
                                  prec.ifft_hat)
        if cfg is None:
            return None
        fn, grid, block, smem, tail = cfg
        return _PreparedLaunch(fn, grid, block, smem, 2, (Fhat,) + tail)  # run(x, out)

    def _direct_config(self, M: int, nd: int, nm: int, adjoint: bool, ts: np.dtype, tp: np.dtype, to: np.dtype,
                       tf: np.dtype, ti: np.dtype) -> tuple | None:
        """Launch set-up of ``btt_direct`` (dtypes: ``Fhat``, pad, reduce, FFT,
        inverse FFT): output series per block (forward: one row, so there are
        ``nd`` blocks, each with a warp per frequency and a thread per input
        series and group of frequencies of its DFTs, up to 640 threads (more
        would leave too few registers); adjoint: 8 consecutive columns, so the
        reads of ``Fhat``'s columns fill 128-byte lines), threads, shared
        memory (None when it does not fit) and the trailing kernel arguments
        (twiddle tables, sizes)."""
        nf, L = M + 1, 2 * M
        n_in, n_out = (nd, nm) if adjoint else (nm, nd)
        OPB = 8 if adjoint else 1
        OPB = min(max(OPB, -(-n_out // (4 * self.sm_count))), n_out)
        per_thread = (nf + 1) // 2 if nf < 16 else 8  # frequencies per DFT thread: FQ of direct.cu
        dft_threads = n_in * -(-nf // per_thread)
        threads = 256 if adjoint else 32 * min(20, max(4, OPB * nf, -(-dft_threads // 32)))

        def a16(nbytes: int) -> int:
            return -(-nbytes // 16) * 16

        smem = (a16(nf * n_in * ts.itemsize) + a16(OPB * nf * ti.itemsize) + a16(L * tf.itemsize)
                + a16(L * ti.itemsize) + n_in * (M | 1) * _C2R[tf].itemsize)
        if smem > min(self.smem_limit, self.direct_max_smem):
            return None
        fn = kernels.kernel("direct.cu", "btt_direct", tp, tf, ts, ti, to, int(adjoint), M, threads)
        _allow_shared_memory(fn, smem)
        k = np.arange(L)
        twf = self._cupy.asarray(np.exp(-1j * np.pi * k / M).astype(tf))  # exp(-2 pi i k / L)
        twi = self._cupy.asarray(np.exp(1j * np.pi * k / M).astype(ti))
        return fn, (-(-n_out // OPB),), (threads,), smem, (twf, twi, np.int32(nd), np.int32(nm), np.int32(OPB))

    def _fused_config(self, M: int, ctype: np.dtype, B: int, K: int) -> tuple | None:
        """Launch set-up of the fused transforms (native/fft.cu) for length
        ``2 M`` in complex ``ctype`` over ``B = n K`` series, or None when
        ``M`` is not supported (a prime factor above 7, or one series does not
        fit in shared memory): ``(S, threads, smem, twp, twl, radices,
        in_place)`` with ``S`` (series per block), ``threads``, ``smem`` (bytes
        of shared memory per block) and ``in_place`` (passes in one buffer) by
        kernel name (``"rfft_pad"``, ``"irfft_unpad"``), the twiddle tables
        ``twp`` (:func:`pass_twiddles`) and ``twl`` on the device, and the
        radices.  Twiddle tables are computed in float64 and rounded once."""
        key = (M, ctype, B, K)
        if key in self._fused:
            return self._fused[key]
        cfg = None
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
            twp = self._cupy.asarray(pass_twiddles(radices).astype(ctype))
            twl = self._cupy.asarray(np.exp(-1j * np.pi * np.arange(M + 1) / M).astype(ctype))  # L = 2 M
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
            cfg = (S_of, threads_of, smem_of, twp, twl, tuple(radices), in_place_of)
        self._fused[key] = cfg
        return cfg

    def _fused_transform(self, which: str, src: Array, dst: Array, ctype: np.dtype, B: int, K: int, M: int,
                         scale: float | None, tiled: bool = False) -> bool:
        """Run ``which`` ("rfft_pad" or "irfft_unpad", native/fft.cu) from ``src``
        to ``dst``; False (nothing done) when the length is not supported.
        A ``tiled`` inverse drops each tile of ``src`` from the L2 once it has
        read it when :attr:`release_spectra`."""
        cfg = self._fused_config(M, np.dtype(ctype), B, K)
        if cfg is None or B == 0:
            return cfg is not None
        _, threads_of, _, twp, twl, _, _ = cfg
        fn, blocks, smem = self._fused_kernel(which, src, dst, ctype, B, K, M, cfg)
        _allow_shared_memory(fn, smem)
        args = [src, dst, twp, twl, np.int32(B), np.int32(K)]
        if which == "rfft_pad":  # its spectra kept in the L2 when they fit
            args.append(np.int32(dst.nbytes <= self.rfft_keep_max_bytes))
        else:
            args += [_C2R[np.dtype(ctype)].type(scale), np.int32(tiled), np.int32(self.release_spectra)]
        self._run_kernel(fn, (blocks,), (threads_of[which],), tuple(args), smem)
        return True

    def _fused_kernel(self, which: str, src: Array, dst: Array, ctype: np.dtype, B: int, K: int, M: int,
                      cfg: tuple) -> tuple[Any, int, int]:
        """The kernel :meth:`_fused_transform` launches for the set-up ``cfg``
        (:meth:`_fused_config`'s), its blocks and its bytes of shared memory."""
        S_of, threads_of, smem_of, _, _, radices, in_place_of = cfg
        S, threads, smem = S_of[which], threads_of[which], smem_of[which]
        groups = -(-B // S)
        # rfft_pad from samples wider than the transform's reals (float64 into complex64), K = 1: blocks loop over
        # groups of series, staging the next group's samples in shared memory behind the transform's buffers
        # (16-byte aligned: StagingOffset in native/fft.cu) while they transform the current one.  Only when there
        # are more groups than blocks: one wave has nothing to overlap the staging with (the middle size's 1000
        # series: 5.57 us staged against 5.39, benchmarks/results/h200-fft-ab-staged-forward-stop27.jsonl)
        staged_smem = -(-smem // 16) * 16 + S * M * src.dtype.itemsize
        if (which == "rfft_pad" and K == 1 and 2 * src.dtype.itemsize > np.dtype(ctype).itemsize
                and staged_smem <= self.smem_limit):
            fn = self._fft_kernel(which, src, dst, ctype, S, threads, in_place_of[which], True, M, radices)
            blocks = min(groups, self.sm_count * self._resident_blocks(fn, threads, staged_smem),
                         self.fused_max_blocks or groups)
            if blocks < groups:
                return fn, blocks, staged_smem
        return self._fft_kernel(which, src, dst, ctype, S, threads, in_place_of[which], False, M, radices), groups, smem

    @staticmethod
    def _fft_kernel(which: str, src: Array, dst: Array, ctype: np.dtype, S: int, threads: int, in_place: bool,
                    staged: bool, M: int, radices: list[int]):
        """The ``native/fft.cu`` kernel ``which`` for these dtypes and launch set-up."""
        flags = (int(in_place),) + ((int(staged),) if which == "rfft_pad" else ())
        return kernels.kernel("fft.cu", which, src.dtype, ctype, dst.dtype, S.bit_length() - 1, threads, *flags, M,
                              *radices)

    # -- stage 3 ---------------------------------------------------------
    def sbgemv(self, Fhat: Array, x_hat: Array, out: Array, adjoint: bool) -> None:
        self._sbgemv(Fhat, x_hat, out, adjoint, 0)

    def sbgemv_irfft_unpad(self, Fhat: Array, x_hat: Array, y_hat: Array, out: Array, dtype: Any,
                           adjoint: bool) -> None:
        """Stages 3-5 as the base class, but where the adjoint product with
        one right-hand side runs in a one-column kernel and the inverse in
        the fused one, ``y_hat`` is laid out in tiles of the inverse's series
        per block (``fmv::spectrum_index``): each block of the inverse then
        reads its spectra in one run instead of a run of a few values per
        frequency.  With :attr:`release_spectra` each block of the inverse
        then drops its tile from the L2 unwritten once it has read it."""
        tile = self._spectra_tile(Fhat, x_hat, y_hat, out, dtype, adjoint)
        if not tile:
            super().sbgemv_irfft_unpad(Fhat, x_hat, y_hat, out, dtype, adjoint)
            return
        n, nt, _ = out.shape
        self._sbgemv(Fhat, x_hat, y_hat, True, tile)
        self._fused_transform("irfft_unpad", y_hat, out, _R2C[np.dtype(dtype)], n, 1, nt, 1.0 / (2 * nt),
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
        cfg = self._fused_config(nt, _R2C[np.dtype(dtype)], n, 1)
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
        if Fhat.dtype not in _C2R:
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

    def _resident_blocks(self, fn, threads: int, smem: int = 0) -> int:
        """Blocks of ``threads`` threads and ``smem`` bytes of dynamic shared
        memory that fit on one multiprocessor (registers, threads, shared memory)."""
        try:
            regs = int(fn.num_regs)
        except Exception:  # attribute missing on some CuPy versions
            regs = 64
        regs = max(8, -(-regs // 8) * 8)
        by_smem = self.smem_per_sm // (smem + 1024) if smem else 32  # 1 KB reserved per block
        return max(1, min(32, 2048 // threads, 65536 // (regs * threads), by_smem))

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
        _allow_shared_memory(fn, smem)
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
        _allow_shared_memory(fn, smem)
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
                           (phases(BK) - 1) * 32 * MT * KB * _C2R[ta].itemsize)

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
                _allow_shared_memory(fn, smem)
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
            real = _C2R[ta].itemsize
            AS, XS = BK + 16 // ta.itemsize, 4 * TN + 16 // ta.itemsize
            P = 256 // (4 * RG) if 4 * RG <= 256 else 0
            smem = max(NS * (RG * TM * AS + BK * XS) * ta.itemsize, max(P - 1, 0) * 4 * RG * TM * TN * 2 * real)
            if P >= 1 and smem <= self.smem_limit:
                VA = 2 if ta == np.complex64 and aligned and nm % 2 == 0 else 1
                VX = 2 if ta == np.complex64 and x_pairs else 1
                fn = kernels.kernel("sbgemm.cu", "sbgemm_staged", ta, TM, TN, BK, NS, VA, VX, MINB)
                _allow_shared_memory(fn, smem)
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
        real = _C2R[ta].itemsize
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
        _allow_shared_memory(fn, smem)
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
            real = _C2R[ta]
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

    # -- set-up and measurement ------------------------------------------
    def fft_matrix(self, f: np.ndarray, dtype: Any) -> Array:
        """``Fhat`` (Nt+1, nd, nm) of ``dtype``, computed on the GPU in float64
        block rows at a time (bounded work space) and rounded once.

        Raises :class:`FftmatvecError` naming the bytes needed when ``Fhat``
        does not fit in the free device memory.
        """
        cp = self._cupy
        dtype = np.dtype(dtype)
        nd, nm, nt = f.shape
        L, nf = 2 * nt, nt + 1
        need = nf * nd * nm * dtype.itemsize
        row_bytes = nm * (nt * 8 + L * 8 + 2 * nf * 16)  # upload, padded copy, transform, cast
        free = self.free_bytes()
        if need + row_bytes > free:
            raise FftmatvecError(
                f"Fhat of {nd}x{nm}x{nf} {dtype} needs {need} bytes ({need / 2**30:.2f} GiB) plus "
                f"{row_bytes} bytes of work space on GPU {self.device_id}, but only {free} bytes "
                f"({free / 2**30:.2f} GiB) are free; use more ranks or single precision"
            )
        budget = max(row_bytes, min(512 << 20, (free - need) // 2))
        rows = max(1, budget // row_bytes)
        Fhat = cp.empty((nf, nd, nm), dtype)
        for i0 in range(0, nd, rows):
            i1 = min(nd, i0 + rows)
            blk = cp.asarray(np.ascontiguousarray(f[i0:i1], dtype=np.float64))
            hat = cp.fft.rfft(blk, n=L, axis=-1)  # (rows, nm, nf) complex128
            Fhat[:, i0:i1, :] = hat.transpose(2, 0, 1)
            del blk, hat
        self.synchronize()
        return Fhat

    def copy_bandwidth(self, nbytes: int = 1 << 30, repeats: int = 5) -> float:
        """Device-to-device ``cudaMemcpyAsync`` bandwidth, bytes read + written
        per second, median of ``repeats`` timed with CUDA events (after one warm-up)."""
        cp = self._cupy
        n = max(1, nbytes // 8)
        src = cp.empty(n, np.float64)
        src.fill(1.0)
        dst = cp.empty_like(src)
        start, end = cp.cuda.Event(), cp.cuda.Event()
        times = []
        for _ in range(repeats + 1):
            start.record()
            dst.data.copy_from_device_async(src.data, src.nbytes)
            end.record()
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end) * 1e-3)
        del src, dst
        return 2 * n * 8 / float(np.median(times[1:]))

    def timer(self) -> StageTimer:
        return StageTimer(self.synchronize)

    # -- reference pipeline ------------------------------------------------
    def naive_matvec(self, Fhat: Array, x: Array, adjoint: bool) -> Array:
        """The naive CuPy pipeline for comparison: ``cupy.fft.rfft``, one
        batched ``cupy.matmul`` reading ``Fhat`` in place (the adjoint as
        ``(x^H Fhat)^H``), ``cupy.fft.irfft``; new arrays every call.

        x : (n, Nt, K) real, SOTI.  Returns (n_out, Nt, K) real.
        """
        cp = self._cupy
        x = cp.asarray(x)
        nt = x.shape[1]
        L = 2 * nt
        x_hat = cp.fft.rfft(x, n=L, axis=1)  # (n, Nf, K)
        x_hat = cp.ascontiguousarray(x_hat.transpose(1, 0, 2), dtype=Fhat.dtype)  # (Nf, n, K)
        if adjoint:
            y_hat = cp.matmul(x_hat.conj().transpose(0, 2, 1), Fhat).conj().transpose(0, 2, 1)
        else:
            y_hat = cp.matmul(Fhat, x_hat)
        y = cp.fft.irfft(y_hat, n=L, axis=0)[:nt]
        return y.transpose(1, 0, 2)


__all__ = ["GPUBackend", "select_device", "local_rank_from_env"]
