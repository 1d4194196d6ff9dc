"""``fftmatvec matvec``: apply ``F``, ``F^T`` or ``F^T F`` to a vector file."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("matvec", help="apply the operator to a vector file and write a vector file")
    p.add_argument("--matrix", required=True, metavar="DIR", help="FFTMatvec matrix directory")
    p.add_argument("--input", required=True, metavar="FILE", help="input vector file (.h5)")
    p.add_argument("--output", required=True, metavar="FILE", help="output vector file (.h5), written atomically")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--adjoint", action="store_true", help="apply F^T (input in data space)")
    mode.add_argument("--normal", action="store_true", help="apply F^T F (input and output in parameter space)")
    p.add_argument("--precision", default="ddddd", metavar="CODE", help="five-letter stage precision code (default ddddd)")
    p.add_argument("--device", default="cpu", choices=("cpu", "gpu", "auto"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..io import read_vector, write_vector
    from ..operator import BTTOperator

    op = BTTOperator.from_matrix_dir(args.matrix, precision=args.precision, device=args.device)
    in_space, out_space = ("data", "param") if args.adjoint else ("param", "param" if args.normal else "data")
    n_in = op.Nd if args.adjoint else op.Nm
    x, _ = read_vector(args.input, in_space, expect_n=n_in, expect_nt=op.Nt)
    if args.adjoint:
        y = op.rmatvec(x)
    elif args.normal:
        y = op.normal(x)
    else:
        y = op.matvec(x)
    qoi = out_space == "data" and op.meta.is_p2q
    write_vector(args.output, y, out_space, qoi=qoi)
    return 0
