#!/bin/bash
# fftmatvec: the Bayesian inversion of a TOML config on an AMD GPU cluster of
# the Frontier class (8 GCDs per node, ROCm, RCCL, Cray MPICH on Slingshot),
# one MPI rank per GCD.  docs/slurm.md.
#
#   sbatch scripts/slurm/amd-invert.sh                    # submit from the repository root
#   LAUNCHER="mpiexec -n 4" DEVICE=cpu bash scripts/slurm/amd-invert.sh   # locally, no Slurm
#
# Edit three places, each marked EDIT:
#   EDIT 1  the #SBATCH lines: account, partition, nodes, time;
#   EDIT 2  the run settings: CONFIG, GENERATE, OUT_DIR (any of them can also be
#           given in the environment: sbatch --export=ALL,CONFIG=my.toml ...);
#   EDIT 3  site_setup: the modules and the Python environment fftmatvec is in.
#
# EDIT 1: account, partition, nodes, time (one MPI rank per GCD, 8 per node;
# 7 cores each: Frontier keeps 8 of 64 cores for the system).
#SBATCH --job-name=fftmatvec-invert
#SBATCH --account=CHANGE_ME
#SBATCH --partition=batch
#SBATCH --nodes=1
#SBATCH --time=00:30:00
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=7
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
# gpu (CuPy for ROCm) or cpu; empty GRID: the config's [grid] shape.
DEVICE=${DEVICE:-gpu}
GRID=${GRID:-}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
# Local mode: a launcher that replaces srun, e.g. "mpiexec -n 4" (with DEVICE=cpu).
LAUNCHER=${LAUNCHER:-}

# ---- EDIT 3: the site: modules and the Python environment -------------------
site_setup() {
    # mpi4py built against Cray MPICH (no `mpi` extra), CuPy built for ROCm:
    #   MPICC="cc -shared" pip install --no-binary mpi4py mpi4py
    #   HCC_AMDGPU_TARGET=gfx90a CUPY_INSTALL_USE_HIP=1 ROCM_HOME=$ROCM_PATH pip install cupy
    set +u  # module scripts read unset variables
    module load PrgEnv-gnu cray-mpich craype-accel-amd-gfx90a rocm cray-python
    set -u
    local venv=${VENV:-$HOME/venvs/fftmatvec}
    if [ -f "$venv/bin/activate" ]; then
        # shellcheck disable=SC1091
        . "$venv/bin/activate"
    fi
}

if [ -z "$LAUNCHER" ]; then
    if [ -z "${SLURM_JOB_ID:-}" ]; then
        echo "not inside a Slurm job: submit with sbatch, or set LAUNCHER (e.g. LAUNCHER=\"mpiexec -n 4\" DEVICE=cpu)" >&2
        exit 2
    fi
    site_setup
fi

# ---- the environment RCCL, ROCm and Cray MPICH need --------------------------
CPUS_PER_TASK=${SLURM_CPUS_PER_TASK:-1}
export OMP_NUM_THREADS=$CPUS_PER_TASK
# RCCL reads the NCCL_* variables.  Bootstrap over the Slingshot NICs, and let
# RCCL use GPU-direct RDMA through libfabric (with the aws-ofi-rccl plugin on
# LD_LIBRARY_PATH; without it RCCL falls back to TCP sockets).
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-hsn0}
export NCCL_NET_GDR_LEVEL=${NCCL_NET_GDR_LEVEL:-3}
export NCCL_CROSS_NIC=${NCCL_CROSS_NIC:-1}
# export LD_LIBRARY_PATH=/path/to/aws-ofi-rccl/lib:$LD_LIBRARY_PATH
# libfabric (CXI provider) settings for GPU buffers on Slingshot.
export FI_CXI_ATS=0
export FI_CXI_DISABLE_HOST_REGISTER=1
export FI_MR_CACHE_MONITOR=userfaultfd
export FI_CXI_DEFAULT_CQ_SIZE=131072
# CuPy's kernel cache on a filesystem every node sees (on Frontier: Orion,
# e.g. /lustre/orion/PROJECT/scratch/$USER/cupy-cache), compiled once, reused.
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-$HOME/.cupy/kernel_cache}
# Grid collectives: auto = RCCL (through cupy.cuda.nccl) when every rank has
# its own GCD, else MPI (docs/grid.md); nccl or mpi force one.
export FFTMATVEC_COLLECTIVES=${FFTMATVEC_COLLECTIVES:-auto}
if [ "$DEVICE" = gpu ]; then
    # GPU-aware Cray MPICH: device buffers go to MPI directly.  mpi4py is not
    # linked with the GTL library that needs, so preload it; without it MPICH
    # aborts at start-up, so fall back to staging through the host.
    gtl=${CRAY_MPICH_ROOTDIR:-/nonexistent}/gtl/lib/libmpi_gtl_hsa.so
    if [ -f "$gtl" ]; then
        export LD_PRELOAD=$gtl${LD_PRELOAD:+:$LD_PRELOAD}
        export MPICH_GPU_SUPPORT_ENABLED=1
        export FFTMATVEC_CUDA_AWARE_MPI=${FFTMATVEC_CUDA_AWARE_MPI:-1}
    else
        export MPICH_GPU_SUPPORT_ENABLED=0
        export FFTMATVEC_CUDA_AWARE_MPI=0
    fi
fi

if [ -z "$LAUNCHER" ]; then
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
    env | grep -E '^(NCCL_|FI_|MPICH_|CUPY_|OMP_|FFTMATVEC_|LD_PRELOAD)' | sort || true
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
