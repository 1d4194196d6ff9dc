# Sourced by the GPU bench scripts.  bench_line FILE ARGS...: run `fftmatvec bench ARGS --json` and append its
# JSON line to FILE with the command ("command") and the time it ended ("finished"); on failure, print the
# error's last lines, append nothing and return 1.
bench_line() {
  local out=$1
  shift
  echo "+ fftmatvec bench $* --json" >&2
  if ! python3 -m fftmatvec bench "$@" --json > /tmp/bench-one.txt 2> /tmp/bench-one.err; then
    tail -5 /tmp/bench-one.err >&2
    return 1
  fi
  cat /tmp/bench-one.txt >&2
  tail -n 1 /tmp/bench-one.txt | python3 -c "import json,sys,time; r=json.loads(sys.stdin.read()); r['command']=sys.argv[1]; r['finished']=time.strftime('%Y/%m/%d %H:%M:%S'); print(json.dumps(r))" \
    "fftmatvec bench $* --json" >> "$out"
}
