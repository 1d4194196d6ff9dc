"""Kernels of one file of native/ at other git revisions, beside the working
tree's, in one process: the A/B comparisons (``fft_ab.py``, ``gemm_ab.py``,
``launch_ab.py``) time each revision's kernels with the working tree's
launch set-up, on the same machine and data; and kernels built to register
targets other than the engine's (``use_register_targets``)."""
from __future__ import annotations

import subprocess
from typing import Callable


def source_at(rev: str, name: str) -> str:
    """native/name at git revision rev, local includes expanded (from the same revision);
    ``rev`` = ``file:PATH`` takes name from the file PATH and its includes from the working tree."""
    from fftmatvec.backend.kernels import expand_includes, native_dir

    def read(fname: str) -> str:
        if rev.startswith("file:"):
            return open(rev[5:] if fname == name else native_dir() / fname).read()
        shown = subprocess.run(["git", "show", f"{rev}:native/{fname}"], capture_output=True, text=True)
        if shown.returncode != 0:  # e.g. a copy of the working tree whose .git is older than its files
            raise SystemExit(f"native/{fname} at {rev!r}: {shown.stderr.strip()} (write that revision's file "
                             f"with `git show {rev}:native/{fname} > PATH` where it exists and use file:PATH)")
        return shown.stdout

    return expand_includes(name, read)


def use_revisions(name: str, revs: list[str]) -> Callable[[str], None]:
    """Let ``fftmatvec.backend.kernels`` build ``name``'s kernels from git
    revisions; returns ``select(variant)``: ``"tree"`` (the working tree) or
    one of ``revs`` for the kernels of ``name`` built from then on.  Each
    revision's text is its own NVRTC source (``name@rev``), so the variants'
    modules do not share a cache entry."""
    import fftmatvec.backend.kernels as kernels

    sources = {f"{name}@{rev}": source_at(rev, name) for rev in revs}
    tree_source, tree_kernel = kernels.source, kernels.kernel
    active = {"variant": "tree"}
    kernels.source = lambda fname: sources[fname] if fname in sources else tree_source(fname)
    kernels.kernel = lambda fname, kname, *targs, **kw: tree_kernel(
        f"{name}@{active['variant']}" if fname == name and active["variant"] != "tree" else fname, kname, *targs,
        **kw)

    def select(variant: str) -> None:
        active["variant"] = variant

    return select


def use_register_targets(targets: Callable[[], list[tuple[str, int]]]) -> None:
    """Build every kernel made from then on whose name expression starts with a
    prefix of ``targets()`` (pairs ``(prefix, registers)``, asked at each build)
    to that many registers (0: the compiler's own count), on top of
    ``kernels.REGISTER_TARGETS``."""
    import fftmatvec.backend.kernels as kernels

    engine_kernel = kernels.kernel

    def kernel_with_targets(fname: str, name: str, *targs, **kw):
        expr = kernels.name_expression(name, *targs)
        engine_targets = dict(kernels.REGISTER_TARGETS)
        asked = {expr: n for prefix, n in targets() if expr.startswith(prefix)}
        kernels.REGISTER_TARGETS.update(asked)
        try:
            fn = engine_kernel(fname, name, *targs, **kw)
        finally:
            kernels.REGISTER_TARGETS.clear()
            kernels.REGISTER_TARGETS.update(engine_targets)
        check_register_target(expr, asked.get(expr, 0), int(fn.num_regs))
        return fn

    kernels.kernel = kernel_with_targets


def check_register_target(expr: str, asked: int, built: int) -> None:
    """Stop when kernel ``expr`` was asked for ``asked`` registers (0: none asked) and built with more: a kernel
    whose ``__launch_bounds__`` give a minimum of blocks is built to those bounds, and ptxas then ignores
    ``--maxrregcount``, so the variant would time the engine's own build under another name."""
    if asked and built > asked:
        raise SystemExit(f"{expr}: asked for {asked} registers, built with {built} (its __launch_bounds__ take "
                         f"precedence over --maxrregcount): change the bounds in native/ instead")
