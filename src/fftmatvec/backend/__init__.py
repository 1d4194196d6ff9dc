"""Backends: the only place that branches on the backend name.

``get_backend("cpu")`` gives the NumPy/SciPy backend; ``"gpu"`` the CuPy one
(imported only when asked for); ``"auto"`` the GPU when CuPy sees one.
"""

from __future__ import annotations

from ..errors import ConfigError
from .base import Backend, StageTimer

DEVICES = ("cpu", "gpu", "auto")


def gpu_available() -> bool:
    """Whether CuPy imports and sees at least one device."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device: all mean "no GPU"
        return False


def get_backend(device: "str | Backend" = "cpu") -> Backend:
    """Return the backend for ``device`` (``"cpu"``, ``"gpu"`` or ``"auto"``).

    A :class:`Backend` instance is returned unchanged.
    """
    if isinstance(device, Backend):
        return device
    if device not in DEVICES:
        raise ConfigError(f"unknown device {device!r}: choose one of {', '.join(DEVICES)}")
    if device == "auto":
        device = "gpu" if gpu_available() else "cpu"
    if device == "gpu":
        if not gpu_available():
            raise ConfigError("device 'gpu' asked for, but CuPy finds no GPU (install fftmatvec[cuda12] or [cuda13])")
        from .gpu import GPUBackend

        return GPUBackend()
    from .cpu import CPUBackend

    return CPUBackend()


__all__ = ["Backend", "StageTimer", "get_backend", "gpu_available", "DEVICES"]
