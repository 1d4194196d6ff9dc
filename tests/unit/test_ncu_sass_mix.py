"""benchmarks/ncu_sass_mix.py on a small Nsight Compute export by instruction:
the opcode mix and stall shares over all instructions or a span, and the
runs of instructions executed equally often (how it tells warp roles apart)."""

import csv

import pytest
from conftest import benchmark_module

HEADER = ["Address", "Source", "Instructions Executed", "stall_wait", "stall_long_sb", "stall_selected",
          "stall_long_sb (Not Issued)"]
# (source, executed, wait, long_sb, selected): two instructions of a role run 80 times, a wait branch of
# another run 40 times, two more of the first kind
ROWS = [("LDS R1, [R2]", 80, 2, 0, 2), ("FADD R1, R1, R3", 80, 4, 0, 4), ("@!P0 BRA 0x10", 40, 0, 6, 0),
        ("STS [R2], R1", 80, 1, 0, 1), ("FADD R4, R4, R1", 80, 0, 0, 0)]


@pytest.fixture
def export(tmp_path):
    path = tmp_path / "k.csv"
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["Kernel Name", "k(int)"])
        out.writerow(HEADER)
        for i, (source, executed, wait, long_sb, selected) in enumerate(ROWS):
            out.writerow([hex(16 * i), source, executed, wait, long_sb, selected, 99])
    return str(path)


def test_mix_whole_and_span(export):
    tool = benchmark_module("ncu_sass_mix")
    whole = tool.mix(export, "FADD", top=1)
    assert whole["instructions"] == {"FADD": 44.4, "LDS": 22.2, "STS": 22.2, "BRA": 11.1}  # the predicate skipped
    assert whole["per"] == 2.2 and whole["share"] == 100.0  # (360 instructions, 160 FADD)
    assert whole["stalls"] == {"wait": 35.0, "selected": 35.0, "long_sb": 30.0}  # "Not Issued" columns left out
    assert whole["top"] == [("0x10", "FADD R1, R1, R3", 40.0, {"wait": 50, "selected": 50})]
    head = tool.mix(export, "FADD", span=(0, 1))
    assert head["share"] == 60.0 and head["stalls"] == {"wait": 50.0, "selected": 50.0}


def test_runs_split_by_times_executed(export):
    tool = benchmark_module("ncu_sass_mix")
    assert tool.runs(export, 0) == [(0, 1, 80, 60.0, {"wait": 50, "selected": 50}), (2, 2, 40, 30.0, {"long_sb": 100}),
                                    (3, 4, 80, 10.0, {"wait": 50, "selected": 50})]
    assert [r[:2] for r in tool.runs(export, 20)] == [(0, 1), (2, 2)]
