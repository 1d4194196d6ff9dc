"""Sum collectives of contiguous arrays over one communicator.

:class:`Collectives` is the one interface the grid uses to move blocks:
``bcast``, ``reduce``, ``allreduce`` (SUM only) and ``barrier``, each on a
whole contiguous array, in place or into ``out``.  :class:`MPICollectives`
implements it over an mpi4py communicator with the buffer (upper-case)
methods, so a message has exactly the bytes of the array: the caller's dtype
decides the precision on the wire (float32 halves the bytes).  An NCCL
implementation (``cupy.cuda.nccl``) is meant to be a second subclass with the
same methods; nothing outside this module knows which one it talks to.
:class:`NCCLCollectives` is that subclass: device arrays of float32/float64
(complex as real pairs) go through NCCL on the current CuPy stream, anything
else through its MPI fallback.  :func:`device_collectives` picks one of the
two for a grid whose arrays live on GPUs (``FFTMATVEC_COLLECTIVES=mpi|nccl|auto``).

Arrays may be NumPy arrays or CuPy arrays.  CuPy arrays go through a host
copy unless the MPI library is CUDA-aware and ``FFTMATVEC_CUDA_AWARE_MPI=1``
is set, in which case the device buffer is handed to MPI directly (after the
current stream is synchronised).

Every call adds its wall time (host clock; the call returns when the local
part of the collective is done) to :attr:`Collectives.seconds`, and counts
calls and bytes per operation in :attr:`Collectives.stats`, so benchmarks
can report communication time next to the compute stages.  NCCL calls return
at once (stream-ordered); their time is the GPU-stream time between CUDA
events around each call, read when ``seconds``/``stats`` are read.

:meth:`Collectives.ireduce` starts a reduction and returns a :class:`Request`
whose ``wait()`` finishes it, so that the reduction of one chunk of a result
overlaps the computation of the next (design.md section 4).
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import numpy as np

Array = Any

#: CUDA stream priority of :meth:`NCCLCollectives.ireduce`'s stream: lower
#: numbers are higher priorities, and CUDA clamps a number beyond the
#: device's range (H200: 0 to -5) to its end.
_HIGHEST_PRIORITY = -1000

#: Environment switch: hand CuPy device buffers to MPI directly.
CUDA_AWARE_ENV = "FFTMATVEC_CUDA_AWARE_MPI"

#: Environment switch: transport of a GPU grid's collectives.
COLLECTIVES_ENV = "FFTMATVEC_COLLECTIVES"
MODES = ("mpi", "nccl", "auto")


def collectives_mode(mode: str | None = None) -> str:
    """``mode``, or ``$FFTMATVEC_COLLECTIVES`` when None (default "auto"),
    checked: "mpi" (host-staged or CUDA-aware MPI), "nccl" (NCCL, an error
    where it cannot run) or "auto" (NCCL where it can run, else MPI)."""
    value = os.environ.get(COLLECTIVES_ENV, "auto") if mode is None else mode
    value = str(value).strip().lower() or "auto"
    if value not in MODES:
        from .errors import ConfigError

        raise ConfigError(f"{COLLECTIVES_ENV}={value!r}: choose one of {', '.join(MODES)}")
    return value


def nccl_available() -> bool:
    """Whether CuPy imports with its NCCL bindings."""
    try:
        from cupy.cuda import nccl
    except Exception:  # no CuPy, or CuPy without NCCL
        return False
    return bool(getattr(nccl, "available", False))


class Request:
    """A started non-blocking collective (:meth:`Collectives.ireduce`).

    :meth:`wait` finishes it (once; later calls return the same value) and
    returns what the blocking call returns.
    """

    def __init__(self, finish: Callable[[], Any] | None = None, result: Any = None) -> None:
        self._finish = finish
        self._result = result

    @property
    def done(self) -> bool:
        """Whether :meth:`wait` has run (or nothing was left to do)."""
        return self._finish is None

    def wait(self) -> Any:
        if self._finish is not None:
            finish, self._finish = self._finish, None
            self._result = finish()
        return self._result


def _starts(counts: list[int]) -> list[int]:
    """Where each rank's piece begins in a buffer of consecutive pieces of ``counts`` elements."""
    return np.concatenate(([0], np.cumsum(counts)[:-1])).astype(int).tolist()


def _is_device_array(a: Any) -> bool:
    return hasattr(a, "__cuda_array_interface__") and not isinstance(a, np.ndarray)


class Collectives:
    """Collectives over one communicator (base class: counters and checks).

    Attributes
    ----------
    size, rank : int
        Of the communicator.
    seconds : float
        Wall time spent in collectives since the last :meth:`reset_stats`.
    stats : dict[str, dict[str, float]]
        Per operation (``"bcast"``, ``"reduce"``, ``"allreduce"``): ``calls``,
        ``bytes`` (of the local buffer) and ``seconds``.
    """

    size: int = 1
    rank: int = 0

    def __init__(self) -> None:
        self.reset_stats()

    # -- bookkeeping ------------------------------------------------------
    def reset_stats(self) -> None:
        """Zero :attr:`seconds` and :attr:`stats`."""
        self.seconds = 0.0
        self.stats: dict[str, dict[str, float]] = {}

    def _account(self, op: str, nbytes: int, seconds: float) -> None:
        self.seconds += seconds
        entry = self.stats.setdefault(op, {"calls": 0, "bytes": 0, "seconds": 0.0})
        entry["calls"] += 1
        entry["bytes"] += nbytes
        entry["seconds"] += seconds

    @staticmethod
    def _check(buf: Array, name: str) -> None:
        flags = getattr(buf, "flags", None)
        if flags is None or not flags["C_CONTIGUOUS"]:
            raise ValueError(f"{name} must be a C-contiguous array, got {type(buf).__name__}")

    # -- the interface ----------------------------------------------------
    def bcast(self, buf: Array, root: int = 0) -> Array:
        """Broadcast ``buf`` from ``root`` in place; return ``buf``.

        Every rank passes an array of the same shape and dtype; on the others
        its contents are overwritten.
        """
        raise NotImplementedError

    def reduce(self, buf: Array, out: Array | None = None, root: int = 0) -> Array | None:
        """Sum ``buf`` over all ranks onto ``root``.

        On ``root`` the sum goes to ``out`` (in place into ``buf`` when
        ``out`` is None) and is returned; other ranks return None and their
        ``buf`` is left unchanged.
        """
        raise NotImplementedError

    def allreduce(self, buf: Array, out: Array | None = None) -> Array:
        """Sum ``buf`` over all ranks onto every rank, into ``out`` (in place
        when None); return the sum."""
        raise NotImplementedError

    def ireduce(self, buf: Array, root: int = 0, after: Any = None) -> Request:
        """Start ``reduce(buf, root=root)`` (in place on ``root``); the
        returned :class:`Request`'s ``wait()`` returns what :meth:`reduce`
        returns.  ``buf`` must not be touched before ``wait()``.

        ``after``: a :meth:`fftmatvec.backend.base.Backend.mark` of the device
        work that produces ``buf``; the reduction waits for that work only,
        not for work queued later (None: everything queued so far).  This base
        version reduces at once.
        """
        return Request(result=self.reduce(buf, root=root))

    def barrier(self) -> None:
        """Wait until every rank of the communicator arrives."""
        raise NotImplementedError

    def scatterv(self, send: np.ndarray | None, counts: list[int], recv: np.ndarray, root: int = 0) -> np.ndarray:
        """Scatter consecutive pieces of ``send`` (on ``root``; flattened, host
        memory) to the ranks, ``counts[k]`` elements to rank ``k``, into
        ``recv`` (host, ``counts[rank]`` elements); return ``recv``."""
        raise NotImplementedError

    def gatherv(self, send: Array, counts: list[int], recv: Array | None, root: int | None = 0):
        """Gather ``send`` (``counts[rank]`` elements) from every rank into
        consecutive pieces of ``recv`` on ``root`` (on every rank when
        ``root`` is None); return ``recv`` there, None elsewhere.  ``send``
        and ``recv`` are host arrays, or device arrays on every rank."""
        raise NotImplementedError

    def free(self) -> None:
        """Release what the object owns (not the communicator it was given)."""


class MPICollectives(Collectives):
    """:class:`Collectives` over an mpi4py communicator.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        Used, not owned: :meth:`free` does not free it.
    cuda_aware : bool, optional
        Pass CuPy buffers to MPI directly; default from the environment
        variable ``FFTMATVEC_CUDA_AWARE_MPI`` (``1`` = yes).
    """

    def __init__(self, comm: Any, cuda_aware: bool | None = None) -> None:
        from mpi4py import MPI
        from mpi4py.util import dtlib

        super().__init__()
        self._MPI = MPI
        self._dtlib = dtlib
        self._types = {
            np.dtype(np.float64): MPI.DOUBLE,
            np.dtype(np.float32): MPI.FLOAT,
            np.dtype(np.complex128): MPI.C_DOUBLE_COMPLEX,
            np.dtype(np.complex64): MPI.C_FLOAT_COMPLEX,
            np.dtype(np.int64): MPI.INT64_T,
            np.dtype(np.int32): MPI.INT32_T,
        }
        self.comm = comm
        self.size = comm.Get_size()
        self.rank = comm.Get_rank()
        if cuda_aware is None:
            cuda_aware = os.environ.get(CUDA_AWARE_ENV, "0").strip().lower() in ("1", "yes", "true")
        self.cuda_aware = cuda_aware

    def _type(self, dtype: Any) -> Any:
        """The predefined MPI datatype of ``dtype`` (reductions need one)."""
        dtype = np.dtype(dtype)
        mpi_type = self._types.get(dtype.newbyteorder("=") if dtype.byteorder != "|" else dtype)
        return mpi_type if mpi_type is not None else self._dtlib.from_numpy_dtype(dtype)

    def _spec(self, buf: Array) -> list:
        """``[buffer, MPI datatype]`` with the datatype from the dtype (complex allowed)."""
        return [buf, self._type(buf.dtype)]

    def _host(self, buf: Array) -> tuple[Array, bool]:
        """The array MPI sees for ``buf`` and whether it is a host copy."""
        if not _is_device_array(buf):
            return buf, False
        if self.cuda_aware:
            import cupy

            cupy.cuda.get_current_stream().synchronize()
            return buf, False
        return buf.get(), True

    def _host_after(self, buf: Array, after: Any) -> tuple[Array, bool]:
        """:meth:`_host`, waiting only for the device work marked by ``after``
        (a copy on a side stream), not for everything on the current stream."""
        if after is None or not _is_device_array(buf):
            return self._host(buf)
        import cupy

        if getattr(self, "_copy_stream", None) is None:
            self._copy_stream = cupy.cuda.Stream(non_blocking=True)
        stream = self._copy_stream
        stream.wait_event(after)
        if self.cuda_aware:
            stream.synchronize()
            return buf, False
        return cupy.asnumpy(buf, stream=stream), True

    def _recv(self, out: Array) -> tuple[Array, bool]:
        """The array MPI writes for ``out`` and whether it must be copied back."""
        if _is_device_array(out) and not self.cuda_aware:
            return np.empty(out.shape, out.dtype), True
        return out, False

    def bcast(self, buf: Array, root: int = 0) -> Array:
        self._check(buf, "bcast buffer")
        t0 = time.perf_counter()
        host, staged = self._host(buf)
        self.comm.Bcast(self._spec(host), root=root)
        if staged and self.rank != root:
            buf.set(host)
        self._account("bcast", buf.nbytes, time.perf_counter() - t0)
        return buf

    def reduce(self, buf: Array, out: Array | None = None, root: int = 0) -> Array | None:
        self._check(buf, "reduce buffer")
        t0 = time.perf_counter()
        MPI = self._MPI
        host, staged = self._host(buf)
        result = None
        if self.rank != root:
            self.comm.Reduce(self._spec(host), None, op=MPI.SUM, root=root)
        elif out is None:
            self.comm.Reduce(MPI.IN_PLACE, self._spec(host), op=MPI.SUM, root=root)
            if staged:
                buf.set(host)
            result = buf
        else:
            self._check(out, "reduce output")
            recv, copy_back = self._recv(out)
            self.comm.Reduce(self._spec(host), self._spec(recv), op=MPI.SUM, root=root)
            if copy_back:
                out.set(recv)
            result = out
        self._account("reduce", buf.nbytes, time.perf_counter() - t0)
        return result

    def allreduce(self, buf: Array, out: Array | None = None) -> Array:
        self._check(buf, "allreduce buffer")
        t0 = time.perf_counter()
        MPI = self._MPI
        host, staged = self._host(buf)
        if out is None:
            self.comm.Allreduce(MPI.IN_PLACE, self._spec(host), op=MPI.SUM)
            if staged:
                buf.set(host)
            result = buf
        else:
            self._check(out, "allreduce output")
            recv, copy_back = self._recv(out)
            self.comm.Allreduce(self._spec(host), self._spec(recv), op=MPI.SUM)
            if copy_back:
                out.set(recv)
            result = out
        self._account("allreduce", buf.nbytes, time.perf_counter() - t0)
        return result

    def ireduce(self, buf: Array, root: int = 0, after: Any = None) -> Request:
        """``MPI_Ireduce`` (in place on ``root``).  A device buffer is copied to
        the host first (after the work ``after`` marks, on a side stream) and
        the sum copied back in ``wait()``.  Time accounted (``"ireduce"``):
        the host time of the start and of ``wait()``, i.e. the part of the
        reduction that was not hidden."""
        self._check(buf, "ireduce buffer")
        t0 = time.perf_counter()
        MPI = self._MPI
        host, staged = self._host_after(buf, after)
        if self.rank == root:
            req = self.comm.Ireduce(MPI.IN_PLACE, self._spec(host), op=MPI.SUM, root=root)
        else:
            req = self.comm.Ireduce(self._spec(host), None, op=MPI.SUM, root=root)
        started = time.perf_counter() - t0

        def finish() -> Array | None:
            t1 = time.perf_counter()
            req.Wait()
            if staged and self.rank == root:
                buf.set(host)
            self._account("ireduce", buf.nbytes, started + time.perf_counter() - t1)
            return buf if self.rank == root else None

        return Request(finish)

    def barrier(self) -> None:
        self.comm.Barrier()

    def scatterv(self, send: np.ndarray | None, counts: list[int], recv: np.ndarray, root: int = 0) -> np.ndarray:
        self._check(recv, "scatterv output")
        t0 = time.perf_counter()
        displs = _starts(counts)
        spec = None
        if self.rank == root:
            self._check(send, "scatterv input")
            spec = [send, (list(counts), displs), self._type(send.dtype)]
        self.comm.Scatterv(spec, self._spec(recv), root=root)
        self._account("scatterv", recv.nbytes, time.perf_counter() - t0)
        return recv

    def gatherv(self, send: Array, counts: list[int], recv: Array | None, root: int | None = 0):
        self._check(send, "gatherv input")
        t0 = time.perf_counter()
        displs = _starts(counts)
        host_send, _ = self._host(send)
        spec, host_recv, staged = None, None, False
        if root is None or self.rank == root:
            self._check(recv, "gatherv output")
            host_recv, staged = self._recv(recv)
            spec = [host_recv, (list(counts), displs), self._type(recv.dtype)]
        if root is None:
            self.comm.Allgatherv(self._spec(host_send), spec)
        else:
            self.comm.Gatherv(self._spec(host_send), spec, root=root)
        if staged:
            recv.set(host_recv)
        self._account("gatherv", send.nbytes, time.perf_counter() - t0)
        return recv if root is None or self.rank == root else None


class LocalCollectives(Collectives):
    """The collectives of a one-rank communicator: identities (copies into
    ``out``).  Used by :class:`~fftmatvec.grid.SerialGrid`."""

    def bcast(self, buf: Array, root: int = 0) -> Array:
        return buf

    def reduce(self, buf: Array, out: Array | None = None, root: int = 0) -> Array | None:
        if out is None:
            return buf
        out[...] = buf
        return out

    def allreduce(self, buf: Array, out: Array | None = None) -> Array:
        return self.reduce(buf, out)

    def barrier(self) -> None:
        pass

    def scatterv(self, send: np.ndarray | None, counts: list[int], recv: np.ndarray, root: int = 0) -> np.ndarray:
        recv.reshape(-1)[...] = send.reshape(-1)[: counts[0]]
        return recv

    def gatherv(self, send: np.ndarray, counts: list[int], recv: np.ndarray | None, root: int | None = 0):
        recv.reshape(-1)[...] = send.reshape(-1)
        return recv


class NCCLCollectives(Collectives):
    """:class:`Collectives` over NCCL (``cupy.cuda.nccl``) for device arrays.

    ``bcast``, ``reduce``, ``allreduce`` and ``ireduce`` of CuPy arrays of
    float32/float64 go through NCCL, SUM only, complex64/complex128 sent as
    real pairs (twice as many float32/float64); they are queued on the current
    CuPy stream (``ireduce`` on a stream of its own) and return without
    waiting.  Host arrays, other dtypes, ``scatterv``, ``gatherv`` to one root and
    ``barrier`` go through the MPI fallback.  Whether a call takes NCCL
    depends only on ``buf`` (same kind, dtype and shape on every rank by the
    interface's contract), so all ranks always take the same path.  An
    all-gather (``gatherv`` with ``root=None``) of device arrays goes through
    NCCL as grouped broadcasts.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        Used, not owned.  Making the object is collective over ``comm``;
        every rank must have its own GPU current (NCCL refuses two ranks on
        one GPU): :func:`device_collectives` checks that and votes errors.
    uid : bytes, optional
        ``cupy.cuda.nccl.get_unique_id()`` of rank 0, the same on every rank;
        None: made on rank 0 and broadcast over ``comm``.
    fallback : Collectives, optional
        For what NCCL does not take; default ``MPICollectives(comm)``.

    Attributes
    ----------
    seconds, stats
        NCCL calls are timed on the GPU stream (CUDA events around each call,
        read -- with a synchronisation -- when these are read); the fallback's
        entries appear with an ``"mpi:"`` prefix.
    """

    def __init__(self, comm: Any, uid: Any = None, fallback: Collectives | None = None,
                 cuda_aware: bool | None = None) -> None:
        import cupy
        from cupy.cuda import nccl

        self._cupy, self._nccl_mod = cupy, nccl
        self._nccl_error = getattr(nccl, "NcclError", RuntimeError)
        self._pending: list = []
        self._stream = None
        self.nccl = None
        self.comm = comm
        self.size = comm.Get_size()
        self.rank = comm.Get_rank()
        self.mpi = fallback if fallback is not None else MPICollectives(comm, cuda_aware)
        super().__init__()
        if uid is None:
            uid = comm.bcast(nccl.get_unique_id() if self.rank == 0 else None, root=0)
        self.device_id = int(cupy.cuda.runtime.getDevice())
        self._types = {
            np.dtype(np.float32): (nccl.NCCL_FLOAT32, 1),
            np.dtype(np.float64): (nccl.NCCL_FLOAT64, 1),
            np.dtype(np.complex64): (nccl.NCCL_FLOAT32, 2),
            np.dtype(np.complex128): (nccl.NCCL_FLOAT64, 2),
        }
        self.nccl = nccl.NcclCommunicator(self.size, uid, self.rank)

    # -- timing ---------------------------------------------------------------
    def reset_stats(self) -> None:
        self._pending = []
        self._seconds = 0.0
        self._stats: dict[str, dict[str, float]] = {}
        if getattr(self, "mpi", None) is not None:
            self.mpi.reset_stats()

    def _flush(self, block: bool = True) -> None:
        """Turn finished (all, with ``block``) event pairs into seconds."""
        keep = []
        for op, nbytes, e0, e1 in self._pending:
            if not block and not e1.done:
                keep.append((op, nbytes, e0, e1))
                continue
            e1.synchronize()
            dt = self._cupy.cuda.get_elapsed_time(e0, e1) * 1e-3
            self._seconds += dt
            entry = self._stats.setdefault(op, {"calls": 0, "bytes": 0, "seconds": 0.0})
            entry["calls"] += 1
            entry["bytes"] += nbytes
            entry["seconds"] += dt
        self._pending = keep

    @property
    def seconds(self) -> float:  # type: ignore[override]
        self._flush()
        return self._seconds + self.mpi.seconds

    @seconds.setter
    def seconds(self, value: float) -> None:
        self._seconds = value

    @property
    def stats(self) -> dict[str, dict[str, float]]:  # type: ignore[override]
        self._flush()
        out = {op: dict(v) for op, v in self._stats.items()}
        out.update({f"mpi:{op}": dict(v) for op, v in self.mpi.stats.items()})
        return out

    @stats.setter
    def stats(self, value: dict) -> None:
        self._stats = value

    # -- helpers --------------------------------------------------------------
    def _spec(self, buf: Array) -> tuple[int, int] | None:
        """(NCCL datatype, count) when ``buf`` goes through NCCL, else None."""
        if not _is_device_array(buf):
            return None
        spec = self._types.get(np.dtype(buf.dtype))
        return None if spec is None else (spec[0], int(buf.size) * spec[1])

    def _enqueue(self, op: str, nbytes: int, call: Callable[[int], None], stream: Any = None) -> None:
        """``call(stream_ptr)`` between two timing events on ``stream`` (default current)."""
        cp = self._cupy
        stream = stream if stream is not None else cp.cuda.get_current_stream()
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record(stream)
        try:
            call(stream.ptr)
        except self._nccl_error as exc:
            from .errors import FftmatvecError

            raise FftmatvecError(f"NCCL {op} failed on rank {self.rank} of {self.size}: {exc}") from exc
        e1.record(stream)
        self._pending.append((op, nbytes, e0, e1))
        if len(self._pending) > 512:
            self._flush(block=False)

    def _store(self, src: Array, out: Array) -> Array:
        """``out[...] = src`` across host/device and dtypes; returns ``out``."""
        if _is_device_array(out):
            out[...] = src
        else:
            out[...] = self._cupy.asnumpy(src).reshape(out.shape)
        return out

    def _fits(self, out: Array | None, buf: Array) -> bool:
        return (out is not None and _is_device_array(out) and out.dtype == buf.dtype and out.size == buf.size
                and out.flags.c_contiguous)

    # -- the interface ---------------------------------------------------------
    def bcast(self, buf: Array, root: int = 0) -> Array:
        self._check(buf, "bcast buffer")
        spec = self._spec(buf)
        if spec is None:
            return self.mpi.bcast(buf, root=root)
        dt, count = spec
        if count:
            self._enqueue("bcast", buf.nbytes, lambda s: self.nccl.bcast(buf.data.ptr, count, dt, root, s))
        return buf

    def _operands(self, buf: Array, out: Array | None) -> tuple[Array, Array]:
        """(send, recv) buffers for a sum into ``out`` (in place when None);
        an ``out`` NCCL cannot write (host, other dtype) gets a device copy
        of ``buf`` reduced in place, stored into ``out`` afterwards."""
        if out is None:
            return buf, buf
        if self._fits(out, buf):
            return buf, out
        tmp = buf.copy()
        return tmp, tmp

    def reduce(self, buf: Array, out: Array | None = None, root: int = 0) -> Array | None:
        self._check(buf, "reduce buffer")
        spec = self._spec(buf)
        if spec is None:
            return self.mpi.reduce(buf, out=out, root=root)
        dt, count = spec
        is_root = self.rank == root
        send, recv = self._operands(buf, out if is_root else None)
        if count:
            op = self._nccl_mod.NCCL_SUM
            self._enqueue("reduce", buf.nbytes,
                          lambda s: self.nccl.reduce(send.data.ptr, recv.data.ptr, count, dt, op, root, s))
        if not is_root:
            return None
        if out is None or recv is out:
            return recv
        return self._store(recv, out)

    def allreduce(self, buf: Array, out: Array | None = None) -> Array:
        self._check(buf, "allreduce buffer")
        spec = self._spec(buf)
        if spec is None:
            return self.mpi.allreduce(buf, out=out)
        dt, count = spec
        send, recv = self._operands(buf, out)
        if count:
            op = self._nccl_mod.NCCL_SUM
            self._enqueue("allreduce", buf.nbytes,
                          lambda s: self.nccl.allReduce(send.data.ptr, recv.data.ptr, count, dt, op, s))
        if out is None or recv is out:
            return recv
        return self._store(recv, out)

    def ireduce(self, buf: Array, root: int = 0, after: Any = None) -> Request:
        """NCCL reduce in place on a stream of its own, after the work
        ``after`` marks; ``wait()`` makes the current stream wait for it (no
        host synchronisation)."""
        self._check(buf, "ireduce buffer")
        spec = self._spec(buf)
        if spec is None:
            return self.mpi.ireduce(buf, root=root, after=after)
        cp = self._cupy
        if self._stream is None:
            # the highest priority (CUDA clamps the number to the device's range): the reduction's kernel takes
            # the multiprocessors as the product's blocks leave them, not after the next chunk's kernels
            self._stream = cp.cuda.Stream(non_blocking=True, priority=_HIGHEST_PRIORITY)
        side = self._stream
        if after is None:
            after = cp.cuda.Event(disable_timing=True)
            after.record(cp.cuda.get_current_stream())
        side.wait_event(after)
        dt, count = spec
        if count:
            op = self._nccl_mod.NCCL_SUM
            self._enqueue("ireduce", buf.nbytes,
                          lambda s: self.nccl.reduce(buf.data.ptr, buf.data.ptr, count, dt, op, root, s), stream=side)
        done = cp.cuda.Event(disable_timing=True)
        done.record(side)
        is_root = self.rank == root

        def finish() -> Array | None:
            cp.cuda.get_current_stream().wait_event(done)
            return buf if is_root else None

        return Request(finish)

    def barrier(self) -> None:
        self.mpi.barrier()

    def scatterv(self, send: np.ndarray | None, counts: list[int], recv: np.ndarray, root: int = 0) -> np.ndarray:
        return self.mpi.scatterv(send, counts, recv, root=root)

    def gatherv(self, send: Array, counts: list[int], recv: Array | None, root: int | None = 0):
        """With ``root`` None and device arrays of an NCCL type: one NCCL
        broadcast from each rank that sends, grouped (NCCL's all-gather needs
        equal counts); queued on the current stream.  Else the MPI fallback."""
        spec = self._spec(send)
        if root is not None or spec is None or not _is_device_array(recv):
            return self.mpi.gatherv(send, counts, recv, root=root)
        self._check(send, "gatherv input")
        self._check(recv, "gatherv output")
        if recv.dtype != send.dtype or recv.size != sum(counts) or send.size != counts[self.rank]:
            raise ValueError(f"gatherv: {send.size} {send.dtype} elements sent into {recv.size} {recv.dtype} "
                             f"for counts {counts}")
        dt, per = self._types[np.dtype(send.dtype)]
        starts = _starts(counts)
        nccl = self._nccl_mod

        def call(stream: int) -> None:
            nccl.groupStart()
            try:
                for root_rank, (start, count) in enumerate(zip(starts, counts)):
                    if count:
                        piece = recv.data.ptr + start * recv.itemsize
                        source = send.data.ptr if root_rank == self.rank else piece
                        self.nccl.broadcast(source, piece, count * per, dt, root_rank, stream)
            finally:
                nccl.groupEnd()

        if sum(counts):
            self._enqueue("allgatherv", recv.nbytes, call)
        return recv

    def check(self) -> None:
        """Raise :class:`~fftmatvec.errors.FftmatvecError` (on this rank) if
        NCCL reports an asynchronous error on this communicator."""
        try:
            self.nccl.check_async_error()
        except self._nccl_error as exc:
            from .errors import FftmatvecError

            raise FftmatvecError(f"NCCL error on rank {self.rank} of {self.size}: {exc}") from exc

    def free(self) -> None:
        """Destroy the NCCL communicator (after the queued work is done)."""
        if self.nccl is not None:
            self._flush()
            self._cupy.cuda.Device(self.device_id).synchronize()
            self.nccl.destroy()
            self.nccl = None
        self.mpi.free()


def device_collectives(vote_comm: Any, comms: list, mode: str | None = None,
                       cuda_aware: bool | None = None) -> tuple[list[Collectives], str, str]:
    """Collectives for arrays on this rank's current GPU, one per communicator
    of ``comms`` (each a sub-communicator of ``vote_comm``; every rank of
    ``vote_comm`` calls this with its own, in the same order).

    ``mode`` (default ``$FFTMATVEC_COLLECTIVES``, else "auto"): "mpi" gives
    :class:`MPICollectives`; "nccl" gives :class:`NCCLCollectives` or raises
    :class:`~fftmatvec.errors.ConfigError` on every rank when NCCL cannot run
    (no NCCL on some rank, or ranks sharing a GPU); "auto" gives NCCL where it
    can run, else MPI.  Every failure (a missing library, a unique id, the
    creation of a communicator) is voted over ``vote_comm``, so all ranks
    raise the same error.

    Returns ``(collectives, kind, note)``: kind "mpi" or "nccl", note why.
    """
    from .errors import ConfigError, collective

    mode = collectives_mode(mode)
    mpis: list[Collectives] = [MPICollectives(c, cuda_aware) for c in comms]
    if mode == "mpi":
        return mpis, "mpi", f"{COLLECTIVES_ENV}=mpi"
    with collective(vote_comm, "checking NCCL") as vote:
        import socket

        ok = nccl_available()
        gpu = None
        if ok:
            import cupy

            dev = int(cupy.cuda.runtime.getDevice())
            try:
                gpu = str(cupy.cuda.Device(dev).pci_bus_id)
            except Exception:  # no PCI id: host name and index
                gpu = f"{socket.gethostname()}:{dev}"
        vote.share((ok, gpu))
    values = vote.values
    missing = [r for r, v in enumerate(values) if not v[0]]
    if missing:
        note = f"NCCL is not available through CuPy on rank(s) {missing}"
    else:
        gpus = [v[1] for v in values]
        distinct = len(set(gpus))
        note = "" if distinct == len(gpus) else (
            f"{len(gpus)} ranks share {distinct} GPU{'s' if distinct > 1 else ''} (NCCL needs one GPU per rank)")
    if note:
        if mode == "nccl":
            raise ConfigError(f"{COLLECTIVES_ENV}=nccl, but {note}")
        return mpis, "mpi", note
    with collective(vote_comm, "making NCCL unique ids"):
        from cupy.cuda import nccl

        mine = [nccl.get_unique_id() if c.Get_rank() == 0 else None for c in comms]
    uids = [c.bcast(u, root=0) for c, u in zip(comms, mine)]
    made: list[Collectives] = []
    try:
        with collective(vote_comm, "creating NCCL communicators"):
            for c, uid, fallback in zip(comms, uids, mpis):
                made.append(NCCLCollectives(c, uid=uid, fallback=fallback))
    except Exception:
        for coll in made:
            try:
                coll.free()
            except Exception:
                pass
        raise
    version = ""
    try:
        version = f" {nccl.get_version()}"
    except Exception:
        pass
    return made, "nccl", f"NCCL{version}"
