"""How the native kernels are built: register targets reach the compiler (no GPU, no compiler needed)."""

import contextlib
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor

import pytest

import fftmatvec.backend.kernels as k


@pytest.fixture
def fake_cupy(monkeypatch):
    """A stand-in for CuPy whose RawModule calls ``compile(expr)`` (set by the test) in get_function,
    with empty build caches and no background pool, which is shut down afterwards."""
    state = types.SimpleNamespace(compile=lambda expr: ("function", expr), built=[])

    class FakeModule:
        def __init__(self, code, options, name_expressions):
            state.built.append((name_expressions[0], options))

        def get_function(self, expr):
            return state.compile(expr)

    cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0),
                                 Device=lambda device: contextlib.nullcontext())
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(RawModule=FakeModule, cuda=cuda))
    monkeypatch.setattr(k, "is_hip", lambda: False)
    monkeypatch.setattr(k, "compute_capability", lambda: k.REGISTER_TARGETS_ARCH)
    monkeypatch.setattr(k, "_built", {})
    monkeypatch.setattr(k, "_building", {})
    monkeypatch.setattr(k, "_builders", None)
    yield state
    if k._builders is not None:
        k._builders.shutdown(wait=True)


def test_register_targets_reach_the_compiler(fake_cupy, monkeypatch):
    """An instantiation listed in REGISTER_TARGETS is built with --maxrregcount on the architecture the
    targets were measured on, others without, and none on another architecture or on HIP."""
    monkeypatch.setattr(k, "REGISTER_TARGETS", {"sbgemv_fwd<float2, float2, 1, 2, 2, 1>": 48})
    listed = ("sbgemv.cu", "sbgemv_fwd", "complex64", "complex64", 1, 2, 2, 1)
    for setting in ({}, {"arch": "80"}, {"hip": True}):
        monkeypatch.setattr(k, "is_hip", lambda: setting.get("hip", False))
        monkeypatch.setattr(k, "compute_capability", lambda: setting.get("arch", k.REGISTER_TARGETS_ARCH))
        monkeypatch.setattr(k, "_built", {})
        k.kernel(*listed)
        if not setting:
            k.kernel("sbgemv.cu", "sbgemv_fwd", "complex128", "complex128", 1, 2, 1, 1)
    built = fake_cupy.built
    assert [("--maxrregcount=48" in opts) for _, opts in built] == [True, False, False, False]
    assert built[0][0] == "sbgemv_fwd<float2, float2, 1, 2, 2, 1>"


def test_a_kernel_asked_for_by_many_threads_is_built_once(fake_cupy):
    """Threads that ask for one instantiation while it is being built wait for that build."""
    started = threading.Event()

    def slow(expr):
        started.set()
        time.sleep(0.05)
        return ("function", expr)

    fake_cupy.compile = slow
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda i: k.kernel("fft.cu", "rfft_pad", "float64", i % 2), range(16)))
    assert sorted(e for e, _ in fake_cupy.built) == ["rfft_pad<double, 0>", "rfft_pad<double, 1>"]
    assert {id(f) for f in got[0::2]} == {id(got[0])} and {id(f) for f in got[1::2]} == {id(got[1])}


def test_build_ahead_builds_at_once_in_the_background(fake_cupy, monkeypatch):
    """build_ahead returns before its builds end; they run at the same time (each of two builds waits
    until both have started), and kernel() then gets their functions without building again."""
    monkeypatch.setattr(k, "cores_per_rank", lambda: 2)
    both_started = threading.Barrier(2, timeout=10)
    release = threading.Event()

    def together(expr):
        both_started.wait()  # BrokenBarrierError unless the other build runs at the same time
        release.wait(10)
        return ("function", expr)

    fake_cupy.compile = together
    for i in range(2):
        k.build_ahead(lambda i=i: k.kernel("direct.cu", "btt_direct", i))
    assert not release.is_set() and len(k._built) == 0  # nothing waited for the builds
    release.set()
    got = [k.kernel("direct.cu", "btt_direct", i) for i in range(2)]
    assert got == [("function", "btt_direct<0>"), ("function", "btt_direct<1>")]
    assert len(fake_cupy.built) == 2


def test_a_failed_build_fails_where_its_kernel_is_needed_and_is_tried_again(fake_cupy):
    """An error in a background build is not raised by build_ahead; kernel() raises it, and a later
    call builds again."""
    broken = {"yes": True}

    def build(expr):
        if broken["yes"]:
            raise RuntimeError(f"cannot compile {expr}")
        return ("function", expr)

    fake_cupy.compile = build
    k.build_ahead(lambda: k.kernel("sbgemv.cu", "sum_splits", "complex64"))
    k._builders.shutdown(wait=True)
    k._builders = None
    with pytest.raises(RuntimeError, match="cannot compile sum_splits<float2>"):
        k.kernel("sbgemv.cu", "sum_splits", "complex64")
    broken["yes"] = False
    assert k.kernel("sbgemv.cu", "sum_splits", "complex64") == ("function", "sum_splits<float2>")
    assert len(fake_cupy.built) == 3  # in the background, where needed, and again


def test_nothing_is_built_ahead_on_hip(fake_cupy, monkeypatch):
    monkeypatch.setattr(k, "is_hip", lambda: True)
    k.build_ahead(lambda: k.kernel("direct.cu", "btt_direct", 1))
    assert k._builders is None and fake_cupy.built == []


def test_register_targets_name_kernels_of_the_sources():
    """Every entry is a name expression of a kernel in native/ with a plausible register count."""
    sources = [p.read_text() for p in k.native_dir().glob("*.cu")]
    for expr, registers in k.REGISTER_TARGETS.items():
        name, args = re.fullmatch(r"(\w+)<(.*)>", expr).groups()
        assert any(re.search(rf"__global__ void {name}\(", text) for text in sources), expr
        assert all(a.strip() in k.CTYPE.values() or a.strip().isdigit() for a in args.split(","))
        assert 32 <= registers <= 255


def test_builds_not_started_are_dropped_at_exit(tmp_path):
    """A process that ends with builds queued does not run them first: of 40 builds of 0.2 s queued on one
    thread, only those started before the end run (each writes a line; without the exit hook all 40 do)."""
    script = tmp_path / "queued.py"
    script.write_text(textwrap.dedent(f"""
        import contextlib, sys, time, types
        cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDevice=lambda: 0),
                                     Device=lambda device: contextlib.nullcontext())
        sys.modules["cupy"] = types.SimpleNamespace(cuda=cuda)
        import fftmatvec.backend.kernels as k
        k.is_hip = lambda: False
        k.cores_per_rank = lambda: 1

        def build():
            time.sleep(0.2)
            with open({str(tmp_path / "ran.txt")!r}, "a") as f:
                f.write("built\\n")

        for _ in range(40):
            k.build_ahead(build)
        time.sleep(0.1)
    """))
    subprocess.run([sys.executable, str(script)], check=True, timeout=60,
                   env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    ran = (tmp_path / "ran.txt").read_text().count("built")
    assert ran <= 2, ran
