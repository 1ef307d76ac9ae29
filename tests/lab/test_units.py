"""Parsing sizes, ranges and world sizes as people type them."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.units import UsageError, format_size, parse_size, parse_sizes, parse_worlds


@pytest.mark.parametrize("text, value", [("64KiB", 65536), ("1MiB", 2**20), ("8", 8),
                                         ("1.5KiB", 1536), ("2GB", 2 * 10**9), ("0", 0),
                                         ("4 k", 4096)])
def test_sizes_with_units(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["12XB", "-5", "", "KiB", "1.3B", "1e3"])
def test_bad_sizes_are_one_line_errors(text):
    with pytest.raises(UsageError) as info:
        parse_size(text)
    assert "\n" not in str(info.value)


def test_ranges_step_by_two_or_by_a_factor():
    assert parse_sizes("64KiB:1MiB") == [2**16, 2**17, 2**18, 2**19, 2**20]
    assert parse_sizes("1KiB:64KiB:x4") == [2**10, 2**12, 2**14, 2**16]
    assert parse_sizes("1KiB,1MiB") == [1024, 2**20]


@pytest.mark.parametrize("text", ["1MiB:1KiB", "0:1KiB", "1:2:x1", "1:2:3:4", ""])
def test_bad_ranges_are_refused(text):
    with pytest.raises(UsageError):
        parse_sizes(text)


def test_worlds():
    assert parse_worlds("2,4") == [2, 4]
    for bad in ("0", "-1", "two", "2,,4"):
        with pytest.raises(UsageError):
            parse_worlds(bad)


@given(st.integers(0, 40))
def test_format_then_parse_round_trips_powers_of_two(k):
    assert parse_size(format_size(2**k)) == 2**k
