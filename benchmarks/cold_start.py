"""Wall time of a command on a cold kernel cache, for package sources in turns.

Each run gets an empty ``CUPY_CACHE_DIR`` (so every kernel it launches is
compiled, as on a machine's first run) and ``PYTHONPATH`` set to one of the
``--src`` folders; the sources take turns within each round.  One JSON line
per run goes to stdout (and to ``--out``)::

    python benchmarks/cold_start.py --src new=src --src old=/tmp/old/src --rounds 2 \\
        -- python -m fftmatvec precision --Nm 3000 --Nd 80 --Nt 500 --tol 1e-7 --device gpu

A folder other than this checkout's ``src`` should run with this checkout's
kernels: set ``FFTMATVEC_NATIVE_DIR`` to its ``native/``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--src", action="append", required=True, metavar="LABEL=DIR",
                   help="package sources to run the command with (repeatable)")
    p.add_argument("--rounds", type=int, default=2, help="runs of each source (default 2)")
    p.add_argument("--out", help="also append the JSON lines to this file")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("give the command after --")
    sources = [s.split("=", 1) for s in args.src]
    for round_ in range(args.rounds):
        for label, folder in sources:
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, CUPY_CACHE_DIR=cache, PYTHONPATH=os.path.abspath(folder))
                t0 = time.perf_counter()
                done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                seconds = time.perf_counter() - t0
                kernels = sum(len(files) for _, _, files in os.walk(cache))
            line = json.dumps({"what": "cold_start", "src": label, "round": round_, "seconds": round(seconds, 2),
                               "rc": done.returncode, "cached_files": kernels, "command": " ".join(command)})
            print(line, flush=True)
            if done.returncode:
                print(done.stderr[-2000:], file=sys.stderr)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(line + "\n")


if __name__ == "__main__":
    main()
