import pytest

from textkit import format_duration, parse_duration


def test_parse_compound():
    assert parse_duration("1h30m") == 5400
    assert parse_duration("2d 4h") == 2 * 86400 + 4 * 3600


def test_parse_bare_number_is_seconds():
    assert parse_duration("90") == 90


def test_parse_fractional_and_ms():
    assert parse_duration("1.5h") == 5400
    assert parse_duration("250ms") == pytest.approx(0.25)


def test_parse_is_case_insensitive():
    assert parse_duration("1H30M") == 5400


def test_parse_minutes_and_milliseconds_are_distinct():
    assert parse_duration("1m500ms") == pytest.approx(60.5)


@pytest.mark.parametrize("bad", ["", "abc", "1x", "h1", "1h2q", "1h-2q"])
def test_parse_rejects_garbage(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_format():
    assert format_duration(5400) == "1h30m"
    assert format_duration(90061) == "1d1h1m1s"


def test_format_zero_and_negative():
    assert format_duration(0) == "0s"
    assert format_duration(-90) == "-1m30s"


def test_round_trip():
    for seconds in (1, 59, 61, 3600, 86399, 700000):
        assert parse_duration(format_duration(seconds)) == seconds
