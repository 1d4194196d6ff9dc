"""Where a forward product on a grid of GPUs spends the time that one GPU's
product does not (docs/benchmarks.md, "GPU weak scaling").

    mpiexec -n 2 python benchmarks/grid_parts.py --grid 1x2 --Nm 10000 --out FILE

One rank a GPU, collectives as the grid chooses them (NCCL where it can),
random slabs of ``Nd x Nm x Nt`` (totals) cut by the grid.  Waited-for
medians, each call followed by a device synchronisation and an MPI barrier
(the bench's way), the ways taking turns in rounds (``_waited_medians``):

* ``matvec``: ``BTTOperator.matvec``, with one reduction and with the result
  reduced in each of ``--chunks`` chunks of block rows;
* ``compute``: the rank's local product alone (the engine: no checks, no
  communication), also reported rank by rank (``per_rank_us``: how far the
  GPUs differ);
* ``compute+comm``: the local product between the grid's collectives (the
  input's broadcast down the column, the reduction along the row), without
  matvec's checks and result copy;
* ``checks``: what ``matvec`` does before its first collective (the vote on
  the input, its check for NaN and Inf), waited for before any product is
  queued (``matvec`` now queues its product before it waits for the check,
  where no broadcast comes first), and its parts: ``vote`` (one vote with
  nothing to check), ``finite`` (the backend's ``finite_check``, as
  ``matvec`` makes it) and ``finite, element-wise`` (``isfinite(x).all()``,
  as it was before stop 43);
* ``sync``: the synchronisation and barrier alone.

With ``--chunks``, one product's timeline a rank (``timeline``), in us
from the product's start (CUDA events): ``chunk_done_us``, when each mark
of the product's stream was passed (the backend's marks made timing events
for it: on a grid of several ranks the finite check's first, then each
chunk's of block rows), and ``reduced_us``, when each chunk's reduction was
done on the reductions' stream.  A reduction done before the next chunk is
done ran beside that chunk's computation.
``--side-priority low`` runs the reductions on a stream of the default
priority instead of the package's high-priority one (``side_priority`` in
the records: the stream's priority).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", default="1x2", help="PRxPC (ranks of this launch)")
    ap.add_argument("--Nm", type=int, default=10000, help="parameters, in all")
    ap.add_argument("--Nd", type=int, default=100, help="sensors, in all")
    ap.add_argument("--Nt", type=int, default=1000)
    ap.add_argument("--codes", default="ddddd", help="precision codes of F, comma-separated")
    ap.add_argument("--chunks", default="2,4", help="chunk counts of the chunked reduction (besides one)")
    ap.add_argument("--side-priority", choices=("high", "low"), default="high",
                    help="the chunked reductions' stream: the package's (high priority) or one of the default")
    ap.add_argument("-N", "--reps", type=int, default=30, help="timed calls of each way")
    ap.add_argument("--out", help="append the JSON lines (rank 0) to this file")
    args = ap.parse_args(argv)

    import cupy as cp
    from mpi4py import MPI

    from fftmatvec import BTTOperator
    from fftmatvec.bench import _waited_medians
    from fftmatvec.errors import collective
    from fftmatvec.grid import ProcessGrid
    from fftmatvec.precision import parse
    from gpu_probe import json_lines

    comm = MPI.COMM_WORLD
    emit = json_lines(args.out) if comm.rank == 0 else (lambda **rec: None)
    chunk_counts = [int(c) for c in args.chunks.split(",") if c]
    with ProcessGrid(comm, args.grid, device="gpu") as grid:
        rows, cols = grid.row_block(args.Nd), grid.col_block(args.Nm)
        rng = np.random.default_rng([7, grid.rank])
        f = rng.standard_normal((rows[1], cols[1], args.Nt), dtype=np.float32).astype(np.float64)
        x = cp.asarray(rng.standard_normal((cols[1], args.Nt))) if grid.holds_param() else None
        x_local = cp.asarray(rng.standard_normal((cols[1], args.Nt, 1)))  # every rank's input to its engine
        base = dict(what="grid_parts", grid=f"{grid.pr}x{grid.pc}", ranks=grid.size, Nm=args.Nm, Nd=args.Nd,
                    Nt=args.Nt, collectives=grid.collectives)

        for code in args.codes.split(","):
            op = BTTOperator(f, device="gpu", grid=grid, shape=(args.Nd, args.Nm, args.Nt), precision=code)
            be, prec = op.backend, parse(code)
            if args.side_priority == "low" and grid.collectives == "nccl":
                grid.row._stream = cp.cuda.Stream(non_blocking=True)
            xp = x_local.astype(prec.pad)

            def vote() -> None:
                with collective(comm, "a vote") as v:
                    v.share((1,))
                v.agreed("the vote's value")

            def sync() -> None:
                be.synchronize()
                grid.barrier()

            def with_chunks(C: int):
                def call():
                    op.reduce_chunks = C
                    return op.matvec(x)
                return call

            ways = {f"matvec C={C}": with_chunks(C) for C in [1] + chunk_counts}
            ways.update({
                "compute": lambda: op.engine.apply(xp, prec),
                "compute+comm": lambda: grid.row_reduce(op.engine.apply(grid.col_bcast(xp), prec)),
                "checks": lambda: op._prepare(x, "param", prec, "F m"),
                "vote": vote,
                "finite": lambda: be.finite_check(x_local)(),
                "finite, element-wise": lambda: bool(cp.isfinite(x_local).all()),
                "sync": lambda: None,
            })
            medians = _waited_medians(ways, args.reps, sync)
            per_rank = comm.allgather({name: t * 1e6 for name, t in medians.items()})
            for name in ways:
                times = [r[name] for r in per_rank]
                emit(**base, code=code, way=name, us=round(max(times), 1), per_rank_us=[round(t, 1) for t in times])

            reference = with_chunks(1)()
            for C in chunk_counts:
                y = with_chunks(C)()
                diff = float(cp.abs(y - reference).max() / cp.abs(reference).max()) if y.size else 0.0
                lines = comm.allgather(_timeline(op, grid, x, C, cp))
                emit(**base, code=code, way=f"timeline C={C}", max_rel_diff_vs_one=max(comm.allgather(diff)),
                     side_priority=_side_priority(grid), timeline=lines)
    return 0


def _side_priority(grid) -> int | None:
    """The priority of the stream the chunked reductions ran on (None: not NCCL's)."""
    stream = getattr(grid.row, "_stream", None)
    return None if stream is None else int(stream.priority)


def _timeline(op, grid, x, C: int, cp) -> dict:
    """One chunked product with timing events: when each chunk is done on the
    product's stream and each chunk's reduction on the reductions' stream (us
    from the product's start)."""
    be = op.backend
    marks, reduced = [], []

    def timed_mark():
        ev = cp.cuda.Event()
        ev.record()
        marks.append(ev)
        return ev

    row = grid.row
    plain_mark, plain_ireduce = be.mark, row.ireduce

    def ireduce(buf, root=0, after=None):
        request = plain_ireduce(buf, root=root, after=after)
        stream = getattr(row, "_stream", None)  # NCCLCollectives' side stream (None: MPI, nothing on the device)
        if stream is not None:
            ev = cp.cuda.Event()
            ev.record(stream)
            reduced.append(ev)
        return request

    be.mark, row.ireduce = timed_mark, ireduce
    try:
        be.synchronize()
        grid.barrier()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        op.reduce_chunks = C
        op.matvec(x)
        end.record()
        end.synchronize()
        for ev in reduced:
            ev.synchronize()
    finally:
        be.mark, row.ireduce = plain_mark, plain_ireduce
    since = lambda ev: round(cp.cuda.get_elapsed_time(start, ev) * 1e3, 1)  # noqa: E731
    return {"rank": grid.rank, "chunk_done_us": [since(ev) for ev in marks],
            "reduced_us": [since(ev) for ev in reduced], "product_us": since(end)}


if __name__ == "__main__":
    sys.exit(main())
