"""``fftmatvec matvec``: apply ``F``, ``F^T`` or ``F^T F`` to a vector file.

Under ``mpiexec``/``srun`` the operator is distributed over the ``--grid``:
each rank reads only its slab of the matrix and its blocks of the input, and
rank 0 writes the output.
"""

from __future__ import annotations

import argparse


def add_grid_options(p: argparse.ArgumentParser) -> None:
    """``--grid`` and ``--device``, shared by the commands that build operators."""
    p.add_argument("--grid", default=None, metavar="PRxPC",
                   help="process grid under MPI: 'PRxPC' or 'auto' (default 1 x ranks)")
    p.add_argument("--device", default="cpu", choices=("cpu", "gpu", "auto"), help="backend (default cpu)")


def add_precision_options(p: argparse.ArgumentParser) -> None:
    """``--precision`` and ``--adjoint-precision`` (the ``F^T`` pass of ``--normal``), shared by the commands
    that apply the operator; :func:`check_precision_options` checks them."""
    p.add_argument("--precision", default="ddddd", metavar="CODE",
                   help="five-letter stage precision code (of F with --normal; default ddddd)")
    p.add_argument("--adjoint-precision", metavar="CODE",
                   help="with --normal: the code of the F^T pass (default: --precision)")


def check_precision_options(args: argparse.Namespace) -> None:
    """Reject a bad code, or ``--adjoint-precision`` without ``--normal``, before anything is allocated."""
    from ..errors import ConfigError
    from ..precision import parse

    parse(args.precision)
    if args.adjoint_precision is not None:
        if not args.normal:
            raise ConfigError("--adjoint-precision is the code of F^T F m's second pass: it needs --normal "
                              "(F^T d alone takes --adjoint --precision CODE)")
        parse(args.adjoint_precision)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("matvec", help="apply the operator to a vector file and write a vector file")
    p.add_argument("--matrix", required=True, metavar="DIR", help="FFTMatvec matrix directory")
    p.add_argument("--input", required=True, metavar="FILE", help="input vector file (.h5)")
    p.add_argument("--output", required=True, metavar="FILE", help="output vector file (.h5), written atomically")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--adjoint", action="store_true", help="apply F^T (input in data space)")
    mode.add_argument("--normal", action="store_true", help="apply F^T F (input and output in parameter space)")
    add_precision_options(p)
    add_grid_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..grid import ProcessGrid
    from ..io import read_meta
    from ..operator import BTTOperator
    from ..vector import DistVector

    check_precision_options(args)
    meta = read_meta(args.matrix)
    grid = ProcessGrid.from_option(None, args.grid, Nd=meta.Nd, Nm=meta.Nm)
    op = BTTOperator.from_matrix_dir(args.matrix, grid=grid, precision=args.precision,
                                     adjoint_precision=args.adjoint_precision, device=args.device)
    in_space, out_space = ("data", "param") if args.adjoint else ("param", "param" if args.normal else "data")
    x = DistVector.read(args.input, grid, in_space, n=op.Nd if args.adjoint else op.Nm, Nt=op.Nt)
    if args.adjoint:
        y = op.rmatvec(x)
    elif args.normal:
        y = op.normal(x)
    else:
        y = op.matvec(x)
    y.write(args.output, qoi=out_space == "data" and meta.is_p2q)
    return 0
