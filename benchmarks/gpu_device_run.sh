#!/bin/bash
# Steps to run on the GPU machine, in the repository root:
#   bash benchmarks/gpu_device_run.sh tests probe bench
# Logs go to $OUT (or /tmp/fftmatvec-out).  Needs the reference fixture copied
# to .fixtures/fftmatvec-reference (git-ignored) for the fixture test.
# Steps with MPI need pytest-mpi: carry it as a wheel in .whl/ and run the
# `wheels` step first.  With pytest-xdist and execnet there too, `tests-all`
# runs in several processes.
set -u
M="mpiexec --allow-run-as-root --oversubscribe"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FFTMATVEC_FIXTURES=$PWD/.fixtures/fftmatvec-reference
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/cupy-cache}
OUT=${OUT:-/tmp/fftmatvec-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used,temperature.gpu --format=csv,noheader | tee -a "$OUT/smi.txt"
for step in "$@"; do
  echo "=== $step $(date +%T)"
  case $step in
    tests)
      timeout 300 python3 -m pytest -q -p no:cacheprovider -rfE -x --timeout=120 tests/gpu tests/unit/test_native_compile.py \
        > "$OUT/tests.log" 2>&1
      echo "pytest rc=$?"; grep -E "passed|failed|error" "$OUT/tests.log" | tail -3
      grep -E "^(FAILED|ERROR)|Error|assert" "$OUT/tests.log" | head -30 ;;
    tests-all)  # in TEST_WORKERS processes (default 8) where pytest-xdist is there: they compile the kernels at once
      workers=$(python3 -c "import xdist" 2> /dev/null && echo "-n ${TEST_WORKERS:-8}")
      timeout ${TESTS_TIMEOUT:-480} python3 -m pytest -q -p no:cacheprovider -rfE --timeout=120 $workers tests/gpu \
        tests/unit/test_native_compile.py tests/unit/test_reduce_chunks.py > "$OUT/tests.log" 2>&1
      echo "pytest rc=$?"; tail -3 "$OUT/tests.log"; grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -30 ;;
    wheels)
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=$PYTHONPATH:/tmp/site; echo "wheels rc=$?" ;;
    tests-quick)  # the chunked product and the kernels it uses, a few operator checks
      timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE --timeout=140 tests/gpu/test_gpu_chunks.py \
        tests/unit/test_reduce_chunks.py "tests/gpu/test_gpu.py::test_core_shapes_vs_dense_and_cpu" \
        "tests/gpu/test_gpu.py::test_graph_replay_equals_eager" > "$OUT/tests-quick.log" 2>&1
      echo "pytest rc=$?"; tail -2 "$OUT/tests-quick.log"; grep -E "^(FAILED|ERROR)" "$OUT/tests-quick.log" | head -20 ;;
    mpi-gpu)  # GPU grids under MPI: NCCL forced on 1 rank, auto and forced on 2 ranks of one GPU.  The first run
      # compiles the `auto` test's kernels: on a fresh machine after tests-all it took 84 s and once passed 90
      # (benchmarks/results/h200-stop66-mpi-gpu.log), hence the longer limits
      for spec in "1 nccl" "2 auto" "2 nccl"; do
        set -- $spec
        echo "--- mpiexec -n $1, FFTMATVEC_COLLECTIVES=$2" >> "$OUT/mpi-gpu.log"
        FFTMATVEC_COLLECTIVES=$2 timeout 260 $M -n $1 python3 -m pytest -q -s -p no:cacheprovider -rfEs --with-mpi \
          --timeout=240 tests/gpu/test_gpu_mpi.py >> "$OUT/mpi-gpu.log" 2>&1
        echo "mpi-gpu -n $1 $2 rc=$?"; grep -a -E "passed|failed|error" "$OUT/mpi-gpu.log" | tail -1
      done
      grep -a -E "^(FAILED|ERROR)|rank [0-9]: " "$OUT/mpi-gpu.log" | head -20 ;;
    chunks)  # chunked forward product: engine cost of chunking; 1x2 grid (2 ranks, 1 GPU, MPI) with overlap
      timeout 120 python3 benchmarks/gpu_probe.py --parts chunks,midvar --out "$OUT/h200-probe-chunks.jsonl" \
        > "$OUT/probe-chunks.log" 2>&1
      echo "probe rc=$?"; python3 benchmarks/gpu_summary.py "$OUT/h200-probe-chunks.jsonl"
      for C in 1 4; do
        FFTMATVEC_REDUCE_CHUNKS=$C timeout 60 $M -n 2 python3 -m fftmatvec bench --Nm 1000 --Nd 50 --Nt 500 -N 30 \
          --grid 1x2 --device gpu --json > /tmp/bench-c.txt 2>> "$OUT/bench-chunks.err"
        echo "bench 1x2 chunks=$C rc=$?"
        tail -n 1 /tmp/bench-c.txt | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); r['reduce_chunks']=$C; print(json.dumps(r))" \
          >> "$OUT/h200-bench-chunks.jsonl"
      done
      python3 benchmarks/gpu_summary.py "$OUT/h200-bench-chunks.jsonl" ;;
    precision)
      timeout ${PREC_TIMEOUT:-200} python3 -m fftmatvec precision --Nm 5000 --Nd 100 --Nt 1000 --tol 1e-7 --device gpu \
        --probes ${PREC_PROBES:-3} --repeats ${PREC_REPEATS:-7} --plot "$OUT/pareto-h200.png" --json \
        > "$OUT/precision-h200.txt" 2> "$OUT/precision-h200.err"
      echo "precision rc=$?"; tail -c 1500 "$OUT/precision-h200.err" ;;
    probe)
      timeout 330 python3 benchmarks/gpu_probe.py --out "$OUT/probe.jsonl" > "$OUT/probe.log" 2>&1
      echo "probe rc=$?"
      python3 benchmarks/gpu_summary.py "$OUT/probe.jsonl" ;;
    probe-final)
      timeout 300 python3 benchmarks/gpu_probe.py --parts small,mid,engine,k16 --out "$OUT/h200-probe.jsonl" \
        > "$OUT/probe.log" 2>&1
      echo "probe rc=$?"
      python3 benchmarks/gpu_summary.py "$OUT/h200-probe.jsonl" ;;
    profile)  # fused vs cuFFT transforms, device time per kernel, host time of the operator
      timeout ${PROFILE_TIMEOUT:-240} python3 benchmarks/gpu_probe.py --parts ${PROFILE_PARTS:-fft,kernels,host} \
        --out "$OUT/h200-profile.jsonl" > "$OUT/profile.log" 2>&1
      echo "profile rc=$?"; python3 benchmarks/gpu_summary.py "$OUT/h200-profile.jsonl"
      grep -a -A16 "Ordered by" "$OUT/profile.log" | head -60 ;;
    probe-graph)
      timeout 240 python3 benchmarks/gpu_probe.py --parts engine,pipeline,k16 --out "$OUT/h200-probe-graph.jsonl" \
        > "$OUT/probe.log" 2>&1
      echo "probe rc=$?"
      python3 benchmarks/gpu_summary.py "$OUT/h200-probe-graph.jsonl" ;;
    ncu-fft)  # what bounds the fused transforms: shared-memory wavefronts and bank conflicts, stalls, issue
      m=l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
      m=$m,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
      m=$m,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum
      m=$m,l1tex__throughput.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed
      m=$m,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
      m=$m,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
      m=$m,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active
      for r in barrier short_scoreboard mio_throttle long_scoreboard lg_throttle; do
        m=$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
      done
      for spec in "5000 1000 1 float64" "5000 1000 1 float32" "1000 1000 16 float64" "1000 1000 16 float32"; do
        echo "=== $spec"
        timeout 100 ncu --metrics $m -k regex:"rfft_pad|irfft_unpad" -c 2 python3 benchmarks/fused_fft_run.py $spec 2 2>&1 \
          | grep -v "^==PROF==\|WARNING"
      done > "$OUT/ncu-fft.txt" 2>&1
      echo "ncu-fft rc=$?"; grep -E "===|duration" "$OUT/ncu-fft.txt" ;;
    bench)
      timeout ${BENCH_TIMEOUT:-400} bash benchmarks/gpu_bench_targets.sh "$OUT/h200-bench.jsonl" > "$OUT/bench.log" 2>&1
      echo "bench rc=$?"; python3 benchmarks/gpu_summary.py "$OUT/h200-bench.jsonl" ;;
  esac
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used,temperature.gpu --format=csv,noheader | tee -a "$OUT/smi.txt"
