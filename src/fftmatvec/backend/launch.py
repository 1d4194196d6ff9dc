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
        self._error_name = libcuda.cuGetErrorName
        self._error_name.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        self._attr = LaunchAttribute()
        self._attr.id = PROGRAMMATIC_STREAM_SERIALIZATION
        self._attr.value[0] = 1

    @classmethod
    def load(cls) -> ProgrammaticLauncher | None:
        try:
            libcuda = ctypes.CDLL("libcuda.so.1")
            libcuda.cuLaunchKernelEx  # noqa: B018 (CUDA 11.8 and later)
        except (OSError, AttributeError):
            return None
        return cls(libcuda)

    def __call__(self, fn: Any, grid: tuple[int, ...], block: tuple[int, ...], args: tuple, smem: int,
                 stream_ptr: int) -> None:
        """Launch CuPy ``RawKernel`` ``fn`` on the stream ``stream_ptr``
        (``args`` as for :func:`kernel_params`)."""
        self.packed(fn, grid, block, args, smem, stream_ptr)()

    def packed(self, fn: Any, grid: tuple[int, ...], block: tuple[int, ...], args: tuple, smem: int,
               stream_ptr: int) -> Callable[[], None]:
        """The launch of :meth:`__call__` with its parameters packed once: each
        call of the result launches ``fn`` again on the same arguments."""
        params, values = kernel_params(args)
        cfg = LaunchConfig(_dims(grid), _dims(block), int(smem), ctypes.c_void_p(stream_ptr),
                           ctypes.pointer(self._attr), 1)
        call = (ctypes.byref(cfg), ctypes.c_void_p(int(fn.kernel.ptr)), params, None)

        def launch() -> None:
            rc = self._launch(*call)
            if rc != 0:
                name = ctypes.c_char_p()
                self._error_name(rc, ctypes.byref(name))
                raise RuntimeError(f"cuLaunchKernelEx of {fn.name}: {(name.value or b'error').decode()} ({rc})")

        launch.arguments = values  # what params points to, kept alive with the launch
        return launch
