"""This process's share of the node's cores, and work split over them.

:func:`cores_per_rank` counts the cores a rank may use; :func:`map_slices`
runs a function on slices of a range in threads, for the host work of NumPy
and SciPy (which release the GIL): the CPU backend's transforms, the set-up's
passes over ``f``, the tsunami model's impulse responses.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

import numpy as np


#: Variables in which MPI launchers give the number of ranks on this node.
_LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE")


def cores_per_rank() -> int:
    """The cores this process should use: those it may run on, divided among
    the MPI ranks of this node when the launcher did not bind them to
    separate cores (``mpiexec`` without binding: every rank sees all cores)."""
    cores = len(os.sched_getaffinity(0))
    local = next((int(os.environ[v]) for v in _LOCAL_SIZE_VARS if v in os.environ), 1)
    if local > 1 and cores == os.cpu_count():
        return max(1, cores // local)
    return cores


T = TypeVar("T")

# The pool is kept between calls: starting its threads at every call cost the
# block-by-block upload of f (GPUBackend.fft_matrix) a tenth of its time.
_POOL_THREAD = "fftmatvec-slices"
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def _threads(n: int) -> ThreadPoolExecutor:
    """The kept pool, replaced by a larger one when ``n`` threads are asked
    for (under ``_pool_lock``; a replaced pool finishes what it was given)."""
    global _pool, _pool_size
    if n > _pool_size:
        if _pool is not None:
            _pool.shutdown(wait=False)
        _pool, _pool_size = ThreadPoolExecutor(n, thread_name_prefix=_POOL_THREAD), n
    return _pool


def map_slices(fn: Callable[[slice], T], n: int, workers: int | None = None) -> list[T]:
    """``fn(s)`` for contiguous slices ``s`` that cover ``range(n)`` in order,
    one thread each (at most ``workers``, default :func:`cores_per_rank`;
    one empty slice when ``n`` is 0); the results in the slices' order.  For
    NumPy and SciPy work, which releases the GIL; ``fn`` runs under the
    caller's :func:`numpy.errstate`.  Called from ``fn`` it runs
    its slices one after the other (a pool's thread waiting on the pool
    could wait for ever)."""
    parts = max(1, min(workers or cores_per_rank(), n))
    bounds = np.linspace(0, n, parts + 1).astype(int)
    slices = [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
    if parts == 1 or threading.current_thread().name.startswith(_POOL_THREAD):
        return [fn(s) for s in slices]
    errors = np.geterr()  # the caller's np.errstate, which is the calling thread's own

    def run(s: slice) -> T:
        with np.errstate(**errors):
            return fn(s)

    with _pool_lock:
        pool = _threads(parts)
        futures = [pool.submit(run, s) for s in slices]
    return [future.result() for future in futures]
