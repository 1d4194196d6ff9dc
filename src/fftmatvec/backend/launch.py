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

# CUlaunchAttributeID, CUaccessProperty, CUlimit and CUdevice_attribute values (cuda.h)
ACCESS_POLICY_WINDOW = 1
PROGRAMMATIC_STREAM_SERIALIZATION = 6
ACCESS_PROPERTY_STREAMING = 1
ACCESS_PROPERTY_PERSISTING = 2
LIMIT_PERSISTING_L2_CACHE_SIZE = 6
ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE = 108
ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE = 109


class LaunchAttribute(ctypes.Structure):
    """``CUlaunchAttribute``: the id, padding, and a 64-byte value union."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int * 16)]


class AccessPolicyWindow(ctypes.Structure):
    """``CUaccessPolicyWindow``: ``hit_ratio`` of the lines in ``[base, base + num_bytes)`` get ``hit_prop``,
    the others ``miss_prop``."""

    _fields_ = [("base", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hit_ratio", ctypes.c_float),
                ("hit_prop", ctypes.c_int), ("miss_prop", ctypes.c_int)]


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
        self._set_limit = libcuda.cuCtxSetLimit
        self._set_limit.argtypes = [ctypes.c_int, ctypes.c_size_t]
        self._set_limit.restype = ctypes.c_int
        self._get_attribute = libcuda.cuDeviceGetAttribute
        self._get_attribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int]
        self._get_attribute.restype = ctypes.c_int

    @classmethod
    def load(cls) -> ProgrammaticLauncher | None:
        try:
            libcuda = ctypes.CDLL("libcuda.so.1")
            libcuda.cuLaunchKernelEx  # noqa: B018 (CUDA 11.8 and later)
        except (OSError, AttributeError):
            return None
        return cls(libcuda)

    def persisting_l2(self, device: int, nbytes: int) -> tuple[int, int]:
        """Set aside up to ``nbytes`` of the L2 for persisting lines (the
        current context); returns the bytes set aside and the largest access
        policy window of ``device``."""
        limit, window = ctypes.c_int(), ctypes.c_int()
        self._get_attribute(ctypes.byref(limit), ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, device)
        self._get_attribute(ctypes.byref(window), ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, device)
        size = max(0, min(int(nbytes), limit.value))
        if self._set_limit(LIMIT_PERSISTING_L2_CACHE_SIZE, size) != 0:
            size = 0
        return size, window.value

    def __call__(self, fn: Any, grid: tuple[int, ...], block: tuple[int, ...], args: tuple, smem: int,
                 stream_ptr: int, window: tuple[int, int, float] | None = None) -> None:
        """Launch CuPy ``RawKernel`` ``fn`` on the stream ``stream_ptr``
        (``args`` as for :func:`kernel_params`); ``window`` ``(address,
        bytes, hit_ratio)``: that share of the lines in the range persists
        in the L2, the others stream."""
        self.packed(fn, grid, block, args, smem, stream_ptr, window)()

    def packed(self, fn: Any, grid: tuple[int, ...], block: tuple[int, ...], args: tuple, smem: int,
               stream_ptr: int, window: tuple[int, int, float] | None = None) -> Callable[[], None]:
        """The launch of :meth:`__call__` with its parameters packed once: each
        call of the result launches ``fn`` again on the same arguments."""
        params, values = kernel_params(args)
        attrs = (LaunchAttribute * 2)()
        attrs[0].id = PROGRAMMATIC_STREAM_SERIALIZATION
        attrs[0].value[0] = 1
        if window is not None:
            attrs[1].id = ACCESS_POLICY_WINDOW
            apw = AccessPolicyWindow(ctypes.c_void_p(window[0]), window[1], window[2], ACCESS_PROPERTY_PERSISTING,
                                     ACCESS_PROPERTY_STREAMING)
            ctypes.memmove(attrs[1].value, ctypes.byref(apw), ctypes.sizeof(apw))
        cfg = LaunchConfig(_dims(grid), _dims(block), int(smem), ctypes.c_void_p(stream_ptr),
                           ctypes.cast(attrs, ctypes.POINTER(LaunchAttribute)), 1 if window is None else 2)
        call = (ctypes.byref(cfg), ctypes.c_void_p(int(fn.kernel.ptr)), params, None)

        def launch() -> None:
            rc = self._launch(*call)
            if rc != 0:
                name = ctypes.c_char_p()
                self._error_name(rc, ctypes.byref(name))
                raise RuntimeError(f"cuLaunchKernelEx of {fn.name}: {(name.value or b'error').decode()} ({rc})")

        launch.arguments = values, attrs  # what params and cfg point to, kept alive with the launch
        return launch
