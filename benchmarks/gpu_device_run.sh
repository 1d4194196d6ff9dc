#!/bin/bash
# Steps to run on the GPU machine, in the repository root:
#   bash benchmarks/gpu_device_run.sh tests probe bench
# Logs go to $OUT (or /tmp/fftmatvec-out).  Needs the reference fixture copied
# to .fixtures/fftmatvec-reference (git-ignored) for the fixture test.
set -u
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
    tests-all)
      timeout 300 python3 -m pytest -q -p no:cacheprovider -rfE --timeout=120 tests/gpu tests/unit/test_native_compile.py \
        > "$OUT/tests.log" 2>&1
      echo "pytest rc=$?"; tail -3 "$OUT/tests.log"; grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -30 ;;
    probe)
      timeout 330 python3 benchmarks/gpu_probe.py --out "$OUT/probe.jsonl" > "$OUT/probe.log" 2>&1
      echo "probe rc=$?"
      python3 benchmarks/gpu_summary.py "$OUT/probe.jsonl" ;;
    probe-final)
      timeout 300 python3 benchmarks/gpu_probe.py --parts small,mid,engine,k16 --out "$OUT/h200-probe.jsonl" \
        > "$OUT/probe.log" 2>&1
      echo "probe rc=$?"
      python3 benchmarks/gpu_summary.py "$OUT/h200-probe.jsonl" ;;
    probe-graph)
      timeout 240 python3 benchmarks/gpu_probe.py --parts engine,pipeline,k16 --out "$OUT/h200-probe-graph.jsonl" \
        > "$OUT/probe.log" 2>&1
      echo "probe rc=$?"
      python3 benchmarks/gpu_summary.py "$OUT/h200-probe-graph.jsonl" ;;
    bench)
      timeout 400 bash benchmarks/gpu_bench_targets.sh "$OUT/h200-bench.jsonl" > "$OUT/bench.log" 2>&1
      echo "bench rc=$?"; python3 benchmarks/gpu_summary.py "$OUT/h200-bench.jsonl" ;;
  esac
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used,temperature.gpu --format=csv,noheader | tee -a "$OUT/smi.txt"
