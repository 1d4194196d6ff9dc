#!/bin/bash
# The GPU performance targets through the bench CLI; one JSON line per run appended to $1.
# usage: bash benchmarks/gpu_bench_targets.sh benchmarks/results/h200-bench.jsonl
set -u
out=${1:-h200-bench.jsonl}
. "$(dirname "$0")/bench_line.sh"
run() { bench_line "$out" "$@" --device gpu; }
BIG="--Nm 5000 --Nd 100 --Nt 1000 -N 20 --compare-naive"
MID="--Nm 1000 --Nd 50 --Nt 500 -N 50 --compare-naive --check"
SMALL="--Nm 289 --Nd 15 --Nt 10 -N 200 --compare-naive --check"
run $BIG --precision ddddd
run $BIG --precision ddddd --adjoint
run $BIG --precision dssdd
run $BIG --precision ddssd --adjoint
run $BIG --precision ddddd --nrhs 16
run $BIG --precision dssdd --nrhs 16
run $MID --precision ddddd
run $MID --precision ddddd --adjoint
run $MID --precision dssdd
run $MID --precision ddssd --adjoint
run $SMALL --precision ddddd
run $SMALL --precision ddddd --adjoint
# Beside the targets: F^T F m, a conjugate gradient iteration's product (the forward, then the adjoint)
run $BIG --normal --precision ddddd
run $BIG --normal --precision dssdd --adjoint-precision ddssd
run $MID --normal --precision ddddd
run $MID --normal --precision dssdd --adjoint-precision ddssd
run $SMALL --normal --precision ddddd
