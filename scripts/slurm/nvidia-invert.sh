#!/bin/bash
# fftmatvec: the Bayesian inversion of a TOML config on an NVIDIA GPU cluster
# (4 GPUs per node, CUDA, NCCL), one MPI rank per GPU.  docs/slurm.md.
#
#   sbatch scripts/slurm/nvidia-invert.sh                 # submit from the repository root
#   LAUNCHER="mpiexec -n 4" DEVICE=cpu bash scripts/slurm/nvidia-invert.sh   # locally, no Slurm
#
# Edit three places, each marked EDIT:
#   EDIT 1  the #SBATCH lines: account, partition, nodes, time;
#   EDIT 2  the run settings: CONFIG, GENERATE, OUT_DIR (any of them can also be
#           given in the environment: sbatch --export=ALL,CONFIG=my.toml ...);
#   EDIT 3  site_setup: the modules and the Python environment fftmatvec is in.
#
# EDIT 1: account, partition, nodes, time (one MPI rank per GPU, 4 per node).
#SBATCH --job-name=fftmatvec-invert
#SBATCH --account=CHANGE_ME
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --time=00:30:00
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=16
#SBATCH --output=fftmatvec-invert-%j.out

set -euo pipefail

# ---- EDIT 2: what to run and where the results go ---------------------------
# The inversion config (docs/inversion.md); relative paths in it are relative to it.
CONFIG=${CONFIG:-inputs/tsunami-1d.toml}
# 1: write the model of the config's [model] table first (fftmatvec generate, into
# its [generate] dir), 0: the matrices and data named in [operator]/[data] exist.
GENERATE=${GENERATE:-1}
# Results (map.h5, qoi_mean.h5, qoi_std.h5, summary.json, plots) and the job record.
OUT_DIR=${OUT_DIR:-out/invert-${SLURM_JOB_ID:-local}}
# gpu (CuPy) or cpu; empty GRID: the config's [grid] shape.
DEVICE=${DEVICE:-gpu}
GRID=${GRID:-}
GPUS_PER_NODE=${GPUS_PER_NODE:-4}
# Local mode: a launcher that replaces srun, e.g. "mpiexec -n 4" (with DEVICE=cpu).
LAUNCHER=${LAUNCHER:-}

# ---- EDIT 3: the site: modules and the Python environment -------------------
site_setup() {
    # mpi4py must be built against the MPI that srun starts (no `mpi` extra):
    #   module load gcc cuda/12 openmpi   (or your site's MPI)
    #   pip install --no-binary mpi4py mpi4py && pip install -e ".[cuda12]"
    # module load gcc cuda/12.4 openmpi/4.1
    local venv=${VENV:-$HOME/venvs/fftmatvec}
    if [ -f "$venv/bin/activate" ]; then
        # shellcheck disable=SC1091
        . "$venv/bin/activate"
    fi
}

# ---- the environment NCCL, CUDA and the MPI library need ---------------------
CPUS_PER_TASK=${SLURM_CPUS_PER_TASK:-1}
export OMP_NUM_THREADS=$CPUS_PER_TASK
# Keep NVLink multicast (NVLS) off: a program using it can take a shared node's
# GPUs out of service, and fftmatvec's small reductions gain nothing from it.
export NCCL_NVLS_ENABLE=0
# NCCL's bootstrap interface, if it picks the wrong one (e.g. ib0, eth0, hsn):
# export NCCL_SOCKET_IFNAME=ib0
# CuPy compiles the native kernels once and caches them: on a filesystem every
# node sees, so the ranks of later jobs find them compiled.
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-$HOME/.cupy/kernel_cache}
# Grid collectives: auto = NCCL when every rank has its own GPU, else MPI
# (docs/grid.md); nccl or mpi force one.
export FFTMATVEC_COLLECTIVES=${FFTMATVEC_COLLECTIVES:-auto}
# 1: hand device buffers to a CUDA-aware MPI (Open MPI + UCX built with CUDA);
# 0: stage the (small) messages through the host, which works with any MPI.
export FFTMATVEC_CUDA_AWARE_MPI=${FFTMATVEC_CUDA_AWARE_MPI:-0}

if [ -z "$LAUNCHER" ]; then
    if [ -z "${SLURM_JOB_ID:-}" ]; then
        echo "not inside a Slurm job: submit with sbatch, or set LAUNCHER (e.g. LAUNCHER=\"mpiexec -n 4\" DEVICE=cpu)" >&2
        exit 2
    fi
    site_setup
    RANKS=$((SLURM_JOB_NUM_NODES * GPUS_PER_NODE))
    launch=(srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks="$RANKS" --ntasks-per-node="$GPUS_PER_NODE"
            --gpus-per-task=1 --gpu-bind=closest --cpus-per-task="$CPUS_PER_TASK" --cpu-bind=cores)
else
    read -r -a launch <<<"$LAUNCHER"
fi
command -v fftmatvec >/dev/null || { echo "fftmatvec is not on PATH (EDIT 3: site_setup)" >&2; exit 2; }

mkdir -p "$OUT_DIR"
cp "$CONFIG" "$OUT_DIR/config.toml"
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(hostname)"
    echo "job: ${SLURM_JOB_ID:-local} nodes: ${SLURM_JOB_NUM_NODES:-1}"
    echo "launcher: ${launch[*]}"
    echo "config: $CONFIG  device: $DEVICE  grid: ${GRID:-from the config}"
    env | grep -E '^(NCCL_|FI_|MPICH_|UCX_|CUPY_|OMP_|FFTMATVEC_)' | sort || true
} >"$OUT_DIR/job.txt"

if [ "$GENERATE" = 1 ]; then
    # one process: the model is built with SciPy on the CPU
    fftmatvec generate "$CONFIG"
fi

args=(invert "$CONFIG" --out "$OUT_DIR" --device "$DEVICE")
if [ -n "$GRID" ]; then
    args+=(--grid "$GRID")
fi
"${launch[@]}" fftmatvec "${args[@]}"
echo "results in $OUT_DIR"
