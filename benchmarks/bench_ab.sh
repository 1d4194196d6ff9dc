#!/bin/bash
# The fixture- and middle-size rows of gpu_bench_targets.sh with two versions
# of the package, alternated (A, tree, A, tree) on one machine: A/B of changes
# whose effect is smaller than the spread between lent machines.  A is the
# Python package of git revision $1, or of the folder $1 (holding src/ and
# native/, e.g. a `git archive` where the machine's clone lacks the revision),
# or, when $1 is an environment assignment (NAME=value), the working tree's
# run with it.  With a third argument "big" the big size's one-vector rows
# run too; with "nrhs" only the big size's complex128 adjoint with 8 and 16
# right-hand sides; with "big16" only the big `ddssd` adjoint, the big
# `ddddd` product and the latter with 16 right-hand sides; with "k16" only the
# big `dssdd` product with 16 right-hand sides, with "k16d" only the big
# `ddddd` one, with "adj" only the big `ddssd` and `ddddd` adjoints, with "adjk" only the big
# adjoints with several right-hand sides (`ddssd` with 8 and 16, `ddddd` with 16), with "adjfew" only the big
# adjoints with 3 and 4 right-hand sides (`ddssd` and `ddddd`), with "fwd2" only the `dssdd` products with 2
# and 3 right-hand sides at the big and middle sizes, with "k32" only the `dssdd` products with 20-32 right-hand
# sides at both sizes, with "normal" only `F^T F m` (`--normal`) at the fixture and middle sizes.  One
# JSON line per run appended to $2, with "source" ($1 or "tree"), "round" and "command".
# usage: bash benchmarks/bench_ab.sh e0ec1ac benchmarks/results/h200-bench-ab.jsonl
#        bash benchmarks/bench_ab.sh FFTMATVEC_L2_PREFETCH_BYTES=0 out.jsonl big
set -u
rev=$1
out=$2
rows=${3:-}
base=$(mktemp -d)
if [ -d "$rev/src" ]; then
  ln -s "$(cd "$rev" && pwd)/src" "$base/src"
else
  case $rev in
    *=*) ln -s "$PWD/src" "$base/src" ;;
    *) git archive "$rev" src native | tar -x -C "$base" ;;
  esac
fi
MID="--Nm 1000 --Nd 50 --Nt 500 -N 50"
SMALL="--Nm 289 --Nd 15 --Nt 10 -N 200"
BIG="--Nm 5000 --Nd 100 --Nt 1000 -N 20"
runs=("$SMALL --precision ddddd" "$SMALL --precision ddddd --adjoint" "$MID --precision ddddd"
      "$MID --precision ddddd --adjoint" "$MID --precision dssdd" "$MID --precision ddssd --adjoint")
[ "$rows" = big ] && runs+=("$BIG --precision ddddd" "$BIG --precision ddddd --adjoint" "$BIG --precision dssdd"
                            "$BIG --precision ddssd --adjoint")
[ "$rows" = nrhs ] && runs=("$BIG --precision ddddd --adjoint --nrhs 8" "$BIG --precision ddddd --adjoint --nrhs 16")
[ "$rows" = big16 ] && runs=("$BIG --precision ddssd --adjoint" "$BIG --precision ddddd" "$BIG --precision ddddd --nrhs 16")
[ "$rows" = k16 ] && runs=("$BIG --precision dssdd --nrhs 16")
[ "$rows" = k16d ] && runs=("$BIG --precision ddddd --nrhs 16")
[ "$rows" = adj ] && runs=("$BIG --precision ddssd --adjoint" "$BIG --precision ddddd --adjoint")
[ "$rows" = adjk ] && runs=("$BIG --precision ddssd --adjoint --nrhs 8" "$BIG --precision ddssd --adjoint --nrhs 16"
                            "$BIG --precision ddddd --adjoint --nrhs 16")
[ "$rows" = adjfew ] && runs=("$BIG --precision ddssd --adjoint --nrhs 3" "$BIG --precision ddssd --adjoint --nrhs 4"
                              "$BIG --precision ddddd --adjoint --nrhs 3" "$BIG --precision ddddd --adjoint --nrhs 4")
[ "$rows" = fwd2 ] && runs=("$BIG --precision dssdd --nrhs 2" "$BIG --precision dssdd --nrhs 3"
                            "$MID --precision dssdd --nrhs 2" "$MID --precision dssdd --nrhs 3")
[ "$rows" = k32 ] && runs=("$BIG --precision dssdd --nrhs 24" "$BIG --precision dssdd --nrhs 32"
                           "$MID --precision dssdd --nrhs 20" "$MID --precision dssdd --nrhs 32")
[ "$rows" = normal ] && runs=("$SMALL --normal --precision ddddd" "$MID --normal --precision ddddd"
                              "$MID --normal --precision dssdd --adjoint-precision ddssd")
for round in 1 2; do
  for source in "$rev" tree; do
    src=$PWD/src
    env=()
    [ "$source" = tree ] || src=$base/src
    case $source in *=*) env=("$source") ;; esac
    for args in "${runs[@]}"; do
      env "${env[@]}" PYTHONPATH=$src python3 -m fftmatvec bench $args --device gpu --json 2> /tmp/bench-ab.err |
        tail -n 1 |
        python3 -c "import json,sys; r=json.loads(sys.stdin.read()); r['source']=sys.argv[1]; r['round']=int(sys.argv[3]); r['command']=sys.argv[2]; print(json.dumps(r))" \
          "$source" "fftmatvec bench $args --device gpu --json" "$round" >> "$out" || tail -3 /tmp/bench-ab.err
    done
  done
done
rm -rf "$base"
