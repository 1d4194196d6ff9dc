"""The bench's timing helpers: the ways of running a product take turns."""

from fftmatvec.bench import _median_time, _waited_medians


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
