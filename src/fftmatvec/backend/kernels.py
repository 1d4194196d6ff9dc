"""Native CUDA/HIP kernels: where the sources are and how they are built.

The ``.cu``/``.cuh`` files live in ``native/`` at the repository root and are
shipped in the wheel as ``fftmatvec/native/``.  This module alone knows
where to find them and alone asks whether CuPy runs on HIP.  Nothing is
compiled at import: :func:`kernel` builds one :class:`cupy.RawModule` per
template instantiation on first use (CuPy then caches the binary on disk
under ``CUPY_CACHE_DIR`` and per device), so only the instantiations that the
precision codes in use need are ever compiled.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Callable

import numpy as np

CTYPE = {
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
    np.dtype(np.complex64): "float2",
    np.dtype(np.complex128): "double2",
}

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.MULTILINE)


def native_dir() -> Path:
    """The folder holding the kernel sources.

    ``fftmatvec/native`` inside the installed package (a wheel), else
    ``native/`` at the root of the source tree (editable or source-tree use),
    else ``$FFTMATVEC_NATIVE_DIR``.
    """
    env = os.environ.get("FFTMATVEC_NATIVE_DIR")
    candidates = [Path(env)] if env else []
    try:
        from importlib.resources import files

        candidates.append(Path(str(files("fftmatvec").joinpath("native"))))
    except Exception:  # pragma: no cover - no importlib.resources path
        pass
    here = Path(__file__).resolve()
    candidates.append(here.parents[3] / "native")  # <repo>/src/fftmatvec/backend/kernels.py
    for cand in candidates:
        if (cand / "sbgemv.cu").is_file():
            return cand
    raise FileNotFoundError(
        "fftmatvec kernel sources not found (looked in "
        + ", ".join(str(c) for c in candidates)
        + "); set FFTMATVEC_NATIVE_DIR to the folder with sbgemv.cu"
    )


def expand_includes(fname: str, read: Callable[[str], str]) -> str:
    """Text of ``fname`` (``read`` gives a file's text by name) with local
    ``#include "..."`` lines replaced by the files' text, each file once."""
    seen: set[str] = set()

    def expand(name: str) -> str:
        if name in seen:  # headers use #pragma once
            return ""
        seen.add(name)
        text = re.sub(r"^\s*#\s*pragma\s+once\s*$", "", read(name), flags=re.MULTILINE)
        return _INCLUDE.sub(lambda m: expand(m.group(1)), text)

    return expand(fname)


@functools.cache
def source(fname: str) -> str:
    """Text of ``native/fname`` with local ``#include "..."`` lines expanded
    (so that NVRTC/hipRTC need no include path and a zipped package works)."""
    root = native_dir()
    return expand_includes(fname, lambda name: (root / name).read_text())


def is_hip() -> bool:
    import cupy

    return bool(cupy.cuda.runtime.is_hip)


@functools.cache
def options() -> tuple[str, ...]:
    """Compiler options, built once: C++17, no fast-math."""
    opts = ["-std=c++17"]
    if is_hip():
        opts.append("-D__HIP_PLATFORM_AMD__=1")
    return tuple(opts)


def ctype(dtype) -> str:
    """The C type of a NumPy dtype (``complex64 -> float2``)."""
    try:
        return CTYPE[np.dtype(dtype)]
    except KeyError:
        raise ValueError(f"no kernel type for dtype {np.dtype(dtype)}; supported: {sorted(map(str, CTYPE))}") from None


@functools.cache
def _module(fname: str, expr: str):
    import cupy

    return cupy.RawModule(code=source(fname), options=options(), name_expressions=(expr,))


def kernel(fname: str, name: str, *targs):
    """The kernel ``name<targs...>`` from ``native/fname``, compiled on first use.

    ``targs`` are dtypes (mapped through :data:`CTYPE`) or ints (template
    values).  Compiled lazily, once per instantiation and device (CuPy's
    RawModule cache).
    """
    parts = [ctype(a) if not isinstance(a, (int, np.integer)) else str(int(a)) for a in targs]
    expr = f"{name}<{', '.join(parts)}>"
    return _get(fname, expr)


@functools.cache
def _get(fname: str, expr: str):
    return _module(fname, expr).get_function(expr)


def warmup(names: "list[tuple]") -> None:
    """Compile the given ``(fname, name, *targs)`` instantiations now (e.g. on
    one rank per node before a barrier, so that the others hit the disk cache)."""
    for spec in names:
        kernel(*spec)


__all__ = ["CTYPE", "native_dir", "expand_includes", "source", "options", "kernel", "ctype", "is_hip", "warmup"]
