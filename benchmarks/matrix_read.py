"""Time reading a matrix directory (``read_matrix_slab`` of every block row,
checksums and NaN checks included), how ``BTTOperator.from_matrix_dir`` reads
a rank's slab.  Writes a random ``--Nd x --Nm x --Nt`` matrix into ``--dir``
once (kept, so that a run with another revision's ``src/`` on ``PYTHONPATH``
reads the same files), then reads it ``--rounds`` times; one JSON line per
round.  The first read after writing may come from the page cache as much as
the later ones: the times are of the reading code, not of the disk.

    python benchmarks/matrix_read.py --dir /tmp/matrix-2d --Nd 80 --Nm 3000 --Nt 500 --rounds 3 --out FILE
"""

import argparse
import os
import platform
import time

import numpy as np
from prior_sqrt import emit

from fftmatvec.io import read_matrix_slab, read_meta, write_matrix


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="matrix directory (written when it has no meta_adj)")
    ap.add_argument("--Nd", type=int, default=80)
    ap.add_argument("--Nm", type=int, default=3000)
    ap.add_argument("--Nt", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--label", default="", help="written into each line (e.g. the revision)")
    ap.add_argument("--out")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.dir, "binary", "meta_adj")):
        f = np.random.default_rng(0).standard_normal((args.Nd, args.Nm, args.Nt))
        write_matrix(args.dir, f)
        del f
    meta = read_meta(args.dir)
    for r in range(args.rounds):
        start = time.perf_counter()
        f = read_matrix_slab(args.dir, (0, meta.Nd), (0, meta.Nm), meta=meta)
        seconds = time.perf_counter() - start
        emit({"what": "matrix-read", "label": args.label, "machine": platform.node(), "round": r,
              "Nd": meta.Nd, "Nm": meta.Nm, "Nt": meta.Nt, "checksum": meta.checksum, "bytes": f.nbytes,
              "read_s": seconds}, args.out)
        del f


if __name__ == "__main__":
    main()
