"""TLC's class-data-sharing archive (tla/tlc.py): written by the first run, used by the next, and
never able to change a verdict: a damaged, stale or unwritable archive only costs the saving, and
the TLC log says why."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import tla.tlc as tlc
from tla.manifest import load_manifest, resolve
from tla.tlc import TlcOptions, class_data, jar_path, java_path, run_model

pytestmark = pytest.mark.tlc
MODEL = "reach_torn_tail"       # a tiny model whose verdict is a violation with a counterexample


def verdict(log_dir):
    run = run_model(resolve(load_manifest(), MODEL), TlcOptions(workers=1), log_dir=log_dir)
    return (run.outcome, run.distinct_states, run.depth, len(run.trace)), run.log_path.read_text()


@pytest.fixture
def cds_dir(tmp_path, monkeypatch):
    where = tmp_path / "jvm"
    monkeypatch.setattr(tlc, "CDS_DIR", where)
    return where


def test_the_first_run_writes_the_archive_and_the_next_uses_it(cds_dir, tmp_path):
    model = resolve(load_manifest(), MODEL)
    first, _ = verdict(tmp_path / "a")
    assert first[0] == model.expected and first[1:3] == (model.distinct_states, model.depth)
    archive = class_data(java_path(), jar_path()).archive
    assert archive is not None and archive.is_file() and archive.stat().st_size > 1_000_000
    assert [p.name for p in cds_dir.iterdir()] == [archive.name]          # no part file left
    assert class_data(java_path(), jar_path()).flags == (f"-XX:SharedArchiveFile={archive}",)
    second, _ = verdict(tmp_path / "b")
    assert second == first
    # the JVM really maps it: -Xshare:on refuses to start with an archive it cannot use
    usable = subprocess.run([java_path(), "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", str(jar_path()),
                             "-version"], capture_output=True, text=True, timeout=60)
    assert usable.returncode == 0 and "Unable to use shared archive" not in usable.stdout + usable.stderr, \
        usable.stdout[-2000:] + usable.stderr[-2000:]


def test_a_damaged_or_stale_archive_changes_no_verdict(cds_dir, tmp_path, monkeypatch):
    clean, _ = verdict(tmp_path / "clean")              # writes a good archive
    archive = class_data(java_path(), jar_path()).archive
    good = archive.read_bytes()

    archive.chmod(0o644)
    archive.write_bytes(good[: len(good) // 3])          # cut: the JVM crashes mapping it
    cut, log = verdict(tmp_path / "cut")
    assert cut == clean and "the JVM crashed with the class-data-sharing archive" in log
    assert not archive.exists()                          # removed; the next run writes a new one

    archive.write_bytes(b"\0garbage" * 4096)             # not an archive: the JVM ignores it
    garbage, _ = verdict(tmp_path / "garbage")
    assert garbage == clean

    # an archive of another jar (same classes, another path and time): the JVM refuses it, and says so
    other = tmp_path / "other" / "tla2tools.jar"
    other.parent.mkdir()
    shutil.copy(jar_path(), other)
    archive.unlink()
    monkeypatch.setattr(tlc, "jar_path", lambda: other)
    verdict(tmp_path / "other-run")
    monkeypatch.undo()
    monkeypatch.setattr(tlc, "CDS_DIR", cds_dir)
    shutil.copy(class_data(java_path(), other).archive, archive)
    stale, log = verdict(tmp_path / "stale")
    assert stale == clean and "Unable to use shared archive" in log


def test_no_place_for_the_archive_is_logged(tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    monkeypatch.setattr(tlc, "CDS_DIR", blocked / "jvm")
    model = resolve(load_manifest(), MODEL)
    got, log = verdict(tmp_path / "logs")
    assert got[0] == model.expected and got[1:3] == (model.distinct_states, model.depth)
    assert "no class-data-sharing archive" in log.splitlines()[0]
