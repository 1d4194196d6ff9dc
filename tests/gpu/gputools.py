"""Shared by the GPU test modules: skip the whole module without a GPU."""

import pytest


def require_gpu():
    """Return the CuPy module, or skip the calling test module (at import)
    when CuPy is missing or sees no GPU."""
    cupy = pytest.importorskip("cupy")
    from fftmatvec.backend import gpu_available

    if not gpu_available():
        pytest.skip("no GPU visible to CuPy", allow_module_level=True)
    return cupy
