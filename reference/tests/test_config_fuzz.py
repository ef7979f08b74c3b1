"""The reference's parsers of configuration text, fuzzed: `--config KEY=VALUE` of `ackorder sim`,
`replay` and the fuzz campaign's matrix (reference/sim/params.py ``draw``), and the addresses and
names of the real processes' command lines (reference/real/options.py, metadata_store.py).  Each
gives its documented error in one line, or a result the program can run with — never another
exception.  What each property caught when it was written is in its docstring."""

from __future__ import annotations

import math

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.real.metadata_store import parse_endpoints
from reference.real.options import parse_address, parse_replicas
from reference.sim.params import MAX_SEGMENT_BYTES, MIN_RATE_PER_S, draw
from reference.sim.world import World
from spec.config import ConfigError

SMALL = settings(max_examples=120, deadline=None)
FULL = settings(max_examples=5_000, deadline=None)

# Numbers as people and programs mistype them: signs, exponents, nan, huge, other scripts' digits
# ('²' is a digit to str.isdigit() and not to int(); '١' is to both), empty, NUL, surrogates.
NUMBERS = ["0", "1", "2", "-1", "+3", "007", "1_000", " 4 ", "1e3", "0.5", "-0.0", "nan", "inf", "-inf", "1e999",
           "9" * 30, "9" * 5000, "²", "١", "١٢", "𝟙", "①", "", " ", "\x00", "\udcff", "x", "true", "TRUE", "0x10",
           "2147483648", "65535", "65536", "99999", "18446744073709551616"]
ATOMS = st.one_of(st.sampled_from(NUMBERS), st.integers(-5, 70_000).map(str), st.text(max_size=6))


@st.composite
def pairs(draw_) -> str:
    """LOW,HIGH ranges, right and wrong."""
    return ",".join(draw_(st.lists(ATOMS, min_size=1, max_size=3)))


SIM = draw(0)
STORE_KEYS = [f.name for f in attrs.fields(type(SIM.store)) if f.name != "bugs"]
RANGE_KEYS = [k for k, v in attrs.asdict(SIM.faults).items() if isinstance(v, tuple)]
RATE_KEYS = [k for k, v in attrs.asdict(SIM.faults).items() if isinstance(v, float)]
KEYS = ["replicas", "bug", *STORE_KEYS, *RANGE_KEYS, *RATE_KEYS, "no_such_knob", ""]
VALUES = st.one_of(ATOMS, pairs(), st.sampled_from(["SYNC_FLUSH", "ASYNC_MASTER", "AT_LEAST_K", "BLOCKING",
                                                    "BugAckOnWrote", "ack_on_wrote_bug", "BugNope", "5,1", "0,0",
                                                    "-5,-1", "1,2,3", "0,1000000"]))
# By the kind of knob too, so that each one's own checks are reached: ranges LOW,HIGH in any order,
# rates of every float, integers up to far past memory.
TYPED = st.one_of(
    st.tuples(st.sampled_from(RANGE_KEYS), st.tuples(st.integers(-3, 400), st.integers(-3, 400)).map(
        lambda p: f"{p[0]},{p[1]}")),
    st.tuples(st.sampled_from(RATE_KEYS), st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr),
                                                    st.sampled_from(["nan", "inf", "-1", "1.5", "0"]))),
    # (not between 64 KiB and the cap: a simulation holds its segments in memory, and one of 8 GiB
    # taken without the cap had this process killed by the kernel's OOM killer, not a MemoryError)
    st.tuples(st.sampled_from(["mapped_file_size_commit_log", "os_page_size", "max_message_size", "replicas"]),
              st.one_of(st.integers(-1, 2**16), st.integers(MAX_SEGMENT_BYTES + 1, 2**50)).map(str)),
)
OVERRIDES = st.builds(lambda typed, other: {**dict(other), **dict(typed)},
                      st.lists(TYPED, max_size=2), st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=2))


def check_overrides(seed: int, overrides: dict[str, str]) -> None:
    try:
        params = draw(seed, overrides)
    except ConfigError as err:
        assert str(err) and "\n" not in str(err), str(err)
        return
    f = params.faults
    for name, value in attrs.asdict(f).items():
        if isinstance(value, float) and name.endswith("_probability"):
            assert 0 <= value <= 1, (name, value)
        elif isinstance(value, float):                          # a rate: 0, or one whose waits are finite
            assert math.isfinite(value) and (value == 0 or value >= MIN_RATE_PER_S), (name, value)
        else:
            low, high = value
            assert 0 <= low <= high, (name, value)
    assert 1 <= len(params.replicas) <= 32
    World(params, check=True).run(60, liveness=False)          # a result the simulator runs without a crash


@SMALL
@given(st.integers(0, 2**32), OVERRIDES)
def test_sim_config_overrides_are_a_run_or_a_config_error(seed, overrides):
    """Caught: net_delay_ms=5,1 was taken and the simulation crashed (ValueError: empty range for
    randrange); nan, inf and negative fault rates and probabilities above 1 were taken;
    mapped_file_size_commit_log=2**40 was taken and the simulated disk raised MemoryError (at 8 GiB the
    kernel killed the process); a rate of 2.2e-309 was taken and the next fault's wait was int(inf)
    (OverflowError); replicas='\n' made a two-line error."""
    check_overrides(seed, overrides)


@pytest.mark.full
@FULL
@given(st.integers(0, 2**32), OVERRIDES)
def test_sim_config_overrides_are_a_run_or_a_config_error_full(seed, overrides):
    check_overrides(seed, overrides)


@pytest.mark.parametrize("key, value", [
    ("net_delay_ms", "5,1"), ("fsync_latency_ms", "-5,-1"), ("fsync_failure_probability", "2"),
    ("replica_crash_per_s", "nan"), ("corrupt_frame_per_s", "inf"), ("master_process_crash_per_s", "-1"),
    ("mapped_file_size_commit_log", str(2**40)), ("master_process_crash_per_s", "2.225073858507203e-309"),
])
def test_what_the_simulator_took_or_crashed_on_is_a_config_error(key, value):
    with pytest.raises(ConfigError, match=key):
        draw(1, {key: value})


HOSTS = st.one_of(st.sampled_from(["", "127.0.0.1", "[::1]", "::1", "localhost", "a b", "\t", "h\x00", "\udcff",
                                   "١", "x" * 300]), st.text(max_size=8))
PORTS = st.one_of(st.sampled_from(NUMBERS), st.integers(-5, 70_000).map(str))
ADDRESSES = st.one_of(st.tuples(HOSTS, PORTS).map(":".join), st.tuples(HOSTS, ATOMS).map(":".join),
                      st.tuples(st.sampled_from(["h", "127.0.0.1"]), st.sampled_from(["²", "①", "𝟙", "١", "١٢"])).map(
                          ":".join),
                      st.text(max_size=12), ATOMS)


def check_address(text: str) -> None:
    try:
        host, port = parse_address(text, "--target")
    except ConfigError as err:
        assert str(err).startswith("--target ") and "\n" not in str(err), str(err)
        return
    digits = text.rpartition(":")[2]
    assert digits.isascii() and digits.isdigit() and port == int(digits) and 1 <= port <= 65535, (text, port)
    assert host and not any(c.isspace() for c in host)


@SMALL
@given(ADDRESSES)
def test_an_address_is_host_and_port_or_a_config_error(text):
    """Caught: '127.0.0.1:²' (str.isdigit() said yes, int() raised ValueError); '127.0.0.1:١٢'
    was taken as port 12."""
    check_address(text)


@pytest.mark.full
@FULL
@given(ADDRESSES)
def test_an_address_is_host_and_port_or_a_config_error_full(text):
    check_address(text)


def check_endpoints(text: str) -> None:
    try:
        endpoints = parse_endpoints(text)
    except ValueError as err:
        assert str(err).startswith("--etcd-endpoints") and "\n" not in str(err), str(err)
        return
    assert endpoints and len(set(endpoints)) == len(endpoints)
    for host, port in endpoints:
        assert host and not any(c.isspace() for c in host) and 1 <= port <= 65535
        host.encode("idna")                                         # what the socket layer does with it
    for item in text.split(","):
        digits = item.strip().rpartition(":")[2]
        assert digits.isascii() and digits.isdigit(), item          # '١٢' is no port another program reads


@SMALL
@given(st.lists(ADDRESSES, min_size=1, max_size=2).map(",".join))
def test_etcd_endpoints_are_addresses_or_a_value_error_naming_the_flag(text):
    """Caught: 'h:²' raised int()'s own ValueError ("invalid literal ..."), not one naming the flag;
    '[:1' was taken as the endpoint ('', 1)."""
    check_endpoints(text)


@pytest.mark.full
@FULL
@given(st.lists(ADDRESSES, min_size=1, max_size=3).map(",".join))
def test_etcd_endpoints_are_addresses_or_a_value_error_naming_the_flag_full(text):
    check_endpoints(text)


@SMALL
@given(st.lists(st.one_of(HOSTS, ATOMS), max_size=4).map(",".join))
def test_replica_names_are_names_or_a_config_error(text):
    try:
        names = parse_replicas(text)
    except ConfigError as err:
        assert str(err).startswith("--replicas ") and "\n" not in str(err)
        return
    assert len(set(names)) == len(names)
    assert all(n and n.isascii() and len(n) <= 64 for n in names)


@pytest.mark.parametrize("text", ["127.0.0.1:²", "127.0.0.1:١٢", "h:𝟙", "h:" + "9" * 5000])
def test_non_ascii_or_huge_ports_are_refused(text):
    with pytest.raises(ConfigError, match="port 1..65535"):
        parse_address(text, "--target")
    with pytest.raises(ValueError, match="--etcd-endpoints"):
        parse_endpoints(text)
