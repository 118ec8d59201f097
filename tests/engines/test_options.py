"""An engine's own settings (`engine.options`, engines/options.py): each engine declares the keys
it takes and checks them, and every refusal is one line that starts with the key."""

from __future__ import annotations

import pytest

import engines
from engines.options import Option, OptionError, check_options

DECLARED = {
    "rate": Option("a fraction", range="[0, 1]"),
    "count": Option("a count", types=(int,), range=">= 0"),
    "mode": Option("a choice", types=(str,), choices=("a", "b")),
    "where": Option("needed", types=(str,), required=True),
}


@pytest.mark.parametrize(("options", "message"), [
    ({"where": "x", "colour": 1}, "colour is not an option of engine=toy (its options: count, "
                                  "mode, rate, where; drop it with ~engine.options.colour)"),
    ({"where": "x", "rate": 1.5}, "rate must be within [0, 1], got 1.5"),
    ({"where": "x", "rate": "lots"}, "rate must be a number within [0, 1], got 'lots'"),
    ({"where": "x", "rate": float("nan")}, "rate must be within [0, 1], got nan"),
    ({"where": "x", "count": True}, "count must be an integer, got True"),
    ({"where": "x", "count": 2.5}, "count must be an integer, got 2.5"),
    ({"where": "x", "count": -1}, "count must be >= 0, got -1"),
    ({"where": "x", "mode": "c"}, "mode='c' is not one of a, b"),
    ({}, "where must be set: needed"),
    ({"where": None}, "where must be set: needed"),
])
def test_each_refusal_is_one_line_naming_the_key(options, message):
    with pytest.raises(OptionError) as e:
        check_options(DECLARED, options, "toy")
    assert str(e.value) == message
    assert e.value.key == message.split(" ", 1)[0].split("=", 1)[0]


def test_unset_and_good_values_pass():
    check_options(DECLARED, {"where": "x", "rate": None, "count": 0, "mode": "b"}, "toy")
    check_options(DECLARED, {"where": "x", "rate": 1}, "toy")  # an int is a number


def test_each_engine_checks_its_own_options():
    # the simulator: its --sim-* flags
    engines.get("sim").check_options({"profile": "default", "time_scale": 0.5, "seed": 3})
    with pytest.raises(OptionError, match=r"^launcher is not an option of engine=sim"):
        engines.get("sim").check_options({"launcher": "serve"})
    # SGLang: how it is started
    engines.get("sglang").check_options({"launcher": "launch_server"})
    with pytest.raises(OptionError, match=r"^launcher='python' is not one of serve, "):
        engines.get("sglang").check_options({"launcher": "python"})
    with pytest.raises(OptionError, match=r"^time_scale is not an option of engine=sglang "
                                          r"\(its options: launcher; drop it with "
                                          r"~engine.options.time_scale\)$"):
        engines.get("sglang").check_options({"time_scale": 0.25})
    # vLLM takes none
    engines.get("vllm").check_options({})
    with pytest.raises(OptionError, match=r"^url is not an option of engine=vllm \(its "
                                          r"options: none;"):
        engines.get("vllm").check_options({"url": "http://h:1"})
    # an external server: where it is, a usable base URL
    engines.get("external").check_options({"url": "h:8000"})
    assert engines.get("external").server_url({"url": "h:8000/"}) == "http://h:8000"
    with pytest.raises(OptionError, match=r"^url: external server URL must be the server's "
                                          r"base"):
        engines.get("external").check_options({"url": "http://h:1/v1"})
    with pytest.raises(OptionError, match=r"^url must be set"):
        engines.get("external").check_options({})
    assert engines.get("sglang").server_url({"launcher": "serve"}) is None
