"""Every kernel source in native/ compiles standalone with nvcc (skipped without nvcc).

The sources are self-contained (float2/double2, own complex helpers, no CuPy
or thrust headers), so this needs only the CUDA compiler.  Each ``.cu`` file
is compiled with ``-DFFTMATVEC_INSTANTIATE``, which turns on explicit template
instantiations at its end; the header is checked through the files that
include it.  The same text goes through NVRTC at run time via
``fftmatvec.backend.kernels.source`` (includes expanded), which is checked too.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import benchmark_module

NATIVE = Path(__file__).resolve().parents[2] / "native"
NVCC = shutil.which("nvcc")
SOURCES = sorted(NATIVE.glob("*.cu"))

pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")


def _nvcc(src: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [NVCC, "-std=c++17", "-DFFTMATVEC_INSTANTIATE", "--ptx", "-o", str(tmp_path / (src.stem + ".ptx")),
           *extra, str(src)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def test_sources_exist():
    names = {p.name for p in NATIVE.iterdir()}
    assert {"sbgemv.cu", "glue.cu", "fftmatvec_common.cuh"} <= names


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_compiles_with_nvcc(src, tmp_path):
    res = _nvcc(src, tmp_path, "-arch=sm_90", "-Werror=all-warnings")
    assert res.returncode == 0, res.stderr
    ptx = (tmp_path / (src.stem + ".ptx")).read_text()
    assert ".entry" in ptx  # the explicit instantiations produced kernels


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_expanded_source_compiles(src, tmp_path):
    """The text handed to NVRTC (includes inlined) compiles on its own."""
    from fftmatvec.backend import kernels

    flat = tmp_path / src.name
    flat.write_text(kernels.source(src.name))
    res = _nvcc(flat, tmp_path)
    assert res.returncode == 0, res.stderr
    assert '#include "' not in flat.read_text()


def test_kernels_module_imports_without_cupy():
    """Nothing is compiled (or CuPy imported) when the kernels module is imported."""
    import sys

    import fftmatvec.backend.kernels as k

    assert (k.native_dir() / "sbgemv.cu").is_file()
    assert k.ctype("complex64") == "float2" and k.ctype("float64") == "double"
    with pytest.raises(ValueError, match="no kernel type"):
        k.ctype("int32")
    probe = "import sys, fftmatvec.backend.kernels, fftmatvec.backend.gpu; print('cupy' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "False"


@pytest.mark.parametrize("N", [8, 64])
def test_wgmma_rate_kernels_compile(N, tmp_path):
    """benchmarks/wgmma_rate.py's kernels (built at run time for sm_90a) compile to wgmma products."""
    rate = benchmark_module("wgmma_rate")
    src = tmp_path / "rate.cu"
    src.write_text(rate.source(N, 2))
    res = _nvcc(src, tmp_path, "-arch=sm_90a")
    assert res.returncode == 0, res.stderr
    assert f"wgmma.mma_async.sync.aligned.m64n{N}k8" in (tmp_path / "rate.ptx").read_text()


def test_k16_bound_kernels_compile(tmp_path):
    """benchmarks/k16_bound.py's stand-in kernels compile, each instantiation it launches."""
    bound = benchmark_module("k16_bound")
    src = tmp_path / "k16_bound.cu"
    taken = ", ".join(f"(void*)&{name}" for name in bound.KERNELS)
    src.write_text(bound.SRC + f"\nvoid* const* instantiated() {{ static void* const k[] = {{{taken}}}; return k; }}\n")
    res = _nvcc(src, tmp_path, "-arch=sm_90", "-Werror=all-warnings")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "k16_bound.ptx").read_text().count(".entry") == len(bound.KERNELS)


@pytest.mark.parametrize("size", [(1000, 100, 5000), (500, 50, 1000)], ids=["big", "middle"])
def test_k16_fused_kernels_compile(size, tmp_path):
    """benchmarks/k16_fused.py's kernels compile, each instantiation it launches at the big and middle sizes
    on an H200's 132 multiprocessors."""
    fused = benchmark_module("k16_fused")
    layout = fused.Layout(*size, blocks=132, threads=256, series=8, stages=3)
    src = tmp_path / "k16_fused.cu"
    taken = ", ".join(f"(void*)&{name}" for name in layout.kernels())
    src.write_text(fused.source() + "\nvoid* const* instantiated() { static void* const k[] = {" + taken
                   + "}; return k; }\n")
    res = _nvcc(src, tmp_path, "-arch=sm_90a", "-Werror=all-warnings")  # (sm_90a: k16_ws's setmaxnreg)
    assert res.returncode == 0, res.stderr
    ptx = (tmp_path / "k16_fused.ptx").read_text()
    entries = [line for line in ptx.splitlines() if ".entry" in line]  # (fft.cu's own instantiations too)
    assert sum(any(k in e for k in ("k16_fused", "k16_ws", "k16_pack", "dmma_rate", "rows_read")) for e in entries) \
        == len(layout.kernels())
    assert "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64" in ptx
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32" in ptx


def _ptxas_report(source: str, kernel: str, tmp_path: Path) -> str:
    """What ptxas says (-v) of `kernel` alone, compiled for sm_90a from `source`."""
    src = tmp_path / "one.cu"
    src.write_text(source + "\nvoid* const* instantiated() { static void* const k[] = {(void*)&" + kernel
                   + "}; return k; }\n")
    cmd = [NVCC, "-std=c++17", "-arch=sm_90a", "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "one.cubin"), str(src)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return res.stderr


def test_k16_ws_products_take_the_transforms_registers(tmp_path):
    """ptxas honours k16_ws's setmaxnreg: at the big size, the default setting with 128 threads transforming (launch
    bound 384 threads: 168 registers a thread) compiles its products at 200 registers without spilling, while the
    same kernel with its products at the launch bound's 168 registers spills (they hold 128 registers of sums)."""
    fused = benchmark_module("k16_fused")
    default = fused.Layout(1000, 100, 5000, blocks=132, threads=256, series=8, stages=3)
    ((label, setting),) = [(label, setting) for label, setting in default.ws.items() if setting[3] == 128]
    assert setting[3:7] == (128, 1, 104, 200)  # (threads that transform, teams, their registers, the products')
    capped = fused.Layout(1000, 100, 5000, blocks=132, threads=256, series=8, stages=3,
                          ws=(setting[:5] + (168, 168) + setting[7:],))
    given = _ptxas_report(fused.source(), default.name(label), tmp_path)
    held = _ptxas_report(fused.source(), capped.name("ws"), tmp_path)
    for report in (given, held):
        assert "C7508" not in report, report  # ('setmaxnreg' ignored)
        assert "Used 168 registers" in report, report
    spilled = [int(re.search(r"(\d+) bytes spill stores", report).group(1)) for report in (given, held)]
    assert spilled[0] == 0 and spilled[1] > 0, (given, held)


def test_wgmma_kernel_compiles_for_sm90a(tmp_path):
    """sbgemm_wg_pipe's warpgroup MMA is built only for sm_90a (its body is
    empty for other targets, as in the tests above), so it is compiled here
    too, to the tensor core's instructions."""
    res = _nvcc(NATIVE / "sbgemm.cu", tmp_path, "-arch=sm_90a", "-Werror=all-warnings")
    assert res.returncode == 0, res.stderr
    ptx = (tmp_path / "sbgemm.ptx").read_text()
    assert "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32" in ptx


def test_wgmma_products_stay_pipelined(tmp_path):
    """ptxas keeps sbgemm_wg_pipe's warpgroup products in flight together: it serializes them (C7514) where other
    instructions read a set of their sums while products run, as a form with two sets of sums did (stop 45), and
    the kernel fits its registers without spilling."""
    from fftmatvec.backend import kernels

    report = _ptxas_report(kernels.source("sbgemm.cu"), "sbgemm_wg_pipe<3, 4, 2>", tmp_path)
    assert "sbgemm_wg_pipe" in report, report
    assert "C7514" not in report, report
    assert re.search(r"\b0 bytes spill stores", report), report
