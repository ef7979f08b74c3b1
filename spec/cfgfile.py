"""Reader for the TLC .cfg files of tla/, so that the Python twin checks the
very models TLC checks.  Only the subset of the cfg language the project
uses is accepted; anything else is an error naming the file and line."""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from spec.config import Bounds, Config, ConfigError, ascii_digits

_KEYWORDS = {
    "CONSTANT": "constants", "CONSTANTS": "constants",
    "INIT": "init", "NEXT": "next", "SPECIFICATION": "specification",
    "INVARIANT": "invariants", "INVARIANTS": "invariants",
    "PROPERTY": "properties", "PROPERTIES": "properties",
    "VIEW": "view", "SYMMETRY": "symmetry",
}
_TOKEN = re.compile(r'\s*(?:(?P<string>"[^"\n]*")|(?P<punct><-|[{}=,])|(?P<word>[A-Za-z0-9_!]+)|(?P<bad>\S))')


class CfgError(ConfigError):
    """A malformed cfg file; the message starts with ``path:line:``."""


@attrs.frozen
class CfgFile:
    path: str
    constants: dict
    init: str | None
    next: str | None
    specification: str | None
    invariants: tuple[str, ...]
    properties: tuple[str, ...]
    view: str | None
    symmetry: str | None

    @property
    def name(self) -> str:
        return Path(self.path).stem


def _strip_comments(text: str) -> str:
    # (* ... *) may span lines: keep the newlines so line numbers stay right.
    text = re.sub(r"\(\*.*?\*\)", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"\\\*[^\n]*", "", text)


def _tokens(text: str, path: str):
    for lineno, line in enumerate(_strip_comments(text).split("\n"), start=1):
        pos = 0
        while pos < len(line):
            m = _TOKEN.match(line, pos)
            if m is None or m.end() == pos:
                break
            pos = m.end()
            kind = m.lastgroup
            if kind == "bad":
                raise CfgError(f"{path}:{lineno}: unexpected character {m.group('bad')!r}")
            yield kind, m.group(kind), lineno


# TLC's integers are Java ints; a longer number is refused here rather than by int()'s
# 4,300-digit limit (a ValueError that escaped), and sets nested deeper than any model needs
# rather than by the stack (a RecursionError that escaped).
MAX_INT = 2**31 - 1
MAX_SET_DEPTH = 16


def _value(tokens, i, path, depth=0):
    kind, text, line = tokens[i]
    if kind == "string":
        return text[1:-1], i + 1
    if kind == "word":
        if text in ("TRUE", "FALSE"):
            return text == "TRUE", i + 1
        if ascii_digits(text):
            digits = text.lstrip("0") or "0"
            if len(digits) > len(str(MAX_INT)) or int(digits) > MAX_INT:
                raise CfgError(f"{path}:{line}: the number {text[:12]}{'...' if len(text) > 12 else ''} "
                               f"exceeds TLC's largest integer {MAX_INT}")
            return int(digits), i + 1
        return ModelValue(text), i + 1
    if text == "{":
        if depth >= MAX_SET_DEPTH:
            raise CfgError(f"{path}:{line}: sets nested more than {MAX_SET_DEPTH} deep")
        items, i = [], i + 1
        while i < len(tokens) and tokens[i][1] != "}":
            item, i = _value(tokens, i, path, depth + 1)
            items.append(item)
            if i < len(tokens) and tokens[i][1] == ",":
                i += 1
        if i >= len(tokens):
            raise CfgError(f"{path}:{line}: set is not closed with '}}'")
        return frozenset(items), i + 1
    raise CfgError(f"{path}:{line}: expected a value, found {text!r}")


@attrs.frozen
class ModelValue:
    name: str


def parse_cfg(text: str, path: str = "<cfg>") -> CfgFile:
    tokens = list(_tokens(text, path))
    fields: dict = {"constants": {}, "invariants": [], "properties": []}
    section, i = None, 0
    while i < len(tokens):
        kind, text_, line = tokens[i]
        if kind == "word" and text_ in _KEYWORDS:
            section = _KEYWORDS[text_]
            i += 1
            continue
        if section is None:
            raise CfgError(f"{path}:{line}: {text_!r} before any section keyword")
        if kind != "word":
            raise CfgError(f"{path}:{line}: unexpected {text_!r} in {section} section")
        if section == "constants":
            if i + 1 >= len(tokens) or tokens[i + 1][1] not in ("=", "<-"):
                raise CfgError(f"{path}:{line}: constant {text_} needs '= value'")
            if tokens[i + 1][1] == "<-":
                raise CfgError(f"{path}:{line}: operator override '{text_} <-' is not used by this project")
            if i + 2 >= len(tokens):
                raise CfgError(f"{path}:{line}: constant {text_} has no value")
            value, i = _value(tokens, i + 2, path)
            if text_ in fields["constants"]:
                raise CfgError(f"{path}:{line}: constant {text_} assigned twice")
            fields["constants"][text_] = (value, line)
            continue
        if section in ("invariants", "properties"):
            fields[section].append(text_)
        else:
            if fields.get(section) is not None:
                raise CfgError(f"{path}:{line}: {section.upper()} given twice")
            fields[section] = text_
        i += 1
    return CfgFile(
        path=path,
        constants=fields["constants"],
        init=fields.get("init"),
        next=fields.get("next"),
        specification=fields.get("specification"),
        invariants=tuple(fields["invariants"]),
        properties=tuple(fields["properties"]),
        view=fields.get("view"),
        symmetry=fields.get("symmetry"),
    )


_CONFIG_CONSTANTS = {
    "Replicas": "replicas", "FlushMode": "flush_mode", "ReplMode": "repl_mode",
    "TransientStorePool": "transient_store_pool", "AckPolicy": "ack_policy",
    "InSyncReplicas": "in_sync_replicas", "FileSize": "file_size",
    "CommitOnReplicaWait": "commit_on_replica_wait",
}
_BOUND_CONSTANTS = {
    "MaxPuts": "max_puts", "MaxMasterProcessCrashes": "max_master_process_crashes",
    "MaxMasterMachineCrashes": "max_master_machine_crashes",
    "MaxReplicaCrashes": "max_replica_crashes", "MaxReplicaDisconnects": "max_replica_disconnects",
    "MaxFsyncFailures": "max_fsync_failures", "MaxWriteFailures": "max_write_failures",
    "MaxForgedReports": "max_forged_reports",
}


def constant_reader(cfg: CfgFile, expected: set[str]):
    """Check that the cfg assigns exactly the ``expected`` constants (errors name the file and
    line) and return a function reading a constant's value."""
    given = set(cfg.constants)
    first_line = min((line for _, line in cfg.constants.values()), default=1)
    if missing := sorted(expected - given):
        raise CfgError(f"{cfg.path}:{first_line}: missing constants {', '.join(missing)}")
    if extra := sorted(given - expected):
        line = cfg.constants[extra[0]][1]
        raise CfgError(f"{cfg.path}:{line}: unknown constants {', '.join(extra)}")
    return lambda name: cfg.constants[name][0]


def model_value_names(cfg: CfgFile, name: str) -> tuple[str, ...]:
    """The names in a constant that must be a set of model values."""
    value = cfg.constants[name][0]
    if not isinstance(value, frozenset) or not all(isinstance(v, ModelValue) for v in value):
        raise CfgError(f"{cfg.path}:{cfg.constants[name][1]}: {name} must be a set of model values")
    return tuple(v.name for v in value)


def active_bugs(cfg: CfgFile) -> frozenset[str]:
    """ActiveBug: "none" or the name of the one bug switch the cfg turns on."""
    bug = cfg.constants["ActiveBug"][0]
    if not isinstance(bug, str):
        raise CfgError(f"{cfg.path}:{cfg.constants['ActiveBug'][1]}: ActiveBug must be a string")
    return frozenset() if bug == "none" else frozenset({bug})


def model_from_cfg(cfg: CfgFile) -> tuple[Config, Bounds]:
    """The Config and Bounds a cfg of MCAckOrder.tla describes."""
    value = constant_reader(cfg, set(_CONFIG_CONSTANTS) | set(_BOUND_CONSTANTS) | {"ActiveBug"})
    kwargs = {field: value(const) for const, field in _CONFIG_CONSTANTS.items()}
    kwargs["replicas"] = model_value_names(cfg, "Replicas")
    kwargs["bugs"] = active_bugs(cfg)
    try:
        config = Config(**kwargs)
        bounds = Bounds(**{field: value(const) for const, field in _BOUND_CONSTANTS.items()})
    except (ConfigError, TypeError) as err:
        raise CfgError(f"{cfg.path}: {err}") from err
    return config, bounds


def twin_model_from_cfg(cfg: CfgFile):
    """The twin's (config, bounds) for a cfg of any MC module: the write
    path's (Config, Bounds), the controllers module's (ControllersConfig,
    ControllersBounds) when the cfg names Controllers, or the failover
    module's (FailoverConfig, FailoverBounds) when it names Brokers."""
    from spec.controllers.explore import controllers_model_from_cfg, is_controllers_cfg
    from spec.failover.explore import failover_model_from_cfg, is_failover_cfg

    if is_controllers_cfg(cfg):
        return controllers_model_from_cfg(cfg)
    return failover_model_from_cfg(cfg) if is_failover_cfg(cfg) else model_from_cfg(cfg)


def load_cfg(path: str | Path) -> CfgFile:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise CfgError(f"{path}: cannot read: {err.strerror}") from err
    except UnicodeDecodeError as err:           # escaped before: a cfg of any bytes
        raise CfgError(f"{path}: not a UTF-8 text file (byte {err.start})") from None
    except ValueError as err:                   # a NUL in the path
        raise CfgError(f"{path!r}: cannot read: {err}") from None
    return parse_cfg(text, str(path))
