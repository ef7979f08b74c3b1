"""The TLC cfg reader (spec/cfgfile.py) and the twin's models read from it, fuzzed: a CfgError in
one line naming the file (and the line), or a model TLC's ASSUMEs would accept — never another
exception.  Inputs: token soup in the cfg language, the project's own cfgs mutated line by line,
and files that are not text.  What each property caught when it was written is in its docstring."""

from __future__ import annotations

import re

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spec.cfgfile import CfgError, CfgFile, load_cfg, parse_cfg, twin_model_from_cfg
from spec.controllers.config import CONTROLLERS_BUG_NAMES, ControllersConfig
from spec.config import BUG_NAMES, Bounds, Config
from spec.failover.config import FAILOVER_BUG_NAMES, FailoverBounds, FailoverConfig
from tla.manifest import TLA_DIR

SMALL = settings(max_examples=200, deadline=None)
FULL = settings(max_examples=10_000, deadline=None)
PATH = "fuzz/My.cfg"
CFGS = sorted(TLA_DIR.glob("*.cfg"))
CFG_TEXTS = [p.read_text() for p in CFGS]

KEYWORDS = ["CONSTANT", "CONSTANTS", "INIT", "NEXT", "SPECIFICATION", "INVARIANT", "INVARIANTS", "PROPERTY",
            "PROPERTIES", "VIEW", "SYMMETRY"]
NAMES = ["Replicas", "FlushMode", "ReplMode", "TransientStorePool", "AckPolicy", "InSyncReplicas", "FileSize",
         "CommitOnReplicaWait", "ActiveBug", "MaxPuts", "MaxMasterProcessCrashes", "MaxMasterMachineCrashes",
         "MaxReplicaCrashes", "MaxReplicaDisconnects", "MaxFsyncFailures", "MaxWriteFailures", "MaxForgedReports",
         "Brokers", "InitialMaster", "NoBroker", "MaxBrokerCrashes", "MaxPowerLosses", "MaxCutOffs",
         "MaxDisconnects", "MaxSssProposals", "MaxElections", "Init", "MCNext", "TypeOK", "r1", "b1", "b2"]
VALUES = ["0", "1", "2", "33", "007", "9" * 5000, "0" * 5000, "1" * 4301, "TRUE", "FALSE", '"SYNC_FLUSH"', '"ASYNC_MASTER"',
          '"ALL_IN_SYNC"', '"none"', '"BugAckOnWrote"', '"BugNoAllAck"', '""', '"x', "{}", "{r1}", "{r1, r2}",
          "{b1, b2, b3}", "{1, 2}", "{{r1}}", "{" * 3000, "{" * 50 + "}" * 50, "r1", "b1", "NoBroker", "²", "١",
          "𝟙", "x!y", "-1"]
PUNCT = ["=", "<-", "{", "}", ",", "\n", "\\* comment", "(*", "*)", " (* a\nb *) ", '"', "\t"]
TOKENS = st.one_of(st.sampled_from(KEYWORDS + NAMES + VALUES + PUNCT), st.from_regex(r"[A-Za-z0-9_!]{1,8}", fullmatch=True),
                   st.text(max_size=3))


def config_ok(config: Config, bounds: Bounds) -> None:
    """tla/AckOrderTypes.tla's ConfigOK and tla/MCAckOrder.tla's ASSUMEs, which TLC checks."""
    assert config.flush_mode in ("SYNC_FLUSH", "ASYNC_FLUSH")
    assert config.repl_mode in ("SYNC_MASTER", "ASYNC_MASTER")
    assert type(config.transient_store_pool) is bool and type(config.commit_on_replica_wait) is bool
    assert config.ack_policy in ("ANY_REPLICA_MAX", "AT_LEAST_K", "ALL_IN_SYNC")
    assert type(config.in_sync_replicas) is int and 1 <= config.in_sync_replicas <= len(config.replicas) + 1
    assert type(config.file_size) is int and config.file_size >= 1
    assert all(type(r) is str for r in config.replicas) and len(set(config.replicas)) == len(config.replicas)
    assert len(config.bugs) <= 1 and config.bugs <= set(BUG_NAMES)
    for value in attrs.asdict(bounds).values():
        assert type(value) is int and value >= 0


def failover_config_ok(config: FailoverConfig, bounds: FailoverBounds) -> None:
    """tla/AckOrderFailoverTypes.tla's ConfigOK and tla/MCAckOrderFailover.tla's ASSUMEs."""
    assert config.brokers and all(type(b) is str for b in config.brokers)
    assert config.initial_master in config.brokers and config.no_broker not in config.brokers
    assert len(config.bugs) <= 1 and config.bugs <= set(FAILOVER_BUG_NAMES)
    for value in attrs.asdict(bounds).values():
        assert type(value) is int and value >= 0


def controllers_config_ok(config: ControllersConfig, bounds) -> None:
    """tla/AckOrderControllers.tla's ConfigOK and tla/MCAckOrderControllers.tla's ASSUMEs."""
    assert config.brokers and config.controllers and config.initial_master in config.brokers
    assert config.no_broker not in config.brokers and config.no_controller not in config.controllers
    assert len(config.bugs) <= 1 and config.bugs <= set(CONTROLLERS_BUG_NAMES)
    for value in attrs.asdict(bounds).values():
        assert type(value) is int and value >= 0


def refusal(err: CfgError) -> None:
    text = str(err)
    assert "\n" not in text and text.startswith(PATH + ":"), text


def check_cfg_text(text: str) -> None:
    try:
        cfg = parse_cfg(text, PATH)
    except CfgError as err:
        refusal(err)
        return
    assert isinstance(cfg, CfgFile)
    for value, line in cfg.constants.values():
        assert isinstance(line, int) and 1 <= line <= text.count("\n") + 1
    try:
        config, bounds = twin_model_from_cfg(cfg)
    except CfgError as err:
        refusal(err)
        return
    if isinstance(config, Config):
        config_ok(config, bounds)
    elif isinstance(config, ControllersConfig):
        controllers_config_ok(config, bounds)
    else:
        failover_config_ok(config, bounds)


SOUP = st.lists(TOKENS, max_size=40).map(" ".join)


@SMALL
@given(SOUP)
def test_any_token_soup_is_a_cfg_or_a_cfg_error(text):
    """Caught: a number of over 4,300 digits (ValueError from int()), sets nested deeper than the
    stack (RecursionError)."""
    check_cfg_text(text)


@pytest.mark.full
@FULL
@given(SOUP)
def test_any_token_soup_is_a_cfg_or_a_cfg_error_full(text):
    check_cfg_text(text)


@st.composite
def mutated_cfgs(draw) -> str:
    """A project cfg with lines deleted, doubled or inserted, and values replaced by hostile ones."""
    lines = draw(st.sampled_from(CFG_TEXTS)).split("\n")
    for _ in range(draw(st.integers(1, 3))):
        assignments = [i for i, line in enumerate(lines) if "=" in line]
        op = draw(st.sampled_from(["value", "value", "value", "value", "delete", "double", "insert"]))
        at = draw(st.sampled_from(assignments) if op == "value" and assignments else st.integers(0, len(lines) - 1))
        if op == "value" and "=" in lines[at]:
            name, _, _ = lines[at].partition("=")
            lines[at] = f"{name}= {draw(st.sampled_from(VALUES) | TOKENS)}"
        elif op == "delete":
            del lines[at]
        elif op == "double":
            lines.insert(at, lines[at])
        else:
            lines.insert(at, draw(SOUP))
        if not lines:
            lines = [""]
    return "\n".join(lines)


@SMALL
@given(mutated_cfgs())
def test_a_mutated_project_cfg_is_a_model_tlc_accepts_or_a_cfg_error(text):
    """Caught: TransientStorePool = 5, CommitOnReplicaWait = "x", FileSize = TRUE and
    InSyncReplicas = TRUE were taken by the twin (ConfigOK refuses each in TLC)."""
    check_cfg_text(text)


@pytest.mark.full
@FULL
@given(mutated_cfgs())
def test_a_mutated_project_cfg_is_a_model_tlc_accepts_or_a_cfg_error_full(text):
    check_cfg_text(text)


@pytest.mark.parametrize("change, what", [
    ("TransientStorePool      = 5", "TransientStorePool"),
    ('CommitOnReplicaWait     = "x"', "CommitOnReplicaWait"),
    ("FileSize                = TRUE", "FileSize"),
    ("InSyncReplicas          = TRUE", "InSyncReplicas"),
    pytest.param("MaxPuts                 = " + "9" * 5000, "largest integer", id="5000-digits"),
    pytest.param("MaxPuts                 = 2147483648", "largest integer", id="2**31"),
    pytest.param("Replicas                = " + "{" * 5000, "nested", id="nested-5000"),
])
def test_what_the_twin_took_or_crashed_on_is_a_cfg_error(change, what):
    text = (TLA_DIR / "MCAckOrder_sync_flush.cfg").read_text()
    name = change.split()[0]
    text = re.sub(rf"^\s*{name}\s*=.*$", "    " + change, text, count=1, flags=re.M)
    with pytest.raises(CfgError) as err:
        twin_model_from_cfg(parse_cfg(text, PATH))
    refusal(err.value)
    assert what in str(err.value)


@SMALL
@given(st.one_of(st.binary(max_size=200), SOUP.map(lambda t: t.encode("utf-8", "surrogatepass")),
                 st.sampled_from(CFG_TEXTS).map(str.encode).map(lambda b: b[:len(b) // 2] + b"\xff\xfe" + b[len(b) // 2:])))
def test_a_cfg_file_that_is_not_text_is_a_cfg_error(tmp_path_factory, raw):
    """Caught: load_cfg let UnicodeDecodeError through (a cfg file of any bytes)."""
    path = tmp_path_factory.mktemp("cfg") / "My.cfg"
    path.write_bytes(raw)
    try:
        cfg = load_cfg(path)
    except CfgError as err:
        text = str(err)
        assert "\n" not in text and text.startswith(str(path)), text
        return
    assert isinstance(cfg, CfgFile)


def test_a_cfg_path_that_is_not_a_file_is_a_cfg_error(tmp_path):
    for path in (tmp_path, tmp_path / "missing.cfg", tmp_path / "x\udcff.cfg"):
        with pytest.raises(CfgError) as err:
            load_cfg(path)
        assert "\n" not in str(err.value)
