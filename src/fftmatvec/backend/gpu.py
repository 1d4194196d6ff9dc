"""CuPy backend: one GPU, native kernels for every stage (cuFFT where a length
has no native transform), CUDA graphs for replay.

The backend is put together from one module per job:

* :mod:`.gpu_transforms`: stages 1-2 and 4-5, the fused native transforms
  (``native/fft.cu``, their geometry in :mod:`.fused_fft`) and cuFFT;
* :mod:`.gpu_products`: stage 3, the per-frequency products
  (``native/sbgemv.cu``, ``native/sbgemm.cu``, cuBLAS), and the one-kernel
  products of small sizes (``native/direct.cu``);
* :mod:`.graphs`: :meth:`GPUBackend.replayer` records the engine's stages as
  CUDA graphs (no host launch gaps); :meth:`GPUBackend.capture` records any
  block of calls;
* :mod:`.launch`: on Hopper the kernels are launched programmatically, so a
  product kernel is scheduled while the transform before it still runs and
  asks the L2 for its first bytes of ``Fhat`` until the transform is done;
* this module: the device, its arrays and memory, and set-up and measurement.

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
from .gpu_products import GPUProducts
from .gpu_transforms import GPUTransforms
from .graphs import Recording, Replayer
from .threads import map_slices


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


#: Bytes of ``f`` a block of :meth:`GPUBackend.fft_matrix` sends at most (at
#: least one block row): small enough that sending one block overlaps
#: filling the next.
UPLOAD_BYTES = 64 << 20


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



class GPUBackend(GPUTransforms, GPUProducts, Backend):
    """CuPy on one GPU.

    The stages' settings are attributes of :class:`~.gpu_transforms.GPUTransforms`
    and :class:`~.gpu_products.GPUProducts`.

    Parameters
    ----------
    device : int, optional
        GPU id.  Default: the node-local rank of the MPI launcher (modulo the
        visible GPUs) when one is set in the environment, else the current
        device.

    Attributes
    ----------
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
    smem_limit : int
        Dynamic shared memory (bytes) one block may opt in to on this device.
    programmatic_launch : bool
        The native kernels of a product are launched programmatically
        (:mod:`~fftmatvec.backend.launch`): each may start while the one
        before it ends (CUDA, compute capability 9.0 or higher;
        ``$FFTMATVEC_PDL=0`` turns it off).
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
        l2_bytes = int(attributes.get("L2CacheSize", 0))
        self.graph_max_bytes = int(os.environ.get("FFTMATVEC_GRAPH_MAX_BYTES", 1 << 62))
        self.max_graphs = 4
        self._launcher = launch.ProgrammaticLauncher.load() if not kernels.is_hip() and cc >= 90 else None
        self.programmatic_launch = self._launcher is not None and os.environ.get("FFTMATVEC_PDL", "1") != "0"
        self._launch: dict[tuple, tuple] = {}
        self._scratch: dict[tuple, Array] = {}
        self._capture_stream = None
        self._copy_stream = None  # copies beside the current stream (_side_stream)
        self._set_up_transforms(l2_bytes)
        self._set_up_products(l2_bytes)

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

    def check_free(self, nbytes: int, what: str) -> None:
        free = self.free_bytes()
        if nbytes > free:
            raise FftmatvecError(
                f"{what} needs {nbytes} bytes ({nbytes / 2**30:.2f} GiB) on GPU {self.device_id}, but only "
                f"{free} bytes ({free / 2**30:.2f} GiB) are free; use more ranks or single precision"
            )

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

    # -- graphs ----------------------------------------------------------
    def use_replay(self, nbytes: int) -> bool:
        return nbytes <= self.graph_max_bytes

    def _side_stream(self) -> Any:
        """A stream of this backend's own for copies that run beside the current stream."""
        if self._copy_stream is None:
            self._copy_stream = self._cupy.cuda.Stream(non_blocking=True)
        return self._copy_stream

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
            value = complex(total.get(stream=self._side_stream()))
            return cmath.isfinite(value) or bool(cp.isfinite(a).all())  # (the second test only after an overflow)

        return answer

    def _stream_for_capture(self):
        if self._capture_stream is None:
            self._capture_stream = self._cupy.cuda.Stream(non_blocking=True)
        return self._capture_stream

    @contextlib.contextmanager
    def capture(self) -> Iterator[Recording]:
        """Record the device work of the body as a CUDA graph.

        The body's work is not executed while it is recorded; it runs once when
        the context exits (so the effect is that of eager mode), and
        ``rec.replay()`` runs it again on the same buffers.  The body must not
        allocate, synchronise or copy to the host.
        """
        rec = Recording()
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
                 y_fixed: Array | None = None) -> Replayer:
        """``fn(x, y)`` through CUDA graphs, one recording per pair of
        buffers that comes back (:class:`~.graphs.Replayer`)."""
        return Replayer(self, fn, x_fixed, y_fixed)

    def recorded(self, work: Callable[[], None]) -> Callable[[], None]:
        """As the base class: ``work`` runs once eagerly (plans, scratch
        buffers and kernels are made there), then is recorded as a CUDA graph
        (which runs it once more), and the call returned is the graph's
        launch; ``work`` itself if it cannot be recorded."""
        work()
        rec, _ = self._recording(lambda x, y: work(), None, None)
        return work if rec is None else rec.graph.launch

    def _recording(self, fn: Callable[[Array, Array], None], x: Array, y: Array
                   ) -> tuple[Recording | None, Exception | None]:
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

    def _recorded(self, fn: Callable[[Array, Array], None], x: Array, y: Array) -> Recording:
        with self.capture() as rec:
            fn(x, y)
        return rec

    # -- set-up and measurement ------------------------------------------
    def fft_matrix(self, f: np.ndarray, dtype: Any) -> Array:
        """``Fhat`` (Nt+1, nd, nm) of ``dtype``, computed on the GPU in float64
        block rows at a time (bounded work space) and rounded once.

        The block rows go up through two pinned host buffers, filled by one
        thread per core while the one before is sent and the one before that
        transformed: a copy from ``f``'s pageable memory took 0.72 s of a 3 s
        set-up at ``Nm=5000, Nd=100, Nt=1000`` (docs/precision.md).

        Raises :class:`FftmatvecError` naming the bytes needed when ``Fhat``
        does not fit in the free device memory.
        """
        cp = self._cupy
        import cupyx

        dtype = np.dtype(dtype)
        nd, nm, nt = f.shape
        L, nf = 2 * nt, nt + 1
        need = nf * nd * nm * dtype.itemsize
        row_bytes = nm * (2 * nt * 8 + L * 8 + 2 * nf * 16)  # two uploads, padded copy, transform, cast
        free = self.free_bytes()
        if need + row_bytes > free:
            raise FftmatvecError(
                f"Fhat of {nd}x{nm}x{nf} {dtype} needs {need} bytes ({need / 2**30:.2f} GiB) plus "
                f"{row_bytes} bytes of work space on GPU {self.device_id}, but only {free} bytes "
                f"({free / 2**30:.2f} GiB) are free; use more ranks or single precision"
            )
        budget = max(row_bytes, min(512 << 20, (free - need) // 2))
        rows = max(1, min(budget // row_bytes, UPLOAD_BYTES // (nm * nt * 8)))
        Fhat = cp.empty((nf, nd, nm), dtype)
        host = [cupyx.empty_pinned((rows, nm, nt), np.float64) for _ in range(2)]
        dev = [cp.empty((rows, nm, nt), np.float64) for _ in range(2)]
        sent: list[Any] = [None, None]  # per buffer pair: the upload's event
        read: list[Any] = [None, None]  # per buffer pair: the transform's event
        uploads, compute = self._side_stream(), cp.cuda.get_current_stream()
        for c, i0 in enumerate(range(0, nd, rows)):
            b, n = c % 2, min(rows, nd - i0)
            if sent[b] is not None:
                sent[b].synchronize()
            map_slices(lambda cols: np.copyto(host[b][:n, cols], f[i0:i0 + n, cols]), nm)
            if read[b] is not None:
                uploads.wait_event(read[b])
            dev[b][:n].set(host[b][:n], stream=uploads)  # pinned: returns at once
            sent[b] = uploads.record()
            compute.wait_event(sent[b])
            hat = cp.fft.rfft(dev[b][:n], n=L, axis=-1)  # (n, nm, nf) complex128
            Fhat[:, i0:i0 + n, :] = hat.transpose(2, 0, 1)
            read[b] = compute.record()
            del hat
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
