"""benchmarks/ab_sources.py: a variant's register target that the build did
not honour stops the comparison instead of timing the engine's own build."""

import pytest
from conftest import benchmark_module


def _ab_sources():
    return benchmark_module("ab_sources")


@pytest.mark.parametrize("asked, built", [(0, 64), (40, 40), (40, 32)])
def test_register_target_met_or_not_asked(asked, built):
    _ab_sources().check_register_target("irfft_unpad<float2, float2, double>", asked, built)


def test_register_target_not_met_stops():
    with pytest.raises(SystemExit, match="asked for 40 registers, built with 64"):
        _ab_sources().check_register_target("irfft_unpad<float2, float2, double>", 40, 64)


def test_unknown_revision_names_the_way_out():
    with pytest.raises(SystemExit, match="use file:PATH"):
        _ab_sources().source_at("no-such-revision-36", "fft.cu")


def test_file_variant_reads_the_file(tmp_path):
    variant = tmp_path / "fft.cu"
    variant.write_text("// a variant\n")
    assert _ab_sources().source_at(f"file:{variant}", "fft.cu").startswith("// a variant")
