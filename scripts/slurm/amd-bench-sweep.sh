#!/bin/bash
# fftmatvec: matvec scaling sweep (weak and strong, over node counts and grid
# shapes) on an AMD GPU cluster of the Frontier class (8 GCDs per node, ROCm,
# RCCL, Cray MPICH on Slingshot), one MPI rank per GCD.  Writes scaling.csv
# and scaling.png into OUT_DIR.  docs/slurm.md.
#
#   sbatch scripts/slurm/amd-bench-sweep.sh            # submit from the repository root
#   LAUNCHER="mpiexec -n 4" DEVICE=cpu bash scripts/slurm/amd-bench-sweep.sh   # locally, no Slurm
#
# Edit three places, each marked EDIT:
#   EDIT 1  the #SBATCH lines: account, partition, the largest node count, time;
#   EDIT 2  the sweep: OUT_DIR, NODE_COUNTS, GRID_ROWS, sizes (any of them can
#           also be given in the environment: sbatch --export=ALL,NM=8000 ...);
#   EDIT 3  site_setup: the modules and the Python environment fftmatvec is in.
#
# EDIT 1: account, partition, nodes (the largest count of NODE_COUNTS), time
# (one MPI rank per GCD, 8 per node; 7 cores each: Frontier keeps 8 of 64 cores
# for the system).
#SBATCH --job-name=fftmatvec-sweep
#SBATCH --account=CHANGE_ME
#SBATCH --partition=batch
#SBATCH --nodes=8
#SBATCH --time=01:00:00
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=7
#SBATCH --output=fftmatvec-sweep-%j.out

set -euo pipefail

# ---- EDIT 2: the sweep and where the results go -------------------------------
OUT_DIR=${OUT_DIR:-out/sweep-${SLURM_JOB_ID:-local}}
SWEEPS=${SWEEPS:-"weak strong"}
# One srun per node count, each with GPUS_PER_NODE ranks per node.
NODE_COUNTS=${NODE_COUNTS:-"1 2 4 8"}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
# Grid rows pr to try at each rank count P: grids pr x P/pr (pr must divide P).
GRID_ROWS=${GRID_ROWS:-"1 2 4 8 16"}
# Sizes: strong scaling keeps Nm fixed (the total); weak scaling uses Nm per rank.
# Nm=5000, Nd=100, Nt=1000 is 8 GB of Fhat in complex128 (a GCD has 64 GB).
NM=${NM:-5000}
ND=${ND:-100}
NT=${NT:-1000}
PRECISION=${PRECISION:-ddddd}
REPS=${REPS:-20}
DEVICE=${DEVICE:-gpu}
# Local mode: a launcher that replaces srun, e.g. "mpiexec -n 4" (with DEVICE=cpu);
# its one launch runs every grid of LOCAL_GRIDS that fits.
LAUNCHER=${LAUNCHER:-}
LOCAL_GRIDS=${LOCAL_GRIDS:-1x1,1x2,2x1,1x4,2x2}

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

if [ -z "$LAUNCHER" ] && [ -z "${SLURM_JOB_ID:-}" ]; then
    echo "not inside a Slurm job: submit with sbatch, or set LAUNCHER (e.g. LAUNCHER=\"mpiexec -n 4\" DEVICE=cpu)" >&2
    exit 2
fi
if [ -z "$LAUNCHER" ]; then
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

command -v fftmatvec >/dev/null || { echo "fftmatvec is not on PATH (EDIT 3: site_setup)" >&2; exit 2; }

mkdir -p "$OUT_DIR"
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(hostname)"
    echo "job: ${SLURM_JOB_ID:-local} nodes: ${SLURM_JOB_NUM_NODES:-1}"
    echo "sweeps: $SWEEPS  node counts: $NODE_COUNTS  grid rows: $GRID_ROWS  launcher: ${LAUNCHER:-srun}"
    echo "sizes: Nm=$NM Nd=$ND Nt=$NT precision=$PRECISION reps=$REPS device=$DEVICE"
    env | grep -E '^(NCCL_|FI_|MPICH_|CUPY_|OMP_|FFTMATVEC_|LD_PRELOAD)' | sort || true
} >"$OUT_DIR/job.txt"

# The grids pr x P/pr of P ranks, for pr in GRID_ROWS dividing P, comma-separated.
grids_for() {
    local p=$1 pr out=""
    for pr in $GRID_ROWS; do
        if [ "$pr" -le "$p" ] && [ $((p % pr)) -eq 0 ]; then
            out="${out:+$out,}${pr}x$((p / pr))"
        fi
    done
    echo "$out"
}

# One launch of the sweep: the launcher is the array "launch"; each launch
# merges its rows into scaling.csv and redraws scaling.png from all of them.
run_sweep() {  # run_sweep SWEEP GRIDS
    "${launch[@]}" fftmatvec bench --sweep "$1" --grids "$2" \
        --Nm "$NM" --Nd "$ND" --Nt "$NT" --precision "$PRECISION" -N "$REPS" --device "$DEVICE" \
        --csv "$OUT_DIR/scaling.csv" --plot "$OUT_DIR/scaling.png"
}

for sweep in $SWEEPS; do
    if [ -n "$LAUNCHER" ]; then
        read -r -a launch <<<"$LAUNCHER"
        run_sweep "$sweep" "$LOCAL_GRIDS"
        continue
    fi
    for nodes in $NODE_COUNTS; do
        if [ "$nodes" -gt "$SLURM_JOB_NUM_NODES" ]; then
            echo "skipping $nodes nodes: the job has $SLURM_JOB_NUM_NODES (EDIT 1: --nodes)" >&2
            continue
        fi
        ranks=$((nodes * GPUS_PER_NODE))
        launch=(srun --nodes="$nodes" --ntasks="$ranks" --ntasks-per-node="$GPUS_PER_NODE"
                --gpus-per-task=1 --gpu-bind=closest --cpus-per-task="$CPUS_PER_TASK" --cpu-bind=cores)
        run_sweep "$sweep" "$(grids_for "$ranks")"
    done
done
echo "results in $OUT_DIR: scaling.csv, scaling.png, job.txt"
