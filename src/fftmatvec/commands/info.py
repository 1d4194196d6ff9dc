"""``fftmatvec info DIR``: sizes, type, memory of ``Fhat``, file checks."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="describe and check a matrix directory")
    p.add_argument("matrix", metavar="DIR", help="FFTMatvec matrix directory (DIR or DIR/binary)")
    p.add_argument("--no-check", action="store_true", help="skip reading and checking the block files")
    p.set_defaults(func=run)


def _human(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError("unreachable")


def run(args: argparse.Namespace) -> int:
    from ..io import read_matrix_slab, read_meta

    meta = read_meta(args.matrix)
    nf = meta.Nt + 1
    print(f"matrix       {args.matrix}")
    print(f"type         {'p2q (parameter-to-QoI)' if meta.is_p2q else 'p2o (parameter-to-observable)'}")
    print(f"sizes        N{'q' if meta.is_p2q else 'd'}={meta.Nd}  Nm={meta.Nm}  Nt={meta.Nt}")
    print(f"F            {meta.Nd * meta.Nt} x {meta.Nm * meta.Nt}")
    checksums = "on" if meta.checksum else "off"
    print(f"files        {meta.Nd} block rows '{meta.prefix}NNNNNN{meta.extension}', checksums {checksums}")
    print(f"f on disk    {_human(meta.Nd * meta.Nm * meta.Nt * 8)} (float64)")
    for name, itemsize in (("complex128", 16), ("complex64", 8)):
        letter = "d" if itemsize == 16 else "s"
        print(f"Fhat         {_human(nf * meta.Nd * meta.Nm * itemsize)} ({name}, SBGEMV letter '{letter}')")
    if not args.no_check:
        for i in range(meta.Nd):
            read_matrix_slab(args.matrix, (i, 1), (0, meta.Nm), meta=meta)
        print(f"check        all {meta.Nd} block files read and verified")
    return 0
