"""Compact table of the JSON lines written by gpu_probe.py or the bench runs."""

import json
import sys


def fmt_us(t):
    return "-" if t is None else f"{t * 1e6:9.1f}"


def main(path):
    try:
        lines = [json.loads(s) for s in open(path) if s.strip().startswith("{")]
    except FileNotFoundError:
        print(f"{path}: missing")
        return
    for r in lines:
        w = r.get("what")
        if w == "copy_bandwidth":
            print(f"copy bw {r['Bps'] / 1e12:.3f} TB/s  {r.get('device')}")
        elif w in ("sbgemv_fwd", "sbgemv_adj", "sbgemm"):
            extra = r.get("variant", r.get("path", ""))
            print(f"{w:10s} {r.get('size', ''):3s} {'adj' if r.get('adjoint') else '':3s} {r['ta']:10s} {r.get('tx', ''):10s} "
                  f"{str(extra):30s} K={r.get('K', 1):<2d} {fmt_us(r['time_s'])} us  x{r['floor_ratio']:.3f}")
        elif w == "fft":
            print(f"fft n={r['n']} K={r['K']} {r['real']} {r['layout']}: pad_rfft {fmt_us(r['pad_rfft_s'])} "
                  f"irfft_unpad {fmt_us(r['irfft_unpad_s'])}  (ideal pad_rfft {fmt_us(r['ideal_pad_rfft_s'])})")
        elif w == "engine":
            st = " ".join(f"{k}={v * 1e6:.0f}" for k, v in r.get("stages", {}).items())
            print(f"engine {r['size']:18s} {r['code']} {'FT' if r['adjoint'] else 'F '} K={r['K']:<3d} "
                  f"{fmt_us(r['time_s'])} us x{r['floor_ratio']:.3f} naive {fmt_us(r.get('naive_s'))} "
                  f"g={int(r['graph'])} [{st}]" + (f" ERR {r['slot_error'][:80]}" if r.get("slot_error") else ""))
        elif w == "small":
            print(f"small {r['code']} {'FT' if r['adjoint'] else 'F '} graph={int(r['graph_allowed'])}"
                  f"/{int(r['recorded'])} b2b {fmt_us(r['per_call_back_to_back_s'])} ev "
                  f"{fmt_us(r['per_call_events_s'])} wall {fmt_us(r['per_call_wall_sync_s'])}"
                  + (f" ERR {r['slot_error'][:80]}" if r.get("slot_error") else ""))
        elif w == "small-operator":
            print(f"small operator.matvec {fmt_us(r['per_call_events_s'])} us")
        elif w == "kernels":
            top = sorted(r.get("per_product_us", {}).items(), key=lambda kv: -kv[1])[:5]
            print(f"kernels {r['size']:5s} K={r['K']:<2d} {r['code']} {'FT' if r['adjoint'] else 'F '} total "
                  f"{r.get('total_us', 0):8.1f} us (floor {r.get('floor_us', 0):8.1f}): "
                  + "; ".join(f"{k[:40]} {v:.1f}" for k, v in top))
        elif w == "fftvar":
            print(f"fftvar n={r['n']} K={r['K']} Nt={r['nt']} {r['real']} smem={r['smem_kb']}KB T={r['threads']} "
                  f"S={r['S']}: pad_rfft {r['pad_rfft_us']} irfft_unpad {r['irfft_unpad_us']} (ideal {r['ideal_us']})")
        elif w == "host":
            print(f"host {r['call']}: latency {r['latency_us']} us, back to back {r['back_to_back_us']} us")
        elif w == "error":
            print(f"ERROR in {r['part']}:\n{r['traceback'][-1500:]}")
        elif "time_s" in r and "floor_ratio" in r:  # fftmatvec bench --json
            print(f"bench Nm={r['Nm']} Nd={r['Nd']} Nt={r['Nt']} K={r['nrhs']} {r['precision']} "
                  f"{'FT' if r['adjoint'] else 'F '} {fmt_us(r['time_s'])} us x{r['floor_ratio']:.3f} "
                  f"b2b {fmt_us(r.get('back_to_back_s'))} out= {fmt_us(r.get('into_out_s'))} per-vec {fmt_us(r['time_per_vector_s'])} naive {fmt_us(r.get('naive_time_s'))} "
                  f"err {r.get('rel_error', '-')}")
        else:
            print(json.dumps(r)[:200])


def markdown(path):
    """The table of docs/benchmarks.md from the bench lines of a results file."""
    rows = [json.loads(s) for s in open(path) if s.strip().startswith("{")]
    print("| size `Nm x Nd x Nt` | K | code | product | time (us) | into `out=` (us) | back to back (us) "
          "| per vector (us) | x floor | naive (us) | speed-up | rel. error |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "floor_ratio" not in r:
            continue
        err = f"{r['rel_error']:.1e}" if "rel_error" in r else "-"
        print(f"| {r['Nm']} x {r['Nd']} x {r['Nt']} | {r['nrhs']} | `{r['precision']}` | "
              f"{'`F^T d`' if r['adjoint'] else '`F m`'} | {r['time_s'] * 1e6:.1f} | {fmt_us(r.get('into_out_s')).strip()} | "
              f"{r['back_to_back_s'] * 1e6:.1f} | "
              f"{r['time_per_vector_s'] * 1e6:.1f} | {r['floor_ratio']:.3f} | {r['naive_time_s'] * 1e6:.1f} | "
              f"{r['speedup_vs_naive']:.2f}x | {err} |")


if __name__ == "__main__":
    if sys.argv[1] == "--markdown":
        markdown(sys.argv[2])
    else:
        for p in sys.argv[1:]:
            main(p)
