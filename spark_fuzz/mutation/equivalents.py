"""The reviewed list of equivalent mutants: each survivor claimed equivalent, with the reason.

``equivalent.json`` next to this module maps a mutant's key (``module:operator:occurrence@source
sha``, mutants.Mutant.key) to why no behaviour can tell it from the original.  A claim without a
reason (or with a reason too short to say one) is refused, so a survivor cannot be waved away;
a key names the module's source it was reviewed against, so an edit of the module retires it.
"""

from __future__ import annotations

import json
from pathlib import Path

from spec.config import ConfigError

FILE = Path(__file__).resolve().parent / "equivalent.json"
MIN_REASON_CHARS = 30


def load(path: Path = FILE) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"{path}: not the equivalents file ({err})") from None
    except RecursionError:
        raise ConfigError(f"{path}: not the equivalents file (nested too deeply)") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a JSON {type(data).__name__}, not an object of key -> reason")
    for key, reason in data.items():
        if key.count(":") < 2 or "@" not in key:
            raise ConfigError(f"{path}: {key!r}: not a mutant key (module:operator:occurrence@source sha)")
        if not isinstance(reason, str) or len(reason.strip()) < MIN_REASON_CHARS:
            raise ConfigError(f"{path}: {key}: an equivalence claim needs its reason (at least "
                              f"{MIN_REASON_CHARS} characters)")
    return data
