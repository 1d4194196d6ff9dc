"""benchmarks/gpu_summary.py reads every results file kept in the repository
(one line per record, whatever the record's kind or the form it had when it
was written) and makes docs/benchmarks.md's table from a bench run."""

import json
from pathlib import Path

import pytest
from conftest import benchmark_module

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
RESULTS = sorted((BENCH / "results").glob("*.jsonl"))


def _summary():
    return benchmark_module("gpu_summary")


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.name)
def test_every_results_file_summarises(path, capsys):
    records = [json.loads(s) for s in path.read_text().splitlines() if s.strip().startswith("{")]
    _summary().main(str(path))
    lines = capsys.readouterr().out.splitlines()
    assert len(records) > 0
    assert len(lines) >= len(records)  # (an error record's traceback takes several)


def test_known_kinds_are_formatted():
    summary = _summary()
    rate = {"what": "wgmma-rate", "N": 32, "chains": 2, "warpgroups": 2, "cycles_per_instruction": 16.0,
            "mac_per_cycle": 1022.1}
    assert summary.line(rate) == "wgmma m64n32k8 chains=2 warpgroups=2: 16.0 cycles, 1022 MAC/cycle"
    old_form = {"what": "fftvar", "n": 5000, "K": 1}  # fields missing: printed as JSON, not an error
    assert summary.line(old_form).startswith('{"what": "fftvar"')


def test_markdown_table_of_a_bench_run(capsys):
    _summary().markdown(str(BENCH / "results" / "h200-bench-stop18.jsonl"))
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].startswith("| size `Nm x Nd x Nt` |") and len(rows) == 2 + 12
    assert "| 5000 x 100 x 1000 | 1 | `ddddd` | `F m` | 2053.5 |" in rows[2]


def test_markdown_and_line_name_the_normal_product(tmp_path, capsys):
    r = _bench(1000, 50, 500, "dssdd", False, 1, 1.2e-4, 1e-4, normal=True, adjoint_precision="ddssd",
               naive_time_s=3e-4)
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(r) + "\n")
    summary = _summary()
    summary.markdown(str(path))
    row = capsys.readouterr().out.splitlines()[2]
    assert row.startswith("| 1000 x 50 x 500 | 1 | `dssdd/ddssd` | `F^T F m` | 120.0 |")
    assert " dssdd/ddssd F^T F m " in summary.line(r)


def _bench(nm, nd, nt, code, adjoint, K, time_s, floor_s, **extra):
    return dict(device="gpu", Nm=nm, Nd=nd, Nt=nt, precision=code, adjoint=adjoint, nrhs=K, time_s=time_s,
                back_to_back_s=0.9 * time_s, time_per_vector_s=time_s / K, floor_s=floor_s,
                floor_ratio=time_s / floor_s, speedup_vs_naive=1.2, **extra)


def test_targets_row_marks_what_is_met(tmp_path, capsys):
    """One row per run; a value within its target is bold, one just past it is not."""
    big, mid = (5000, 100, 1000), (1000, 50, 500)
    runs = [_bench(*big, "ddddd", False, 1, 1.00e-3, 1e-3), _bench(*big, "ddddd", True, 1, 1.06e-3, 1e-3),
            _bench(*big, "dssdd", False, 1, 0.55e-3, 0.5e-3), _bench(*big, "ddssd", True, 1, 0.52e-3, 0.5e-3),
            _bench(*big, "ddddd", False, 16, 16e-3 / 12, 1e-3), _bench(*big, "dssdd", False, 16, 1.6e-3, 0.5e-3),
            _bench(*mid, "ddddd", False, 1, 1.30e-4, 1e-4), _bench(*mid, "ddssd", True, 1, 1.31e-4, 1e-4),
            _bench(289, 15, 10, "ddddd", False, 1, 20.1e-6, 1e-7),
            # F^T F m, beside the targets: not the dssdd F m row although its forward code is dssdd
            _bench(*big, "dssdd", False, 1, 9e-3, 1e-3, normal=True, adjoint_precision="ddssd")]
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    _summary().targets([str(path)])
    header, rule, row = capsys.readouterr().out.splitlines()
    assert header.startswith("| run |") and rule.count("|") == header.count("|")
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "`run.jsonl`"
    assert cells[1] == "**1.000 (0.900)**, 1.060 (0.954), 1.100 (0.990), **1.040 (0.936)**"
    assert cells[2] == "**0.550**, **0.491**"  # dssdd / ddddd 0.55 exactly, ddssd / ddddd F^T d
    assert cells[4] == "**1.300 (1.170)**, -, -, 1.310 (1.179)"  # rows not run show as "-"
    assert cells[5] == "20.1"
    assert cells[6] == "**1/12.0**, 1/5.5"


def test_targets_of_prepared_products(tmp_path, capsys):
    """With ``prepared_s`` as the waited-for time the same cells come from the
    prepared products; a run that did not time them shows "-"."""
    big, mid = (5000, 100, 1000), (1000, 50, 500)
    runs = [_bench(*big, "ddddd", False, 1, 1.10e-3, 1e-3, prepared_s=1.04e-3, naive_time_s=2.08e-3),
            _bench(*mid, "ddssd", True, 1, 1.35e-4, 1e-4, prepared_s=1.29e-4),
            _bench(289, 15, 10, "ddddd", False, 1, 21e-6, 1e-7, prepared_s=11e-6)]
    path, old = tmp_path / "run.jsonl", tmp_path / "old.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    old.write_text(json.dumps(_bench(*big, "ddddd", False, 1, 1.0e-3, 1e-3)) + "\n")
    _summary().targets([str(path), str(old)], "prepared_s")
    _, _, row, old_row = capsys.readouterr().out.splitlines()
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "**1.040 (0.990)**, -, -, -"
    assert cells[3] == "2.00-2.00x"
    assert cells[4] == "-, -, -, **1.290 (1.215)**"
    assert cells[5] == "**11.0**"
    assert [c.strip() for c in old_row.strip("|").split("|")][1] == "-, -, -, -"


def test_tally_counts_the_runs_that_met_each_target(tmp_path, capsys):
    """Per target, the runs that met it and the range of its value over the
    runs that have it; a target no run has shows "-"."""
    big, mid = (5000, 100, 1000), (1000, 50, 500)
    first = [_bench(*big, "ddddd", False, 1, 1.04e-3, 1e-3, prepared_s=1.0e-3),
             _bench(*mid, "ddssd", True, 1, 1.31e-4, 1e-4, prepared_s=1.2e-4)]
    second = [_bench(*big, "ddddd", False, 1, 1.06e-3, 1e-3, prepared_s=1.01e-3),
              _bench(*mid, "ddssd", True, 1, 1.29e-4, 1e-4, prepared_s=1.25e-4),
              _bench(*big, "ddddd", False, 16, 16e-3 / 11, 1e-3)]
    paths = []
    for name, runs in (("a.jsonl", first), ("b.jsonl", second)):
        paths.append(tmp_path / name)
        paths[-1].write_text("".join(json.dumps(r) + "\n" for r in runs))
    _summary().tally([str(p) for p in paths])
    rows = {c[0]: c[1:] for c in ([x.strip() for x in line.strip("|").split("|")]
                                  for line in capsys.readouterr().out.splitlines()[2:])}
    assert rows["big `ddddd` `F m`"] == ["1", "1.040", "1.060"]
    assert rows["middle `ddssd` `F^T d`"] == ["1", "1.290", "1.310"]
    assert rows["big `dssdd` `F m`"] == ["0", "-", "-"]
    assert rows["`K = 16` `ddddd` (1/n)"] == ["0", "11.660", "11.660"]  # 1.06 ms against 16 / 11 ms
    _summary().tally([str(p) for p in paths], "prepared_s")
    rows = {c[0]: c[1:] for c in ([x.strip() for x in line.strip("|").split("|")]
                                  for line in capsys.readouterr().out.splitlines()[2:])}
    assert rows["big `ddddd` `F m`"] == ["2", "1.000", "1.010"]
    assert rows["middle `ddssd` `F^T d`"] == ["2", "1.200", "1.250"]
