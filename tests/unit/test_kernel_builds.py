"""How the native kernels are built: register targets reach the compiler (no GPU, no compiler needed)."""

import re
import sys
import types

import fftmatvec.backend.kernels as k


def test_register_targets_reach_the_compiler(monkeypatch):
    """An instantiation listed in REGISTER_TARGETS is built with --maxrregcount on the architecture the
    targets were measured on, others without, and none on another architecture or on HIP."""
    built = []

    class FakeModule:
        def __init__(self, code, options, name_expressions):
            built.append((name_expressions[0], options))

        def get_function(self, expr):
            return expr

    device = {}
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(RawModule=FakeModule))
    monkeypatch.setattr(k, "is_hip", lambda: device["hip"])
    monkeypatch.setattr(k, "compute_capability", lambda: device["arch"])
    monkeypatch.setattr(k, "REGISTER_TARGETS", {"sbgemv_fwd<float2, float2, 1, 2, 2, 1>": 48})
    listed = ("sbgemv.cu", "sbgemv_fwd", "complex64", "complex64", 1, 2, 2, 1)
    try:
        for setting in ({}, {"arch": "80"}, {"hip": True}):
            device.update({"hip": False, "arch": k.REGISTER_TARGETS_ARCH}, **setting)
            for fn in (k._module, k._get):
                fn.cache_clear()
            k.kernel(*listed)
            if not setting:
                k.kernel("sbgemv.cu", "sbgemv_fwd", "complex128", "complex128", 1, 2, 1, 1)
    finally:
        for fn in (k._module, k._get):
            fn.cache_clear()
    assert [("--maxrregcount=48" in opts) for _, opts in built] == [True, False, False, False]
    assert built[0][0] == "sbgemv_fwd<float2, float2, 1, 2, 2, 1>"


def test_register_targets_name_kernels_of_the_sources():
    """Every entry is a name expression of a kernel in native/ with a plausible register count."""
    sources = [p.read_text() for p in k.native_dir().glob("*.cu")]
    for expr, registers in k.REGISTER_TARGETS.items():
        name, args = re.fullmatch(r"(\w+)<(.*)>", expr).groups()
        assert any(re.search(rf"__global__ void {name}\(", text) for text in sources), expr
        assert all(a.strip() in k.CTYPE.values() or a.strip().isdigit() for a in args.split(","))
        assert 32 <= registers <= 255
