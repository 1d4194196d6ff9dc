#!/bin/bash
# One `fftmatvec bench` row in fresh processes, alternately placed by the OS
# and bound to the CPU cores $2 (taskset), $3 rounds: whether the spread of
# the waited-for time between processes (the same code, the same machine)
# comes from where the host thread runs.  One JSON line per process appended
# to $1, with "cpus" ($2, or "any"), "round" and "command".
# usage: bash benchmarks/bench_pinning.sh OUT.jsonl CORES ROUNDS BENCH-OPTIONS...
#   bash benchmarks/bench_pinning.sh out.jsonl 0 6 --Nm 1000 --Nd 50 --Nt 500 -N 200 --precision ddssd --adjoint
set -u
out=$1
cores=$2
rounds=$3
shift 3
for round in $(seq 1 "$rounds"); do
  for cpus in any "$cores"; do
    bind=()
    [ "$cpus" = any ] || bind=(taskset -c "$cpus")
    "${bind[@]}" python3 -m fftmatvec bench "$@" --device gpu --json 2> /tmp/bench-pinning.err | tail -n 1 |
      python3 -c "import json,sys; r=json.loads(sys.stdin.read()); r.update(cpus=sys.argv[1], round=int(sys.argv[2]), command=sys.argv[3]); print(json.dumps(r))" \
        "$cpus" "$round" "${bind[*]} fftmatvec bench $* --device gpu --json" >> "$out" || tail -3 /tmp/bench-pinning.err
  done
done
