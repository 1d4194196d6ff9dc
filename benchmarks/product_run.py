"""Run one product a few times at one size on the GPU, for a profiler
(``ncu --kernel-name regex:sbgemv python3 benchmarks/product_run.py 1000 50 500 dssdd``).

Usage: python benchmarks/product_run.py NM ND NT CODE [adjoint] [REPEATS]
"""

import sys

from fftmatvec import BTTOperator
from fftmatvec.bench import random_slab


def main(Nm: int, Nd: int, Nt: int, code: str, adjoint: bool, repeats: int) -> None:
    f = random_slab(7, Nd, Nm, Nt, (0, Nd), (0, Nm))
    op = BTTOperator(f, device="gpu", **({"adjoint_precision": code} if adjoint else {"precision": code}))
    be = op.backend
    x = be.asarray(random_slab(8, 1, Nd if adjoint else Nm, Nt, (0, 1), (0, Nd if adjoint else Nm))[0])
    apply = op.rmatvec if adjoint else op.matvec
    for _ in range(repeats):
        apply(x)
    be.synchronize()


if __name__ == "__main__":
    a = sys.argv[1:]
    main(int(a[0]), int(a[1]), int(a[2]), a[3], len(a) > 4 and a[4] == "adjoint", int(a[5]) if len(a) > 5 else 4)
