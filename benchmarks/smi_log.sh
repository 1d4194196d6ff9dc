#!/bin/bash
# Run a command while nvidia-smi logs the GPU's clocks, power and throttle reasons every SMI_INTERVAL_MS
# (default 100) ms into a CSV file; summarise the log with `python benchmarks/gpu_summary.py --smi FILE`.
# usage: bash benchmarks/smi_log.sh FILE.csv COMMAND [ARGS...]
set -u
log=$1
shift
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv -lms "${SMI_INTERVAL_MS:-100}" > "$log" 2> /dev/null &
smi=$!
trap 'kill $smi 2> /dev/null' EXIT
"$@"
