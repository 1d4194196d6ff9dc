#!/bin/bash
# fftmatvec: matvec scaling sweep (weak and strong, over node counts and grid
# shapes) on an NVIDIA GPU cluster (4 GPUs per node, CUDA, NCCL), one MPI rank
# per GPU.  Writes scaling.csv and scaling.png into OUT_DIR.  docs/slurm.md.
#
#   sbatch scripts/slurm/nvidia-bench-sweep.sh            # submit from the repository root
#   LAUNCHER="mpiexec -n 4" DEVICE=cpu bash scripts/slurm/nvidia-bench-sweep.sh   # locally, no Slurm
#
# Edit three places, each marked EDIT:
#   EDIT 1  the #SBATCH lines: account, partition, the largest node count, time;
#   EDIT 2  the sweep: OUT_DIR, NODE_COUNTS, GRID_ROWS, sizes (any of them can
#           also be given in the environment: sbatch --export=ALL,NM=8000 ...);
#   EDIT 3  site_setup: the modules and the Python environment fftmatvec is in.
#
# EDIT 1: account, partition, nodes (the largest count of NODE_COUNTS), time.
#SBATCH --job-name=fftmatvec-sweep
#SBATCH --account=CHANGE_ME
#SBATCH --partition=gpu
#SBATCH --nodes=4
#SBATCH --time=01:00:00
#SBATCH --ntasks-per-node=4
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=16
#SBATCH --output=fftmatvec-sweep-%j.out

set -euo pipefail

# ---- EDIT 2: the sweep and where the results go -------------------------------
OUT_DIR=${OUT_DIR:-out/sweep-${SLURM_JOB_ID:-local}}
SWEEPS=${SWEEPS:-"weak strong"}
# One srun per node count, each with GPUS_PER_NODE ranks per node.
NODE_COUNTS=${NODE_COUNTS:-"1 2 4"}
GPUS_PER_NODE=${GPUS_PER_NODE:-4}
# Grid rows pr to try at each rank count P: grids pr x P/pr (pr must divide P).
GRID_ROWS=${GRID_ROWS:-"1 2 4 8"}
# Sizes: strong scaling keeps Nm fixed (the total); weak scaling uses Nm per rank.
# Nm=5000, Nd=100, Nt=1000 is 8 GB of Fhat in complex128.
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
# CuPy's kernel cache on a filesystem every node sees (compiled once, reused).
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-$HOME/.cupy/kernel_cache}
# Grid collectives: auto = NCCL when every rank has its own GPU, else MPI
# (docs/grid.md); nccl or mpi force one.
export FFTMATVEC_COLLECTIVES=${FFTMATVEC_COLLECTIVES:-auto}
# 1: hand device buffers to a CUDA-aware MPI; 0: stage through the host.
export FFTMATVEC_CUDA_AWARE_MPI=${FFTMATVEC_CUDA_AWARE_MPI:-0}

if [ -z "$LAUNCHER" ] && [ -z "${SLURM_JOB_ID:-}" ]; then
    echo "not inside a Slurm job: submit with sbatch, or set LAUNCHER (e.g. LAUNCHER=\"mpiexec -n 4\" DEVICE=cpu)" >&2
    exit 2
fi
if [ -z "$LAUNCHER" ]; then
    site_setup
fi
command -v fftmatvec >/dev/null || { echo "fftmatvec is not on PATH (EDIT 3: site_setup)" >&2; exit 2; }

mkdir -p "$OUT_DIR"
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(hostname)"
    echo "job: ${SLURM_JOB_ID:-local} nodes: ${SLURM_JOB_NUM_NODES:-1}"
    echo "sweeps: $SWEEPS  node counts: $NODE_COUNTS  grid rows: $GRID_ROWS  launcher: ${LAUNCHER:-srun}"
    echo "sizes: Nm=$NM Nd=$ND Nt=$NT precision=$PRECISION reps=$REPS device=$DEVICE"
    env | grep -E '^(NCCL_|FI_|MPICH_|UCX_|CUPY_|OMP_|FFTMATVEC_)' | sort || true
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
