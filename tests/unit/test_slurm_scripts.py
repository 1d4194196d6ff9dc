"""The Slurm job scripts of ``scripts/slurm/`` (docs/slurm.md) keep working.

Each script runs with bash, at small sizes, within a time limit:

* in local mode (``LAUNCHER="mpiexec -n 2" DEVICE=cpu``), the documented way
  to try a script without Slurm;
* in Slurm mode, with ``SLURM_*`` variables set and stub ``srun`` and
  ``module`` commands on PATH: the stub records the ``srun`` options (one
  task per GPU, GPU and CPU binding) and runs the command under ``mpiexec``.

and their ``#SBATCH`` headers are checked against what ``sbatch`` accepts:
directives before the first command, known long options, nothing after the
value.  Runs in the serial suite (it starts its own ``mpiexec``).
"""

from __future__ import annotations

import csv
import re
import subprocess
import time
from pathlib import Path

import pytest
from shelltools import REPO, require_mpi, shell_env

pytestmark = [pytest.mark.mpi_skip, pytest.mark.timeout(300)]

SLURM_DIR = REPO / "scripts" / "slurm"
SCRIPTS = sorted(SLURM_DIR.glob("*.sh"))
INVERT = [s for s in SCRIPTS if s.name.endswith("-invert.sh")]
SWEEP = [s for s in SCRIPTS if s.name.endswith("-bench-sweep.sh")]
LIMIT_S = 120

#: sbatch long options these scripts may use (subset of ``sbatch --help``).
SBATCH_OPTIONS = {
    "job-name", "account", "partition", "qos", "nodes", "time", "ntasks", "ntasks-per-node",
    "gpus-per-task", "gpus-per-node", "gpus", "cpus-per-task", "output", "error", "constraint",
    "exclusive", "mem", "core-spec", "threads-per-core", "gpu-bind", "mail-type", "mail-user",
}


def _ids(paths):
    return [p.name for p in paths]


def test_the_four_scripts_exist():
    assert {p.name for p in SCRIPTS} >= {"nvidia-invert.sh", "nvidia-bench-sweep.sh",
                                         "amd-invert.sh", "amd-bench-sweep.sh"}


@pytest.mark.parametrize("script", SCRIPTS, ids=_ids(SCRIPTS))
def test_header_is_valid_for_sbatch(script):
    lines = script.read_text().splitlines()
    assert lines[0] == "#!/bin/bash"
    first_command = next(i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#"))
    directives = [(i, line) for i, line in enumerate(lines) if line.startswith("#SBATCH")]
    assert directives, "no #SBATCH lines"
    assert all(i < first_command for i, _ in directives), "sbatch ignores #SBATCH lines after the first command"
    assert not any(line.lstrip().startswith("#SBATCH") and not line.startswith("#SBATCH") for line in lines)
    options = {}
    for _, line in directives:
        match = re.fullmatch(r"#SBATCH --([a-z-]+)(?:=(\S+))?", line)
        assert match, f"not a plain '#SBATCH --option=value' line (no trailing comments): {line!r}"
        assert match.group(1) in SBATCH_OPTIONS, f"unknown sbatch option in {line!r}"
        options[match.group(1)] = match.group(2)
    gpus = "8" if script.name.startswith("amd") else "4"
    assert options["ntasks-per-node"] == gpus and options["gpus-per-task"] == "1"
    for key in ("account", "nodes", "time", "cpus-per-task", "output"):
        assert key in options
    assert re.fullmatch(r"\d+:\d\d:\d\d", options["time"])
    text = "\n".join(lines)
    for marker in ("EDIT 1", "EDIT 2", "EDIT 3"):
        assert text.count(marker) >= 2, f"{marker} is not both announced at the top and marked in place"
    assert "set -euo pipefail" in text
    subprocess.run(["bash", "-n", str(script)], check=True)


@pytest.mark.parametrize("script", SCRIPTS, ids=_ids(SCRIPTS))
def test_environment_and_binding(script):
    text = script.read_text()
    for needle in ("--gpus-per-task=1", "--gpu-bind=closest", '--cpus-per-task="$CPUS_PER_TASK"',
                   "export OMP_NUM_THREADS=", "export CUPY_CACHE_DIR=", "FFTMATVEC_CUDA_AWARE_MPI", "srun "):
        assert needle in text, needle
    if script.name.startswith("nvidia"):
        assert "export NCCL_NVLS_ENABLE=0" in text
    else:
        for needle in ("MPICH_GPU_SUPPORT_ENABLED=1", "NCCL_SOCKET_IFNAME", "FI_CXI_", "module load"):
            assert needle in text, needle


@pytest.mark.parametrize("script", SCRIPTS, ids=_ids(SCRIPTS))
def test_outside_slurm_without_launcher_is_a_clear_error(script, tmp_path):
    env = shell_env(tmp_path)
    proc = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "LAUNCHER" in proc.stderr


# ---------------------------------------------------------------- helpers


def _small_config(tmp: Path) -> Path:
    """inputs/tsunami-1d.toml at a tenth of the cost, writing under ``tmp``."""
    text = (REPO / "inputs" / "tsunami-1d.toml").read_text()
    text = text.replace("../out/tsunami-1d", str(tmp / "run"))
    text = re.sub(r"(?m)^nt = \d+", "nt = 60", text)
    text = re.sub(r"(?m)^param_nx = \d+", "param_nx = 40", text)
    path = tmp / "small.toml"
    path.write_text(text)
    return path


def _run(script: Path, tmp: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(["bash", str(script)], cwd=tmp, env=env, capture_output=True, text=True,
                              timeout=LIMIT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{script.name} ran longer than {LIMIT_S} s; output so far: {exc.stdout!r} {exc.stderr!r}")
    seconds = time.perf_counter() - t0
    assert proc.returncode == 0, f"{script.name} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    assert seconds < LIMIT_S
    return proc


def _stub_slurm(tmp: Path, env: dict[str, str]) -> dict[str, str]:
    """Slurm-mode environment: SLURM_* set, ``srun`` and ``module`` stubs on PATH."""
    bindir = tmp / "bin"
    srun = bindir / "srun"
    srun.write_text(
        "#!/bin/bash\n"
        'echo "srun $*" >> "$STUB_LOG"\n'
        "n=1\n"
        "while [ $# -gt 0 ]; do\n"
        '    case $1 in\n'
        '        --ntasks=*) n=${1#--ntasks=}; shift ;;\n'
        "        --*) shift ;;\n"
        "        *) break ;;\n"
        "    esac\n"
        "done\n"
        "for v in $(compgen -v | grep '^SLURM_'); do unset \"$v\"; done\n"
        'exec mpiexec -n "$n" "$@"\n')
    module = bindir / "module"
    module.write_text('#!/bin/sh\necho "module $*" >> "$STUB_LOG"\n')
    for stub in (srun, module):
        stub.chmod(0o755)
    env = dict(env, SLURM_JOB_ID="4242", SLURM_JOB_NUM_NODES="1", SLURM_CPUS_PER_TASK="1",
               GPUS_PER_NODE="2", DEVICE="cpu", VENV=str(tmp / "no-venv"), STUB_LOG=str(tmp / "stub.log"))
    return env


def _check_inversion(out: Path, model: Path) -> None:
    for name in ("map.h5", "qoi_mean.h5", "qoi_std.h5", "summary.json", "job.txt", "config.toml"):
        assert (out / name).is_file(), name
    assert (model / "p2o" / "binary" / "meta_adj").is_file()


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


# ---------------------------------------------------------------- local mode


@pytest.mark.parametrize("script", INVERT, ids=_ids(INVERT))
def test_invert_local_mode(script, tmp_path):
    require_mpi()
    config = _small_config(tmp_path)
    env = dict(shell_env(tmp_path), LAUNCHER="mpiexec -n 2", DEVICE="cpu", CONFIG=str(config),
               OUT_DIR=str(tmp_path / "results"), GRID="1x2")
    proc = _run(script, tmp_path, env)
    _check_inversion(tmp_path / "results", tmp_path / "run" / "model")
    assert "launcher: mpiexec -n 2" in (tmp_path / "results" / "job.txt").read_text()
    assert "results in" in proc.stdout


@pytest.mark.parametrize("script", SWEEP, ids=_ids(SWEEP))
def test_sweep_local_mode(script, tmp_path):
    require_mpi()
    out = tmp_path / "results"
    env = dict(shell_env(tmp_path), LAUNCHER="mpiexec -n 2", DEVICE="cpu", NM="24", ND="4", NT="16", REPS="2",
               LOCAL_GRIDS="1x1,1x2,2x2", OUT_DIR=str(out))
    proc = _run(script, tmp_path, env)
    rows = _csv_rows(out / "scaling.csv")
    assert sorted((r["sweep"], r["grid"], r["Nm"]) for r in rows) == [
        ("strong", "1x1", "24"), ("strong", "1x2", "24"), ("weak", "1x1", "24"), ("weak", "1x2", "48")]
    assert all(r["efficiency"] == "1" for r in rows if r["ranks"] == "1")
    assert (out / "scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "skipped" in proc.stdout and "2x2" in proc.stdout


# ---------------------------------------------------------------- Slurm mode, stub srun


@pytest.mark.parametrize("script", INVERT, ids=_ids(INVERT))
def test_invert_slurm_mode(script, tmp_path):
    require_mpi()
    config = _small_config(tmp_path)
    env = _stub_slurm(tmp_path, dict(shell_env(tmp_path), CONFIG=str(config)))
    _run(script, tmp_path, env)
    out = tmp_path / "out" / "invert-4242"  # the default OUT_DIR
    _check_inversion(out, tmp_path / "run" / "model")
    log = (tmp_path / "stub.log").read_text()
    srun = [line for line in log.splitlines() if line.startswith("srun ")]
    assert len(srun) == 1
    for option in ("--nodes=1", "--ntasks=2", "--ntasks-per-node=2", "--gpus-per-task=1", "--gpu-bind=closest",
                   "--cpus-per-task=1", "fftmatvec invert", "--device cpu", f"--out {out.relative_to(tmp_path)}"):
        assert option in srun[0], option
    if script.name.startswith("amd"):
        assert "module load" in log and "rocm" in log


@pytest.mark.parametrize("script", SWEEP, ids=_ids(SWEEP))
def test_sweep_slurm_mode(script, tmp_path):
    require_mpi()
    env = _stub_slurm(tmp_path, dict(shell_env(tmp_path), SWEEPS="strong", NODE_COUNTS="1 2", GRID_ROWS="1 2 4",
                                     NM="24", ND="4", NT="16", REPS="2"))
    proc = _run(script, tmp_path, env)
    assert "skipping 2 nodes" in proc.stderr
    srun = [line for line in (tmp_path / "stub.log").read_text().splitlines() if line.startswith("srun ")]
    assert len(srun) == 1 and "--grids 1x2,2x1" in srun[0] and "--ntasks=2" in srun[0]
    assert "--gpus-per-task=1" in srun[0] and "--gpu-bind=closest" in srun[0]
    rows = _csv_rows(tmp_path / "out" / "sweep-4242" / "scaling.csv")
    assert sorted(r["grid"] for r in rows) == ["1x2", "2x1"] and {r["ranks"] for r in rows} == {"2"}
