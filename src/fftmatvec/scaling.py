"""Scaling sweeps of the matvec benchmark: several grids per launch, CSV rows, a plot.

``fftmatvec bench --sweep weak|strong --grids 1x1,1x2,2x2 --csv FILE`` runs
:func:`run_sweep` (docs/benchmarks.md):

* One launch of ``P`` ranks runs every grid ``pr x pc`` of ``--grids`` with
  ``pr * pc <= P``, smallest first, each on a sub-communicator made of the
  first ``pr * pc`` ranks of the launch; the other ranks wait in a barrier
  that sleeps between polls, so they take no CPU from the measured ranks.
  Grids larger than ``P`` are skipped (and reported), so the same command
  can run under any launch size, and a sweep over node counts is one launch
  per node count, each giving only its own grids (scripts/slurm/).
* ``strong``: the sizes are the total, the same for every grid.  ``weak``:
  ``--Nm`` is per rank; a grid of ``p`` ranks runs ``Nm * p`` parameters
  (``Nd`` and ``Nt`` fixed), so every rank keeps an ``Nd x Nm`` slab.
* :func:`update_csv` merges the rows into the CSV file: a row measured again
  (same sweep, sizes, precision, product, device, grid) replaces the old
  one, and the efficiency of every row is recomputed from its series' row
  with the fewest ranks (:func:`add_efficiency`), so the file is consistent
  whatever order the launches came in.
* :func:`plot_scaling` draws time and efficiency against ranks and the
  per-stage times (matplotlib, Agg).

Times are those of the slowest rank (:func:`fftmatvec.bench.run_bench`).
"""

from __future__ import annotations

import csv
import dataclasses
import math
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from .bench import BenchConfig, run_bench
from .errors import ConfigError, collective
from .grid import SerialGrid, parse_shape

SWEEPS = ("weak", "strong")

#: Stage columns, in pipeline order (``bcast``/``reduce`` are 0 on one rank).
STAGES = ("pad", "fft", "sbgemv", "ifft", "unpad", "bcast", "reduce")

#: Columns of the CSV file, in order.  The product is ``F m``, ``F^T d``
#: (``adjoint``) or ``F^T F m`` (``normal``, whose ``precision`` is
#: ``"FORWARD/ADJOINT"``, the two passes' codes).
CSV_COLUMNS = (
    "ranks", "grid", "sweep", "Nm", "Nd", "Nt", "nrhs", "precision", "adjoint", "normal", "device",
    *(f"{s}_s" for s in STAGES),
    "comm_s", "time_s", "setup_s", "fhat_bytes", "bandwidth_GBps", "floor_ratio",
    "efficiency", "base_ranks", "rel_error",
)

#: The columns of files written before ``F^T F m`` rows (read as ``normal = 0``).
CSV_COLUMNS_BEFORE_NORMAL = tuple(c for c in CSV_COLUMNS if c != "normal")

_INT = {"ranks", "Nm", "Nd", "Nt", "nrhs", "adjoint", "normal", "fhat_bytes", "base_ranks"}
_TEXT = {"grid", "sweep", "precision", "device"}

#: Columns that identify a measurement; a new row with the same key replaces the old one.
ROW_KEY = ("sweep", "device", "precision", "adjoint", "normal", "nrhs", "Nm", "Nd", "Nt", "grid")


def parse_grids(text: str) -> list[tuple[int, int]]:
    """``"1x1,1x2,2x2"`` -> ``[(1, 1), (1, 2), (2, 2)]`` (duplicates dropped,
    order kept).  :class:`ConfigError` for an unparsable entry."""
    grids: list[tuple[int, int]] = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        try:
            pr, pc = (int(v) for v in item.lower().split("x"))
        except ValueError:
            raise ConfigError(f"--grids: {item!r} is not PRxPC (e.g. 2x4)") from None
        shape = parse_shape((pr, pc), pr * pc)  # positive extents
        if shape not in grids:
            grids.append(shape)
    if not grids:
        raise ConfigError("--grids: no grid given")
    return grids


def sweep_config(cfg: BenchConfig, sweep: str, ranks: int) -> BenchConfig:
    """The benchmark of one grid of ``ranks`` ranks: ``weak`` multiplies
    ``Nm`` (per rank) by ``ranks``; ``strong`` keeps the sizes."""
    if sweep not in SWEEPS:
        raise ConfigError(f"--sweep {sweep!r}: choose one of {', '.join(SWEEPS)}")
    return dataclasses.replace(cfg, Nm=cfg.Nm * ranks) if sweep == "weak" else cfg


def idle_barrier(comm: Any, poll_s: float = 0.005) -> None:
    """A barrier that sleeps between polls (``Ibarrier`` + ``Test``): ranks
    waiting here leave the cores to the ranks still measuring."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(poll_s)


def run_sweep(cfg: BenchConfig, sweep: str, grids: Iterable[tuple[int, int]], comm: Any = None,
              log: Callable[[str], None] | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Benchmark ``cfg`` on every grid of ``grids`` that fits in ``comm``.

    Parameters
    ----------
    cfg : BenchConfig
        Sizes (``Nm`` per rank for ``weak``), precision, direction, device.
    sweep : "weak" or "strong"
    grids : (pr, pc) pairs; run smallest first.
    comm : mpi4py communicator, optional
        The ranks of this launch; None is one process without MPI.
    log : callable, optional
        Called with one line per grid, on every rank.

    Returns
    -------
    rows : list of dict
        One CSV row (:data:`CSV_COLUMNS`, efficiency not yet filled in) per
        grid run, the same on every rank.
    skipped : list of str
        Grids larger than the launch.

    Every rank of ``comm`` calls this.  A failure on a grid raises the same
    error on every rank (one vote over ``comm`` after each grid).
    """
    size = 1 if comm is None else comm.Get_size()
    rank = 0 if comm is None else comm.Get_rank()
    rows, skipped = [], []
    bandwidth: dict[int, float] = {}  # measured once per rank count: the same ranks copy
    for pr, pc in sorted(dict.fromkeys(grids), key=lambda g: (g[0] * g[1], g[0])):
        n = pr * pc
        if n > size:
            skipped.append(f"{pr}x{pc}")
            continue
        run_cfg = sweep_config(cfg, sweep, n)
        if cfg.copy_bandwidth is None and n in bandwidth:
            run_cfg = dataclasses.replace(run_cfg, copy_bandwidth=bandwidth[n])
        if comm is None:
            result = run_bench(run_cfg, SerialGrid())
        else:
            result = _run_on_subgrid(comm, rank, pr, pc, run_cfg)
        bandwidth.setdefault(n, result["copy_bandwidth_Bps"])
        row = scaling_row(result, sweep)
        rows.append(row)
        if log is not None:
            log(format_row(row))
    return rows, skipped


def _run_on_subgrid(comm: Any, rank: int, pr: int, pc: int, cfg: BenchConfig) -> dict[str, Any]:
    """Run on the first ``pr*pc`` ranks of ``comm``; the rest wait; all return
    the result (or all raise the same error)."""
    from mpi4py import MPI

    from .grid import ProcessGrid
    from .mpi import run_collectively

    n = pr * pc
    result, error = None, None
    sub = comm.Split(0 if rank < n else MPI.UNDEFINED, rank)
    if sub != MPI.COMM_NULL:
        try:
            grid = ProcessGrid.from_option(sub, (pr, pc), Nd=cfg.Nd, Nm=cfg.Nm)
            try:
                # an error that the grid's ranks do not agree on ends the job
                result = run_collectively(run_bench, cfg, grid, comm=sub)
            finally:
                grid.free()
        except Exception as exc:  # agreed on the sub-grid: share it with the idle ranks
            error = exc
        finally:
            sub.Free()
    idle_barrier(comm)
    with collective(comm, f"benchmark on grid {pr}x{pc}"):
        if error is not None:
            raise error
    return comm.bcast(result, root=0)


def scaling_row(result: dict[str, Any], sweep: str) -> dict[str, Any]:
    """A CSV row from a :func:`~fftmatvec.bench.run_bench` result."""
    stages = result["stages"]
    total = int(result.get("fhat_bytes_total", result["fhat_bytes"] * result["ranks"]))
    normal = bool(result.get("normal"))
    row: dict[str, Any] = {
        "ranks": result["ranks"], "grid": result["grid"], "sweep": sweep,
        "Nm": result["Nm"], "Nd": result["Nd"], "Nt": result["Nt"], "nrhs": result["nrhs"],
        "precision": f"{result['precision']}/{result['adjoint_precision']}" if normal else result["precision"],
        "adjoint": int(bool(result["adjoint"])), "normal": int(normal), "device": result["device"],
    }
    for s in STAGES:
        row[f"{s}_s"] = float(stages.get(s, 0.0))
    row.update({
        "comm_s": result["comm_s"], "time_s": result["time_s"], "setup_s": result["setup_s"],
        "fhat_bytes": total, "bandwidth_GBps": total / result["time_s"] / 1e9,
        "floor_ratio": result["floor_ratio"], "efficiency": float("nan"), "base_ranks": result["ranks"],
        "rel_error": result.get("rel_error", float("nan")),
    })
    return row


def format_row(row: dict[str, Any]) -> str:
    """One line of the sweep table (``efficiency`` shown once known)."""
    eff = row.get("efficiency", float("nan"))
    eff_text = "" if eff != eff else f"  efficiency {eff:5.2f}"
    return (f"{row['sweep']:<6} ranks {row['ranks']:>4}  grid {row['grid']:>7}  Nm={row['Nm']} Nd={row['Nd']} "
            f"Nt={row['Nt']}  time {row['time_s'] * 1e3:9.3f} ms  comm {row['comm_s'] * 1e3:8.3f} ms  "
            f"{row['bandwidth_GBps']:7.2f} GB/s{eff_text}")


# ------------------------------------------------------------------ CSV


def series_key(row: dict[str, Any]) -> tuple:
    """Rows of one scaling series share this key: the sweep, the base sizes
    (``Nm`` per rank for weak), precision, product, device and ``K``."""
    nm = row["Nm"] // row["ranks"] if row["sweep"] == "weak" else row["Nm"]
    return (row["sweep"], row["device"], row["precision"], row["adjoint"], row["normal"], row["nrhs"], nm,
            row["Nd"], row["Nt"])


def add_efficiency(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fill in ``efficiency`` and ``base_ranks`` in place.

    The base of a series is its row with the fewest ranks (the fastest grid
    if several share that count): strong ``E = T_b p_b / (T p)``, weak
    ``E = T_b / T``.  Returns ``rows``.
    """
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(series_key(row), []).append(row)
    for group in groups.values():
        p_b = min(r["ranks"] for r in group)
        t_b = min(r["time_s"] for r in group if r["ranks"] == p_b)
        for r in group:
            r["base_ranks"] = p_b
            if r["sweep"] == "weak":
                r["efficiency"] = t_b / r["time_s"]
            else:
                r["efficiency"] = t_b * p_b / (r["time_s"] * r["ranks"])
    return rows


def read_csv(path: "str | Path") -> list[dict[str, Any]]:
    """Rows of a sweep CSV file, with numbers as numbers (a file of
    :data:`CSV_COLUMNS_BEFORE_NORMAL` holds ``F m`` and ``F^T d`` rows only:
    ``normal`` is 0).  :class:`ConfigError` for any other header."""
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        header = tuple(reader.fieldnames or ())
        if header not in (CSV_COLUMNS, CSV_COLUMNS_BEFORE_NORMAL):
            raise ConfigError(f"{path}: not a sweep CSV of this version (columns {reader.fieldnames}, "
                              f"expected {', '.join(CSV_COLUMNS)}); write to a new file")
        return [dict({"normal": 0}, **{k: _parse(k, v) for k, v in row.items()}) for row in reader]


def _parse(column: str, text: str) -> Any:
    if column in _TEXT:
        return text
    if column in _INT:
        return int(text)
    return float(text) if text != "" else float("nan")


def _format(value: Any) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.6g}"
    return str(value)


def write_csv(path: "str | Path", rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` (sorted by sweep, series and ranks) atomically."""
    from .io import atomic_path

    rows = sorted(rows, key=lambda r: (series_key(r), r["ranks"], r["grid"]))
    with atomic_path(path) as tmp:
        with open(tmp, "w", newline="") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(CSV_COLUMNS)
            for row in rows:
                writer.writerow([_format(row[c]) for c in CSV_COLUMNS])


def update_csv(path: "str | Path", rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge ``rows`` into the CSV file at ``path`` (created if missing): rows
    with the same :data:`ROW_KEY` are replaced, efficiencies recomputed over
    the whole file.  Returns all rows of the file."""
    path = Path(path)
    old = read_csv(path) if path.exists() else []
    new_keys = {tuple(r[k] for k in ROW_KEY) for r in rows}
    merged = [r for r in old if tuple(r[k] for k in ROW_KEY) not in new_keys] + [dict(r) for r in rows]
    add_efficiency(merged)
    write_csv(path, merged)
    return merged


# ------------------------------------------------------------------ plot


def _label(key: tuple) -> str:
    sweep, device, precision, adjoint, normal, nrhs, nm, nd, nt = key
    what = "F^T F m" if normal else "F^T d" if adjoint else "F m"
    per = "/rank" if sweep == "weak" else ""
    k = f" K={nrhs}" if nrhs != 1 else ""
    return f"{sweep}: {what} Nm={nm}{per} Nd={nd} Nt={nt}{k} {precision} {device}"


def plot_scaling(rows: list[dict[str, Any]], path: "str | Path", title: str | None = None) -> Path:
    """Time and efficiency against ranks, and stage times per run, as a PNG.

    One line per series through its fastest grid at each rank count (the
    dashed line is ideal scaling from the series' base), every grid as a
    labelled point; the right panel stacks the slowest-rank stage medians
    of every row.  Rows need ``efficiency`` (:func:`add_efficiency`).
    """
    from .plots import _pyplot, _save

    plt = _pyplot()
    rows = sorted(rows, key=lambda r: (series_key(r), r["ranks"], r["grid"]))
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(series_key(row), []).append(row)
    fig, (ax_t, ax_e, ax_s) = plt.subplots(1, 3, figsize=(17, 5.2), gridspec_kw={"width_ratios": [1, 1, 1.3]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (key, group) in enumerate(groups.items()):
        color = colors[i % len(colors)]
        ranks = sorted({r["ranks"] for r in group})
        best = [min((r for r in group if r["ranks"] == p), key=lambda r: r["time_s"]) for p in ranks]
        ax_t.plot(ranks, [r["time_s"] * 1e3 for r in best], "o-", color=color, label=_label(key))
        p_b, t_b = best[0]["ranks"], best[0]["time_s"]
        ideal = [t_b * 1e3 * (p_b / p if key[0] == "strong" else 1.0) for p in ranks]
        ax_t.plot(ranks, ideal, "--", color=color, alpha=0.5)
        ax_e.plot(ranks, [r["efficiency"] for r in best], "o-", color=color, label=_label(key))
        for r in group:
            ax_t.plot(r["ranks"], r["time_s"] * 1e3, ".", color=color)
            ax_t.annotate(r["grid"], (r["ranks"], r["time_s"] * 1e3), fontsize=7, xytext=(3, 3),
                          textcoords="offset points", color=color)
            ax_e.annotate(r["grid"], (r["ranks"], r["efficiency"]), fontsize=7, xytext=(3, 3),
                          textcoords="offset points", color=color)
            ax_e.plot(r["ranks"], r["efficiency"], ".", color=color)
    all_ranks = sorted({r["ranks"] for r in rows})
    for ax in (ax_t, ax_e):
        ax.set_xscale("log", base=2)
        ax.set_xticks(all_ranks, [str(p) for p in all_ranks])
        ax.xaxis.set_minor_locator(plt.NullLocator())
        ax.set_xlabel("ranks")
        ax.grid(True, which="both", alpha=0.3)
    ax_t.set_yscale("log")
    plain = plt.FuncFormatter(lambda v, _: f"{v:g}")
    ax_t.yaxis.set_major_formatter(plain)
    ax_t.yaxis.set_minor_formatter(plain)
    ax_t.tick_params(axis="y", which="minor", labelsize=7)
    ax_t.set(ylabel="time per product (ms, slowest rank)", title="time (dashed: ideal)")
    ax_e.axhline(1.0, color="k", lw=0.8, ls=":")
    ax_e.set(ylabel="efficiency", title="parallel efficiency (fastest grid per rank count)", ylim=(0, None))
    ax_t.legend(fontsize=7, loc="best")

    labels, bottom = [f"{r['sweep'][0]} {r['ranks']}: {r['grid']}" for r in rows], [0.0] * len(rows)
    for s in STAGES:
        values = [r[f"{s}_s"] * 1e3 for r in rows]
        if any(v > 0 for v in values):
            ax_s.bar(range(len(rows)), values, bottom=bottom, label=s)
            bottom = [b + v for b, v in zip(bottom, values)]
    ax_s.plot(range(len(rows)), [r["time_s"] * 1e3 for r in rows], "k_", ms=14, mew=2, label="whole product")
    ax_s.set_xticks(range(len(rows)), labels, rotation=60, ha="right", fontsize=7)
    ax_s.set(ylabel="ms (median per stage, slowest rank)", title="stages (w = weak, s = strong)")
    ax_s.legend(fontsize=7, ncol=2)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, Path(path))
