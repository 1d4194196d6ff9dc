"""How long NVRTC takes to build the package's kernels, one after another or in threads.

``record OUT -- ARGS``: runs ``fftmatvec ARGS`` in this process on an empty
``CUPY_CACHE_DIR``, with nothing built ahead, and writes to ``OUT`` (JSON)
each kernel instantiation that took more than 5 ms to get (its build), with
those seconds: ``[file, name expression, register target, arch, seconds]``.

``build LIST THREADS [OPTION ...]``: on an empty cache, builds every
instantiation of ``LIST`` in ``THREADS`` threads (NVRTC releases the GIL),
with extra NVRTC options if given, and prints one JSON line with the wall
time.  ``batch LIST THREADS``: the same with one module per file, register
target and arch holding all of its instantiations (one parse of the source
for several kernels)::

    python benchmarks/compile_threads.py record /tmp/list.json -- precision --Nm 3000 --Nd 80 --Nt 500 \\
        --tol 1e-7 --device gpu --probes 1 --repeats 3
    python benchmarks/compile_threads.py build /tmp/list.json 8

Each mode needs a fresh process (CuPy keeps built modules in memory).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor


def record(out: str, args: list[str]) -> None:
    from fftmatvec.backend import kernels
    from fftmatvec.cli import main

    builds = []
    engine_function = kernels._function

    def timed(build: tuple):
        t0 = time.perf_counter()
        fn = engine_function(build)
        if time.perf_counter() - t0 > 0.005:
            builds.append([*build, time.perf_counter() - t0])
        return fn

    kernels._function = timed
    kernels.build_ahead = lambda choose: None  # each kernel built where it is first needed, timed alone
    t0 = time.perf_counter()
    try:
        main(args)
    except SystemExit:
        pass
    with open(out, "w") as f:
        json.dump(builds, f)
    print(f"{time.perf_counter() - t0:.1f} s in all; {len(builds)} builds, {sum(b[-1] for b in builds):.1f} s",
          file=sys.stderr)


def build(mode: str, listed: str, threads: int, extra: list[str]) -> None:
    import cupy

    from fftmatvec.backend import kernels

    cupy.zeros(1)  # the context, outside the timing
    builds = json.load(open(listed))
    if extra:
        base = kernels.options()
        kernels.options = lambda: base + tuple(extra)
    if mode == "batch":
        groups: dict[tuple, list[str]] = {}
        for fname, expr, registers, arch, _ in builds:
            groups.setdefault((fname, registers, arch), []).append(expr)

        def one(group: tuple) -> None:
            fname, registers, arch = group
            opts = kernels.options() + ((f"--maxrregcount={registers}",) if registers else ())
            opts += (f"-arch={arch}",) if arch else ()
            module = cupy.RawModule(code=kernels.source(fname), options=opts, name_expressions=tuple(groups[group]))
            for expr in groups[group]:
                module.get_function(expr)
        items: list = list(groups)
    else:
        def one(item: list) -> None:
            kernels._function(tuple(item[:4]))
        items = builds
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, items))
    print(json.dumps({"mode": "one" if mode == "build" else mode, "threads": threads, "extra": extra,
                      "n": len(builds), "groups": len(items), "seconds": round(time.perf_counter() - t0, 2)}))


if __name__ == "__main__":
    os.environ["CUPY_CACHE_DIR"] = tempfile.mkdtemp()
    if sys.argv[1] == "record":
        record(sys.argv[2], sys.argv[4:] if sys.argv[3:4] == ["--"] else sys.argv[3:])
    else:
        build(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:])
