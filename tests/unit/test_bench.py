"""The bench's timing helpers: the ways of running a product take turns,
after a warm-up of products back to back."""

import time

from fftmatvec.bench import _median_time, _waited_medians, _warm_up


def _recorder(order, name):
    return lambda: order.append(name)


def test_waited_medians_take_turns_in_rounds():
    order, syncs = [], []
    calls = {"time": _recorder(order, "time"), "into": _recorder(order, "into")}
    medians = _waited_medians(calls, 7, lambda: syncs.append(len(order)), rounds=3)
    assert set(medians) == {"time", "into"} and all(t >= 0 for t in medians.values())
    warm = ["time", "into"]  # one warm-up call each, then rounds of 3, 2 and 2 calls of each in turn
    assert order == warm + ["time"] * 3 + ["into"] * 3 + (["time"] * 2 + ["into"] * 2) * 2
    assert syncs == [2] + list(range(3, len(order) + 1))  # after the warm-ups, then after every timed call


def test_fewer_calls_than_rounds():
    order = []
    _waited_medians({"a": _recorder(order, "a"), "b": _recorder(order, "b")}, 2, lambda: None, rounds=5)
    assert order == ["a", "b", "a", "b", "a", "b"]


def test_median_time_is_one_way_alone():
    order = []
    assert _median_time(_recorder(order, "a"), 4, lambda: None) >= 0
    assert order == ["a"] * 5


def test_warm_up_fills_its_seconds_in_turns():
    order, syncs, agreed = [], [], []

    def product():  # about 2 ms a call
        order.append("p")
        time.sleep(0.002)

    t0 = time.perf_counter()
    n = _warm_up(product, 0.05, lambda: syncs.append(len(order)), agree=lambda k: agreed.append(k) or k)
    assert 0.045 <= time.perf_counter() - t0 < 0.2 and n == len(order) and 2 <= n <= 26
    assert syncs[0] == 1 and syncs[-1] == n  # one call first, a synchronisation after each turn
    assert all(b <= 2 * a for a, b in zip(syncs, syncs[1:]))  # a turn at most doubles the calls
    assert len(agreed) == len(syncs) and agreed[-1] == 0  # every turn's count agreed, the last none


def test_warm_up_that_overruns_agrees_on_no_more_calls():
    """A turn that ends past the seconds (a slow call) asks for none, not a negative count."""
    order, agreed = [], []

    def product():  # the fourth call is slow
        order.append("p")
        time.sleep(0.002 if len(order) < 4 else 0.03)

    _warm_up(product, 0.02, lambda: None, agree=lambda k: agreed.append(k) or k)
    assert agreed[-1] == 0 and min(agreed) >= 0


def test_warm_up_takes_the_agreed_count_and_none_for_no_seconds():
    order = []
    counts = iter([2, 5, 0])  # what the other ranks want, whatever this one's clock says
    assert _warm_up(_recorder(order, "p"), 1e-9, lambda: None, agree=lambda n: next(counts)) == 8
    assert order == ["p"] * 8
    assert _warm_up(_recorder(order, "q"), 0.0, lambda: None) == 0 and "q" not in order
