"""Sum collectives of contiguous arrays over one communicator.

:class:`Collectives` is the one interface the grid uses to move blocks:
``bcast``, ``reduce``, ``allreduce`` (SUM only) and ``barrier``, each on a
whole contiguous array, in place or into ``out``.  :class:`MPICollectives`
implements it over an mpi4py communicator with the buffer (upper-case)
methods, so a message has exactly the bytes of the array: the caller's dtype
decides the precision on the wire (float32 halves the bytes).  An NCCL
implementation (``cupy.cuda.nccl``) is meant to be a second subclass with the
same methods; nothing outside this module knows which one it talks to.

Arrays may be NumPy arrays or CuPy arrays.  CuPy arrays go through a host
copy unless the MPI library is CUDA-aware and ``FFTMATVEC_CUDA_AWARE_MPI=1``
is set, in which case the device buffer is handed to MPI directly (after the
current stream is synchronised).

Every call adds its wall time (host clock; the call returns when the local
part of the collective is done) to :attr:`Collectives.seconds`, and counts
calls and bytes per operation in :attr:`Collectives.stats`, so benchmarks
can report communication time next to the compute stages.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

Array = Any

#: Environment switch: hand CuPy device buffers to MPI directly.
CUDA_AWARE_ENV = "FFTMATVEC_CUDA_AWARE_MPI"


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

    def barrier(self) -> None:
        """Wait until every rank of the communicator arrives."""
        raise NotImplementedError

    def scatterv(self, send: np.ndarray | None, counts: list[int], recv: np.ndarray, root: int = 0) -> np.ndarray:
        """Scatter consecutive pieces of ``send`` (on ``root``; flattened, host
        memory) to the ranks, ``counts[k]`` elements to rank ``k``, into
        ``recv`` (host, ``counts[rank]`` elements); return ``recv``."""
        raise NotImplementedError

    def gatherv(self, send: np.ndarray, counts: list[int], recv: np.ndarray | None, root: int | None = 0):
        """Gather ``send`` (host, ``counts[rank]`` elements) from every rank
        into consecutive pieces of ``recv`` on ``root`` (on every rank when
        ``root`` is None); return ``recv`` there, None elsewhere."""
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

    def barrier(self) -> None:
        self.comm.Barrier()

    def scatterv(self, send: np.ndarray | None, counts: list[int], recv: np.ndarray, root: int = 0) -> np.ndarray:
        self._check(recv, "scatterv output")
        t0 = time.perf_counter()
        displs = np.concatenate(([0], np.cumsum(counts)[:-1])).tolist()
        spec = None
        if self.rank == root:
            self._check(send, "scatterv input")
            spec = [send, (list(counts), displs), self._type(send.dtype)]
        self.comm.Scatterv(spec, self._spec(recv), root=root)
        self._account("scatterv", recv.nbytes, time.perf_counter() - t0)
        return recv

    def gatherv(self, send: np.ndarray, counts: list[int], recv: np.ndarray | None, root: int | None = 0):
        self._check(send, "gatherv input")
        t0 = time.perf_counter()
        displs = np.concatenate(([0], np.cumsum(counts)[:-1])).tolist()
        spec = None
        if root is None or self.rank == root:
            self._check(recv, "gatherv output")
            spec = [recv, (list(counts), displs), self._type(recv.dtype)]
        if root is None:
            self.comm.Allgatherv(self._spec(send), spec)
        else:
            self.comm.Gatherv(self._spec(send), spec, root=root)
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
