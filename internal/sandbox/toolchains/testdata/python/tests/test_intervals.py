import pytest

from intervals import merge, total


@pytest.mark.parametrize(
    "given, want",
    [
        ([], []),
        ([(1, 3)], [(1, 3)]),
        ([(5, 7), (1, 3), (2, 4)], [(1, 4), (5, 7)]),
        ([(1, 2), (2, 3)], [(1, 3)]),
        ([(0, 10), (2, 3)], [(0, 10)]),
    ],
)
def test_merge(given, want):
    assert merge(given) == want


def test_total():
    assert total([(0, 10), (5, 15), (20, 21)]) == 16


def test_empty_interval_is_refused():
    with pytest.raises(ValueError):
        merge([(3, 3)])
