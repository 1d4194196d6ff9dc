"""Compact table of the JSON lines written by gpu_probe.py or the bench runs."""

import json
import sys
from pathlib import Path


def fmt_us(t):
    return "-" if t is None else f"{t * 1e6:9.1f}"


def _kernel_line(r):
    extra = r.get("variant", r.get("path", ""))
    return (f"{r['what']:10s} {r.get('size', ''):3s} {'adj' if r.get('adjoint') else '':3s} {r['ta']:10s} "
            f"{r.get('tx', ''):10s} {str(extra):30s} K={r.get('K', 1):<2d} {fmt_us(r['time_s'])} us  "
            f"x{r['floor_ratio']:.3f}")


def _product(r):
    """A bench line's product and its code(s): ``F^T F m`` runs two, forward/adjoint."""
    if r.get("normal"):
        return "F^T F m", f"{r['precision']}/{r['adjoint_precision']}"
    return ("F^T d" if r["adjoint"] else "F m"), r["precision"]


def _bench_line(r):  # fftmatvec bench --json (from bench_ab.sh: with its source)
    source = f"[{r['source']}] " if "source" in r else ""
    product, code = _product(r)
    return (f"{source}bench Nm={r['Nm']} Nd={r['Nd']} Nt={r['Nt']} K={r['nrhs']} {code} "
            f"{product} {fmt_us(r['time_s'])} us x{r['floor_ratio']:.3f} "
            f"b2b {fmt_us(r.get('back_to_back_s'))} out= {fmt_us(r.get('into_out_s'))} "
            f"prep {fmt_us(r.get('prepared_s'))} "
            f"per-vec {fmt_us(r['time_per_vector_s'])} naive {fmt_us(r.get('naive_time_s'))} "
            f"err {r.get('rel_error', '-')}")


def _gemm_variant_line(r):
    if "error" in r:
        return f"gemm_variant {r['ta']} {r['kind']} {r['tile']} S={r['S']}: ERROR {r['error'][:120]}"
    if r.get("kind") == "cublas":  # the reference product, timed beside the variants
        return f"gemm_variant {r['ta']:10s} K={r['K']:<2} cuBLAS {fmt_us(r['time_s'])} us x{r['floor_ratio']:.3f}"
    return (f"gemm_variant {r['ta']:10s} K={r.get('K', '-'):<2} {r.get('kernel', r.get('kind', '')):14s} "
            f"{str(r['tile']):22s} S={r['S']}/{r['S_used']} regs={r['regs']} local={r['local_bytes']} "
            f"{fmt_us(r['time_s'])} us x{r['floor_ratio']:.3f} vs cuBLAS {r['rel_vs_cublas']:.1e}")


def _overlap_line(r):
    f = r["floor_s"]
    return (f"overlap {r['size']:4s} K={r['K']:<2} {r['code']} {'FT' if r['adjoint'] else 'F '} "
            f"in order {fmt_us(r['in_order_s'])} us x{r['in_order_s'] / f:.3f}, side by side "
            f"{fmt_us(r['side_by_side_s'])} us x{r['side_by_side_s'] / f:.3f} (product {fmt_us(r['product_s'])}, "
            f"transforms {fmt_us(r['transforms_s'])})")


def _engine_line(r):
    st = " ".join(f"{k}={v * 1e6:.0f}" for k, v in r.get("stages", {}).items())
    return (f"engine {r['size']:18s} {r['code']} {'FT' if r['adjoint'] else 'F '} K={r['K']:<3d} "
            f"{fmt_us(r['time_s'])} us x{r['floor_ratio']:.3f} naive {fmt_us(r.get('naive_s'))} "
            f"g={int(r['graph'])} [{st}]" + (f" ERR {r['slot_error'][:80]}" if r.get("slot_error") else ""))


def _small_line(r):
    return (f"small {r['code']} {'FT' if r['adjoint'] else 'F '} graph={int(r['graph_allowed'])}"
            f"/{int(r['recorded'])} b2b {fmt_us(r['per_call_back_to_back_s'])} ev "
            f"{fmt_us(r['per_call_events_s'])} wall {fmt_us(r['per_call_wall_sync_s'])}"
            + (f" ERR {r['slot_error'][:80]}" if r.get("slot_error") else ""))


def _kernels_line(r):
    if "error" in r:
        return f"kernels: {r['error']}"
    top = sorted(r.get("per_product_us", {}).items(), key=lambda kv: -kv[1])[:5]
    return (f"kernels {r['size']:5s} K={r['K']:<2d} {r['code']} {'FT' if r['adjoint'] else 'F '} total "
            f"{r.get('total_us', 0):8.1f} us (floor {r.get('floor_us', 0):8.1f}): "
            + "; ".join(f"{k[:40]} {v:.1f}" for k, v in top))


# one line per record, by its "what"; records of other kinds (or of older forms of a kind) print as JSON
FORMATS = {
    "copy_bandwidth": lambda r: f"copy bw {r['Bps'] / 1e12:.3f} TB/s  {r.get('device')}",
    "sbgemv_fwd": _kernel_line,
    "sbgemv_adj": _kernel_line,
    "sbgemm": _kernel_line,
    "gemm_variant": _gemm_variant_line,
    "overlap": _overlap_line,
    "gemm-ab": lambda r: (f"gemm-ab {r['variant']:10s} K={r['K']:<2d} {r['kernel']:14s} {r['time_us']:9.1f} us "
                          f"x{r['floor_ratio']:.3f} err {r['rel_err']:.1e}"),
    "fft": lambda r: (f"fft n={r['n']} K={r['K']} {r['real']} {r['layout']}: pad_rfft {fmt_us(r['pad_rfft_s'])} "
                      f"irfft_unpad {fmt_us(r['irfft_unpad_s'])}  (ideal pad_rfft {fmt_us(r['ideal_pad_rfft_s'])})"),
    "fft-ab": lambda r: (f"fft-ab {r['variant']:10s} n={r['n']} K={r['K']} Nt={r['nt']} {r['real']} -> {r['ctype']}: "
                         f"pad_rfft {r['pad_rfft_us']} irfft_unpad {r['irfft_unpad_us']} us"),
    "fftvar": lambda r: (f"fftvar n={r['n']} K={r['K']} Nt={r['nt']} {r['real']} smem={r['smem_kb']}KB "
                         f"T={r['threads']} S={r['S']}: pad_rfft {r['pad_rfft_us']} irfft_unpad "
                         f"{r['irfft_unpad_us']} (ideal {r['ideal_us']})"),
    "fftradix": lambda r: (f"fftradix n={r['n']} K={r['K']} Nt={r['nt']} {r['real']} {r['rule']} {r['radices']}: "
                           f"pad_rfft {r['pad_rfft_us']} irfft_unpad {r['irfft_unpad_us']} (ideal {r['ideal_us']})"),
    "engine": _engine_line,
    "small": _small_line,
    "small-operator": lambda r: f"small operator.matvec {fmt_us(r['per_call_events_s'])} us",
    "kernels": _kernels_line,
    "host": lambda r: f"host {r['call']}: latency {r['latency_us']} us, back to back {r['back_to_back_us']} us",
    "wgmma-rate": lambda r: (f"wgmma m64n{r['N']}k8 chains={r['chains']} warpgroups={r['warpgroups']}: "
                             f"{r['cycles_per_instruction']:.1f} cycles, {r['mac_per_cycle']:.0f} MAC/cycle"),
    "warmup": lambda r: (f"warmup {r['code']} K={r['K']:<2} {'FT' if r['adjoint'] else 'F '} {r['way']:12s} "
                         f"({r['products']} products from idle): "
                         + ", ".join(f"{w} {t}" for w, t in r["median_us_by_window"].items())),
    "error": lambda r: f"ERROR in {r['part']}:\n{r['traceback'][-1500:]}",
}


def line(r: dict) -> str:
    """The summary line of one record."""
    fmt = FORMATS.get(r.get("what"))
    if fmt is None and "time_s" in r and "floor_ratio" in r:
        fmt = _bench_line
    try:
        return fmt(r) if fmt else json.dumps(r)[:200]
    except (KeyError, TypeError, ValueError):  # an older form of the record
        return json.dumps(r)[:200]


def main(path):
    try:
        lines = [json.loads(s) for s in open(path) if s.strip().startswith("{")]
    except FileNotFoundError:
        print(f"{path}: missing")
        return
    for r in lines:
        print(line(r))


def markdown(path):
    """The table of docs/benchmarks.md from the bench lines of a results file."""
    rows = [json.loads(s) for s in open(path) if s.strip().startswith("{")]
    print("| size `Nm x Nd x Nt` | K | code | product | time (us) | into `out=` (us) | prepared (us) "
          "| back to back (us) | per vector (us) | x floor | naive (us) | speed-up | rel. error |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "floor_ratio" not in r:
            continue
        err = f"{r['rel_error']:.1e}" if "rel_error" in r else "-"
        product, code = _product(r)
        print(f"| {r['Nm']} x {r['Nd']} x {r['Nt']} | {r['nrhs']} | `{code}` | "
              f"`{product}` | {r['time_s'] * 1e6:.1f} | "
              f"{fmt_us(r.get('into_out_s')).strip()} | {fmt_us(r.get('prepared_s')).strip()} | "
              f"{r['back_to_back_s'] * 1e6:.1f} | "
              f"{r['time_per_vector_s'] * 1e6:.1f} | {r['floor_ratio']:.3f} | {r['naive_time_s'] * 1e6:.1f} | "
              f"{r['speedup_vs_naive']:.2f}x | {err} |")


# The GPU issue's sizes and products, as benchmarks/gpu_bench_targets.sh runs them.
_BIG, _MID, _FIXTURE = (5000, 100, 1000), (1000, 50, 500), (289, 15, 10)
_ONE_VECTOR = (("ddddd", False), ("ddddd", True), ("dssdd", False), ("ddssd", True))


def _run_rows(path):
    """The bench lines of one table run, by (size, code, adjoint, K); ``F^T F m``
    lines are beside the targets, not among them."""
    rows = {}
    for s in open(path):
        if s.strip().startswith("{"):
            r = json.loads(s)
            if "floor_ratio" in r and r.get("device") == "gpu" and not r.get("normal"):
                rows[(r["Nm"], r["Nd"], r["Nt"]), r["precision"], r["adjoint"], r["nrhs"]] = r
    return rows


def _bold(text, met):
    return f"**{text}**" if met else text


def run_targets(rows: dict, time_key: str = "time_s") -> list[tuple[str, float | None, bool, str]]:
    """The GPU issue's targets for one table run (``_run_rows``): ``(target, value, met, cell)`` each, value
    None where the run lacks the row.  One-vector products: waited-for time over the floor (the cell adds
    back to back in brackets); the mixed codes' time over ddddd's; the speed-up over naive at the big size
    (its lowest; the cell gives the range); the fixture's F m in us; K = 16's time per vector as a fraction
    1/n of one vector's (value n).  ``time_key``: ``time_s`` (``matvec``/``rmatvec``) or ``prepared_s``
    (``BTTOperator.prepare``)."""
    def waited(r):
        return None if r is None or r.get(time_key) is None else r[time_key]

    out = []
    for size, name, limit in ((_BIG, "big", 1.05), (_MID, "middle", 1.3)):
        for code, adjoint in _ONE_VECTOR:
            r = rows.get((size, code, adjoint, 1))
            t = waited(r)
            x = None if t is None else t / r["floor_s"]
            cell = "-" if x is None else f"{x:.3f} ({r['back_to_back_s'] / r['floor_s']:.3f})"
            product = f"`{code}` `{'F^T d' if adjoint else 'F m'}`"
            out.append((f"{name} {product}", x, x is not None and x <= limit, cell))
    one = {(code, adjoint): rows.get((_BIG, code, adjoint, 1)) for code, adjoint in _ONE_VECTOR}
    for a, b, what in ((one[("dssdd", False)], one[("ddddd", False)], "`dssdd` / `ddddd`"),
                       (one[("ddssd", True)], one[("ddddd", True)], "`ddssd` / `ddddd`")):
        q = None if waited(a) is None or waited(b) is None else waited(a) / waited(b)
        out.append((f"mixed {what}", q, q is not None and q <= 0.55, "-" if q is None else f"{q:.3f}"))
    speedups = [r["naive_time_s"] / waited(r) for r in one.values() if waited(r) is not None and "naive_time_s" in r]
    low = min(speedups) if speedups else None
    out.append(("naive / ours", low, low is not None and low > 1,
                f"{min(speedups):.2f}-{max(speedups):.2f}x" if speedups else "-"))
    t = waited(rows.get((_FIXTURE, "ddddd", False, 1)))
    us = None if t is None else t * 1e6
    out.append(("fixture `F m` (us)", us, us is not None and us <= 20, "-" if us is None else f"{us:.1f}"))
    for code in ("ddddd", "dssdd"):
        many, single = waited(rows.get((_BIG, code, False, 16))), waited(one[(code, False)])
        n = None if many is None or single is None else single / (many / 16)
        out.append((f"`K = 16` `{code}` (1/n)", n, n is not None and n >= 12, "-" if n is None else f"1/{n:.1f}"))
    return out


def targets(paths, time_key="time_s"):
    """One Markdown row per table run (a file of benchmarks/gpu_bench_targets.sh) against the GPU issue's
    targets (:func:`run_targets`); a target met is in bold (but for the speed-up over naive, given as a range)."""
    print("| run | big: `ddddd` `F m`, `F^T d`, `dssdd`, `ddssd` x floor (back to back) | mixed / `ddddd` "
          "| naive / ours | middle, the same | fixture `F m` (us) | `K = 16`: `ddddd`, `dssdd` |")
    print("|---|---|---|---|---|---|---|")
    for path in paths:
        run = run_targets(_run_rows(path), time_key)
        cells = [_bold(cell, met) for _, _, met, cell in run]
        big, mid, mixed, naive, fixture, k16 = cells[0:4], cells[4:8], cells[8:10], run[10][3], cells[11], cells[12:]
        print(f"| `{Path(path).name}` | {', '.join(big)} | {', '.join(mixed)} | {naive} | {', '.join(mid)} | "
              f"{fixture} | {', '.join(k16)} |")


def tally(paths, time_key="time_s"):
    """Per target, in how many of the table runs ``paths`` it was met, and the range of its value
    (:func:`run_targets`): a Markdown table."""
    per = {}
    for path in paths:
        for target, value, met, _ in run_targets(_run_rows(path), time_key):
            per.setdefault(target, []).append((value, met))
    print(f"| target | runs that met it (of {len(paths)}) | lowest | highest |")
    print("|---|---|---|---|")
    for target, results in per.items():
        values = [v for v, _ in results if v is not None]
        low, high = (f"{min(values):.3f}", f"{max(values):.3f}") if values else ("-", "-")
        print(f"| {target} | {sum(met for _, met in results)} | {low} | {high} |")


def nrhs(path):
    """A Markdown table of benchmarks/gpu_bench_nrhs.sh's runs: per size, code and product, the waited-for time
    per vector with each K, and in brackets that over one vector's (``1/n``: ``n`` vectors' worth of one
    vector's time each); `-` where the run lacks the row."""
    rows = _run_rows(path)
    sizes = sorted({key[0] for key in rows}, reverse=True)
    for size in sizes:
        ks = sorted({key[3] for key in rows if key[0] == size})
        print(f"| `{size[0]} x {size[1]} x {size[2]}` | " + " | ".join(f"`K = {K}`" for K in ks) + " |")
        print("|---" * (len(ks) + 1) + "|")
        for code, adjoint in _ONE_VECTOR:
            one = rows.get((size, code, adjoint, 1))
            cells = []
            for K in ks:
                r = rows.get((size, code, adjoint, K))
                if r is None:
                    cells.append("-")
                    continue
                per = r["time_s"] / K
                cells.append(f"{per * 1e6:.1f}" + ("" if one is None else f" (1/{one['time_s'] / per:.1f})"))
            print(f"| `{code}` `{'F^T d' if adjoint else 'F m'}` | " + " | ".join(cells) + " |")
        print()


def smi(path, busy_watts=150.0):
    """The stretches of a benchmarks/smi_log.sh log where the board drew more than ``busy_watts``: per
    stretch its first and last sample's time, the samples, the SM clock's lowest and middle value, the
    power's middle and highest, and in how many samples the software power cap (throttle reason bit 0x4)
    held the clocks.  (Middle value: the upper median, the value at half the sorted samples.)"""
    import csv

    rows = list(csv.reader(open(path)))
    head = [h.strip() for h in rows[0]]
    col = {key: next(i for i, h in enumerate(head) if key in h) for key in ("timestamp", "clocks", "power.draw",
                                                                           "reasons.active")}
    stretches, current = [], []
    for r in rows[1:]:
        if len(r) != len(head):
            continue
        watts = float(r[col["power.draw"]].split()[0])
        if watts > busy_watts:
            current.append((r[col["timestamp"]].strip()[11:], int(r[col["clocks"]].split()[0]), watts,
                            int(r[col["reasons.active"]], 16)))
        elif current:
            stretches.append(current)
            current = []
    stretches += [current] if current else []
    for st in stretches:
        clocks, watts = sorted(c for _, c, _, _ in st), sorted(w for _, _, w, _ in st)
        capped = sum(1 for *_, reasons in st if reasons & 0x4)
        print(f"{st[0][0]}-{st[-1][0]}  {len(st):3d} samples  SM clock lowest {clocks[0]} middle "
              f"{clocks[len(clocks) // 2]} MHz  power middle {watts[len(watts) // 2]:.0f} highest {watts[-1]:.0f} W  "
              f"power cap in {capped}")


if __name__ == "__main__":
    if sys.argv[1] == "--markdown":
        markdown(sys.argv[2])
    elif sys.argv[1] == "--targets":
        targets(sys.argv[2:])
    elif sys.argv[1] == "--targets-prepared":
        targets(sys.argv[2:], "prepared_s")
    elif sys.argv[1] == "--tally":
        tally(sys.argv[2:])
    elif sys.argv[1] == "--smi":
        smi(sys.argv[2])
    elif sys.argv[1] == "--nrhs":
        nrhs(sys.argv[2])
    elif sys.argv[1] == "--tally-prepared":
        tally(sys.argv[2:], "prepared_s")
    else:
        for p in sys.argv[1:]:
            main(p)
