"""Quick GPU timing probe for the native kernels and the engine (CUDA events, medians).

Usage: python benchmarks/gpu_probe.py [--out results.jsonl] [--quick]

Builds random ``Fhat`` directly on the device (no host-side impulse
responses), so that the big size costs seconds, not minutes.  Times

* the copy-bandwidth floor,
* the fused transforms' launch set-ups forced one by one (``fftsweep``, at
  the sizes of ``--sweep-sizes``), and the inverse reading its spectra in
  tiles of its blocks' series (``tiles``),
* SBGEMV kernel variants (rows per group R, loads in flight U, columns per
  thread block) forward and adjoint, at the target sizes,
* the whole local product (``LocalBTT.apply``) eager and replayed,
* the naive CuPy pipeline, and K = 16 right-hand sides (native vs cuBLAS),
* the tiles of the kernels with several right-hand sides, forward
  (``gemmvar``) and adjoint (``adjvar``), against cuBLAS, and the forward
  one at whole and part-filled waves of blocks (``waves``),
* the transforms run beside the product on another stream (``overlap``),
* how much of a stream the L2 serves from the previous one (``l2``),
* how fast a kernel that only reads streams a big buffer, whole or in the
  product kernels' access patterns (``read``),
* the forward kernel's launch variants in alternated rounds (``fwdrows``),
* the blocked adjoint's read pattern built up toward the kernel (``adjparts``),
* the read pattern of an adjoint fused with the inverse transform (``slabs``),
* the complex128 adjoint kernel changed one thing at a time (``adjc128``), and
  the product kernels under register caps (``regs``), with more or fewer loads
  in flight (``regsloads``),
* what programmatic dependent launch saves on a stand-in for a
  middle-size product's three kernels (``pdl``), and the engine's recorded
  graph against its kernels launched one by one from packed parameters
  (``chain``),
* the device time of every kernel of the replayed product (PyTorch's
  profiler, which records all kernels of the process through CUPTI), and
* the host time of ``BTTOperator.matvec`` at the fixture size (cProfile),
  and at the middle size from the call to the graph's launch (``prelaunch``),
* what making a big adjoint's result array costs a waited-for product (``resultalloc``),
* what each layer of ``matvec``'s host path adds to a waited-for product,
  and the same against another revision's ``operator.py`` (``hostpath``),
* ``F^T F m`` through ``normal`` against two products (``normal``),
* how a product's time changes as the device warms up from idle, back to back
  and waited for (``warmup``),

and prints one JSON object per measurement.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def device_times(fn, synchronize, n=20) -> dict:
    """Device time (us) per call of ``fn`` of each kernel it runs, from
    PyTorch's profiler (which records every kernel of the process through CUPTI)."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        synchronize()
    per = {}
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None)
        t = ev.cuda_time_total if t is None else t
        if t > 0:
            per[ev.key[:90]] = round(t / n, 2)
    return per


def size_parser(doc: str) -> argparse.ArgumentParser:
    """The parser of a script timing one size (default the big one): its
    first paragraph of ``doc`` as description, ``--out`` (append the JSON
    lines there), ``--Nm``, ``--Nd`` and ``--Nt``."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="append the JSON lines here")
    ap.add_argument("--Nm", type=int, default=5000)
    ap.add_argument("--Nd", type=int, default=100)
    ap.add_argument("--Nt", type=int, default=1000)
    return ap


def json_lines(path: str | None):
    """``emit(**record)``: prints ``record`` as one JSON line, and appends
    the line to the file ``path`` when one is given."""
    out = open(path, "a") if path else None

    def emit(**rec) -> None:
        line = json.dumps(rec)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    return emit


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--parts", default="small,mid,variants,engine,k16,kernels,host")
    ap.add_argument("--kernel-sizes", default="small,mid,big,big16", help="sizes of the kernels part")
    ap.add_argument("--sweep-sizes", default="big", help="sizes of the fftsweep part: big, mid, big16, bigK, bigKwide")
    ap.add_argument("--wait-sizes", default="big",
                    help="sizes of the wait part: big, big16, big16d (K = 16, ddddd), mid")
    ap.add_argument("--timeline-sizes", default="small,mid",
                    help="sizes of the timeline part: small, mid, big, big16 (K = 16)")
    ap.add_argument("--hostpath-sizes", default="mid,midadj,big",
                    help="sizes of the hostpath part: mid (dssdd F m), midadj (ddssd F^T d), big (ddssd F^T d)")
    ap.add_argument("--hostpath-wait", default="device", choices=("device", "poll"),
                    help="hostpath part: wait with be.synchronize() or a Python loop asking an event")
    ap.add_argument("--old-operator", default=None, metavar="FILE",
                    help="hostpath part: an operator.py of another revision, timed beside this one")
    ap.add_argument("--gemm-dtypes", default="complex64,complex128", help="dtypes of the gemmvar part")
    ap.add_argument("--set", action="append", default=[], metavar="ATTR[.KEY]=VALUE",
                    help="set an integer attribute of the backend (a kernel's tuning), or one entry of a dict "
                         "attribute, e.g. fwd_lanes=256, fft_store.rfft_pad=1")
    ap.add_argument("--no-register-targets", action="store_true",
                    help="build every kernel with the compiler's own register count (kernels.REGISTER_TARGETS emptied)")
    ap.add_argument("--regs-loads", default="all", choices=("all", "forward", "adjoint"),
                    help="the kernels of the regsloads part")
    ap.add_argument("--register-target", action="append", default=[], metavar="PREFIX=N",
                    help="build the kernels whose name expression starts with PREFIX to N registers, "
                         "e.g. 'irfft_unpad<float2=48' (0: the compiler's own count)")
    ap.add_argument("--schedule", default="auto", choices=("auto", "spin", "yield", "blocking"),
                    help="how the host thread waits for the device: the primary context's scheduling flag, "
                         "set before the backend is made (cuDevicePrimaryCtxSetFlags)")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))

    import cupy as cp

    if args.schedule != "auto":
        import ctypes

        cuda = ctypes.CDLL("libcuda.so.1")
        dev, flags, active = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
        if cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(dev), 0) or cuda.cuDevicePrimaryCtxSetFlags_v2(
                dev, {"spin": 1, "yield": 2, "blocking": 4}[args.schedule]):
            raise SystemExit(f"could not set the scheduling flag {args.schedule!r}")
        cuda.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(active))
        print(json.dumps({"what": "schedule", "schedule": args.schedule, "flags": flags.value}), flush=True)

    from fftmatvec.backend.gpu import GPUBackend
    from fftmatvec.btt import LocalBTT
    from fftmatvec.precision import parse

    from fftmatvec.backend import kernels

    if args.no_register_targets:
        kernels.REGISTER_TARGETS.clear()
    if args.register_target:
        from ab_sources import use_register_targets

        targets = [(p, int(n)) for p, _, n in (t.rpartition("=") for t in args.register_target)]
        use_register_targets(lambda: targets)
    be = GPUBackend()
    for setting in args.set:
        name, value = setting.split("=")
        attr, _, key = name.partition(".")
        if not hasattr(be, attr) or (key and key not in getattr(be, attr)):
            raise SystemExit(f"GPUBackend has no attribute {name!r}")
        if key:
            getattr(be, attr)[key] = int(value)
        else:
            setattr(be, attr, int(value))
    emit = json_lines(args.out)
    start, end = cp.cuda.Event(), cp.cuda.Event()

    def timeit(fn, reps=20, warm=3):
        for _ in range(warm):
            fn()
        be.synchronize()
        ts = []
        for _ in range(reps):
            start.record()
            fn()
            end.record()
            end.synchronize()
            ts.append(cp.cuda.get_elapsed_time(start, end) * 1e-3)
        return float(np.median(ts))

    def loop_time(fn, n=200):
        fn()
        be.synchronize()
        start.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end) * 1e-3 / n

    def alternated(what, variants, floor, rounds=7, n=10, per_variant=None, **fields):
        """Time each of ``variants`` (name -> call) ``n`` times back to back per
        round, in rounds that alternate them, and emit each one's median (us,
        spread over the rounds, x ``floor`` seconds) with ``fields`` and its
        ``per_variant`` entries."""
        times = {k: [] for k in variants}
        for _ in range(rounds):
            for k, call in variants.items():
                times[k].append(loop_time(call, n=n))
        for k, ts in times.items():
            t = float(np.median(ts))
            emit(what=what, **fields, variant=k, **(per_variant or {}).get(k, {}), us=round(t * 1e6, 2),
                 spread_us=round((max(ts) - min(ts)) * 1e6, 2), floor_ratio=round(t / floor, 4))

    def rand_c(shape, dt):
        """Random complex array (no zero parts) of complex dtype dt."""
        real = np.float32 if np.dtype(dt) == np.complex64 else np.float64
        return cp.random.standard_normal(tuple(shape[:-1]) + (2 * shape[-1],), dtype=real).view(dt)

    def rand_fhat(nf, nd, nm, dt):
        return rand_c((nf, nd, nm), dt)

    def engine(nd, nm, nt, dtypes):
        eng = LocalBTT.__new__(LocalBTT)
        eng.nd, eng.nm, eng.Nt = nd, nm, nt
        eng.L, eng.Nf = 2 * nt, nt + 1
        eng.backend = be
        eng._workspaces = {}
        eng.Fhat = {np.dtype(dt): rand_fhat(nt + 1, nd, nm, dt) for dt in dtypes}
        return eng

    import traceback

    def guarded(name, fn):
        try:
            fn()
        except Exception:
            emit(what="error", part=name, traceback=traceback.format_exc())

    bw = be.copy_bandwidth(nbytes=2 << 30, repeats=10)
    emit(what="copy_bandwidth", Bps=bw, device=be.device_name)

    C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)

    Nm, Nd, Nt = 5000, 100, 1000
    Nf = Nt + 1
    big = {}

    def get_big():
        if "eng" not in big:
            big["eng"] = engine(Nd, Nm, Nt, (C128, C64))
        return big["eng"]

    def part_variants():
        eng = get_big()
        for ta in (C128, C64):
            A = eng.Fhat[ta]
            floor = A.nbytes / bw
            for tx in (ta, C128 if ta == C64 else C64):
                x = rand_c((Nf, Nm, 1), tx)
                y = cp.empty((Nf, Nd, 1), ta)
                variants = [dict()]
                if tx == ta:
                    variants += [dict(R=2, U=4), dict(R=1, U=4), dict(R=1, U=16), dict(R=4, U=2)]
                # fewer loads of x per byte of Fhat: more rows per group, the group one warp or a whole block
                variants += [dict(R=r, U=u, S=1, lanes=g) for g in (32, 128, 256)
                             for r, u in ((2, 2), (2, 4), (4, 1), (4, 2), (8, 1))]
                for v in variants:
                    fn, grid, block, smem, tail, S = be._fwd_config(Nf, Nd, Nm, 1, ta, tx, **v)
                    out = y if S == 1 else cp.empty((S,) + y.shape, ta)
                    t = timeit(lambda: fn(grid, block, (A, x, out) + tail, shared_mem=smem))
                    emit(what="sbgemv_fwd", ta=str(ta), tx=str(tx), variant=dict(v, S=S), time_s=t,
                         floor_ratio=t / floor)
                d = rand_c((Nf, Nd, 1), tx)
                m = cp.empty((Nf, Nm, 1), ta)
                variants = [dict()]
                if tx == ta:
                    variants += [dict(U=4), dict(U=16), dict(T=128), dict(T=512), dict(flat=False, U=4),
                                 dict(flat=False, U=8)]
                for v in variants:
                    fn, grid, block, smem, tail, S = be._adj_config(Nf, Nd, Nm, 1, ta, tx, **v)
                    t = timeit(lambda: fn(grid, block, (A, d, m) + tail, shared_mem=smem))
                    emit(what="sbgemv_adj", ta=str(ta), tx=str(tx), variant=v, time_s=t, floor_ratio=t / floor)

    def part_fft():
        for n, K, real in ((Nm, 1, np.float64), (Nm, 1, np.float32), (Nd, 1, np.float64), (Nm, 16, np.float64)):
            x = cp.random.standard_normal((n, Nt, K)).astype(real)
            xh = cp.empty((Nf, n, K), np.result_type(real, np.complex64))
            y = cp.empty((n, Nt, K), real)
            for r2c, c2r in (("fused", "fused"), ("cs", "sc"), ("cc", "cc"), ("ss", "ss")):
                be.fft_layout = {"r2c": r2c, "c2r": c2r}
                t1 = timeit(lambda: be.pad_rfft(x, xh), reps=10)
                yh = cp.empty_like(xh)
                t2 = timeit(lambda: (yh.__setitem__(Ellipsis, xh), be.irfft_unpad(yh, y, real)), reps=10)
                t3 = timeit(lambda: yh.__setitem__(Ellipsis, xh), reps=10)
                ideal = (x.nbytes + x.nbytes * 2 + xh.nbytes) / bw
                emit(what="fft", n=n, K=K, real=str(np.dtype(real)), layout=f"{r2c}/{c2r}", pad_rfft_s=t1,
                     irfft_unpad_s=t2 - t3, ideal_pad_rfft_s=ideal)
            be.fft_layout = {"r2c": "fused", "c2r": "fused"}

    def part_fft_variants():
        """Fused transforms: series per block S (through the shared-memory target) and threads per block,
        device time per launch from CUPTI (PyTorch's profiler)."""
        for n, K, real, nt in ((Nm, 1, np.float64, Nt), (Nm, 1, np.float32, Nt), (Nd, 1, np.float64, Nt),
                               (1000, 1, np.float64, 500), (1000, 1, np.float32, 500), (50, 1, np.float64, 500),
                               (50, 1, np.float32, 500)):
            x = cp.random.standard_normal((n, nt, K)).astype(real)
            xh = cp.empty((nt + 1, n, K), np.result_type(real, np.complex64))
            y = cp.empty((n, nt, K), real)
            yh = cp.empty_like(xh)
            ideal = (x.nbytes + xh.nbytes) / bw
            per_series = 2 * (nt + 1) * xh.dtype.itemsize
            for S in (1, 2, 4, 8, 16):
                if S * per_series > be.smem_limit:
                    continue
                for threads in (None, 128, 256):
                    be.fused_smem_target, be.fused_threads = S * per_series, threads
                    be._fused.clear()
                    if be._fused_config(nt, np.dtype(xh.dtype), n * K, K)[0]["rfft_pad"] != S:
                        continue
                    t1 = sum(kernel_times(lambda: be.pad_rfft(x, xh)).values())
                    t2 = sum(kernel_times(lambda: be.irfft_unpad(yh, y, real)).values())
                    emit(what="fftvar", n=n, K=K, nt=nt, real=str(np.dtype(real)), S=S, threads=threads,
                         pad_rfft_us=round(t1, 2), irfft_unpad_us=round(t2, 2), ideal_us=round(ideal * 1e6, 2))
        be.fused_smem_target, be.fused_threads = 64 << 10, None
        be._fused.clear()

    def part_fft_radices():
        """Fused transforms with radix 10 (the default: a 10 per pair of factors 2 and 5) against
        separate passes of 2s and 5s, threads per block by size and 256, device times from CUPTI."""
        import fftmatvec.backend.gpu_transforms as transforms_module

        with_10 = transforms_module.fft_radices

        def without_10(M):
            """The rule before radix 10: powers of two in 8s, 4 and 2, and the odd primes."""
            radices = with_10(M)
            if radices is None or 10 not in radices:
                return radices
            n10 = radices.count(10)
            p2 = 2 ** n10 * int(np.prod([r for r in radices if r in (2, 4, 8)]))
            return sorted(with_10(p2) + [r for r in radices if r in (3, 5, 7)] + [5] * n10)

        for n, K, real, nt in ((Nm, 1, np.float64, Nt), (Nm, 1, np.float32, Nt), (Nd, 1, np.float64, Nt),
                               (1000, 1, np.float64, 500), (1000, 1, np.float32, 500), (50, 1, np.float64, 500),
                               (Nm, 16, np.float64, Nt)):
            x = cp.random.standard_normal((n, nt, K)).astype(real)
            xh = cp.empty((nt + 1, n, K), np.result_type(real, np.complex64))
            y = cp.empty((n, nt, K), real)
            yh = cp.empty_like(xh)
            ideal = (x.nbytes + xh.nbytes) / bw
            for rule, fn in (("radix 10", with_10), ("2s and 5s", without_10)):
                transforms_module.fft_radices = fn
                for threads in (None, 256):
                    be.fused_threads = threads
                    be._fused.clear()
                    t1 = sum(kernel_times(lambda: be.pad_rfft(x, xh)).values())
                    t2 = sum(kernel_times(lambda: be.irfft_unpad(yh, y, real)).values())
                    cfg = be._fused_config(nt, np.dtype(xh.dtype), n * K, K)
                    emit(what="fftradix", n=n, K=K, nt=nt, real=str(np.dtype(real)), rule=rule,
                         radices=list(cfg[5]), S=cfg[0], threads=cfg[1], pad_rfft_us=round(t1, 2),
                         irfft_unpad_us=round(t2, 2), ideal_us=round(ideal * 1e6, 2))
        transforms_module.fft_radices = with_10
        be.fused_threads = None
        be._fused.clear()

    def part_tiles():
        """The inverse transform reading its spectra frequency-major (the
        product's layout: each block gathers runs of S values, one a frequency)
        against the same kernel reading them in tiles of S series (each block's
        spectra one contiguous run), at the big and middle sizes of `ddssd` and
        `ddddd` `F^T d`: device times (CUPTI) alternated in rounds.  The values
        are random, so the two read the same buffer."""
        cases = [("big", Nm, Nt), ("mid", 1000, 500)]
        for size, n, nt in cases:
            for code, ctype in (("ddssd", C64), ("ddddd", C128)):
                xh = rand_c((nt + 1, n), ctype)
                y = cp.empty((n, nt, 1), np.float64)
                ideal = (xh.nbytes + y.nbytes) / bw
                S = be._fused_config(nt, ctype, n, 1)[0]["irfft_unpad"]  # the same spectra in tiles: equal results
                tiles = cp.ascontiguousarray(xh.reshape(nt + 1, n // S, S).transpose(1, 0, 2))
                y_t = cp.empty_like(y)
                be._fused_transform("irfft_unpad", xh, y, ctype, n, 1, nt, 1.0 / (2 * nt))
                be._fused_transform("irfft_unpad", tiles, y_t, ctype, n, 1, nt, 1.0 / (2 * nt), tiled=True)
                emit(what="tiles-check", size=size, code=code, S=S, equal=bool(cp.array_equal(y, y_t)))
                for rnd in range(3):
                    for tiled in (False, True):
                        def run(tiled=tiled):
                            be._fused_transform("irfft_unpad", xh, y, ctype, n, 1, nt, 1.0 / (2 * nt), tiled=tiled)
                        per = device_times(run, be.synchronize, n=50)
                        emit(what="tiles", size=size, code=code, n=n, Nt=nt, tiled=tiled, round=rnd,
                             us=round(sum(per.values()), 2), ideal_us=round(ideal * 1e6, 2))

    def part_fft_sweep():
        """Launch set-ups of the fused transforms forced one by one (series per
        block S, threads, one buffer or two, radices), device times from CUPTI,
        against the engine's own set-up, at the sizes of ``--sweep-sizes``: the
        big size's four transforms (and the engine's set-up at series counts
        that fill whole waves of blocks or not), the middle size's transforms
        of the mixed codes (1000 series and the 50 on the other side), and the
        big size's complex128 transforms and complex64 forward transform of 16
        right-hand sides (``big16``), its complex128 transforms of 2, 4 and 8
        (``bigK``), and its complex128 inverse of 8, 12 and 16 with 4 or 8
        series a block, 512 or 1024 threads, in one buffer (``bigKwide``).
        Each series count also runs with the fewest threads that take a pass's
        butterflies at once (a multiple of 32), whose kernels get more
        registers; every row gives the kernel's registers and the bytes of
        local memory a thread spills to (``regs``, ``local_bytes``)."""
        import fftmatvec.backend.fused_fft as fused_fft

        F64, F32 = np.float64, np.float32
        # (label, series n, Nt, K, complex type of the transform, of the spectrum, inverse)
        cases = {"big": [("dssdd rfft", Nm, Nt, 1, C64, C64, False), ("ddssd irfft", Nm, Nt, 1, C64, C64, True),
                         ("ddddd rfft", Nm, Nt, 1, C128, C128, False), ("ddddd irfft", Nm, Nt, 1, C128, C128, True)],
                 "mid": [("dssdd rfft", 1000, 500, 1, C64, C64, False), ("ddssd irfft", 1000, 500, 1, C64, C64, True),
                         ("dssdd irfft", 50, 500, 1, C128, C64, True), ("ddssd rfft", 50, 500, 1, C128, C64, False)],
                 "big16": [("ddddd rfft", Nm, Nt, 16, C128, C128, False), ("ddddd irfft", Nm, Nt, 16, C128, C128, True),
                           ("dssdd rfft", Nm, Nt, 16, C64, C64, False)],
                 "bigK": [(f"ddddd {name}", Nm, Nt, K, C128, C128, name == "irfft") for K in (2, 4, 8)
                          for name in ("rfft", "irfft")],
                 "bigKwide": [("ddddd irfft", Nm, Nt, K, C128, C128, True) for K in (8, 12, 16)]}
        grids = {"big": ((1, 2, 4, 8), (128, 256, 384, 512), (False, True), True),
                 "mid": ((1, 2, 4, 8), (64, 128, 256, 512), (False,), False),
                 "big16": ((2, 4, 8, 16), (256, 512, 1024), (False, True), False),
                 "bigK": ((2, 4), (256, 512), (False, True), False),
                 "bigKwide": ((4, 8), (512, 1024), (True,), False)}
        engine_config = be._fused_config
        for size in args.sweep_sizes.split(","):
            Ss, threads_list, places, other_radices = grids[size]
            for label, n, nt, K, ctype, htype, inverse in cases[size]:
                real = F32 if ctype == C64 else F64
                nf = nt + 1
                x = cp.random.standard_normal((n, nt, K))
                xh = cp.empty((nf, n, K), htype)
                be.pad_rfft(x, xh, real)
                y = cp.empty_like(x)
                run = (lambda: be.irfft_unpad(xh, y, real)) if inverse else (lambda: be.pad_rfft(x, xh, real))
                which = "irfft_unpad" if inverse else "rfft_pad"
                ideal = (x.nbytes + xh.nbytes) / bw
                own = engine_config(nt, ctype, n * K, K)
                setups = [(own[0][which], own[1][which], own[6][which], tuple(own[5]), "engine")]
                radix_sets = [tuple(own[5])] + ([(8, 5, 5, 5), (5, 5, 5, 8)] if other_radices else [])
                for radices in radix_sets:
                    for S in Ss:
                        fit = fused_fft.pass_threads(nt, S, list(radices))
                        for threads in sorted(set(threads_list) | ({fit} if fit <= 1024 else set())):
                            for in_place in places:
                                if in_place and not fused_fft.fused_in_place(nt, S, threads, list(radices)):
                                    continue
                                if radices != radix_sets[0] and (S, threads) != (own[0][which], own[1][which]):
                                    continue
                                row = S * fused_fft.fused_row_stride(nt, S, ctype.itemsize) * ctype.itemsize
                                if (1 if in_place else 2) * row > be.smem_limit or S > n * K:
                                    continue
                                setups.append((S, threads, in_place, radices, "forced"))
                run()
                ref = (y if inverse else xh).copy()
                for S, threads, in_place, radices, kind in setups:
                    twp = cp.asarray(fused_fft.pass_twiddles(list(radices)).astype(ctype))
                    row = S * fused_fft.fused_row_stride(nt, S, ctype.itemsize) * ctype.itemsize
                    smem = (1 if in_place else 2) * row
                    cfg = ({which: S}, {which: threads}, {which: smem}, twp, own[4], radices, {which: in_place})
                    be._fused_config = lambda *a, cfg=cfg: cfg
                    rec = dict(what="fftsweep", size=size, case=label, n=n, K=K, kind=kind, S=S, threads=threads,
                               in_place=in_place, radices=list(radices))
                    try:
                        (y if inverse else xh).fill(0)
                        run()
                        err = float(cp.abs((y if inverse else xh) - ref).max() / cp.abs(ref).max())
                        t = sum(kernel_times(run).values())
                        src, dst = (xh, y) if inverse else (x, xh)
                        attrs = be._fused_kernel(which, src.dtype, dst.dtype, ctype, n * K, K, nt, cfg[:3] + cfg[5:])[0].attributes
                        emit(**rec, us=round(t, 2), ideal_us=round(ideal * 1e6, 2), err=err,
                             regs=attrs["num_regs"], local_bytes=attrs["local_size_bytes"])
                    except Exception as exc:
                        emit(**rec, error=str(exc)[:200])
                    finally:
                        be._fused_config = engine_config
        if "big" not in args.sweep_sizes.split(","):
            return
        for label, _, _, _, ctype, _, inverse in cases["big"]:
            for n in (4752, 5000, 5280):
                x = cp.random.standard_normal((n, Nt, 1))
                xh = cp.empty((Nf, n, 1), ctype)
                y = cp.empty_like(x)
                fft_real = np.float32 if ctype == C64 else np.float64
                run = (lambda: be.irfft_unpad(xh, y, fft_real)) if inverse else (lambda: be.pad_rfft(x, xh))
                be.pad_rfft(x, xh)
                t = sum(kernel_times(run).values())
                emit(what="fftwaves", case=label, n=n, us=round(t, 2), us_per_1000_series=round(t * 1000 / n, 3))

    def part_mid_variants():
        """Launch parameters of the product kernels, device times from CUPTI: every variant at the
        middle size; in complex64 also the big size and an input vector in complex128 (the mixed codes)."""
        for size, nf, nd, nm in (("mid", 501, 50, 1000), ("big", Nf, Nd, Nm)):
            for ta in ((C128, C64) if size == "mid" else (C64,)):
                A = rand_c((nf, nd, nm), ta)
                floor = A.nbytes / bw
                for tx in ((ta,) if ta == C128 else (C64, C128)):
                    x = rand_c((nf, nm, 1), tx)
                    y = cp.empty((nf, nd, 1), ta)
                    fwd = ((dict(), dict(U=2), dict(U=8), dict(R=2), dict(R=2, U=2), dict(S=2)) if size == "mid"
                           else (dict(), dict(U=2)))
                    for v in fwd:
                        fn, grid, block, smem, tail, S = be._fwd_config(nf, nd, nm, 1, ta, tx, **v)
                        out = y if S == 1 else cp.empty((S,) + y.shape, ta)
                        t = sum(kernel_times(lambda: fn(grid, block, (A, x, out) + tail, shared_mem=smem)).values())
                        emit(what="sbgemv_fwd", size=size, ta=str(ta), tx=str(tx), variant=dict(v, S=S),
                             device_s=t * 1e-6, floor_ratio=t * 1e-6 / floor)
                    d = rand_c((nf, nd, 1), tx)
                    m = cp.empty((nf, nm, 1), ta)
                    adj = ((dict(), dict(U=2), dict(U=8), dict(T=128), dict(T=512), dict(VEC=1), dict(flat=False))
                           if size == "mid" else (dict(), dict(U=8)))
                    for v in adj:
                        fn, grid, block, smem, tail, S = be._adj_config(nf, nd, nm, 1, ta, tx, **v)
                        t = sum(kernel_times(lambda: fn(grid, block, (A, d, m) + tail, shared_mem=smem)).values())
                        emit(what="sbgemv_adj", size=size, ta=str(ta), tx=str(tx), variant=v, device_s=t * 1e-6,
                             floor_ratio=t * 1e-6 / floor)

    def part_fwd_rows():
        """The forward kernel with one right-hand side: rows per group R, loads in
        flight U and threads per group (``lanes``: a warp, or several sharing
        the rows' columns), each variant timed back to back in rounds that
        alternate the variants (medians; x the floor), at the middle and big
        sizes, for both storage precisions with an input vector in each."""
        variants = [dict(S=1, **v) for v in (
            dict(), dict(R=1, U=2, lanes=32), dict(R=1, U=4, lanes=32), dict(R=2, U=2, lanes=32),
            dict(R=2, U=4, lanes=32), dict(R=4, U=1, lanes=32), dict(R=4, U=1, lanes=128),
            dict(R=2, U=1, lanes=128), dict(R=4, U=1, lanes=256), dict(R=2, U=1, lanes=256))]
        for size, nf, nd, nm in (("mid", 501, 50, 1000), ("big", Nf, Nd, Nm)):
            rounds, n = (5, 40) if size == "mid" else (7, 20)
            for ta in (C64, C128):
                A = rand_c((nf, nd, nm), ta)
                floor = A.nbytes / bw
                for tx in (C64, C128):
                    x = rand_c((nf, nm, 1), tx)
                    y = cp.empty((nf, nd, 1), ta)
                    times = {i: [] for i in range(len(variants))}
                    for _ in range(rounds):
                        for i, v in enumerate(variants):
                            fn, grid, block, smem, tail, S = be._fwd_config(nf, nd, nm, 1, ta, tx, **v)
                            times[i].append(loop_time(lambda: fn(grid, block, (A, x, y) + tail, shared_mem=smem),
                                                      n=n))
                    for i, v in enumerate(variants):
                        t = float(np.median(times[i]))
                        emit(what="fwd_rows", size=size, ta=str(ta), tx=str(tx), variant=v, us=round(t * 1e6, 2),
                             spread_us=round((max(times[i]) - min(times[i])) * 1e6, 2), floor_ratio=round(t / floor, 4))
                A = None

    def part_kgemm():
        """Per-frequency products with K right-hand sides at the big size: the
        one-column kernels (``native``), ``native/sbgemm.cu`` (``gemm``:
        forward, the backend's choice of kernel; ``tensor``: adjoint,
        ``sbgemm_adj_tc``) and cuBLAS's batched GEMM."""
        eng = get_big()
        saved = dict(be.blas_min_k), dict(be.gemm_min_k), dict(be.adj_tensor_min_k)
        for ta in (C64, C128):
            A = eng.Fhat[ta]
            for K in (2, 3, 4, 5, 6, 8, 12, 16, 32):
                x = rand_c((Nf, Nm, K), ta)
                y = cp.empty((Nf, Nd, K), ta)
                d = rand_c((Nf, Nd, K), ta)
                m = cp.empty((Nf, Nm, K), ta)
                for adjoint, xx, yy in ((False, x, y), (True, d, m)):
                    for path in ("native", "gemm", "cublas") if not adjoint else ("native", "tensor", "cublas"):
                        if path == "native" and K > (8 if ta == C128 else 16) or path == "tensor" and K > 16:
                            continue
                        be.blas_min_k[(ta, adjoint)] = 1 if path == "cublas" else 10**6
                        be.gemm_min_k[ta] = 1 if path == "gemm" else 10**6
                        be.adj_tensor_min_k[ta] = 1 if path == "tensor" else 10**6
                        t = timeit(lambda: be.sbgemv(A, xx, yy, adjoint=adjoint), reps=5)
                        emit(what="sbgemm", adjoint=adjoint, ta=str(ta), K=K, path=path, time_s=t,
                             floor_ratio=t / (A.nbytes / bw))
                del x, y, d, m
        be.blas_min_k, be.gemm_min_k, be.adj_tensor_min_k = saved

    def part_waves():
        """The forward product with 16 right-hand sides (Nd = 100, Nm = 5000) at
        numbers of frequencies that fill whole waves of blocks and that do not
        (1001, the big size's), complex64 and complex128: time per frequency
        and x the floor, so that the cost of a part-filled last wave shows."""
        saved = dict(be.gemm_min_k), dict(be.blas_min_k)
        for ta, nfs in ((C128, (1001, 1056, 924, 990)), (C64, (1001, 1056, 1188, 792))):
            be.gemm_min_k[ta], be.blas_min_k[(ta, False)] = 1, 10**6
            for nf in nfs:
                A = rand_c((nf, 100, 5000), ta)
                x = rand_c((nf, 5000, 16), ta)
                y = cp.empty((nf, 100, 16), ta)
                t = timeit(lambda: be.sbgemv(A, x, y, adjoint=False), reps=15)
                cfg = next(v for k, v in be._launch.items() if k[0] == "gemm" and k[1] == nf and k[5] == ta)
                emit(what="waves", ta=str(ta), nf=nf, K=16, kernel=cfg[6], grid=cfg[1], splits=cfg[5], time_s=t,
                     us_per_frequency=t * 1e6 / nf, floor_ratio=t / (A.nbytes / bw))
        be.gemm_min_k, be.blas_min_k = saved

    def part_gemm_variants():
        """sbgemm_tc's and sbgemm_staged's tiles and sbgemm_fwd's lane layouts
        at K = 4, 8, 12 and 16, big size, each checked against cuBLAS's
        product and timed beside it (sbgemm_tc_pipe turned off; its tiles:
        benchmarks/gemm_ab.py --pipe-tile)."""
        eng = get_big()
        saved = (dict(be.gemm_tiles), dict(be.gemm_staged), dict(be.gemm_tensor), be.gemm_splits,
                 dict(be.gemm_min_k), dict(be.blas_min_k), dict(be.gemm_tensor_pipe))
        be.gemm_tensor_pipe = {ta: None for ta in be.gemm_tensor_pipe}
        tensor = [("tensor", (32, 3, 2)), ("tensor", (16, 4, 3)), ("tensor", (16, 6, 2))]
        tensor128 = [("tensor", (32, 3, 1)), ("tensor", (16, 3, 1)), ("tensor", (16, 3, 2)), ("tensor", (16, 4, 1)),
                     ("tensor", (16, 6, 1))]
        deep = [("tensor", (32, 5, 1)), ("tensor", (16, 8, 1))]  # more chunks in flight, one block a multiprocessor
        variants = {(C64, 16): tensor + deep + [("staged", (5, 4, 32, 3, 2)), ("fwd", (2, 4, 2, 2, 2, 2))],
                    (C64, 12): tensor[:2] + [("staged", (5, 4, 32, 3, 2))],
                    (C64, 8): tensor[:2] + [("fwd", (1, 8, 2, 4, 1, 2))],
                    (C64, 4): tensor[:1] + [("fwd", (1, 8, 2, 4, 2, 2))],
                    (C128, 16): tensor128 + [("staged", (2, 4, 16, 3, 2))],
                    (C128, 12): tensor128[:3],
                    (C128, 8): tensor128[:3] + [("fwd", (2, 4, 2, 2, 4, 2))],
                    (C128, 4): tensor128[:2] + [("fwd", (1, 8, 2, 2, 4, 2))]}
        for (ta, K), tiles in variants.items():
            if str(ta) not in args.gemm_dtypes.split(","):
                continue
            A = eng.Fhat[ta]
            KB = min(16, 1 << (K - 1).bit_length())
            x = rand_c((Nf, Nm, K), ta)
            y = cp.empty((Nf, Nd, K), ta)
            be.blas_min_k[(ta, False)] = 1
            t = timeit(lambda: be.sbgemv(A, x, y, adjoint=False), reps=5)
            emit(what="gemm_variant", ta=str(ta), K=K, kind="cublas", kernel="cuBLAS", time_s=t,
                 floor_ratio=t / (A.nbytes / bw))
            ref = y.copy()
            be.blas_min_k[(ta, False)] = 10**6
            be.gemm_min_k[ta] = 1
            for kind, tile in tiles:
                for S in (None, 1):
                    be.gemm_tensor[ta] = tile if kind == "tensor" else None
                    be.gemm_staged[ta] = tile if kind == "staged" else None
                    if kind == "fwd":
                        be.gemm_tiles[(ta, KB)] = tile
                    be.gemm_splits = S
                    be._launch.clear()
                    y[...] = 0
                    try:
                        t = timeit(lambda: be.sbgemv(A, x, y, adjoint=False), reps=5)
                    except Exception as exc:
                        emit(what="gemm_variant", ta=str(ta), kind=kind, tile=tile, S=S, error=repr(exc)[:300])
                        break
                    cfg = next(v for k, v in be._launch.items() if k[0] == "gemm")
                    err = float(cp.linalg.norm(y - ref) / cp.linalg.norm(ref))
                    emit(what="gemm_variant", ta=str(ta), K=K, kind=kind, kernel=cfg[6], tile=tile, S=S, S_used=cfg[5],
                         regs=int(cfg[0].num_regs), local_bytes=int(cfg[0].local_size_bytes), grid=cfg[1],
                         block=cfg[2], smem=cfg[3], time_s=t, floor_ratio=t / (A.nbytes / bw), rel_vs_cublas=err)
        (be.gemm_tiles, be.gemm_staged, be.gemm_tensor, be.gemm_splits, be.gemm_min_k, be.blas_min_k,
         be.gemm_tensor_pipe) = saved
        be._launch.clear()

    def part_adj_variants():
        """sbgemm_adj_tc's tiles (W, KS, NS, MINB) at K = 8 and 16, big size, each checked against cuBLAS's
        adjoint product and timed beside it."""
        eng = get_big()
        saved = dict(be.adj_tensor), dict(be.adj_tensor_min_k), dict(be.blas_min_k)
        tiles = {C128: [(4, 2, 3, 2), (4, 2, 4, 2), (4, 2, 2, 3)],
                 C64: [(4, 4, 3, 2), (4, 2, 4, 2), (4, 4, 4, 2), (4, 4, 2, 4), (4, 2, 3, 4), (4, 2, 2, 4),
                       (4, 4, 3, 3), (4, 2, 3, 3)]}
        for ta in (C64, C128):
            if str(ta) not in args.gemm_dtypes.split(","):
                continue
            A = eng.Fhat[ta]
            for K in (16, 8):
                d = rand_c((Nf, Nd, K), ta)
                m = cp.empty((Nf, Nm, K), ta)
                be.adj_tensor_min_k[ta], be.blas_min_k[(ta, True)] = 10**6, 1
                t = timeit(lambda: be.sbgemv(A, d, m, adjoint=True), reps=5)
                emit(what="gemm_variant", ta=str(ta), K=K, kind="cublas", kernel="cuBLAS adjoint", time_s=t,
                     floor_ratio=t / (A.nbytes / bw))
                ref = m.copy()
                be.adj_tensor_min_k[ta] = 1
                for tile in tiles[ta]:
                    be.adj_tensor[ta] = tile
                    be._launch.clear()
                    m[...] = 0
                    t = timeit(lambda: be.sbgemv(A, d, m, adjoint=True), reps=5)
                    fn, grid, block, smem, tail = next(v for k, v in be._launch.items() if k[0] == "gemm-adj")
                    emit(what="gemm_variant", ta=str(ta), K=K, kind="adj-tensor", kernel="sbgemm_adj_tc", tile=tile,
                         S=None, S_used=int(tail[4]), regs=int(fn.num_regs), local_bytes=int(fn.local_size_bytes),
                         grid=grid, block=block, smem=smem, time_s=t, floor_ratio=t / (A.nbytes / bw),
                         rel_vs_cublas=float(cp.linalg.norm(m - ref) / cp.linalg.norm(ref)))
        be.adj_tensor, be.adj_tensor_min_k, be.blas_min_k = saved
        be._launch.clear()

    def engine_runs(eng, codes, K, label, naive=True, stages=True):
        for code, adjoint in codes:
            prec = parse(code)
            A = eng.Fhat[prec.sbgemv]
            floor = A.nbytes / bw
            n_in = eng.nd if adjoint else eng.nm
            x = cp.random.standard_normal((n_in, eng.Nt, K)).astype(prec.pad)
            t = timeit(lambda: eng.apply(x, prec, adjoint=adjoint))
            ws = eng.workspace(adjoint, prec, K)
            rec = dict(what="engine", size=label, code=code, adjoint=adjoint, K=K, time_s=t, floor_s=floor,
                       floor_ratio=t / floor, per_vector_s=t / K, replay=ws.x_in is not None,
                       graph=bool(getattr(ws.launch, "graphs", None)), slot_error=getattr(ws.launch, "error", None))
            if stages:
                timer = be.timer()
                for _ in range(5):
                    eng.apply(x, prec, adjoint=adjoint, timer=timer)
                rec["stages"] = {k: float(np.median(v)) for k, v in timer.times.items()}
            if naive:
                x64 = x.astype(np.float64)
                rec["naive_s"] = timeit(lambda: be.naive_matvec(A, x64, adjoint), reps=10)
            emit(**rec)

    def part_engine():
        engine_runs(get_big(), [("ddddd", False), ("ddddd", True), ("dssdd", False), ("ddssd", True),
                                ("sssss", False), ("sssss", True)], 1, "big")

    def part_chunks():
        """Forward product in chunks of block rows (LocalBTT.apply_rows, no
        communication): what chunking the computation costs on one GPU."""
        sizes = (("mid", engine(50, 1000, 500, (C128, C64))), ("big", get_big()))
        for label, eng in sizes:
            for code in ("ddddd", "dssdd"):
                prec = parse(code)
                A = eng.Fhat[prec.sbgemv]
                floor = A.nbytes / bw
                x = cp.random.standard_normal((eng.nm, eng.Nt, 1)).astype(prec.pad)
                t1 = timeit(lambda: eng.apply(x, prec))
                for C in (1, 2, 4, 8):
                    eng._workspaces.clear()
                    t = timeit(lambda: eng.apply_rows(x, prec, C, lambda rows, mark: None))
                    timer = be.timer()
                    for _ in range(5):
                        eng.apply_rows(x, prec, C, None, timer=timer)
                    st = {k: float(np.median(v)) for k, v in timer.times.items()}
                    emit(what="engine", size=f"{label}-rows{C}", code=code, adjoint=False, K=1, time_s=t,
                         floor_s=floor, floor_ratio=t / floor, graph=False, stages=st, one_piece_s=t1)
                eng._workspaces.clear()

    def part_overlap():
        """The most that running the transforms beside the product could save:
        the three stages one after another on one stream against the product
        on one stream and both transforms (on other buffers) on another, all
        queued at once (CUDA events around both; nothing depends on anything)."""
        main_s, prod_s, fft_s = (cp.cuda.Stream(non_blocking=True) for _ in range(3))

        def stream_time(fn, reps=7):
            ts = []
            for i in range(reps + 2):
                e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                e0.record(main_s)
                with main_s:
                    fn()
                e1.record(main_s)
                e1.synchronize()
                ts.append(cp.cuda.get_elapsed_time(e0, e1) * 1e-3)
            return float(np.median(ts[2:]))

        cases = [(get_big(), "big", 1, "ddddd", False), (get_big(), "big", 1, "ddddd", True),
                 (get_big(), "big", 1, "dssdd", False), (get_big(), "big", 16, "ddddd", False),
                 (get_big(), "big", 16, "dssdd", False)]
        mid = engine(50, 1000, 500, (C128, C64))
        cases += [(mid, "mid", 1, "ddddd", False), (mid, "mid", 1, "dssdd", False)]
        for eng, label, K, code, adjoint in cases:
            prec = parse(code)
            A = eng.Fhat[prec.sbgemv]
            n_in, n_out = (eng.nd, eng.nm) if adjoint else (eng.nm, eng.nd)
            bufs = [(cp.random.standard_normal((n_in, eng.Nt, K)).astype(prec.pad),
                     cp.empty((eng.Nf, n_in, K), prec.fft_hat), cp.empty((eng.Nf, n_out, K), prec.sbgemv),
                     cp.empty((n_out, eng.Nt, K), prec.reduce)) for _ in range(2)]
            (x, xh, yh, y), (x2, xh2, yh2, y2) = bufs
            be.pad_rfft(x, xh)

            def in_order():
                be.pad_rfft(x, xh)
                be.sbgemv(A, xh, yh, adjoint)
                be.irfft_unpad(yh, y, prec.ifft)

            def side_by_side():
                fork = main_s.record()
                prod_s.wait_event(fork)
                fft_s.wait_event(fork)
                with prod_s:
                    be.sbgemv(A, xh, yh, adjoint)
                with fft_s:
                    be.pad_rfft(x2, xh2)
                    be.irfft_unpad(yh2, y2, prec.ifft)
                main_s.wait_event(prod_s.record())
                main_s.wait_event(fft_s.record())

            floor = A.nbytes / bw
            rec = dict(what="overlap", size=label, K=K, code=code, adjoint=adjoint, floor_s=floor,
                       in_order_s=stream_time(in_order), side_by_side_s=stream_time(side_by_side),
                       product_s=stream_time(lambda: be.sbgemv(A, xh, yh, adjoint)),
                       transforms_s=stream_time(lambda: (be.pad_rfft(x2, xh2), be.irfft_unpad(yh2, y2, prec.ifft))))
            emit(**rec)
            eng._workspaces.clear()

    def part_k16():
        eng = get_big()
        eng._workspaces.clear()
        engine_runs(eng, [("ddddd", False), ("dssdd", False), ("ddddd", True), ("ddssd", True)], 16, "big-K16",
                    naive=True)
        eng._workspaces.clear()

    def part_mid():
        eng = engine(50, 1000, 500, (C128, C64))
        for gmax in (-1, 1 << 30):
            be.graph_max_bytes = gmax
            eng._workspaces.clear()
            engine_runs(eng, [("ddddd", False), ("ddddd", True), ("dssdd", False), ("ddssd", True)], 1,
                        f"mid-graph{int(gmax > 0)}", naive=(gmax > 0))
        be.graph_max_bytes = 1 << 62

    def part_small():
        rng = np.random.default_rng(0)
        eng = engine(15, 289, 10, (C128, C64))
        for code, adjoint in (("ddddd", False), ("ddddd", True), ("dssdd", False)):
            prec = parse(code)
            x = cp.asarray(rng.standard_normal((15 if adjoint else 289, 10, 1))).astype(prec.pad)
            for gmax in (-1, 1 << 30):
                be.graph_max_bytes = gmax
                eng._workspaces.clear()
                eng.apply(x, prec, adjoint=adjoint)
                eng.apply(x, prec, adjoint=adjoint)
                t_loop = loop_time(lambda: eng.apply(x, prec, adjoint=adjoint))
                t_sync = timeit(lambda: eng.apply(x, prec, adjoint=adjoint), reps=200)
                be.synchronize()
                t0 = time.perf_counter()
                for _ in range(200):
                    eng.apply(x, prec, adjoint=adjoint)
                    be.synchronize()
                t_wall = (time.perf_counter() - t0) / 200
                ws = eng.workspace(adjoint, prec, 1)
                emit(what="small", code=code, adjoint=adjoint, graph_allowed=gmax > 0,
                     per_call_back_to_back_s=t_loop, per_call_events_s=t_sync, per_call_wall_sync_s=t_wall,
                     recorded=bool(getattr(ws.launch, "graphs", None)), slot_error=getattr(ws.launch, "error", None))
        be.graph_max_bytes = 1 << 62
        from fftmatvec import BTTOperator

        f = rng.standard_normal((15, 289, 10))
        op = BTTOperator(f, device=be)
        m = cp.asarray(rng.standard_normal((289, 10)))
        emit(what="small-operator", per_call_events_s=timeit(lambda: op.matvec(m), reps=200))

    def kernel_times(fn, n=20):
        return device_times(fn, be.synchronize, n)

    def part_kernels():
        """Device time per kernel of the untimed (fused, replayed) product.  With
        programmatic launches (``pdl`` in the rows) a kernel's time runs from
        when it starts, during the kernel before it, and so includes its wait:
        ``FFTMATVEC_PDL=0`` gives the split (docs/gpu-kernels.md, stop 31)."""
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            emit(what="kernels", error="no torch")
            return
        wanted = args.kernel_sizes.split(",")
        sizes = [("small", "small", lambda: engine(15, 289, 10, (C128, C64)), 1),
                 ("mid", "mid", lambda: engine(50, 1000, 500, (C128, C64)), 1), ("big", "big", get_big, 1),
                 ("big16", "big", get_big, 16)]
        for name, label, make, K in sizes:
            if name not in wanted:
                continue
            eng = make()
            eng._workspaces.clear()
            codes = [("ddddd", False), ("ddddd", True), ("dssdd", False), ("ddssd", True)]
            for code, adjoint in codes[:3] if K > 1 else codes:
                prec = parse(code)
                x = cp.random.standard_normal((eng.nd if adjoint else eng.nm, eng.Nt, K)).astype(prec.pad)
                per = kernel_times(lambda: eng.apply(x, prec, adjoint=adjoint))
                floor = eng.Fhat[prec.sbgemv].nbytes / bw * 1e6
                emit(what="kernels", size=label, K=K, code=code, adjoint=adjoint, floor_us=round(floor, 2),
                     total_us=round(sum(per.values()), 2), per_product_us=per, pdl=be.programmatic_launch)
            eng._workspaces.clear()

    def part_kernels_nrhs():
        """Device time per kernel of the replayed ``dssdd`` forward product at
        the big size with 3-8 right-hand sides (the forward transform's series
        per block depend on K)."""
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            emit(what="kernels", error="no torch")
            return
        eng = get_big()
        prec = parse("dssdd")
        for K in range(3, 9):
            x = cp.random.standard_normal((eng.nm, eng.Nt, K))
            per = kernel_times(lambda: eng.apply(x, prec, adjoint=False), n=10)
            emit(what="kernels", size="big", K=K, code="dssdd", adjoint=False, total_us=round(sum(per.values()), 2),
                 per_product_us=per)
            eng._workspaces.clear()

    def part_host():
        """Host time of the operator's products at the fixture size: latency
        (each waited for), back to back, and a cProfile of the calls."""
        import cProfile
        import io
        import pstats

        from fftmatvec import BTTOperator

        rng = np.random.default_rng(0)
        f = rng.standard_normal((15, 289, 10))
        op = BTTOperator(f, device=be)
        m = cp.asarray(rng.standard_normal((289, 10)))
        d = cp.asarray(rng.standard_normal((15, 10)))
        for name, fn in (("matvec", lambda: op.matvec(m)), ("rmatvec", lambda: op.rmatvec(d))):
            for _ in range(5):
                fn()
            be.synchronize()
            n = 2000
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
                be.synchronize()
            lat = (time.perf_counter() - t0) / n
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            be.synchronize()
            b2b = (time.perf_counter() - t0) / n
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(n):
                fn()
            be.synchronize()
            prof.disable()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(14)
            emit(what="host", call=name, latency_us=round(lat * 1e6, 2), back_to_back_us=round(b2b * 1e6, 2))
            print(text.getvalue()[-3500:], flush=True)

    spin = cp.RawKernel(r"""extern "C" __global__ void spin(long long cycles) {
        const long long t0 = clock64();
        while (clock64() - t0 < cycles) {}
    }""", "spin")
    clock_hz = cp.cuda.Device().attributes["ClockRate"] * 1e3

    def host_time(fn, n=300, busy_s=0.05):
        """Median host time of one call of ``fn`` while the device is busy
        with a spin kernel, so that launches only queue (a loop of calls
        timed to a final synchronisation measures the device instead when
        the device work per call is longer than the host's)."""
        done = cp.cuda.Event(disable_timing=True)
        spin((1,), (1,), (np.int64(busy_s * clock_hz),))
        done.record()
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        busy = not done.done
        be.synchronize()
        return float(np.median(ts)), busy

    def event_sync():
        ev = cp.cuda.Event(disable_timing=True)
        ev.record()
        ev.synchronize()

    def event_spin():
        ev = cp.cuda.Event(disable_timing=True)
        ev.record()
        while not ev.done:
            pass

    waits = (("device_sync", be.synchronize), ("stream_sync", cp.cuda.get_current_stream().synchronize),
             ("event_sync", event_sync), ("event_spin", event_spin))  # the ways of waiting for a product

    def part_wait():
        """Products waited for in four ways (the device, the stream, an event, spinning on an event),
        against back to back and CUDA events (device time of each waited-for call), and a copy of
        ``Fhat``'s bytes the same ways (``--wait-sizes``: big ``ddddd`` and, with ``K = 16``, ``dssdd``
        and ``ddddd``, middle ``dssdd``): is the waited-for product's time above the back-to-back one
        the wait or the product?  ``matvec`` and the prepared product (one graph launch) both."""
        from fftmatvec.bench import _back_to_back_time, _median_time, random_slab
        from fftmatvec.operator import BTTOperator

        cases = {"big": (100, 5000, 1000, 1, "ddddd"), "big16": (100, 5000, 1000, 16, "dssdd"),
                 "big16d": (100, 5000, 1000, 16, "ddddd"), "mid": (50, 1000, 500, 1, "dssdd")}
        for size in args.wait_sizes.split(","):
            nd, nm, nt, K, code = cases[size]
            op = BTTOperator(random_slab(0, nd, nm, nt, (0, nd), (0, nm)), device=be, precision=code)
            x = cp.random.standard_normal((nm, nt, K))
            prepared = op.prepare(x)
            fhat = op.engine.Fhat[op.precision.sbgemv]
            src = cp.empty(fhat.nbytes // 8, np.float64)
            dst = cp.empty_like(src)
            reps = 30 if K > 1 else 200
            for name, fn in (("matvec", lambda: op.matvec(x)), ("prepared", prepared),
                             ("copy moving Fhat's bytes", lambda: cp.copyto(dst, src))):
                for _ in range(2):  # two rounds: does the gap stay within one process
                    emit(what="wait", size=f"{nm}x{nd}x{nt}", K=K, code=code, fn=name,
                         back_to_back_us=round(_back_to_back_time(fn, reps, be.synchronize) * 1e6, 1),
                         events_us=round(timeit(fn, reps=reps) * 1e6, 1),
                         **{f"{how}_us": round(_median_time(fn, reps, wait) * 1e6, 1) for how, wait in waits})

    def part_l2():
        """How much of a product's read of Fhat the L2 can serve from the previous
        product: a kernel streams a buffer of a middle-size Fhat's bytes in tiles
        (16-byte loads), back to back, the tiles read in the same order each call
        or in alternating order, with streaming loads (ld.global.cs), plain ones,
        or L2 eviction hints (evict_last on ``keep`` bytes, evict_first on the
        rest), alone and with an 8 MB copy between calls (the transforms' share of
        the L2 traffic).  Time per call and x the floor."""
        src = r"""
        extern "C" __global__ void read_tiles(const float4* p, long long n4, int tile4, int rev, int mode,
                                              long long keep4, float* sink) {
            const int t = rev ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
            const long long beg = (long long)t * tile4;
            const long long end = beg + tile4 < n4 ? beg + tile4 : n4;
            unsigned long long last, first;
            asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(last));
            asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(first));
            float s = 0.f;
            for (long long i = beg + threadIdx.x; i < end; i += blockDim.x) {
                float4 v;
                if (mode == 0) {
                    v = __ldcs(p + i);
                } else if (mode == 1) {
                    v = p[i];
                } else {
                    // mode 2: the first keep4 values kept; mode 3: the values read last this call kept
                    const bool keep = mode == 2 ? i < keep4 : (rev ? i < keep4 : i >= n4 - keep4);
                    const unsigned long long pol = keep ? last : first;
                    asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.f32 {%0,%1,%2,%3}, [%4], %5;"
                                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p + i), "l"(pol));
                }
                s += v.x + v.y + v.z + v.w;
            }
            if (s == 1.2345f) sink[blockIdx.x] = s;  // keeps the loads
        }
        """
        kern = cp.RawKernel(src, "read_tiles", options=("-std=c++17",))
        other_src = cp.empty(1 << 20, np.float64)
        other_dst = cp.empty_like(other_src)
        sink = cp.zeros(1 << 16, np.float32)
        tile4, threads = 4096, 256
        for nbytes in (200_400_000, 400_800_000):
            buf = cp.random.standard_normal(nbytes // 8, dtype=np.float64)
            n4 = nbytes // 16
            blocks = (n4 + tile4 - 1) // tile4
            for interfere in (False, True):
                for mode, alternate, keep_mb in ((0, False, 0), (0, True, 0), (1, False, 0), (1, True, 0),
                                                 (2, False, 16), (2, False, 24), (2, False, 32), (2, False, 40),
                                                 (3, True, 16), (3, True, 24), (3, True, 32), (3, True, 40)):
                    keep4 = keep_mb * 1_000_000 // 16
                    calls = [0]

                    def one():
                        rev = calls[0] % 2 if alternate else 0
                        calls[0] += 1
                        kern((blocks,), (threads,), (buf, np.int64(n4), np.int32(tile4), np.int32(rev),
                                                     np.int32(mode), np.int64(keep4), sink))
                        if interfere:
                            cp.copyto(other_dst, other_src)

                    t = loop_time(one, n=100)
                    emit(what="l2", nbytes=nbytes, mode=("ldcs", "ld", "fixed", "alternate")[mode],
                         alternate=alternate, keep_mb=keep_mb, copy_8mb_between=interfere,
                         us=round(t * 1e6, 2), floor_ratio=round(t / (nbytes / bw), 4))

    def part_read():
        """The rate at which a kernel that only reads can stream a big buffer,
        against the copy bandwidth the floor is measured with: is a product
        kernel at 1.0x the floor at the memory's ceiling?  Sums of 16-byte
        loads, each thread with U loads in flight: first in the product
        kernels' patterns over a big size's `Fhat` bytes (``rows``: a group of
        W threads streams R rows; ``cols``: a block reads a tile of each of a
        frequency's 100 rows), then over 2 GB and 8 GB with the loads streaming
        (ld.global.cs), read-only (ld.global.nc), or read-only past L1 with an
        L2 prefetch of 128 or 256 bytes, the grid persistent (resident blocks
        striding over the buffer, ``sum``) or covering it once (each block its
        own contiguous tile, ``tile``).  Time per call back to back, bytes
        over time, and x the floor."""
        src = r"""
        template <int MODE> __device__ __forceinline__ float4 load(const float4* p) {
            float4 v;
            if (MODE == 0) {
                v = __ldcs(p);
            } else if (MODE == 1) {
                v = __ldg(p);
            } else if (MODE == 2) {
                asm volatile("ld.global.nc.L1::no_allocate.L2::128B.v4.f32 {%0,%1,%2,%3}, [%4];"
                             : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
            } else if (MODE == 3) {
                asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0,%1,%2,%3}, [%4];"
                             : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
            } else {
                asm volatile("ld.global.cs.L2::256B.v4.f32 {%0,%1,%2,%3}, [%4];"
                             : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
            }
            return v;
        }
        // thread t of the grid reads p[i], p[i + stride], ... with U loads in flight
        template <int U, int MODE> __global__ void read_sum(const float4* __restrict__ p, long long n4, float* sink) {
            const long long stride = (long long)gridDim.x * blockDim.x;
            long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
            float s = 0.f;
            for (; i + (U - 1) * stride < n4; i += U * stride) {
                float4 v[U];
        #pragma unroll
                for (int u = 0; u < U; ++u) v[u] = load<MODE>(p + i + u * stride);
        #pragma unroll
                for (int u = 0; u < U; ++u) s += v[u].x + v[u].y + v[u].z + v[u].w;
            }
            for (; i < n4; i += stride) {
                const float4 v = load<MODE>(p + i);
                s += v.x + v.y + v.z + v.w;
            }
            if (s == 1.2345f) sink[0] = s;  // keeps the loads
        }
        // block b reads its own contiguous tile, U loads of blockDim.x * 16 bytes in flight
        template <int U, int MODE> __global__ void read_tile(const float4* __restrict__ p, long long n4, int tile4,
                                                             float* sink) {
            const long long beg = (long long)blockIdx.x * tile4;
            const long long end = beg + tile4 < n4 ? beg + tile4 : n4;
            float s = 0.f;
            long long i = beg + threadIdx.x;
            for (; i + (U - 1) * blockDim.x < end; i += U * blockDim.x) {
                float4 v[U];
        #pragma unroll
                for (int u = 0; u < U; ++u) v[u] = load<MODE>(p + i + u * blockDim.x);
        #pragma unroll
                for (int u = 0; u < U; ++u) s += v[u].x + v[u].y + v[u].z + v[u].w;
            }
            for (; i < end; i += blockDim.x) {
                const float4 v = load<MODE>(p + i);
                s += v.x + v.y + v.z + v.w;
            }
            if (s == 1.2345f) sink[0] = s;
        }
        // the forward product's pattern: a group of W threads owns R consecutive rows of L values and
        // strides over them, U loads of W * 16 bytes in flight per row
        template <int U, int R, int MODE> __global__ void read_rows(const float4* __restrict__ p, long long nrows,
                                                                    int L, int W, float* sink) {
            const long long group = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / W;
            const int sub = threadIdx.x % W;
            if (group * R >= nrows) return;
            const float4* row = p + group * R * L;
            float s = 0.f;
            for (int j = sub; j < L; j += U * W) {
                float4 v[U][R];
        #pragma unroll
                for (int u = 0; u < U; ++u)
        #pragma unroll
                    for (int r = 0; r < R; ++r)
                        v[u][r] = j + u * W < L ? load<MODE>(row + (long long)r * L + j + u * W)
                                                : make_float4(0, 0, 0, 0);
        #pragma unroll
                for (int u = 0; u < U; ++u)
        #pragma unroll
                    for (int r = 0; r < R; ++r) s += v[u][r].x + v[u][r].y + v[u][r].z + v[u][r].w;
            }
            if (s == 1.2345f) sink[0] = s;
        }
        // the blocked adjoint's pattern: block b reads a tile of blockDim.x values of each of the nd rows of
        // its frequency (rows of L values), U rows in flight
        template <int U> __global__ void read_cols(const float4* __restrict__ p, int nd, int L, float* sink) {
            const int tiles = (L + blockDim.x - 1) / blockDim.x;
            const int f = blockIdx.x / tiles;
            const int j = (blockIdx.x % tiles) * blockDim.x + threadIdx.x;
            if (j >= L) return;
            const float4* a = p + (long long)f * nd * L + j;
            float s = 0.f;
            for (int i = 0; i < nd; i += U) {
                float4 v[U];
        #pragma unroll
                for (int u = 0; u < U; ++u)
                    v[u] = i + u < nd ? __ldcs(a + (long long)(i + u) * L) : make_float4(0, 0, 0, 0);
        #pragma unroll
                for (int u = 0; u < U; ++u) s += v[u].x + v[u].y + v[u].z + v[u].w;
            }
            if (s == 1.2345f) sink[0] = s;
        }
        """
        rows_names = [f"read_rows<{u}, {r}, 0>" for u in (2, 4, 8) for r in (1, 2)]
        rows_names += [f"read_cols<{u}>" for u in (4, 8, 16)]
        rows_mod = cp.RawModule(code=src, options=("-std=c++17",), name_expressions=rows_names)
        sink = cp.zeros(1, np.float32)
        for L in (5000, 2500):  # rows of a complex128 and of a complex64 Fhat at the big size
            nrows = 100_100
            buf = cp.empty(nrows * L * 2, np.float64)
            buf.fill(1.0)
            nbytes = buf.nbytes
            for W in (32, 64, 128, 256):
                for u in (2, 4, 8):
                    for r in (1, 2):
                        fn = rows_mod.get_function(f"read_rows<{u}, {r}, 0>")
                        grid = (-(-nrows // r) * W + 255) // 256

                        def one():
                            fn((grid,), (256,), (buf, np.int64(nrows), np.int32(L), np.int32(W), sink))

                        t = loop_time(one, n=20)
                        emit(what="read", nbytes=nbytes, kind="rows", row_bytes=L * 16, W=W, R=r, U=u, load="ldcs",
                             us=round(t * 1e6, 1), TBps=round(nbytes / t / 1e12, 3),
                             floor_ratio=round(t / (nbytes / bw), 4))
            for threads in (64, 128, 256, 512):
                for u in (4, 8, 16):
                    fn = rows_mod.get_function(f"read_cols<{u}>")
                    grid = nrows // 100 * -(-L // threads)

                    def one():
                        fn((grid,), (threads,), (buf, np.int32(100), np.int32(L), sink))

                    t = loop_time(one, n=20)
                    emit(what="read", nbytes=nbytes, kind="cols", row_bytes=L * 16, threads=threads, U=u,
                         load="ldcs", us=round(t * 1e6, 1), TBps=round(nbytes / t / 1e12, 3),
                         floor_ratio=round(t / (nbytes / bw), 4))
            buf = None  # frees the buffer before the next size
        modes = ("ldcs", "ldg", "nc.L2::128B", "nc.L2::256B", "cs.L2::256B")
        us_ = (4, 8, 16)
        names = [f"read_{kind}<{u}, {m}>" for kind in ("sum", "tile") for u in us_ for m in range(len(modes))]
        mod = cp.RawModule(code=src, options=("-std=c++17",), name_expressions=names)
        sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        for nbytes in (2 << 30, 8 << 30):
            buf = cp.empty(nbytes // 8, np.float64)
            buf.fill(1.0)
            n4 = nbytes // 16
            for kind in ("sum", "tile"):
                for threads in (256, 512, 1024):
                    for u in us_:
                        for m, mode in enumerate(modes):
                            if nbytes == 8 << 30 and (u == 4 or mode in ("ldg", "nc.L2::128B")):
                                continue
                            fn = mod.get_function(f"read_{kind}<{u}, {m}>")
                            if kind == "sum":
                                per_sm = max(1, 2048 // threads)
                                grid = sms * per_sm

                                def one():
                                    fn((grid,), (threads,), (buf, np.int64(n4), sink))
                            else:
                                tile4 = threads * u * 4
                                grid = (n4 + tile4 - 1) // tile4

                                def one():
                                    fn((grid,), (threads,), (buf, np.int64(n4), np.int32(tile4), sink))

                            t = loop_time(one, n=20 if nbytes > 4 << 30 else 50)
                            emit(what="read", nbytes=nbytes, kind=kind, threads=threads, U=u, load=mode,
                                 us=round(t * 1e6, 1), TBps=round(nbytes / t / 1e12, 3),
                                 floor_ratio=round(t / (nbytes / bw), 4))
            buf = None  # frees the buffer before the next size

    def part_adj_parts():
        """The blocked adjoint's read pattern built up toward the kernel, to find
        what makes the kernel slower than its reads alone: the pattern (a block
        of 128 threads reads 16 bytes of each of a frequency's 100 rows, 8 rows
        in flight), + the result's write (16 bytes a thread: a plain store, or
        one with the L2 hint evict-first or evict-last), + X staged in shared
        memory behind a barrier and multiplied in, and the kernels themselves
        (``sbgemv_adj`` as the engine launches it, and the balanced
        ``sbgemv_adj_flat``) with a plain and an evict-last store, timed back to back
        in rounds that alternate the variants (medians; x the floor), big size,
        both storage precisions."""
        src = r"""
        // WRITE: 0 no result, 1 plain store, 2 evict-first, 3 evict-last; STAGE: X[f, :] staged in shared memory
        template <int U, int WRITE, int STAGE>
        __global__ void adj_pattern(const float4* __restrict__ p, const float2* __restrict__ X, float4* __restrict__ Y,
                                    int nd, int L, float* sink) {
            extern __shared__ float2 xs[];
            const int tiles = (L + blockDim.x - 1) / blockDim.x;
            const int f = blockIdx.x / tiles;
            const int j = (blockIdx.x % tiles) * blockDim.x + threadIdx.x;
            if (STAGE) {
                for (int t = threadIdx.x; t < nd; t += blockDim.x) xs[t] = X[(long long)f * nd + t];
                __syncthreads();
            }
            if (j >= L) return;
            const float4* a = p + (long long)f * nd * L + j;
            float4 s = make_float4(0, 0, 0, 0);
            for (int i = 0; i < nd; i += U) {
                float4 v[U];
        #pragma unroll
                for (int u = 0; u < U; ++u)
                    v[u] = i + u < nd ? __ldcs(a + (long long)(i + u) * L) : make_float4(0, 0, 0, 0);
        #pragma unroll
                for (int u = 0; u < U; ++u) {
                    const float2 x = STAGE ? xs[min(i + u, nd - 1)] : make_float2(1.f, 0.f);
                    s.x += v[u].x * x.x + v[u].y * x.y;
                    s.y += v[u].y * x.x - v[u].x * x.y;
                    s.z += v[u].z * x.x + v[u].w * x.y;
                    s.w += v[u].w * x.x - v[u].z * x.y;
                }
            }
            float4* y = Y + (long long)f * L + j;
            if (WRITE == 1) {
                *y = s;
            } else if (WRITE == 2) {
                __stcs(y, s);
            } else if (WRITE == 3) {
                asm volatile("{\n\t.reg .b64 pol;\n\tcreatepolicy.fractional.L2::evict_last.b64 pol, 1.0;\n\t"
                             "st.global.L2::cache_hint.v4.f32 [%0], {%1, %2, %3, %4}, pol;\n\t}"
                             ::"l"(y), "f"(s.x), "f"(s.y), "f"(s.z), "f"(s.w) : "memory");
            } else if (s.x == 1.2345f) {
                sink[0] = s.x;
            }
        }
        """
        combos = [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 1)]
        names = [f"adj_pattern<8, {w}, {st}>" for w, st in combos]
        mod = cp.RawModule(code=src, options=("-std=c++17",), name_expressions=names)
        sink = cp.zeros(1, np.float32)
        nf, nd, nm = Nf, Nd, Nm
        for ta in (C64, C128):
            A = rand_c((nf, nd, nm), ta)
            floor = A.nbytes / bw
            L = nm * ta.itemsize // 16  # 16-byte units per row
            X = rand_c((nf, nd, 1), ta)
            Xs = rand_c((nf, nd), C64)
            Y = cp.empty((nf, nm, 1), ta)
            threads = 128
            grid = nf * -(-L // threads)
            variants = {}
            for (w, st), name in zip(combos, names):
                fn = mod.get_function(name)
                variants[f"pattern write={('none', 'plain', 'evict-first', 'evict-last')[w]} stage_x={bool(st)}"] = (
                    lambda fn=fn, st=st: fn((grid,), (threads,), (A, Xs, Y, np.int32(nd), np.int32(L), sink),
                                            shared_mem=nd * 8 if st else 0))
            for flat in (False, True):
                for keep in (False, True):
                    fn, kgrid, block, smem, tail, _ = be._adj_config(nf, nd, nm, 1, ta, ta, flat=flat, keep=keep)
                    kname = "sbgemv_adj_flat" if flat else "sbgemv_adj"
                    variants[f"kernel {kname} store={'evict-last' if keep else 'plain'}"] = (
                        lambda fn=fn, g=kgrid, b=block, sm=smem, t=tail: fn(g, b, (A, X, Y) + t, shared_mem=sm))
            alternated("adj_parts", variants, floor, n=20, ta=str(ta))
            A = None

    def part_slabs():
        """The read pattern of an adjoint product fused with the inverse
        transform, before writing one: block b owns a slab of LANES 16-byte
        units (8 complex128 or 8 complex64 columns: 128 or 64 bytes) of every
        row of every frequency, so that its columns' whole spectra end in its
        shared memory.  Thread t reads unit t % LANES of one frequency at a time
        over the nd rows, U loads in flight, with X[f, i] (16 bytes, shared by
        the piece's lanes) loaded from global memory or not, and stores its sum
        to shared memory (nf * LANES units: the spectra); the block then
        spins SPIN us, standing in for the transform that would follow.  The
        dynamic shared memory reserved sets the blocks per multiprocessor.
        Big size, both storage precisions, the blocked ``sbgemv_adj`` beside
        it; variants alternated in rounds (medians; x the floor)."""
        src = r"""
        template <int LANES, int U, int LOADX>
        __global__ void slab_read(const float4* __restrict__ p, const float4* __restrict__ X, int nf, int nd,
                                  int L, int nspec, long long spin_ns, float* sink) {
            extern __shared__ float4 spec[];
            const int c = threadIdx.x % LANES;
            const int per_round = blockDim.x / LANES;
            const long long col = (long long)blockIdx.x * LANES + c;
            for (int f = threadIdx.x / LANES; f < nf; f += per_round) {
                const float4* a = p + (long long)f * nd * L + col;
                const float4* x = X + (long long)f * nd;
                float4 s = make_float4(0, 0, 0, 0);
                for (int i = 0; i < nd; i += U) {
                    float4 v[U];
        #pragma unroll
                    for (int u = 0; u < U; ++u)
                        v[u] = (i + u < nd && col < L) ? __ldcs(a + (long long)(i + u) * L) : make_float4(0, 0, 0, 0);
        #pragma unroll
                    for (int u = 0; u < U; ++u) {
                        const float4 xv = LOADX ? __ldg(x + min(i + u, nd - 1)) : make_float4(1.f, 0.f, 1.f, 0.f);
                        s.x += v[u].x * xv.x + v[u].y * xv.y;
                        s.y += v[u].y * xv.x - v[u].x * xv.y;
                        s.z += v[u].z * xv.z + v[u].w * xv.w;
                        s.w += v[u].w * xv.z - v[u].z * xv.w;
                    }
                }
                if (f * LANES + c < nspec) spec[f * LANES + c] = s;
            }
            __syncthreads();
            if (spin_ns > 0) {
                long long t0, t;
                asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
                do {
                    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
                } while (t - t0 < spin_ns);
            }
            const float4 r = spec[threadIdx.x];
            if (r.x == 1.2345f) sink[0] = r.y;
        }
        """
        configs = [  # (LANES, threads, U, load X, shared KB, spin us)
            (8, 1024, 8, 1, 128, 0), (8, 1024, 4, 1, 128, 0), (8, 1024, 8, 0, 128, 0), (8, 512, 8, 1, 128, 0),
            (4, 512, 8, 1, 64, 0), (8, 1024, 8, 1, 64, 0), (8, 1024, 8, 1, 128, 13), (4, 512, 8, 1, 64, 13),
        ]
        names = sorted({f"slab_read<{ln // d}, {u}, {lx}>" for ln, _, u, lx, _, _ in configs for d in (1, 2)})
        mod = cp.RawModule(code=src, options=("-std=c++17",), name_expressions=names)
        sink = cp.zeros(1, np.float32)
        nf, nd, nm = Nf, Nd, Nm
        for ta in (C128, C64):
            A = rand_c((nf, nd, nm), ta)
            floor = A.nbytes / bw
            L = nm * ta.itemsize // 16
            X = rand_c((nf, nd, 1), C128)
            Y = cp.empty((nf, nm, 1), ta)
            variants = {}
            for lanes, threads, u, lx, kb, spin in configs:
                if ta == C64:  # 8 complex64 columns are 4 units; the spectra stay 16 bytes a value (a float64 inverse)
                    lanes = lanes // 2
                fn = mod.get_function(f"slab_read<{lanes}, {u}, {lx}>")
                fn.max_dynamic_shared_size_bytes = kb * 1024
                grid = -(-L // lanes)
                key = f"slab units={lanes} threads={threads} U={u} load_x={bool(lx)} shared={kb}KB spin={spin}us"
                variants[key] = lambda fn=fn, g=grid, t=threads, kb=kb, spin=spin: fn(
                    (g,), (t,), (A, X, np.int32(nf), np.int32(nd), np.int32(L), np.int32(kb * 64),
                                 np.int64(spin * 1000), sink), shared_mem=kb * 1024)
            fn, kgrid, block, smem, tail, _ = be._adj_config(nf, nd, nm, 1, ta, ta, flat=False)
            Xk = rand_c((nf, nd, 1), ta)
            variants["kernel sbgemv_adj"] = lambda fn=fn, g=kgrid, b=block, sm=smem, t=tail: fn(
                g, b, (A, Xk, Y) + t, shared_mem=sm)
            alternated("slabs", variants, floor, rounds=5, ta=str(ta))
            A = None

    def part_adj_c128():
        """What makes the complex128 blocked adjoint slower than its read pattern
        with the write (stop 25's ``adjparts``): a copy of ``sbgemv_adj``'s
        one-vector path (blocks of 128 column threads, X staged in shared
        memory, U rows in flight, then single loads for the last nd % U rows),
        changed one thing at a time (and ``sbgemv_adj`` itself with RS = 1 a
        compile-time constant, or held to 40 registers): the last rows as one more predicated
        round of U loads (TAIL), two accumulators instead of one (NACC), X read
        from global memory without a barrier (XG), the arithmetic in float on
        the loaded bits (FMATH: the pattern's work, wrong sums), and U = 10,
        which divides the 100 rows.  Big size, alternated rounds, medians."""

        src = kernels.source("fftmatvec_common.cuh") + r"""
        template <int U, int TAIL, int NACC, int XG, int FMATH>
        __global__ void adj_var(const double2* __restrict__ A, const double2* __restrict__ X, double2* __restrict__ Y,
                                int nd, int nm, int keep) {
            __shared__ double2 xs[128];
            const int tiles = (nm + blockDim.x - 1) / blockDim.x;
            const int f = blockIdx.x / tiles;
            const int j = (blockIdx.x % tiles) * blockDim.x + threadIdx.x;
            const double2* x = X + (long long)f * nd;
            if (!XG) {
                for (int t = threadIdx.x; t < nd; t += blockDim.x) xs[t] = x[t];
                __syncthreads();
            }
            if (j >= nm) return;
            const double2* a = A + (long long)f * nd * nm + j;
            double2 acc[NACC];
            float4 facc = make_float4(0.f, 0.f, 0.f, 0.f);
        #pragma unroll
            for (int q = 0; q < NACC; ++q) acc[q] = fmv::czero<double2>();
            auto mac = [&](int q, double2 av, int i) {
                const double2 xv = XG ? __ldg(x + i) : xs[i];
                if (FMATH) {
                    const float4 v = *reinterpret_cast<const float4*>(&av);
                    const float4 w = *reinterpret_cast<const float4*>(&xv);
                    facc.x += v.x * w.x + v.y * w.y;
                    facc.y += v.y * w.x - v.x * w.y;
                    facc.z += v.z * w.z + v.w * w.w;
                    facc.w += v.w * w.z - v.z * w.w;
                } else {
                    fmv::cmac_conj(acc[q], av, xv);
                }
            };
            int i = 0;
            if (TAIL) {
                for (; i < nd; i += U) {
                    double2 av[U];
        #pragma unroll
                    for (int u = 0; u < U; ++u)
                        av[u] = i + u < nd ? __ldcs(a + (long long)(i + u) * nm) : fmv::czero<double2>();
        #pragma unroll
                    for (int u = 0; u < U; ++u) mac(u % NACC, av[u], min(i + u, nd - 1));
                }
            } else {
                for (; i + U <= nd; i += U) {
                    double2 av[U];
        #pragma unroll
                    for (int u = 0; u < U; ++u) av[u] = __ldcs(a + (long long)(i + u) * nm);
        #pragma unroll
                    for (int u = 0; u < U; ++u) mac(u % NACC, av[u], i + u);
                }
                for (; i < nd; ++i) mac(0, __ldcs(a + (long long)i * nm), i);
            }
        #pragma unroll
            for (int q = 1; q < NACC; ++q) fmv::cadd(acc[0], acc[q]);
            if (FMATH) acc[0] = *reinterpret_cast<const double2*>(&facc);
            fmv::st_keep(Y + (long long)f * nm + j, acc[0], keep);
        }
        """
        combos = {"copy": (8, 0, 1, 0, 0), "tail predicated": (8, 1, 1, 0, 0), "two accumulators": (8, 0, 2, 0, 0),
                  "X from global": (8, 0, 1, 1, 0), "float math": (8, 0, 1, 0, 1), "U=10": (10, 0, 1, 0, 0),
                  "tail predicated, two accumulators, X from global": (8, 1, 2, 1, 0)}
        names = {k: "adj_var<%d, %d, %d, %d, %d>" % v for k, v in combos.items()}
        # sbgemv_adj itself, with RS = 1 known at compile time, or limited to 40 registers (12 blocks of 128)
        sb = kernels.source("sbgemv.cu")
        adj = sb[sb.index("template <typename TA, typename TX, int U, int VEC, int KB>\n__global__ void sbgemv_adj("):
                 sb.index("// Y[i] = sum_s")]
        rs1 = adj.replace("void sbgemv_adj(", "void sbgemv_adj_rs1(")
        rs1 = rs1.replace("int K, int RS, int CH,", "int K, int, int CH,")
        rs1 = rs1.replace("TA* red = xs + CH * KB;", "TA* red = xs + CH * KB;\n    constexpr int RS = 1;")
        bounded = adj.replace("__global__ void sbgemv_adj(",
                              "__global__ void __launch_bounds__(128, 12) sbgemv_adj_b40(")
        src += "\nusing fmv::index_t;\n" + rs1 + bounded
        names["sbgemv_adj, RS = 1 at compile time"] = "sbgemv_adj_rs1<double2, double2, 8, 1, 1>"
        names["sbgemv_adj, 40 registers"] = "sbgemv_adj_b40<double2, double2, 8, 1, 1>"
        mod = cp.RawModule(code=src, options=("-std=c++17",), name_expressions=list(names.values()))
        nf, nd, nm = Nf, Nd, Nm
        A = rand_c((nf, nd, nm), C128)
        floor = A.nbytes / bw
        X = rand_c((nf, nd, 1), C128)
        Y = cp.empty((nf, nm, 1), C128)
        Yref = cp.empty_like(Y)
        variants = {}
        for flat in (False, True):
            fn, kgrid, block, smem, tail, _ = be._adj_config(nf, nd, nm, 1, C128, C128, flat=flat)
            variants["kernel " + ("sbgemv_adj_flat" if flat else "sbgemv_adj")] = (
                lambda fn=fn, g=kgrid, b=block, sm=smem, t=tail, out=(Yref if not flat else Y):
                fn(g, b, (A, X, out) + t, shared_mem=sm))
        grid = nf * -(-nm // 128)
        for k, name in names.items():
            fn = mod.get_function(name)
            if k.startswith("sbgemv_adj"):
                _, kgrid, block, smem, tail, _ = be._adj_config(nf, nd, nm, 1, C128, C128, flat=False)
                variants["copy " + k] = lambda fn=fn, g=kgrid, b=block, sm=smem, t=tail: fn(
                    g, b, (A, X, Y) + t, shared_mem=sm)
            else:
                variants["copy: " + k if k != "copy" else "copy"] = (
                    lambda fn=fn: fn((grid,), (128,), (A, X, Y, np.int32(nd), np.int32(nm), np.int32(0))))
        variants["kernel sbgemv_adj"]()
        for k, call in variants.items():
            if k.startswith("copy") and "float" not in k:
                call()
                err = float(cp.abs(Y - Yref).max() / cp.abs(Yref).max())
                assert err < 1e-12, (k, err)
        alternated("adj_c128", variants, floor)

    def part_regs():
        """The one-vector product kernels compiled with a register cap (NVRTC
        --maxrregcount), which changes how the compiler schedules their loads:
        stop 26's ``adjc128`` found ``sbgemv_adj`` held to 40 registers 7%
        faster in complex128.  Each kernel as the engine picks and launches it
        (blocked or balanced adjoint, the forward's rows and loads in flight),
        at the big and middle sizes, caps alternated in rounds (medians), with
        the registers each build uses."""
        picked = []
        engine_kernel = kernels.kernel

        def recording(fname, name, *targs, **kw):
            picked.append((fname, name, targs))
            return engine_kernel(fname, name, *targs, **kw)

        kernels.kernel = recording
        try:
            for nm, nd, nt in ((Nm, Nd, Nt), (1000, 50, 500)):
                nf = nt + 1
                for ta, tx in ((C128, C128), (C64, C64), (C64, C128)):
                    A = rand_c((nf, nd, nm), ta)
                    floor = A.nbytes / bw
                    for adjoint in (True, False):
                        X = rand_c((nf, nd if adjoint else nm, 1), tx)
                        Y = cp.empty((nf, nm if adjoint else nd, 1), ta)
                        config = be._adj_config if adjoint else be._fwd_config
                        _, grid, block, smem, tail, _ = config(nf, nd, nm, 1, ta, tx)
                        fname, name, targs = picked[-1]
                        expr = kernels.name_expression(name, *targs)
                        variants, regs = {}, {}
                        for cap in (0, 64, 56, 48, 40, 32):
                            opts = kernels.options() + ((f"--maxrregcount={cap}",) if cap else ())
                            fn = cp.RawModule(code=kernels.source(fname), options=opts,
                                              name_expressions=(expr,)).get_function(expr)
                            key = f"cap={cap or 'none'}"
                            regs[key] = fn.num_regs
                            variants[key] = lambda fn=fn, g=grid, b=block, sm=smem, t=tail: fn(
                                g, b, (A, X, Y) + t, shared_mem=sm)
                        alternated("regs", variants, floor, n=10 if nm == Nm else 50,
                                   per_variant={k: {"registers": r} for k, r in regs.items()},
                                   size=f"{nm}x{nd}x{nt}", kernel=expr)
                    A = None
        finally:
            kernels.kernel = engine_kernel

    def part_regs_loads():
        """Loads in flight under register targets, big size: the blocked
        one-vector adjoint with U = 8, 10 (divides the 100 rows) and 16 rows in
        flight, and the forward kernel (groups of 128 lanes as the engine
        launches it) with R rows and U loads a row, each built with the
        compiler's own register count and with targets of 64 and 80; in
        alternated rounds (medians)."""
        nf, nd, nm = Nf, Nd, Nm
        wanted = [(ta, tx, adjoint) for ta, tx, adjoint in
                  ((C64, C64, True), (C64, C64, False), (C64, C128, False), (C128, C128, True), (C128, C128, False))
                  if args.regs_loads in ("all", "forward" if not adjoint else "adjoint")]
        for ta in (C64, C128):
            A = rand_c((nf, nd, nm), ta)
            floor = A.nbytes / bw
            vec = 1 if ta == C128 else 2
            t = kernels.ctype(ta)
            for tx, adjoint in [(tx, adj) for a, tx, adj in wanted if a == ta]:
                X = rand_c((nf, nd if adjoint else nm, 1), tx)
                Y = cp.empty((nf, nm if adjoint else nd, 1), ta)
                shapes = ((8,), (10,), (16,)) if adjoint else ((4, 1), (4, 2), (2, 2), (8, 1)) if ta == C64 else \
                    ((2, 1), (2, 2), (4, 1))
                variants, regs = {}, {}
                for shape in shapes:
                    if adjoint:
                        _, grid, block, smem, tail, _ = be._adj_config(nf, nd, nm, 1, ta, tx, U=shape[0], flat=False)
                        expr = f"sbgemv_adj<{t}, {kernels.ctype(tx)}, {shape[0]}, {vec}, 1>"
                    else:
                        _, grid, block, smem, tail, _ = be._fwd_config(nf, nd, nm, 1, ta, tx, R=shape[0], U=shape[1],
                                                                       lanes=128)
                        expr = f"sbgemv_fwd<{t}, {kernels.ctype(tx)}, {shape[0]}, {shape[1]}, {vec}, 1>"
                    for cap in (0, 64, 80):
                        opts = kernels.options() + ((f"--maxrregcount={cap}",) if cap else ())
                        fn = cp.RawModule(code=kernels.source("sbgemv.cu"), options=opts,
                                          name_expressions=(expr,)).get_function(expr)
                        key = f"{expr} cap={cap or 'none'}"
                        regs[key] = fn.num_regs
                        variants[key] = lambda fn=fn, g=grid, b=block, sm=smem, tl=tail: fn(
                            g, b, (A, X, Y) + tl, shared_mem=sm)
                alternated("regs_loads", variants, floor, rounds=5,
                           per_variant={k: {"registers": r} for k, r in regs.items()})
            A = None

    def part_pdl():
        """What Hopper's programmatic dependent launch could save at the middle
        size, on a stand-in for the three kernels of a product in one CUDA
        graph: a latency-bound transform (250 blocks of 512 threads, passes
        through shared memory), a kernel streaming a complex64 middle-size
        Fhat's bytes (200.4 MB), and a small inverse transform (50 blocks).
        Launched plainly or with the programmatic-serialization attribute on
        the second and third kernels (fftmatvec.backend.launch);
        the transform then lets its dependant start at once, and the streaming
        kernel either waits before any load or issues its first two loads of
        Fhat before it waits.  Time per graph back to back (CUDA events) and
        waited for (host clock), medians."""
        from fftmatvec.backend.launch import ProgrammaticLauncher

        src = r"""
        __device__ __forceinline__ void grid_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
        __device__ __forceinline__ void let_dependants_start() { asm volatile("griddepcontrol.launch_dependents;"); }
        // four series of 1000 samples a block, `passes` exchanges through shared memory, frequency-major store
        extern "C" __global__ void front(const double* x, float2* xh, int n, int passes, int trigger) {
            if (trigger) let_dependants_start();
            __shared__ float2 buf[2000];
            const int s0 = blockIdx.x * 4;
            for (int e = threadIdx.x; e < 2000; e += blockDim.x) {
                const int s = e / 500, j = e % 500;
                buf[e] = make_float2((float)x[(s0 + s) * 1000 + 2 * j], (float)x[(s0 + s) * 1000 + 2 * j + 1]);
            }
            for (int p = 0; p < passes; ++p) {
                float2 v[4];
                __syncthreads();
                for (int k = 0; k < 4; ++k) {
                    const int e = threadIdx.x + k * blockDim.x;
                    v[k] = e < 2000 ? buf[(e * 7 + p * 13) % 2000] : make_float2(0.f, 0.f);
                }
                __syncthreads();
                for (int k = 0; k < 4; ++k) {
                    const int e = threadIdx.x + k * blockDim.x;
                    if (e < 2000) buf[e] = make_float2(v[k].x + 0.5f * v[k].y, v[k].y - 0.5f * v[k].x);
                }
            }
            __syncthreads();
            for (int e = threadIdx.x; e < 2000; e += blockDim.x) xh[(e % 500) * n + s0 + e / 500] = buf[e];
        }
        // tiles of 64 KB of A a block; the first two loads of each thread before the wait when `early`
        extern "C" __global__ void stream(const float4* A, const float2* xh, float* y, int tile4, int nx, int early) {
            const long long beg = (long long)blockIdx.x * tile4;
            const int i = threadIdx.x;
            float4 a0 = make_float4(0.f, 0.f, 0.f, 0.f), a1 = a0;
            if (early) { a0 = __ldcs(A + beg + i); a1 = __ldcs(A + beg + i + blockDim.x); }
            grid_wait();
            if (!early) { a0 = __ldcs(A + beg + i); a1 = __ldcs(A + beg + i + blockDim.x); }
            const float2 xv = xh[blockIdx.x % nx];
            float acc = (a0.x + a0.y + a0.z + a0.w + a1.x + a1.y + a1.z + a1.w) * xv.x;
            for (int k = i + 2 * blockDim.x; k < tile4; k += blockDim.x) {
                const float4 a = __ldcs(A + beg + k);
                acc += (a.x + a.y + a.z + a.w) * xv.y;
            }
            for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
            if ((threadIdx.x & 31) == 0) atomicAdd(y + blockIdx.x % 25050, acc);
        }
        // 50 series of 1000 values, `passes` exchanges, float64 store
        extern "C" __global__ void back(const float* y, double* out, int ny, int passes) {
            grid_wait();
            __shared__ float buf[1000];
            for (int e = threadIdx.x; e < 1000; e += blockDim.x) buf[e] = y[(blockIdx.x * 1000 + e) % ny];
            for (int p = 0; p < passes; ++p) {
                float v[4];
                __syncthreads();
                for (int k = 0; k < 4; ++k) {
                    const int e = threadIdx.x + k * blockDim.x;
                    v[k] = e < 1000 ? buf[(e * 7 + p * 13) % 1000] : 0.f;
                }
                __syncthreads();
                for (int k = 0; k < 4; ++k) {
                    const int e = threadIdx.x + k * blockDim.x;
                    if (e < 1000) buf[e] = 0.5f * v[k] + 1.f;
                }
            }
            __syncthreads();
            for (int e = threadIdx.x; e < 1000; e += blockDim.x) out[blockIdx.x * 1000 + e] = buf[e];
        }
        """
        mod = cp.RawModule(code=src, options=("-std=c++17",))
        front, stream_k, back = (mod.get_function(n) for n in ("front", "stream", "back"))

        launcher = ProgrammaticLauncher.load()

        def launch(fn, grid, block, args, programmatic):
            args = tuple(a if isinstance(a, cp.ndarray) else np.int32(a) for a in args)
            if programmatic:
                launcher(fn, (grid,), (block,), args, 0, cp.cuda.get_current_stream().ptr)
            else:
                fn((grid,), (block,), args)

        n, tile4 = 1000, 4096
        x = cp.random.standard_normal((n, 1000))
        xh = cp.zeros((500, n), np.complex64)
        A = cp.random.standard_normal(200_400_000 // 4, dtype=np.float32)
        blocks = A.size // 4 // tile4
        y = cp.zeros(25050, np.float32)
        out = cp.zeros(50 * 1000, np.float64)
        floor = A.nbytes / bw

        def chain(pdl, early):
            launch(front, n // 4, 512, (x, xh, n, 4, int(pdl)), False)
            launch(stream_k, blocks, 256, (A, xh, y, tile4, n * 500, int(early)), pdl)
            launch(back, 50, 256, (y, out, 25050, 4), pdl)

        for name, fn, grid, block, args in (("front", front, n // 4, 512, (x, xh, n, 4, 0)),
                                            ("stream", stream_k, blocks, 256, (A, xh, y, tile4, n * 500, 0)),
                                            ("back", back, 50, 256, (y, out, 25050, 4))):
            t = timeit(lambda: launch(fn, grid, block, args, False), reps=30)
            emit(what="pdl_kernel", kernel=name, us=round(t * 1e6, 2))
        cap = cp.cuda.Stream(non_blocking=True)
        for pdl, early in ((False, False), (True, False), (True, True), (False, False), (True, False), (True, True)):
            with cap:
                cap.begin_capture()
                chain(pdl, early)
                graph = cap.end_capture()
            back_to_back = loop_time(graph.launch, n=200)
            waited = []
            for _ in range(200):
                t0 = time.perf_counter()
                graph.launch()
                be.synchronize()
                waited.append(time.perf_counter() - t0)
            emit(what="pdl", programmatic=pdl, early_loads=early, back_to_back_us=round(back_to_back * 1e6, 2),
                 waited_us=round(float(np.median(waited)) * 1e6, 2), floor_us=round(floor * 1e6, 2))

    def part_chain():
        """Waited-for middle-size products as the engine's recorded graph against
        the same kernels launched one by one from parameters packed once: with
        the driver's cuLaunchKernel (CuPy's binding), and with cuLaunchKernelEx
        and programmatic serialization (``ProgrammaticLauncher.packed``).  The kernels are those of one
        eager product (every launch through ``GPUBackend._run_kernel``), on
        the eager operator's buffers; the results are checked equal to the
        graph's.  Medians of waited-for products (host clock) and the time per
        product queued back to back, the variants alternated in rounds; and
        the same for one empty kernel, what launching and waiting cost alone."""
        import ctypes

        from fftmatvec import BTTOperator
        from fftmatvec.backend.launch import ProgrammaticLauncher, kernel_params
        from fftmatvec.bench import _back_to_back_time, _median_time, random_slab

        launcher = ProgrammaticLauncher.load()
        empty = cp.RawKernel('extern "C" __global__ void empty() {}', "empty")  # the machine's launch and wait alone
        nd, nm, nt = 50, 1000, 500
        f = random_slab(0, nd, nm, nt, (0, nd), (0, nm))
        eager = GPUBackend()
        eager.graph_max_bytes = -1
        for code, adjoint in (("dssdd", False), ("ddssd", True), ("ddddd", False)):
            kw = dict(adjoint_precision=code) if adjoint else dict(precision=code)
            op, op_e = BTTOperator(f, device=be, **kw), BTTOperator(f, device=eager, **kw)
            apply, apply_e = (op.rmatvec, op_e.rmatvec) if adjoint else (op.matvec, op_e.matvec)
            x = cp.random.standard_normal((nd if adjoint else nm, nt))
            y_e = apply_e(x)
            launches = []
            engine_run = eager._run_kernel
            eager._run_kernel = lambda fn, grid, block, args, smem=0: (launches.append((fn, grid, block, args, smem)),
                                                                       engine_run(fn, grid, block, args, smem))
            y_e = apply_e(x)
            del eager._run_kernel
            stream = cp.cuda.get_current_stream()
            keep, plain = [], []
            for fn, grid, block, args, smem in launches:
                params, values = kernel_params(args)
                keep.append((params, values))
                g = tuple((tuple(grid) + (1, 1))[:3])
                b = tuple((tuple(block) + (1, 1))[:3])
                plain.append((int(fn.kernel.ptr), *g, *b, int(smem), stream.ptr, ctypes.addressof(params), 0))
            programmatic = [launcher.packed(fn, grid, block, args, smem, stream.ptr)
                            for fn, grid, block, args, smem in launches]
            driver_launch = cp.cuda.driver.launchKernel

            def run_plain():
                for a in plain:
                    driver_launch(*a)

            def run_programmatic():
                for launch in programmatic:
                    launch()

            y_ref = apply(x)
            same = {}
            for name, run in (("plain", run_plain), ("programmatic", run_programmatic)):
                y_e.fill(np.nan)  # the recorded launches write the recorded call's result array
                run()
                be.synchronize()
                same[name] = bool(cp.array_equal(y_e, y_ref))
            variants = {"graph": lambda: apply(x), "chain plain": run_plain, "chain programmatic": run_programmatic,
                        "one empty kernel": lambda: empty((1,), (32,), ())}
            waited = {k: [] for k in variants}
            queued = {k: [] for k in variants}
            for _ in range(5):
                for k, fn in variants.items():
                    waited[k].append(_median_time(fn, 200, be.synchronize))
                    queued[k].append(_back_to_back_time(fn, 200, be.synchronize))
            for k in variants:
                emit(what="chain", code=code, adjoint=adjoint, variant=k, kernels=len(launches),
                     kernel_names=[fn.name[:40] for fn, *_ in launches], chain_equals_graph=same,
                     waited_us=[round(t * 1e6, 2) for t in waited[k]],
                     back_to_back_us=[round(t * 1e6, 2) for t in queued[k]])

    def part_host_parts():
        """Host time per call of the pieces of a fixture-size product (each
        call timed while the device is busy, so the device's own time does
        not count), and the waited-for latency of each."""
        from fftmatvec import BTTOperator

        rng = np.random.default_rng(0)
        f = rng.standard_normal((15, 289, 10))
        op = BTTOperator(f, device=be)
        m = cp.asarray(rng.standard_normal((289, 10)))
        d = cp.asarray(rng.standard_normal((15, 10)))
        a = cp.empty((15, 10))
        b = cp.empty((15, 10))
        m3 = m.reshape(289, 10, 1)
        prec = op.precision
        ws = op.engine.workspace(False, prec, 1)
        with be.capture() as rec:
            be.copy_into(a, b)
        staged = GPUBackend()
        staged.direct_max_nt = 0
        op_s = BTTOperator(f, device=staged)
        unrecorded = GPUBackend()
        unrecorded.graph_max_bytes = -1
        op_u = BTTOperator(f, device=unrecorded)
        stream = cp.cuda.get_current_stream
        pieces = {
            "cupy.empty": lambda: cp.empty((15, 10)),
            "cupy.ndarray": lambda: cp.ndarray((15, 10)),
            "get_current_stream().ptr": lambda: stream().ptr,
            "copy_into (memcpy)": lambda: be.copy_into(a, b),
            "graph.launch (one memcpy)": lambda: rec.graph.launch(),
            "reshape": lambda: m.reshape(289, 10, 1),
            "flags.c_contiguous": lambda: m.flags.c_contiguous,
            "_checked": lambda: op._checked(m, 289, "F m"),
            "engine.workspace": lambda: op.engine.workspace(False, prec, 1),
            "direct kernel": lambda: ws.direct(m3, ws.y),
            "direct kernel (2-D arrays)": lambda: ws.direct(m, a),
            "engine.apply (direct)": lambda: op.engine.apply(m3, prec),
            "matvec (direct)": lambda: op.matvec(m),
            "rmatvec (direct)": lambda: op.rmatvec(d),
            "matvec (direct, not recorded)": lambda: op_u.matvec(m),
            "rmatvec (direct, not recorded)": lambda: op_u.rmatvec(d),
            "matvec (staged, graph)": lambda: op_s.matvec(m),
            "rmatvec (staged, graph)": lambda: op_s.rmatvec(d),
        }
        for name, fn in pieces.items():
            for _ in range(20):
                fn()
            be.synchronize()
            host, busy = host_time(fn)
            n = 400
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            be.synchronize()
            queued = (time.perf_counter() - t0) / n
            lat = []
            for _ in range(400):
                t0 = time.perf_counter()
                fn()
                be.synchronize()
                lat.append(time.perf_counter() - t0)
            emit(what="host_part", piece=name, host_us=round(host * 1e6, 2), device_stayed_busy=busy,
                 queued_per_call_us=round(queued * 1e6, 2), waited_median_us=round(float(np.median(lat)) * 1e6, 2))

    def part_latency():
        """Waited-for products at the fixture and middle sizes, each waited for four ways (the
        device, the current stream, an event, spinning on an event's query), with a new result
        array per call and into one ``out=`` array: what the host adds to a small product."""
        from fftmatvec.bench import _median_time, random_slab
        from fftmatvec.operator import BTTOperator

        for (nd, nm, nt), codes, n in (((15, 289, 10), ("ddddd", "dssdd"), 2000),
                                       ((50, 1000, 500), ("ddddd", "dssdd"), 400)):
            f = random_slab(0, nd, nm, nt, (0, nd), (0, nm))
            for code in codes:
                op = BTTOperator(f, device=be, precision=code, adjoint_precision=code.replace("dssdd", "ddssd"))
                for adjoint in (False, True):
                    apply = op.rmatvec if adjoint else op.matvec
                    x = cp.random.standard_normal((nd if adjoint else nm, nt))
                    y = cp.empty((nm if adjoint else nd, nt))
                    for into in (False, True):
                        fn = (lambda: apply(x, out=y)) if into else (lambda: apply(x))
                        rec = dict(what="latency", size=f"{nm}x{nd}x{nt}", code=op.adjoint_precision.code if adjoint
                                   else code, adjoint=adjoint, into_out=into)
                        for how, wait in waits:
                            rec[f"{how}_us"] = round(_median_time(fn, n, wait) * 1e6, 2)
                        rec["host_us"] = round(host_time(fn)[0] * 1e6, 2)
                        emit(**rec)

    def part_normal():
        """The Gauss-Newton product ``F^T F m`` waited for at the fixture and middle sizes, four ways
        taking turns: ``normal``, ``rmatvec(matvec(m))``, the two into ``out=`` arrays, and two
        prepared products (the adjoint's input the forward's output): what ``normal``'s path adds."""
        from fftmatvec.bench import _waited_medians, random_slab
        from fftmatvec.operator import BTTOperator

        for (nd, nm, nt), n in (((15, 289, 10), 1000), ((50, 1000, 500), 300)):
            f = random_slab(0, nd, nm, nt, (0, nd), (0, nm))
            for code in ("ddddd", "dssdd"):
                op = BTTOperator(f, device=be, precision=code, adjoint_precision=code.replace("dssdd", "ddssd"))
                m = cp.random.standard_normal((nm, nt))
                d, z = cp.empty((nd, nt)), cp.empty((nm, nt))
                fwd, adj = op.prepare(m, out=d), op.prepare(d, adjoint=True, out=z)
                calls = {"normal": lambda: op.normal(m), "rmatvec(matvec)": lambda: op.rmatvec(op.matvec(m)),
                         "into out=": lambda: op.rmatvec(op.matvec(m, out=d), out=z),
                         "prepared": lambda: (fwd(), adj())}
                for way, t in _waited_medians(calls, n, be.synchronize).items():
                    emit(what="normal", size=f"{nm}x{nd}x{nt}", code=code, way=way, us=round(t * 1e6, 2))

    def part_prelaunch():
        """Host time from a middle-size product's call to its graph launch,
        without a profiler: each recorded graph of the product is wrapped so
        that its launch notes the host clock. Beside it, the waited-for time
        of the call and of the same graph launched directly: what the Python
        path before and after the launch adds to a waited-for product."""
        from fftmatvec.bench import _median_time, random_slab
        from fftmatvec.operator import BTTOperator

        class NotedGraph:
            def __init__(self, graph, notes):
                self.graph, self.notes = graph, notes

            def launch(self):
                self.notes.append(time.perf_counter())
                self.graph.launch()

        def prelaunch_pieces(op, x, y, graph):
            """Host time of each step of the forward product's path to its launch as it stood in stop 37,
            alone (100 000 calls each, less an empty call's time); since stop 46 a call whose input signature
            was seen before skips the checks and the workspace look-up (operator._LocalCall)."""
            from fftmatvec.vector import DistVector

            prec, eng = op.precision, op.engine
            pieces = {
                "isinstance(x, DistVector)": lambda: isinstance(x, DistVector),
                "op._checked": lambda: op._checked(x, nm, "F m"),
                "be.is_native": lambda: be.is_native(x),
                "x.shape": lambda: x.shape,
                "x.ndim": lambda: x.ndim,
                "x.dtype != prec.pad": lambda: x.dtype != prec.pad,
                "x.flags.c_contiguous": lambda: x.flags.c_contiguous,
                "engine.workspace": lambda: eng.workspace(False, prec, 1),
                "engine.Fhat[prec.sbgemv]": lambda: eng.Fhat[prec.sbgemv],
                "(x.data.ptr, y.data.ptr)": lambda: (x.data.ptr, y.data.ptr),
                "y.shape == shape": lambda: y.shape == (nd, nt),
                "make a lambda": lambda: (lambda a, b: None),
                "graph.launch()": graph.launch,
            }
            n = 100000

            def per_call(fn):
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                return (time.perf_counter() - t0) / n

            empty = per_call(lambda: None)
            for name, fn in pieces.items():
                if name == "graph.launch()":  # the device runs each launch: time the host alone, few calls
                    t = host_time(fn)[0]
                else:
                    t = per_call(fn) - empty
                emit(what="prelaunch_piece", piece=name, host_us=round(t * 1e6, 3))
            be.synchronize()

        nd, nm, nt = 50, 1000, 500
        f = random_slab(0, nd, nm, nt, (0, nd), (0, nm))
        for code, adjoint in (("ddddd", False), ("ddddd", True), ("dssdd", False), ("ddssd", True)):
            op = BTTOperator(f, device=be, **({"adjoint_precision": code} if adjoint else {"precision": code}))
            apply = op.rmatvec if adjoint else op.matvec
            x = cp.random.standard_normal((nd if adjoint else nm, nt))
            y = cp.empty((nm if adjoint else nd, nt))
            for into in (False, True):
                call = (lambda: apply(x, out=y)) if into else (lambda: apply(x))
                for _ in range(5):  # recorded, then replayed
                    call()
                be.synchronize()
                graphs = [g for ws in op.engine._workspaces.values() for g in getattr(ws.launch, "graphs", {}).values()]
                notes = []
                for ws in op.engine._workspaces.values():
                    slot_graphs = getattr(ws.launch, "graphs", {})
                    for key in list(slot_graphs):
                        slot_graphs[key] = NotedGraph(slot_graphs[key], notes)
                before = []
                for _ in range(400):
                    del notes[:]
                    t0 = time.perf_counter()
                    call()
                    t1 = time.perf_counter()
                    be.synchronize()
                    if len(notes) == 1:
                        before.append((notes[0] - t0, t1 - notes[0]))
                waited = _median_time(call, 400, be.synchronize)
                graph_waited = _median_time(graphs[-1].launch, 400, be.synchronize) if graphs else None
                if code == "dssdd" and not into:
                    prelaunch_pieces(op, x, y, graphs[-1])
                emit(what="prelaunch", size=f"{nm}x{nd}x{nt}", code=code, adjoint=adjoint, into_out=into,
                     calls_with_one_launch=len(before),
                     before_launch_us=round(float(np.median([b for b, _ in before])) * 1e6, 2) if before else None,
                     after_launch_us=round(float(np.median([a for _, a in before])) * 1e6, 2) if before else None,
                     waited_us=round(waited * 1e6, 2),
                     graph_launch_waited_us=round(graph_waited * 1e6, 2) if graph_waited else None,
                     graphs=len(graphs))

    def part_resultalloc():
        """What making the result array costs a waited-for big adjoint (a 40 MB
        result): ``rmatvec`` with its result made ahead, during the product
        before (the rule since stop 51), or made before each launch (the rule
        before it for results above 16 MB), into ``out=`` (and the layers of
        that path: the input signature's ``_LocalCall``, the engine's replayer
        and its recording launched directly), and the prepared product,
        taking turns in rounds as the bench does; each one's time back
        to back; and the host time of making and dropping such an array while
        the device runs a product."""
        import fftmatvec.operator as operator
        from fftmatvec.bench import _back_to_back_time, _waited_medians, random_slab
        from fftmatvec.operator import BTTOperator

        nd, nm, nt = 100, 5000, 1000
        f = random_slab(0, nd, nm, nt, (0, nd), (0, nm))
        d = cp.random.standard_normal((nd, nt))
        out = cp.empty((nm, nt))
        share = operator._SPARE_FHAT_SHARE

        def time_adjoint(code: str) -> None:
            ahead, before = (BTTOperator(f, device=be, adjoint_precision=code) for _ in range(2))
            operator._SPARE_FHAT_SHARE = 0.0  # the rule is applied at an input signature's first call
            before.rmatvec(d)
            operator._SPARE_FHAT_SHARE = share
            ahead.rmatvec(d)
            for _ in range(2):  # the engine records the product on (d, out) the second time
                ahead.rmatvec(d, out=out)
            recording = next(g for ws in ahead.engine._workspaces.values()
                             for key, g in getattr(ws.launch, "graphs", {}).items()
                             if key == (d.data.ptr, out.data.ptr))
            replayer = ahead.engine.launcher(True, ahead.adjoint_precision, 1)
            local_call = next(iter(ahead._local_calls.values()))
            calls = {"made ahead": lambda: ahead.rmatvec(d), "made before the launch": lambda: before.rmatvec(d),
                     "into out=": lambda: ahead.rmatvec(d, out=out),
                     "its _LocalCall(d, out)": lambda: local_call(d, out),
                     "its replayer(d, out)": lambda: replayer(d, out),
                     "the engine's recording on (d, out)": recording.launch,
                     "prepared": ahead.prepare(d, adjoint=True, out=out)}
            waited = _waited_medians(calls, 200, be.synchronize)
            for name, fn in calls.items():
                emit(what="resultalloc", code=code, call=name, made_ahead=bool(ahead._spares),
                     waited_us=round(waited[name] * 1e6, 2),
                     back_to_back_us=round(_back_to_back_time(fn, 200, be.synchronize) * 1e6, 2))
            host = []
            for _ in range(200):
                ahead.rmatvec(d, out=out)  # the device is busy while the host makes the array
                t0 = time.perf_counter()
                a = be.empty((nm, nt), np.float64)
                host.append(time.perf_counter() - t0)
                del a
                be.synchronize()
            emit(what="resultalloc", code=code, call="be.empty((Nm, Nt)) while a product runs",
                 host_us=round(float(np.median(host)) * 1e6, 2))

        for code in ("ddssd", "ddddd"):
            time_adjoint(code)

    def part_hostpath():
        """What each layer of a one-process product's host path adds to a
        waited-for product, in the bench's turns (five rounds, the ways one
        after another): the prepared product; the engine's recording on
        ``(x, out)`` launched directly; its replayer; the input signature's
        ``_LocalCall``; ``matvec``/``rmatvec`` into ``out=`` and into a new
        array; the prepared product after 2.5 and 5 us of host spinning (how
        host time before the launch turns into waited-for time).  With
        ``--old-operator FILE`` (an ``operator.py`` of another revision, e.g.
        ``git show REV:src/fftmatvec/operator.py > FILE``) the last two ways
        also run through that version's operator, on the same backend: an A/B
        in one process, where the spread between processes is larger than
        the difference (``--hostpath-sizes``).  Each call is waited for with
        ``be.synchronize()`` or, with ``--hostpath-wait poll``, by a Python
        loop asking an event recorded after it."""
        import importlib.util

        from fftmatvec.bench import random_slab
        from fftmatvec.operator import BTTOperator

        operators = {"": BTTOperator}
        if args.old_operator:
            spec = importlib.util.spec_from_file_location("fftmatvec._operator_old", args.old_operator)
            old = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(old)
            operators["old "] = old.BTTOperator

        def spin_then(us, fn):
            def call():
                end = time.perf_counter() + us * 1e-6
                while time.perf_counter() < end:
                    pass
                fn()
            return call

        wait = event_spin if args.hostpath_wait == "poll" else be.synchronize
        cases = {"big": (100, 5000, 1000, "ddssd", True, 40), "mid": (50, 1000, 500, "dssdd", False, 200),
                 "midadj": (50, 1000, 500, "ddssd", True, 200)}
        for size in args.hostpath_sizes.split(","):
            nd, nm, nt, code, adjoint, reps = cases[size]
            f = random_slab(0, nd, nm, nt, (0, nd), (0, nm))
            ops = {tag: cls(f, device=be, **({"adjoint_precision": code} if adjoint else {"precision": code}))
                   for tag, cls in operators.items()}
            del f
            op = ops[""]
            x = cp.random.standard_normal((nd if adjoint else nm, nt, 1))
            out = cp.empty((nm if adjoint else nd, nt, 1))
            prepared = op.prepare(x, adjoint=adjoint, out=out)
            ways = {"prepared": prepared}
            for tag, o in ops.items():
                apply = o.rmatvec if adjoint else o.matvec
                ways[tag + "into out="] = lambda apply=apply: apply(x, out=out)
                ways[tag + "new array"] = lambda apply=apply: apply(x)
            for fn in list(ways.values()) * 4:  # the replayers record each pair of buffers the second time
                fn()
            be.synchronize()
            replayer = op.engine.launcher(adjoint, op.adjoint_precision if adjoint else op.precision, 1)
            local_call = next(iter(op._local_calls.values()))  # the one input signature's
            ways.update({"recording on (x, out)": replayer.graphs[(x.data.ptr, out.data.ptr)].launch,
                         "replayer(x, out)": lambda r=replayer: r(x, out),
                         "_LocalCall(x, out)": lambda c=local_call: c(x, out),
                         "2.5 us spin, prepared": spin_then(2.5, prepared),
                         "5 us spin, prepared": spin_then(5.0, prepared)})
            for fn in ways.values():
                fn()
            be.synchronize()
            times: dict = {name: [] for name in ways}
            for _ in range(5):
                for name, fn in ways.items():
                    for _ in range(reps // 5):
                        t0 = time.perf_counter()
                        fn()
                        wait()
                        times[name].append(time.perf_counter() - t0)
            for name, ts in times.items():
                a = np.array(ts) * 1e6
                emit(what="hostpath", size=f"{nm}x{nd}x{nt}", code=code, adjoint=adjoint, way=name, calls=len(ts),
                     wait=args.hostpath_wait, schedule=args.schedule,
                     waited_us=round(float(np.median(a)), 2),
                     p25_p75_us=[round(float(v), 2) for v in np.percentile(a, (25, 75))])
            del ops, op, prepared, replayer, local_call, ways
            be.synchronize()

    def part_warmup():
        """Products from an idle device: after ``idle`` seconds without work (the clocks fall to idle), each
        product of a run of ``span`` seconds timed by CUDA events, queued back to back, then (after the same
        rest) each waited for by the host's clock, as ``fftmatvec bench`` times them.  Emits each way's
        median in windows of the time since the first product, and every product's time."""
        idle, span = 5.0, 3.0
        windows = (0.0, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, span)
        eng = get_big()
        for code, K, adjoint in (("ddddd", 16, False), ("dssdd", 16, False), ("ddddd", 1, False),
                                 ("ddssd", 1, True)):
            prec = parse(code)
            n_in = eng.nd if adjoint else eng.nm
            x = cp.random.standard_normal((n_in, eng.Nt, K)).astype(prec.pad)
            product = lambda: eng.apply(x, prec, adjoint=adjoint)  # noqa: E731
            product()
            be.synchronize()
            t0 = time.perf_counter()
            product()
            be.synchronize()
            n = int(span / (time.perf_counter() - t0)) + 1
            time.sleep(idle)
            marks = [cp.cuda.Event() for _ in range(n + 1)]
            marks[0].record()
            for i in range(n):
                product()
                marks[i + 1].record()
            marks[-1].synchronize()
            queued = [cp.cuda.get_elapsed_time(marks[i], marks[i + 1]) * 1e-3 for i in range(n)]
            time.sleep(idle)
            waited = []
            for _ in range(n):
                t0 = time.perf_counter()
                product()
                be.synchronize()
                waited.append(time.perf_counter() - t0)
            for way, ts in (("back to back", queued), ("waited for", waited)):
                ends = np.cumsum(ts)
                medians = {f"{lo * 1e3:g}-{hi * 1e3:g} ms": round(float(np.median(
                    [t for t, e in zip(ts, ends) if lo < e <= hi] or [np.nan])) * 1e6, 1)
                    for lo, hi in zip(windows, windows[1:])}
                emit(what="warmup", code=code, K=K, adjoint=adjoint, way=way, idle_s=idle, products=n,
                     median_us_by_window=medians, times_us=[round(t * 1e6, 1) for t in ts])

    def part_timeline():
        """Where a waited-for product's time goes (``--timeline-sizes``): PyTorch's profiler
        records each call (host), its launches (CUDA runtime and driver calls) and its kernels (CUPTI) on
        one clock, so a call splits into host work before the first launch, launch to the first kernel's
        start, the kernels and the gaps between them, and the last kernel's end to the call's return.
        (The profiler adds its own host time to each call and launch; the device part is exact.)
        Each kernel's median duration is also taken with the same calls queued back to back, so that a
        kernel that runs slower when the device was idle before it shows (``kernel_us``: waited,
        back to back), and the wall time per call of those queued calls (``back_to_back_call_us``)."""
        import importlib.util
        import os
        import tempfile

        if importlib.util.find_spec("torch") is None:
            emit(what="timeline", error="no torch")
            return
        from torch.autograd.profiler import record_function
        from torch.profiler import ProfilerActivity, profile

        from fftmatvec.bench import random_slab
        from fftmatvec.operator import BTTOperator

        shapes = {"small": (15, 289, 10, 1), "mid": (50, 1000, 500, 1), "big": (100, 5000, 1000, 1),
                  "big16": (100, 5000, 1000, 16)}
        codes = {"small": [("ddddd", False), ("ddddd", True)],
                 "mid": [("ddddd", False), ("ddddd", True), ("dssdd", False), ("ddssd", True)],
                 "big16": [("ddddd", False), ("dssdd", False)]}
        codes["big"] = codes["mid"]
        cases = [(shapes[size], code, adjoint) for size in args.timeline_sizes.split(",")
                 for code, adjoint in codes[size]]

        def trace(prof):
            fd, path = tempfile.mkstemp(suffix=".json")
            os.close(fd)
            prof.export_chrome_trace(path)
            with open(path) as fh:
                events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
            os.unlink(path)
            return events

        def kernel_medians(events):
            by_name = {}
            for e in events:
                if e.get("cat") == "kernel":
                    by_name.setdefault(e["name"][:60], []).append(e["dur"])
            return {name: round(float(np.median(d)), 2) for name, d in by_name.items()}

        for (nd, nm, nt, K), code, adjoint in cases:
            f = random_slab(0, nd, nm, nt, (0, nd), (0, nm))
            op = BTTOperator(f, device=be, precision=code, adjoint_precision=code)
            apply = op.rmatvec if adjoint else op.matvec
            x = cp.random.standard_normal((nd if adjoint else nm, nt) + ((K,) if K > 1 else ()))
            for _ in range(10):
                apply(x)
            be.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(40):
                    with record_function("call"):
                        apply(x)
                        be.synchronize()
            events = trace(prof)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                t0 = time.perf_counter()
                for _ in range(40):
                    apply(x)
                be.synchronize()
                back_to_back_call = (time.perf_counter() - t0) / 40
            back_to_back = kernel_medians(trace(prof))
            calls = sorted((e for e in events if e.get("name") == "call" and e.get("cat") == "user_annotation"),
                           key=lambda e: e["ts"])
            kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
            launches = sorted((e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
                               and "aunch" in e.get("name", "")), key=lambda e: e["ts"])
            rows = []
            for c in calls[5:]:
                t0, t1 = c["ts"], c["ts"] + c["dur"]
                ks = [k for k in kernels if t0 <= k["ts"] <= t1]
                ls = [e for e in launches if t0 <= e["ts"] <= t1]
                if not ks or not ls:
                    continue
                first = ks[0]
                end = max(k["ts"] + k["dur"] for k in ks)
                rows.append(dict(call=c["dur"], before_launch=ls[0]["ts"] - t0, launch_call=ls[0]["dur"],
                                 launch_to_kernel=first["ts"] - ls[0]["ts"], kernels=sum(k["dur"] for k in ks),
                                 span=end - first["ts"], after_kernels=t1 - end, n_kernels=len(ks),
                                 n_launches=len(ls)))
            med = {k: round(float(np.median([r[k] for r in rows])), 2) for k in rows[0]} if rows else {}
            waited = kernel_medians(events)
            emit(what="timeline", size=f"{nm}x{nd}x{nt}", K=K, code=code, adjoint=adjoint, calls=len(rows),
                 kernel_us={name: [t, back_to_back.get(name)] for name, t in waited.items()},
                 launch_names=sorted({e["name"] for e in launches}), median_us=med,
                 back_to_back_call_us=round(back_to_back_call * 1e6, 2))

    for name, fn in (("latency", part_latency), ("small", part_small), ("mid", part_mid),
                     ("midvar", part_mid_variants), ("fft", part_fft), ("fftvar", part_fft_variants),
                     ("fftradix", part_fft_radices), ("fftsweep", part_fft_sweep), ("tiles", part_tiles),
                     ("variants", part_variants), ("engine", part_engine),
                     ("kgemm", part_kgemm), ("waves", part_waves), ("gemmvar", part_gemm_variants),
                     ("adjvar", part_adj_variants), ("fwdrows", part_fwd_rows),
                     ("k16", part_k16), ("overlap", part_overlap), ("kernels", part_kernels),
                     ("kernelsk", part_kernels_nrhs), ("host", part_host), ("chunks", part_chunks),
                     ("hostparts", part_host_parts), ("chain", part_chain), ("wait", part_wait), ("l2", part_l2),
                     ("pdl", part_pdl),
                     ("read", part_read), ("adjparts", part_adj_parts), ("slabs", part_slabs),
                     ("adjc128", part_adj_c128), ("regs", part_regs), ("regsloads", part_regs_loads),
                     ("timeline", part_timeline), ("prelaunch", part_prelaunch), ("normal", part_normal),
                     ("resultalloc", part_resultalloc), ("hostpath", part_hostpath), ("warmup", part_warmup)):
        if name in parts:
            guarded(name, fn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
