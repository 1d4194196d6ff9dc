#!/bin/bash
# The fixture- and middle-size rows of gpu_bench_targets.sh with the Python
# package of git revision $1 and with the working tree's, alternated
# (rev, tree, rev, tree) on one machine: A/B of host-side changes, whose
# effect is smaller than the spread between lent machines.  One JSON line per
# run appended to $2, with "source" (the revision or "tree") and "command".
# usage: bash benchmarks/bench_ab.sh e0ec1ac benchmarks/results/h200-bench-ab.jsonl
set -u
rev=$1
out=$2
base=$(mktemp -d)
git archive "$rev" src native | tar -x -C "$base"
MID="--Nm 1000 --Nd 50 --Nt 500 -N 50"
SMALL="--Nm 289 --Nd 15 --Nt 10 -N 200"
for round in 1 2; do
  for source in "$rev" tree; do
    src=$PWD/src
    [ "$source" = tree ] || src=$base/src
    for args in "$SMALL --precision ddddd" "$SMALL --precision ddddd --adjoint" "$MID --precision ddddd" \
                "$MID --precision ddddd --adjoint" "$MID --precision dssdd" "$MID --precision ddssd --adjoint"; do
      PYTHONPATH=$src python3 -m fftmatvec bench $args --device gpu --json 2> /tmp/bench-ab.err | tail -n 1 |
        python3 -c "import json,sys; r=json.loads(sys.stdin.read()); r['source']=sys.argv[1]; r['round']=int(sys.argv[3]); r['command']=sys.argv[2]; print(json.dumps(r))" \
          "$source" "fftmatvec bench $args --device gpu --json" "$round" >> "$out" || tail -3 /tmp/bench-ab.err
    done
  done
done
rm -rf "$base"
