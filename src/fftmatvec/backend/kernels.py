"""Native CUDA/HIP kernels: where the sources are and how they are built.

The ``.cu``/``.cuh`` files live in ``native/`` at the repository root and are
shipped in the wheel as ``fftmatvec/native/``.  This module alone knows
where to find them and alone asks whether CuPy runs on HIP.  Nothing is
compiled at import: :func:`kernel` builds one :class:`cupy.RawModule` per
template instantiation on first use (CuPy then caches the binary on disk
under ``CUPY_CACHE_DIR``), so only the instantiations that the precision
codes in use need are ever compiled.  A caller that knows which kernels will
launch soon hands their choice to :func:`build_ahead`, which builds them in
background threads, several at once (NVRTC releases the GIL); :func:`kernel`
then waits for a build in flight instead of starting its own.
"""

from __future__ import annotations

import functools
import os
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .threads import cores_per_rank

CTYPE = {
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
    np.dtype(np.complex64): "float2",
    np.dtype(np.complex128): "double2",
}

#: The real dtype of each complex kernel type, and the complex dtype of each real one.
REAL_OF = {np.dtype(np.complex64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.float64)}
COMPLEX_OF = {real: cplx for cplx, real in REAL_OF.items()}

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


# Registers per thread that the compiler is asked to fit an instantiation in
# (NVRTC --maxrregcount; not on HIP).  Left to itself, ptxas (CUDA 13.0,
# sm_90) fits the one-vector product kernels in fewer registers than they
# need to keep their loads in flight, and issues the loads of Fhat one or two
# at a time between the multiply-adds: the blocked complex128 adjoint at the
# big size took 2022-2051 us with its own 44 registers, 1869-1904 us with a
# target of 48 or 64 (`python benchmarks/gpu_probe.py --parts regs,regsloads`;
# benchmarks/results/h200-probe-regs-stop26*.jsonl, h200-probe-regsloads-stop26*.jsonl,
# docs/gpu-kernels.md).  Entries: the instantiations the engine launches for
# one vector at the big and middle sizes where a target was faster than the
# compiler's own count by more than the rounds' spread (times in the
# comments: with the target, against without); the others are left to the
# compiler.  They apply on devices of compute capability
# REGISTER_TARGETS_ARCH only, the one they were measured on.
REGISTER_TARGETS_ARCH = "90"
REGISTER_TARGETS = {
    "sbgemv_adj<double2, double2, 8, 1, 1>": 64,  # big complex128: 1894.9 against 2050.7 us
    "sbgemv_adj<float2, float2, 8, 2, 1>": 64,  # big complex64: 961.6 against 969.7 us
    "sbgemv_adj<float2, double2, 8, 2, 1>": 64,  # big, complex128 vector: 961.9 against 969.7 us
    "sbgemv_adj_flat<double2, double2, 4, 1>": 48,  # middle complex128: 95.3 against 96.5 us
    "sbgemv_adj_flat<float2, double2, 8, 2>": 48,  # middle, complex128 vector: 51.5 against 53.6 us
    "sbgemv_fwd<double2, double2, 2, 2, 1, 1>": 64,  # big complex128: 1801.7 against 1917.9 us
    "sbgemv_fwd<float2, float2, 2, 2, 2, 1>": 64,  # big complex64: 905.0 against 973.2 us
    "sbgemv_fwd<float2, double2, 2, 2, 2, 1>": 64,  # big, complex128 vector: 919.0 against 1005.6 us
    "sbgemv_fwd<double2, double2, 2, 4, 1, 1>": 64,  # middle complex128: 94.9 against 100.0 us
    "sbgemv_fwd<float2, float2, 1, 2, 2, 1>": 48,  # middle complex64: 50.4 against 52.1 us
    "sbgemv_fwd<float2, double2, 1, 2, 2, 1>": 48,  # middle, complex128 vector: 52.5 against 56.2 us
}


def compute_capability() -> str:
    """The current device's compute capability, e.g. ``"90"``."""
    import cupy

    return cupy.cuda.Device().compute_capability


def _raw_module(fname: str, expr: str, registers: int, arch: str | None):
    import cupy

    opts = options()
    if registers and not is_hip() and compute_capability() == REGISTER_TARGETS_ARCH:
        opts += (f"--maxrregcount={registers}",)
    if arch:  # CuPy appends the device's own -arch; NVRTC given both compiles for the architecture-specific one
        opts += (f"-arch={arch}",)
    return cupy.RawModule(code=source(fname), options=opts, name_expressions=(expr,))


def kernel(fname: str, name: str, *targs, arch: str | None = None):
    """The kernel ``name<targs...>`` from ``native/fname``, compiled on first use.

    ``targs`` are dtypes (mapped through :data:`CTYPE`) or ints (template
    values).  ``arch`` compiles for that target instead of the device's own
    (``"sm_90a"`` for Hopper's architecture-specific instructions such as
    ``wgmma``).  Built once per instantiation, register target
    (:data:`REGISTER_TARGETS`, on the architecture they were measured on),
    target and device; a build that :func:`build_ahead` started is waited
    for.  Safe to call from several threads.
    """
    expr = name_expression(name, *targs)
    return _function((fname, expr, REGISTER_TARGETS.get(expr, 0), arch))


def name_expression(name: str, *targs) -> str:
    """The instantiation ``name<targs...>`` as NVRTC names it (``targs`` as for :func:`kernel`);
    ``name`` alone for a kernel that is not a template."""
    if not targs:
        return name
    parts = [ctype(a) if not isinstance(a, (int, np.integer)) else str(int(a)) for a in targs]
    return f"{name}<{', '.join(parts)}>"


# Built kernels (_built, read without the lock: the path of every launch that looks its kernel up) and builds
# in flight (_building), by device and (file, name expression, register target, arch).  A failed build is
# not kept: its waiters get its error, and the next request tries again.
_built: dict[tuple, Any] = {}
_building: dict[tuple, Future] = {}
_lock = threading.Lock()
_builders: ThreadPoolExecutor | None = None


def _current_device() -> int:
    import cupy

    return int(cupy.cuda.runtime.getDevice())


def _function(build: tuple):
    """The function of ``build`` (file, expression, registers, arch) on the current device: built here unless
    it is built or being built (then that build is waited for)."""
    key = (_current_device(), build)
    fn = _built.get(key)
    if fn is not None:
        return fn
    with _lock:
        slot = _building.get(key)
        mine = slot is None and key not in _built
        if mine:
            slot = _building[key] = Future()
    if slot is None:  # built between the look-up and the lock
        return _built[key]
    if mine:
        try:
            fname, expr, registers, arch = build
            fn = _raw_module(fname, expr, registers, arch).get_function(expr)
        except BaseException as exc:
            slot.set_exception(exc)
        else:
            with _lock:
                _built[key] = fn
            slot.set_result(fn)
        with _lock:
            del _building[key]
    return slot.result()


def build_ahead(choose: Callable[[], Any]) -> None:
    """Run ``choose``, a function that picks kernels by calling :func:`kernel`
    (and may query the ones it gets, e.g. their registers), in a background
    thread on the current device; return at once.  The builds it starts are
    waited for by whoever asks for those kernels next.  Its errors are not
    raised here: a build that fails fails again where its kernel is needed.
    Nothing runs on HIP, where builds in threads have not been tried."""
    global _builders
    if is_hip():
        return
    device = _current_device()
    with _lock:
        if _builders is None:
            _builders = ThreadPoolExecutor(cores_per_rank(), thread_name_prefix="fftmatvec-build")
            # at exit, drop the builds not started: the executor's own exit hook (registered the same way,
            # earlier, so run later) would otherwise run them all first, seconds after an error or Ctrl-C
            threading._register_atexit(functools.partial(_builders.shutdown, wait=False, cancel_futures=True))
        builders = _builders

    def run() -> None:
        import cupy

        with cupy.cuda.Device(device):
            choose()

    builders.submit(run)


def allow_shared_memory(fn, smem: int) -> None:
    """Let kernel ``fn`` take ``smem`` bytes of dynamic shared memory.  A
    kernel must opt in where its static and dynamic shared memory together
    exceed 48 KB (up to the device's per-block opt-in limit); the attribute it
    starts with is what its static shared memory leaves of the 48 KB."""
    if smem and fn.max_dynamic_shared_size_bytes < smem:
        fn.max_dynamic_shared_size_bytes = smem


__all__ = ["CTYPE", "REAL_OF", "COMPLEX_OF", "REGISTER_TARGETS", "REGISTER_TARGETS_ARCH", "compute_capability",
           "native_dir", "expand_includes", "source", "options", "kernel", "name_expression", "build_ahead", "ctype",
           "is_hip", "allow_shared_memory"]
