"""Time a ``cg-parameter`` iteration of the inversion (one ``F^T F`` product
and two Matérn prior square roots, plus the solver's vector updates) with the
vectors on the host or on the operator's device, and the rank-``--rank`` QoI
band's low-rank posterior (``2 (rank + 10)`` applications of the
prior-preconditioned Hessian).  A random decaying ``F`` of the 2-D example's
size on a Matérn prior grid; one JSON line per placement to ``--out``.

``--parts`` adds the median host and device times of the iteration's parts
(the prior's square root, ``F^T F``, the whole Hessian application, an inner
product, the updates; ``cupyx.profiler.benchmark`` for device vectors, the
host clock for host ones): where the device is idle the host is the bound.

``--vectors host`` with ``--device gpu`` is how ``fftmatvec invert`` ran
before stop 62: the prior and the solver on the host, each product copying
its input to the GPU and its result back.  Under ``mpiexec`` with
``--proc-grid PRxPC`` the products run on that grid of ranks (one GPU a rank
with ``--device gpu``) and rank 0 writes the lines.

    python benchmarks/inversion_iteration.py --device gpu --vectors host device --out FILE
    python benchmarks/inversion_iteration.py --device gpu --rank 0 --iterations 20 --parts --out FILE
    mpiexec -n 2 python benchmarks/inversion_iteration.py --device gpu --proc-grid 1x2 --rank 0 --out FILE
"""

import argparse
import platform
import time

import numpy as np
from prior_sqrt import emit

from fftmatvec import BTTOperator, ReplicatedOperator
from fftmatvec.grid import ProcessGrid
from fftmatvec.backend.arrays import to_host
from fftmatvec.inversion import LowRankPosterior, MaternPrior, WhiteNoise, dot, map_cg_parameter
from fftmatvec.inversion.solve import misfit_hessian


def part_times(fn, xp, repeats=200):
    """Median host (and, for CuPy, device) milliseconds of ``fn()``."""
    if xp is np:
        times = []
        for _ in range(max(3, repeats // 20)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return {"host_ms": 1e3 * float(np.median(times))}
    from cupyx.profiler import benchmark

    result = benchmark(fn, n_repeat=repeats, n_warmup=10)
    return {"host_ms": 1e3 * float(np.median(result.cpu_times)), "device_ms": 1e3 * float(np.median(result.gpu_times[0]))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", type=int, nargs=2, default=[40, 75], help="parameter grid (Nm = nx * ny)")
    ap.add_argument("--Nd", type=int, default=80)
    ap.add_argument("--Nt", type=int, default=500)
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--precision", default="ddddd")
    ap.add_argument("--vectors", choices=("host", "device"), nargs="+", default=["device"],
                    help="where the inversion's vectors live (host: NumPy, device: the operator's arrays)")
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--rank", type=int, default=20, help="rank of the low-rank posterior (0: not timed)")
    ap.add_argument("--proc-grid", default=None, help="PRxPC grid of MPI ranks for the products (default: 1 x ranks)")
    ap.add_argument("--parts", action="store_true", help="also time the iteration's parts (host and device)")
    ap.add_argument("--out")
    args = ap.parse_args()
    Nm = args.grid[0] * args.grid[1]
    rng = np.random.default_rng(0)
    f = rng.standard_normal((args.Nd, Nm, args.Nt)) * np.exp(-np.arange(args.Nt) / 50.0)
    ranks = ProcessGrid.from_option(None, args.proc_grid, args.Nd, Nm, device=args.device)
    F = ReplicatedOperator(BTTOperator(f, device=args.device, precision=args.precision, grid=ranks))
    del f
    d_host = rng.standard_normal((args.Nd, args.Nt))
    maps = {}
    for vectors in args.vectors:
        xp = F.xp if vectors == "device" else np
        prior = MaternPrior(tuple(args.grid), args.Nt, std=0.005, corr_length=30e3, spacing=5e3, xp=xp)
        noise = WhiteNoise(0.01)
        d = xp.asarray(d_host)
        stamps = []
        start = time.perf_counter()
        result = map_cg_parameter(F, prior, noise, d, rtol=0.0, maxiter=args.iterations,
                                  callback=lambda it, res, seconds: stamps.append(time.perf_counter()))
        solve_s = time.perf_counter() - start
        maps[vectors] = to_host(result.m)
        row = {"what": "inversion-iteration", "machine": platform.node(), "device": args.device,
               "vectors": vectors, "grid": args.grid, "Nm": Nm, "Nd": args.Nd, "Nt": args.Nt,
               "precision": args.precision, "proc_grid": F.grid_shape,
               "collectives": getattr(ranks, "collectives", None), "iterations": result.cg.iterations, "solve_s": solve_s,
               "iteration_median_s": float(np.median(np.diff(stamps))) if len(stamps) > 1 else None}
        if args.rank:
            start = time.perf_counter()
            LowRankPosterior(F, prior, noise, args.rank)  # (stop 64's code drew unseeded test vectors)
            row["low_rank_posterior_s"] = time.perf_counter() - start
        if args.parts:
            S, u, v = prior.sqrt, xp.asarray(maps[vectors]), xp.asarray(maps[vectors][::-1])
            parts = {"prior_sqrt": lambda: S(u), "normal": lambda: F.normal(u),
                     "hessian": lambda: S(misfit_hessian(F, noise, S(u))) + u, "inner": lambda: dot(u, v),
                     "updates": lambda: (u + 0.5 * v, u - 0.5 * v, v + 0.3 * u)}
            row["parts"] = {name: part_times(fn, xp) for name, fn in parts.items()}
        row["map_norm"] = float(np.linalg.norm(maps[vectors]))  # to compare runs on other grids
        if len(maps) > 1:
            first = next(iter(maps.values()))
            row["map_rel_difference"] = float(np.linalg.norm(maps[vectors] - first) / np.linalg.norm(first))
        if ranks.rank == 0:
            emit(row, args.out)


if __name__ == "__main__":
    main()
