"""The cfg reader: every project cfg loads, malformed ones name file and line."""

import pytest

from spec.cfgfile import CfgError, load_cfg, model_from_cfg, parse_cfg, twin_model_from_cfg
from tla.manifest import load_manifest

GOOD = """\\* a comment
CONSTANTS
    Replicas = {r1, r2}
    FlushMode = "SYNC_FLUSH"
    ReplMode = "SYNC_MASTER"
    TransientStorePool = TRUE
    CommitOnReplicaWait = FALSE
    AckPolicy = "ALL_IN_SYNC"
    InSyncReplicas = 2
    FileSize = 2
    ActiveBug = "none"
    MaxPuts = 2 MaxMasterProcessCrashes = 0
    MaxMasterMachineCrashes = 1 MaxReplicaCrashes = 1 MaxReplicaDisconnects = 1 MaxFsyncFailures = 0
    MaxWriteFailures = 0 MaxForgedReports = 0
(* a block
   comment *)
INIT Init
NEXT MCNext
VIEW View
INVARIANT TypeOK
INVARIANT NoAckBeforeFlush
"""


def test_every_project_cfg_loads():
    for model in load_manifest():
        cfg, bounds = twin_model_from_cfg(load_cfg(model.cfg_path))
        if model.is_failover:
            assert cfg.brokers and cfg.initial_master in cfg.brokers and bounds.max_puts >= 1
        elif model.is_controllers:
            assert cfg.controllers and cfg.initial_master in cfg.brokers and bounds.max_takes >= 1
        else:
            assert cfg.replicas and bounds.max_puts >= 1


FAILOVER = """CONSTANTS
    Brokers = {b1, b2, b3} InitialMaster = b1 NoBroker = NoBroker ActiveBug = "BugNoAllAck"
    MaxPuts = 1 MaxBrokerCrashes = 1 MaxPowerLosses = 0 MaxCutOffs = 0 MaxDisconnects = 0
    MaxSssProposals = 2 MaxElections = 1
INIT Init
NEXT MCNext
SYMMETRY FollowerSymmetry
INVARIANT TypeOK
"""


def test_parse_failover_cfg():
    cfg, bounds = twin_model_from_cfg(parse_cfg(FAILOVER, "f.cfg"))
    assert cfg.brokers == ("b1", "b2", "b3") and cfg.initial_master == "b1" and cfg.bugs == {"BugNoAllAck"}
    assert bounds.max_sss_proposals == 2 and bounds.max_elections == 1


@pytest.mark.parametrize(
    "change, what",
    [
        (("InitialMaster = b1", "InitialMaster = b9"), "InitialMaster = b9: not one of Brokers"),
        (('ActiveBug = "BugNoAllAck"', 'ActiveBug = "BugNope"'), "unknown failover bug switch BugNope"),
        (("MaxElections = 1", "MaxElections = 1 Replicas = {r1}"), "unknown constants Replicas"),
        (("MaxPuts = 1 ", ""), "missing constants MaxPuts"),
        (("NoBroker = NoBroker", 'NoBroker = "none"'), "NoBroker must be a model value"),
    ],
)
def test_malformed_failover_cfg_names_the_problem(change, what):
    with pytest.raises(CfgError, match=what):
        twin_model_from_cfg(parse_cfg(FAILOVER.replace(*change), "f.cfg"))


def test_parse_good_cfg():
    cfgfile = parse_cfg(GOOD, "good.cfg")
    cfg, bounds = model_from_cfg(cfgfile)
    assert cfg.replicas == ("r1", "r2")
    assert cfg.sync_flush and cfg.sync_master and cfg.transient_store_pool
    assert cfg.bugs == frozenset()
    assert bounds.max_master_process_crashes == 0
    assert cfgfile.invariants == ("TypeOK", "NoAckBeforeFlush")
    assert cfgfile.view == "View" and cfgfile.next == "MCNext"


@pytest.mark.parametrize(
    "text, where, what",
    [
        ('CONSTANTS\n  FlushMode = "SYNC_FLUSH"\n  FlushMode = "ASYNC_FLUSH"\n', "bad.cfg:3", "assigned twice"),
        ("CONSTANTS\n  MaxPuts\n", "bad.cfg:2", "needs '= value'"),
        ("INIT Init\nNEXT A\nNEXT B\n", "bad.cfg:3", "NEXT given twice"),
        ("Init\n", "bad.cfg:1", "before any section"),
        ("CONSTANTS\n  Replicas = {r1\n", "bad.cfg:2", "not closed"),
        ("INIT Init\nNEXT Next $\n", "bad.cfg:2", "unexpected character"),
    ],
)
def test_malformed_cfg_names_file_and_line(text, where, what):
    with pytest.raises(CfgError) as err:
        parse_cfg(text, "bad.cfg")
    assert where in str(err.value) and what in str(err.value)


@pytest.mark.parametrize(
    "change, what",
    [
        (('"SYNC_FLUSH"', '"SOMETIMES_FLUSH"'), "flush_mode = 'SOMETIMES_FLUSH'"),
        (("InSyncReplicas = 2", "InSyncReplicas = 7"), "InSyncReplicas = 7"),
        (('ActiveBug = "none"', 'ActiveBug = "BugNoSuchThing"'), "unknown bug switch BugNoSuchThing"),
        (("MaxPuts = 2", "MaxPuts = TRUE"), "max_puts"),
        (("    FileSize = 2\n", ""), "missing constants FileSize"),
        (("FileSize = 2", "FileSize = 2 Extra = 1"), "unknown constants Extra"),
    ],
)
def test_invalid_constants_are_rejected(change, what):
    cfgfile = parse_cfg(GOOD.replace(*change), "bad.cfg")
    with pytest.raises(CfgError) as err:
        model_from_cfg(cfgfile)
    assert "bad.cfg" in str(err.value) and what in str(err.value)


def test_unreadable_cfg(tmp_path):
    with pytest.raises(CfgError, match="cannot read"):
        load_cfg(tmp_path / "missing.cfg")
