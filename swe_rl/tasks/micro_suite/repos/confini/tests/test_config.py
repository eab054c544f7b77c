import pytest

from confini import Config, ConfigError, InterpolationError, MissingOptionError


@pytest.fixture
def cfg(sample):
    return Config.from_string(sample)


def test_interpolation_same_section(cfg):
    assert cfg.get("server", "url") == "http://example.org:8080/"


def test_interpolation_other_section(cfg):
    assert cfg.get("client", "server") == "http://example.org:8080/"


def test_dollar_escape(cfg):
    assert cfg.get("server", "price") == "$5"


def test_default_section_fallback(cfg):
    assert cfg.getint("client", "timeout") == 30
    assert "timeout" in cfg.options("server")


def test_missing_option(cfg):
    with pytest.raises(MissingOptionError):
        cfg.get("server", "nope")
    assert cfg.get("server", "nope", fallback=None) is None


def test_missing_section(cfg):
    with pytest.raises(ConfigError):
        cfg.get("nope", "x")


def test_bad_reference(cfg):
    cfg.set("client", "broken", "${server:nothing}")
    with pytest.raises(InterpolationError, match="no such option"):
        cfg.get("client", "broken")


def test_circular_reference_is_reported():
    cfg = Config.from_string("[a]\nx = ${y}\ny = ${x}\n")
    with pytest.raises(InterpolationError, match="circular"):
        cfg.get("a", "x")


def test_typed_getters(cfg):
    assert cfg.getint("server", "port") == 8080
    assert cfg.getfloat("client", "ratio") == 0.75
    assert cfg.getbool("server", "debug") is False


def test_getint_hex():
    assert Config.from_string("[a]\nmask = 0xff\n").getint("a", "mask") == 255


def test_getbool_words():
    cfg = Config.from_string("[a]\nx = yes\ny = Off\nz = TRUE\nw = maybe\n")
    assert cfg.getbool("a", "x") is True
    assert cfg.getbool("a", "y") is False
    assert cfg.getbool("a", "z") is True
    with pytest.raises(ConfigError):
        cfg.getbool("a", "w")


def test_getlist_splits_continuation_lines(cfg):
    assert cfg.getlist("client", "mirrors") == ["eu.example.org", "us.example.org", "asia.example.org"]


def test_has_option_is_case_insensitive(cfg):
    assert cfg.has_option("server", "host")
    assert cfg.has_option("server", "HOST")
    assert not cfg.has_option("server", "nope")


def test_set_and_add_section(cfg):
    cfg.add_section("extra")
    cfg.set("extra", "Answer", 42)
    assert cfg.getint("extra", "answer") == 42
    with pytest.raises(ConfigError):
        cfg.add_section("extra")


def test_round_trip_keeps_multiline_values(cfg):
    again = Config.from_string(cfg.to_string())
    assert again.sections() == cfg.sections()
    assert again.get("client", "mirrors") == cfg.get("client", "mirrors")
    assert again.getint("client", "timeout") == 30
