#!/bin/bash
# Products with K right-hand sides at once, both directions, the issue's four codes, at the big and the middle
# size: one `fftmatvec bench` JSON line per run appended to $1, and the GPU's clocks and power every 200 ms
# while it runs in ${1%.jsonl}-smi.csv (benchmarks/smi_log.sh).  Summarise with
# `python benchmarks/gpu_summary.py --nrhs $1` and `--smi ${1%.jsonl}-smi.csv`.
# usage: bash benchmarks/gpu_bench_nrhs.sh benchmarks/results/h200-bench-nrhs.jsonl
set -u
out=${1:-h200-bench-nrhs.jsonl}
if [ -z "${SMI_LOGGED:-}" ]; then
  SMI_LOGGED=1 SMI_INTERVAL_MS=200 exec bash "$(dirname "$0")/smi_log.sh" "${out%.jsonl}-smi.csv" bash "$0" "$out"
fi
. "$(dirname "$0")/bench_line.sh"
run() { bench_line "$out" "$@" --device gpu; }
for size in "--Nm 5000 --Nd 100 --Nt 1000 -N 20:${BIG_K:-1 2 3 4 8 16}" "--Nm 1000 --Nd 50 --Nt 500 -N 50:${MID_K:-1 4 16}"; do
  for K in ${size#*:}; do
    for code in "ddddd" "ddddd --adjoint" "dssdd" "ddssd --adjoint"; do
      run ${size%%:*} --nrhs $K --precision $code
    done
  done
done
