"""The products with several right-hand sides of native/sbgemm.cu in the
working tree against the same file at other git revisions: device time
(CUPTI, through PyTorch's profiler) of the forward product the backend
chooses, x the floor (``Fhat``'s bytes over the copy bandwidth measured in
the same run), and the error against float64 on six frequencies, at the big
size in complex64 (``--dtype complex128``: in that), on one GPU; with
``--adjoint`` the adjoint product instead (``sbgemm_adj_tc`` where the
backend takes it).

    python benchmarks/gemm_ab.py --rev 638d20c --out benchmarks/results/h200-gemm-ab.jsonl
    python benchmarks/gemm_ab.py --pipe-tile off --pipe-tile 32,3,2,1 --rounds 3 \\
        --out benchmarks/results/h200-gemm-ab-pipe.jsonl
    python benchmarks/gemm_ab.py --wg-tile off --wg-tile 2,1 --K 16,12 \\
        --out benchmarks/results/h200-gemm-ab-wg.jsonl
    python benchmarks/gemm_ab.py --dtype complex128 --spread-off --K 16,8 \\
        --out benchmarks/results/h200-gemm-ab-c128-spread.jsonl
    python benchmarks/gemm_ab.py --adjoint --rev HEAD --K 4,8,16 --rounds 2 \\
        --out benchmarks/results/h200-gemm-ab-adj.jsonl

One JSON line per variant, ``K`` and round: ``variant`` (``tree``, the
revision, or ``pipe=TILE``: the tree with ``sbgemm_tc_pipe``'s tile set to
``BK,NS,MINB,CW`` for every shape (``gemm_pipe_few_rows`` unset) or ``off``,
which leaves the products to ``sbgemm_tc``,
and with ``@REV`` the kernels of that revision; ``wg=TILE``: the tree with
``sbgemm_wg_pipe``'s tile set to ``NS,SW`` or ``off``, which leaves the
products to ``sbgemm_tc_pipe``; ``l2-promotion=N``: the tree with the
tensor maps' L2 promotion set to N; ``splits=S``: the tree with S column
splits, ``GPUBackend.gemm_splits``, instead of its own choice;
``spread=off``: the tree with ``GPUBackend.gemm_spread`` off),
``dtype``, ``adjoint``,
``kernel`` (the kernel the backend took; for the adjoint ``sbgemm_adj_tc`` or ``other``),
``time_us``, ``floor_ratio``, ``rel_err`` and ``copy_Bps``.  The launch
set-up is the working tree's (``GPUBackend._gemm_config``) for every
variant.  The variants take turns within each round.
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from ab_sources import use_revisions
from gpu_probe import device_times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", action="append", default=[], help="git revision to compare (repeatable)")
    ap.add_argument("--K", default="4,8,12,16", help="right-hand sides, comma-separated")
    ap.add_argument("--pipe-tile", action="append", default=[],
                    help="also the tree with sbgemm_tc_pipe's tile BK,NS,MINB,CW or off, with @REV: that "
                         "revision's kernels (repeatable)")
    ap.add_argument("--wg-tile", action="append", default=[],
                    help="also the tree with sbgemm_wg_pipe's tile NS,SW or off (repeatable)")
    ap.add_argument("--l2-promotion", action="append", default=[], type=int,
                    help="also the tree with the tensor maps' L2 promotion set to this (0-3, repeatable)")
    ap.add_argument("--splits", action="append", default=[], type=int,
                    help="also the tree with this many column splits (repeatable)")
    ap.add_argument("--spread-off", action="store_true",
                    help="also the tree with a block a frequency (gemm_spread off)")
    ap.add_argument("--dtype", default="complex64", choices=["complex64", "complex128"], help="of Fhat and X")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of all variants in turn")
    ap.add_argument("--size", default="1001,100,5000", help="Nf,Nd,Nm")
    ap.add_argument("--adjoint", action="store_true", help="time the adjoint product instead of the forward")
    ap.add_argument("--out", required=True, help="JSON lines appended here")
    args = ap.parse_args()

    import cupy as cp

    from fftmatvec.backend import tensormap
    from fftmatvec.backend.gpu import GPUBackend

    select = use_revisions("sbgemm.cu", args.rev + [t.partition("@")[2] for t in args.pipe_tile if "@" in t])
    be = GPUBackend()
    bw = be.copy_bandwidth()
    nf, nd, nm = (int(v) for v in args.size.split(","))
    rng = cp.random.default_rng(7)

    dtype = np.dtype(args.dtype)

    def rand(shape):
        re, im = (rng.standard_normal(shape, dtype=np.finfo(dtype).dtype) for _ in range(2))
        return (re + 1j * im).astype(dtype)

    A = rand((nf, nd, nm))
    pipe, warpgroup, few_rows = dict(be.gemm_tensor_pipe), dict(be.gemm_warpgroup), dict(be.gemm_pipe_few_rows)

    def tile(text: str) -> tuple | None:
        return None if text == "off" else tuple(int(v) for v in text.split(","))

    tiles = {f"pipe={t}": tile(t.split("@")[0]) for t in args.pipe_tile}
    wg_tiles = {f"wg={t}": tile(t) for t in args.wg_tile}
    promotions = {f"l2-promotion={n}": n for n in args.l2_promotion}
    tree_promotion = tensormap.L2_PROMOTION
    tree_spread = be.gemm_spread
    splits = {f"splits={n}": n for n in args.splits}
    variants = (["tree"] + list(tiles) + list(wg_tiles) + list(promotions) + list(splits)
                + (["spread=off"] if args.spread_off else []) + args.rev)
    with open(args.out, "a") as out:
        for K, rnd in ((int(k), r) for k in args.K.split(",") for r in range(args.rounds)):
            n_in, n_out = (nd, nm) if args.adjoint else (nm, nd)
            x = rand((nf, n_in, K))
            y = cp.empty((nf, n_out, K), dtype)
            A6 = A[:6].astype(np.complex128)
            ref = (A6.conj().transpose(0, 2, 1) if args.adjoint else A6) @ x[:6].astype(np.complex128)
            for variant in variants:
                revision = variant if variant == "tree" or variant in args.rev else variant.partition("@")[2]
                select(revision or "tree")
                be.gemm_tensor_pipe = {t: tiles[variant] for t in pipe} if variant in tiles else dict(pipe)
                be.gemm_pipe_few_rows = {t: None for t in few_rows} if variant in tiles else dict(few_rows)
                be.gemm_warpgroup = ({t: wg_tiles[variant] for t in warpgroup} if variant in wg_tiles
                                     else dict(warpgroup))
                tensormap.L2_PROMOTION = promotions.get(variant, tree_promotion)
                be.gemm_splits = splits.get(variant)
                be.gemm_spread = tree_spread and variant != "spread=off"
                be._tensor_maps.clear()  # (maps made anew with this variant's promotion)
                be._launch.clear()
                y[...] = np.nan
                be.sbgemv(A, x, y, adjoint=args.adjoint)
                err = float(cp.linalg.norm(y[:6] - ref) / cp.linalg.norm(ref))
                t = sum(device_times(lambda: be.sbgemv(A, x, y, adjoint=args.adjoint), be.synchronize).values())
                if args.adjoint:
                    taken = any(k[0] == "gemm-adj" and v for k, v in be._launch.items())
                    kernel = "sbgemm_adj_tc" if taken else "other"
                else:
                    kernel = next(v[6] for k, v in be._launch.items() if k[0] == "gemm")
                rec = dict(what="gemm-ab", variant=variant, K=K, round=rnd, nf=nf, nd=nd, nm=nm, dtype=str(dtype),
                           adjoint=args.adjoint, kernel=kernel,
                           time_us=round(t, 1), floor_ratio=round(t * 1e-6 / (A.nbytes / bw), 4), rel_err=err,
                           copy_Bps=bw)
                print(json.dumps(rec), flush=True)
                out.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
