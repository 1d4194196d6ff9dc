"""benchmarks/gpu_summary.py reads every results file kept in the repository
(one line per record, whatever the record's kind or the form it had when it
was written) and makes docs/benchmarks.md's table from a bench run."""

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
RESULTS = sorted((BENCH / "results").glob("*.jsonl"))


def _summary():
    spec = importlib.util.spec_from_file_location("gpu_summary", BENCH / "gpu_summary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
