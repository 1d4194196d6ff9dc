"""Scaling sweeps (``fftmatvec bench --sweep``): grids, efficiency, the CSV
file and its merging, the plot, the command line in one process and under
``mpiexec`` (several grids in one launch, idle ranks waiting)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from shelltools import require_mpi, shell_env

from fftmatvec.bench import BenchConfig
from fftmatvec.cli import main
from fftmatvec.errors import ConfigError
from fftmatvec.scaling import (CSV_COLUMNS, add_efficiency, parse_grids, plot_scaling, read_csv, sweep_config,
                               update_csv, write_csv)

PNG = b"\x89PNG\r\n\x1a\n"
DOCS = Path(__file__).resolve().parents[2] / "docs"


def _row(sweep, ranks, grid, time_s, Nm=100, **kw):
    row = {c: 0.0 for c in CSV_COLUMNS}
    row.update(ranks=ranks, grid=grid, sweep=sweep, Nm=Nm, Nd=8, Nt=16, nrhs=1, precision="ddddd", adjoint=0,
               normal=0, device="cpu", time_s=time_s, fhat_bytes=1000, base_ranks=ranks, efficiency=float("nan"),
               rel_error=float("nan"), fft_s=time_s / 2, sbgemv_s=time_s / 3)
    row.update(kw)
    return row


def test_parse_grids():
    assert parse_grids("1x1, 1x2,2X1,1x2,") == [(1, 1), (1, 2), (2, 1)]
    for bad in ("", "2", "1x", "ax2", "0x2", "2x-1", "1x2x3"):
        with pytest.raises(ConfigError):
            parse_grids(bad)


def test_weak_multiplies_nm_strong_keeps_it():
    cfg = BenchConfig(Nm=10, Nd=3, Nt=4)
    assert sweep_config(cfg, "weak", 4).Nm == 40 and sweep_config(cfg, "strong", 4).Nm == 10
    with pytest.raises(ConfigError):
        sweep_config(cfg, "sideways", 2)


def test_efficiency_from_the_fastest_smallest_run():
    rows = [_row("strong", 1, "1x1", 1.0), _row("strong", 2, "1x2", 0.6), _row("strong", 2, "2x1", 0.8),
            _row("strong", 4, "2x2", 0.5),
            _row("weak", 1, "1x1", 1.0, Nm=100), _row("weak", 2, "1x2", 1.25, Nm=200),
            # another series (other sizes): its own base
            _row("strong", 2, "1x2", 2.0, Nm=999), _row("strong", 4, "1x4", 1.0, Nm=999)]
    add_efficiency(rows)
    eff = [round(r["efficiency"], 6) for r in rows]
    assert eff == [1.0, round(1 / 1.2, 6), 0.625, 0.5, 1.0, 0.8, 1.0, 1.0]
    assert [r["base_ranks"] for r in rows] == [1, 1, 1, 1, 1, 1, 2, 2]


def test_csv_merge_replaces_the_same_measurement(tmp_path):
    path = tmp_path / "s.csv"
    update_csv(path, [_row("strong", 1, "1x1", 1.0), _row("strong", 2, "1x2", 0.5)])
    rows = update_csv(path, [_row("strong", 2, "1x2", 0.25), _row("strong", 2, "2x1", 1.0)])
    back = read_csv(path)
    assert len(back) == len(rows) == 3
    by_grid = {r["grid"]: r for r in back}
    assert by_grid["1x2"]["time_s"] == 0.25 and by_grid["1x2"]["efficiency"] == 2.0  # superlinear is shown as is
    assert isinstance(by_grid["1x1"]["ranks"], int) and math.isnan(by_grid["1x1"]["rel_error"])
    assert path.read_text().splitlines()[0] == ",".join(CSV_COLUMNS)


def test_csv_from_before_normal_rows_is_read_and_rewritten(tmp_path):
    """A file written before the ``normal`` column (docs/scaling-cpu.csv) holds
    ``F m`` and ``F^T d`` rows: read with ``normal = 0``, merged with an
    ``F^T F m`` series of its own, and rewritten with every column."""
    path = tmp_path / "old.csv"
    path.write_text((DOCS / "scaling-cpu.csv").read_text())
    old = read_csv(path)
    assert old and all(r["normal"] == 0 for r in old)
    first = old[0]
    normal = dict(first, normal=1, precision="ddddd/ddddd", time_s=2 * first["time_s"], ranks=first["ranks"])
    rows = update_csv(path, [normal])
    assert len(rows) == len(old) + 1 and path.read_text().splitlines()[0] == ",".join(CSV_COLUMNS)
    back = read_csv(path)
    assert sum(r["normal"] for r in back) == 1
    assert [r for r in back if r["normal"]][0]["efficiency"] == 1.0  # its own series, its own base
    def efficiencies(rows):
        return sorted((r["sweep"], r["Nm"], r["grid"], r["efficiency"]) for r in rows)

    kept = efficiencies(r for r in back if not r["normal"])
    assert [k[:3] for k in kept] == [k[:3] for k in efficiencies(add_efficiency(old))]
    assert [k[3] for k in kept] == pytest.approx([k[3] for k in efficiencies(add_efficiency(old))], rel=1e-5)


def test_csv_of_another_layout_is_refused(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("ranks,time\n1,0.5\n")
    with pytest.raises(ConfigError, match="new file"):
        update_csv(path, [_row("strong", 1, "1x1", 1.0)])
    assert path.read_text() == "ranks,time\n1,0.5\n"


def test_plot(tmp_path):
    rows = add_efficiency([_row("strong", 1, "1x1", 1.0), _row("strong", 2, "1x2", 0.6),
                           _row("weak", 1, "1x1", 1.0), _row("weak", 2, "2x1", 1.1, Nm=200, bcast_s=0.1)])
    write_csv(tmp_path / "s.csv", rows)
    out = plot_scaling(read_csv(tmp_path / "s.csv"), tmp_path / "s.png", title="t")
    assert out.read_bytes()[:8] == PNG


def test_cli_sweep_in_one_process(tmp_path, capsys):
    csv_path, png = tmp_path / "sweep.csv", tmp_path / "sweep.png"
    args = ["bench", "--sweep", "weak", "--Nm", "9", "--Nd", "3", "--Nt", "8", "-N", "2", "--grids", "1x1,1x2",
            "--csv", str(csv_path), "--plot", str(png), "--json"]
    for _ in range(2):  # the second run replaces the first one's row
        assert main(args) == 0
        out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["skipped"] == ["1x2"] and out["ranks"] == 1
    (row,) = out["rows"]
    assert row["grid"] == "1x1" and row["Nm"] == 9 and row["efficiency"] == 1.0 and row["rel_error"] is None
    assert set(CSV_COLUMNS) <= set(row)
    assert len(read_csv(csv_path)) == 1 and png.read_bytes()[:8] == PNG


def test_cli_sweep_of_the_normal_product(tmp_path, capsys):
    """``--normal --sweep``: ``F^T F m`` rows, the two codes in ``precision``,
    beside an ``F m`` series in the same file."""
    csv_path = tmp_path / "sweep.csv"
    base = ["bench", "--sweep", "strong", "--Nm", "9", "--Nd", "3", "--Nt", "8", "-N", "2", "--check",
            "--csv", str(csv_path), "--json"]
    assert main(base) == 0
    assert main(base + ["--normal", "--precision", "dssdd", "--adjoint-precision", "ddssd"]) == 0
    out = capsys.readouterr().out
    assert "sweep of F^T F m" in out
    (row,) = json.loads(out.strip().splitlines()[-1])["rows"]
    assert row["normal"] == 1 and row["precision"] == "dssdd/ddssd" and 0 < row["rel_error"] < 1e-5
    rows = read_csv(csv_path)
    assert sorted((r["normal"], r["precision"]) for r in rows) == [(0, "ddddd"), (1, "dssdd/ddssd")]
    assert all(r["efficiency"] == 1.0 for r in rows)


def test_cli_sweep_usage_errors(tmp_path, capsys):
    base = ["bench", "--Nm", "9", "--Nd", "3", "--Nt", "8", "-N", "1"]
    assert main(base + ["--sweep", "weak", "--grid", "1x1"]) == 2
    assert main(base + ["--csv", str(tmp_path / "x.csv")]) == 2  # --csv needs --sweep
    assert main(base + ["--sweep", "strong", "--grids", "2x2"]) == 2  # nothing fits in one process
    assert main(base + ["--sweep", "strong", "--grids", "1xq"]) == 2
    assert main(base + ["--sweep", "diagonal"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--grids" in err
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.mpi_skip
@pytest.mark.timeout(180)
def test_cli_sweep_under_mpiexec_runs_every_grid_that_fits(tmp_path):
    exe = require_mpi()
    csv_path = tmp_path / "s.csv"
    cmd = [exe, "-n", "3", sys.executable, "-m", "fftmatvec", "bench", "--sweep", "strong", "--Nm", "10",
           "--Nd", "4", "--Nt", "8", "-N", "2", "--check", "--grids", "1x1,1x2,2x1,1x3,2x2", "--csv", str(csv_path),
           "--json"]
    proc = subprocess.run(cmd, env=shell_env(tmp_path), capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    out = json.loads(lines[-1])
    assert sum(line.startswith("{") for line in lines) == 1  # rank 0 alone prints
    assert out["skipped"] == ["2x2"]
    rows = read_csv(csv_path)
    assert sorted((r["ranks"], r["grid"]) for r in rows) == [(1, "1x1"), (2, "1x2"), (2, "2x1"), (3, "1x3")]
    assert all(r["rel_error"] < 1e-12 for r in rows)
    assert all(r["comm_s"] > 0 for r in rows if r["ranks"] > 1)
