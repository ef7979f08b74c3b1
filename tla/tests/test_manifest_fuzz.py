"""tla/manifest.json's reader (``load_manifest``: the manifest `ackorder tlc --manifest FILE` names),
fuzzed: a ManifestError in one line naming the file, or models whose fields have their types —
never another exception.  What it caught when it was written is in its docstring."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tla.manifest import KINDS, MANIFEST_PATH, SIZES, SPEC_MODULES, ManifestError, Model, load_manifest

SMALL = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
FULL = settings(SMALL, max_examples=5_000)
REAL = json.loads(MANIFEST_PATH.read_text())
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=10)
FIELD_VALUES = st.one_of(JSON, st.sampled_from([*KINDS, *SIZES, *SPEC_MODULES, "pass", "Bug", "BugX", -1, True,
                                                "no_such.cfg", "/", "\x00", "\udcff"]))


@st.composite
def manifests(draw) -> bytes:
    """The real manifest with entries and fields changed, or JSON of any shape, or bytes that are
    not JSON at all (not UTF-8, nested deeper than the stack, an integer of 5,000 digits)."""
    data = json.loads(json.dumps(REAL))
    models = data["models"]
    for _ in range(draw(st.integers(0, 3))):
        entry = models[draw(st.integers(0, len(models) - 1))]
        key = draw(st.sampled_from([*entry, "extra", "spec", "seconds"]))
        if draw(st.integers(0, 3)) == 0:
            entry.pop(key, None)
        else:
            entry[key] = draw(FIELD_VALUES)
    if draw(st.integers(0, 4)) == 0:
        models.append(draw(JSON))
    text = json.dumps(data)
    return draw(st.one_of(
        st.just(text.encode()),
        JSON.map(lambda v: json.dumps({"models": v}).encode()),
        JSON.map(lambda v: json.dumps(v).encode()),
        st.sampled_from([b"\xff\xfe", b'{"models": [' + b"9" * 5000 + b"]}", b"[" * 50_000, b"", b"{"]),
        st.integers(1, len(text)).map(lambda n: text[:n].encode()),
    ))


def check_manifest(tmp_path_factory, raw: bytes) -> None:
    path = tmp_path_factory.mktemp("manifest") / "manifest.json"
    path.write_bytes(raw)
    try:
        models = load_manifest(path)
    except ManifestError as err:
        text = str(err)
        assert text.startswith(str(path)) and "\n" not in text, text
        return
    for m in models:
        assert isinstance(m, Model) and m.kind in KINDS and m.size in SIZES and m.spec in SPEC_MODULES
        assert all(isinstance(getattr(m, f), str) for f in ("model", "cfg", "expected", "title"))
        assert m.cfg_path.is_file()


@SMALL
@given(manifests())
def test_a_manifest_is_models_or_a_manifest_error(tmp_path_factory, raw):
    """Caught: a manifest that is not UTF-8 (UnicodeDecodeError), nested deeper than the stack
    (RecursionError) or with an integer of over 4,300 digits (ValueError) escaped as tracebacks of
    `ackorder tlc --manifest FILE`."""
    check_manifest(tmp_path_factory, raw)


@pytest.mark.full
@FULL
@given(manifests())
def test_a_manifest_is_models_or_a_manifest_error_full(tmp_path_factory, raw):
    check_manifest(tmp_path_factory, raw)
