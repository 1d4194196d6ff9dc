"""benchmarks/k16_fused.py's host side: its ``--ws`` settings and the kernel instantiations they name.

The kernels themselves are checked against ``BTTOperator.matvec`` by the script on a GPU, and compiled by
test_native_compile.py where nvcc is.
"""

import pytest
from conftest import benchmark_module

fused = benchmark_module("k16_fused")
BIG = dict(Nt=1000, Nd=100, Nm=5000, blocks=132, threads=256, series=8, stages=3)
SETTING = "4,1,2,256,1,64,192,2,1,8,0,0"


def test_ws_setting_reads_twelve_integers_then_optional_radices():
    assert fused.ws_setting(SETTING) == (4, 1, 2, 256, 1, 64, 192, 2, 1, 8, 0, 0)
    assert fused.ws_setting(SETTING + ",10x10x5") == (4, 1, 2, 256, 1, 64, 192, 2, 1, 8, 0, 0, (10, 10, 5))


def test_each_setting_names_its_instantiation():
    """The prefetch distance, the 16 x 8 x 4 products and the radices reach the kernel's template arguments; the
    default radices are small_radices'."""
    settings = (fused.ws_setting(SETTING), fused.ws_setting("4,1,2,256,1,64,192,2,1,4,2,1,10x10x5"))
    layout = fused.Layout(**BIG, ws=settings)
    assert fused.small_radices(500) == [5, 5, 5, 4]
    assert layout.name("ws").endswith(", true, 8, 0, false, 5, 5, 5, 4>")
    assert layout.name("ws1").endswith(", true, 4, 2, true, 10, 10, 5>")
    assert layout.ws_radices == {"ws": [5, 5, 5, 4], "ws1": [10, 10, 5]}


@pytest.mark.parametrize("radices", ["10x10x4", "20x25"], ids=["product", "no-butterfly"])
def test_radices_that_do_not_make_the_transform_are_refused(radices):
    with pytest.raises(SystemExit, match="radices"):
        fused.Layout(**BIG, ws=(fused.ws_setting(f"{SETTING},{radices}"),))
