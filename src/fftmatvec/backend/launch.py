"""Programmatic dependent launch of the native kernels (CUDA driver, ctypes).

CuPy launches a ``RawKernel`` without launch attributes.  Hopper's
programmatic dependent launch needs ``cuLaunchKernelEx`` with the attribute
``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION``: the kernel may be
scheduled once every block of the kernel before it in the stream has started
(``griddepcontrol.launch_dependents``, ``fmv::let_next_grid_start`` in
``native/``), and its ``griddepcontrol.wait`` (``fmv::wait_for_prior_grids``)
holds it there until that kernel has finished and its writes are visible.
What a kernel does before the wait overlaps the end of the one before: the
product kernels ask the L2 for their first bytes of ``Fhat`` there.  Inside
a recorded CUDA graph the launch becomes a programmatic edge.

Every kernel in ``native/`` waits before it touches memory that an earlier
kernel writes, so a programmatic launch is always safe.  The backend
launches this way from compute capability 9.0 (before it, and on HIP, the
kernels' waits compile to nothing).
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

# CUlaunchAttributeID (cuda.h)
PROGRAMMATIC_STREAM_SERIALIZATION = 6
PRIORITY = 8
# CUgraphInstantiate_flags (cuda.h)
USE_NODE_PRIORITY = 8


class LaunchAttribute(ctypes.Structure):
    """``CUlaunchAttribute``: the id, padding, and a 64-byte value union."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int * 16)]


class LaunchConfig(ctypes.Structure):
    """``CUlaunchConfig``."""

    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(LaunchAttribute)), ("n_attrs", ctypes.c_uint)]


_SCALARS = {np.dtype(np.int32): ctypes.c_int32, np.dtype(np.int64): ctypes.c_int64,
            np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}


def kernel_params(args: tuple) -> tuple[Any, list]:
    """The ``void**`` parameter array of a launch, and the ctypes values it
    points to (keep them alive until the launch returns).

    args : CuPy arrays (passed as their device pointers) and NumPy scalars
    of int32, int64, float32 or float64 (passed as that C type), the
    kernel's parameters in order.
    """
    values = []
    for a in args:
        if isinstance(a, np.generic) and a.dtype in _SCALARS:
            values.append(_SCALARS[a.dtype](a.item()))
        elif hasattr(a, "data") and hasattr(a.data, "ptr"):
            values.append(ctypes.c_void_p(a.data.ptr))
        else:
            raise TypeError(f"kernel argument {a!r}: expected a device array or a NumPy int32, int64, float32 "
                            f"or float64 scalar")
    params = (ctypes.c_void_p * len(values))(*(ctypes.addressof(v) for v in values))
    return params, values


def _dims(d: tuple[int, ...]) -> Any:
    return (ctypes.c_uint * 3)(*(tuple(int(v) for v in d) + (1, 1))[:3])


class ProgrammaticLauncher:
    """Launches kernels with programmatic stream serialization through the
    driver's ``cuLaunchKernelEx``; :meth:`load` gives None where the driver
    has no such entry point."""

    def __init__(self, libcuda: Any) -> None:
        self._launch = libcuda.cuLaunchKernelEx
        self._launch.argtypes = [ctypes.POINTER(LaunchConfig), ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.c_void_p]
        self._launch.restype = ctypes.c_int
        self._libcuda = libcuda
        self._attrs = (LaunchAttribute * 2)()
        self._attrs[0].id = PROGRAMMATIC_STREAM_SERIALIZATION
        self._attrs[0].value[0] = 1
        self._attrs[1].id = PRIORITY

    @classmethod
    def load(cls) -> ProgrammaticLauncher | None:
        try:
            libcuda = ctypes.CDLL("libcuda.so.1")
            libcuda.cuLaunchKernelEx  # noqa: B018 (CUDA 11.8 and later)
        except (OSError, AttributeError):
            return None
        return cls(libcuda)

    def __call__(self, fn: Any, grid: tuple[int, ...], block: tuple[int, ...], args: tuple, smem: int,
                 stream_ptr: int, priority: int | None = None) -> None:
        """Launch CuPy ``RawKernel`` ``fn`` on the stream ``stream_ptr``
        (``args`` as for :func:`kernel_params`), at the scheduling
        ``priority`` when given (lower numbers first, as stream priorities;
        a recorded launch keeps it for :class:`PriorityGraph`)."""
        self.packed(fn, grid, block, args, smem, stream_ptr, priority)()

    def packed(self, fn: Any, grid: tuple[int, ...], block: tuple[int, ...], args: tuple, smem: int,
               stream_ptr: int, priority: int | None = None) -> Callable[[], None]:
        """The launch of :meth:`__call__` with its parameters packed once: each
        call of the result launches ``fn`` again on the same arguments."""
        params, values = kernel_params(args)
        attrs = self._attrs
        if priority is not None:
            attrs = (LaunchAttribute * 2)(self._attrs[0], self._attrs[1])
            attrs[1].value[0] = int(priority)
        cfg = LaunchConfig(_dims(grid), _dims(block), int(smem), ctypes.c_void_p(stream_ptr),
                           ctypes.cast(attrs, ctypes.POINTER(LaunchAttribute)), 1 if priority is None else 2)
        call = (ctypes.byref(cfg), ctypes.c_void_p(int(fn.kernel.ptr)), params, None)

        def launch() -> None:
            _check(self._libcuda, self._launch(*call), f"cuLaunchKernelEx of {fn.name}")

        launch.arguments = (values, attrs)  # what the call points to, kept alive with the launch
        return launch


class PriorityGraph:
    """A CUDA graph recorded on a stream, instantiated so that its kernels
    keep the priorities they were launched with
    (``CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY``).  CuPy instantiates
    with no flags, and then every kernel of a replay runs at the priority of
    the stream it is launched into.

    Made by :meth:`end_capture`; :meth:`launch` replays it on CuPy's current
    stream."""

    def __init__(self, libcuda: Any, graph: ctypes.c_void_p, graph_exec: ctypes.c_void_p) -> None:
        import cupy

        self._libcuda, self._graph, self._exec = libcuda, graph, graph_exec
        self._current_stream = cupy.cuda.get_current_stream

    @classmethod
    def end_capture(cls, stream_ptr: int) -> PriorityGraph:
        """End the capture on the stream ``stream_ptr`` (begun by CuPy's
        ``Stream.begin_capture``) and instantiate its graph."""
        libcuda = ctypes.CDLL("libcuda.so.1")
        graph, graph_exec = ctypes.c_void_p(), ctypes.c_void_p()
        _check(libcuda, libcuda.cuStreamEndCapture(ctypes.c_void_p(stream_ptr), ctypes.byref(graph)),
               "cuStreamEndCapture")
        rc = libcuda.cuGraphInstantiateWithFlags(ctypes.byref(graph_exec), graph, ctypes.c_ulonglong(USE_NODE_PRIORITY))
        if rc != 0:
            libcuda.cuGraphDestroy(graph)
            _check(libcuda, rc, "cuGraphInstantiateWithFlags")
        return cls(libcuda, graph, graph_exec)

    def launch(self) -> None:
        _check(self._libcuda, self._libcuda.cuGraphLaunch(self._exec, ctypes.c_void_p(self._current_stream().ptr)),
               "cuGraphLaunch")

    def __del__(self) -> None:
        self._libcuda.cuGraphExecDestroy(self._exec)
        self._libcuda.cuGraphDestroy(self._graph)


def highest_stream_priority() -> int:
    """The highest (numerically lowest) stream priority of the current
    context (``cuCtxGetStreamPriorityRange``)."""
    libcuda = ctypes.CDLL("libcuda.so.1")
    least, greatest = ctypes.c_int(), ctypes.c_int()
    _check(libcuda, libcuda.cuCtxGetStreamPriorityRange(ctypes.byref(least), ctypes.byref(greatest)),
           "cuCtxGetStreamPriorityRange")
    return greatest.value


def _check(libcuda: Any, rc: int, what: str) -> None:
    if rc != 0:
        name = ctypes.c_char_p()
        libcuda.cuGetErrorName(rc, ctypes.byref(name))
        raise RuntimeError(f"{what}: {(name.value or b'error').decode()} ({rc})")
