"""Replay on the GPU: CUDA graphs of a product's stages and launches packed
once.

:class:`Replayer` runs a product's device work through CUDA graphs, one
recording per pair of buffers that comes back; :class:`Recording` holds one
graph; :class:`PreparedLaunch` is one kernel launch with everything but its
leading pointers fixed (the one-kernel products of
:meth:`~fftmatvec.backend.gpu.GPUBackend.direct_plan`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..errors import FftmatvecError
from .base import Array

if TYPE_CHECKING:
    from .gpu import GPUBackend


class PreparedLaunch:
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
                raise TypeError(f"PreparedLaunch: unsupported argument {a!r}")
        self._tail = tail  # the arrays whose pointers are packed
        self._values = self._ptrs + fixed  # the ctypes values the parameter array points to
        self._params = (ctypes.c_void_p * len(self._values))(*(ctypes.addressof(v) for v in self._values))
        self._params_ptr = ctypes.addressof(self._params)

    def __call__(self, *arrays: Array) -> None:
        for slot, a in zip(self._ptrs, arrays):
            slot.value = a.data.ptr
        self._launch(self._fn_ptr, *self._dims, self._smem, self._current_stream().ptr, self._params_ptr, 0)


class Recording:
    """A recorded CUDA graph; :meth:`replay` launches it on the current stream."""

    def __init__(self) -> None:
        self.graph = None

    def replay(self) -> None:
        if self.graph is None:
            raise FftmatvecError("nothing was recorded")
        self.graph.launch()


class Replayer:
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


__all__ = ["PreparedLaunch", "Recording", "Replayer"]
