"""`ackorder fuzz-report`: the HTML is rendered Markdown (real tables, no raw `|---|`),
every failure links its reproducer and its trace, coverage is on a log scale, and a real
headless Chromium (Debian's, installed by `make test`) shows a page that is not blank."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from spark_fuzz.campaign import CampaignSpec, run_campaign
from spark_fuzz.report import coverage, write_report
from spark_fuzz.tests import sessions


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.links: list[str] = []
        self.images: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if tag == "a":
            self.links.append(attrs.get("href", ""))
        if tag == "img":
            self.images.append(attrs.get("src", ""))

    def handle_data(self, data):
        self.text.append(data)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """A --bug campaign: failures with reproducers and traces to report."""
    out = tmp_path_factory.mktemp("report")
    summary = run_campaign(sessions.shared(), CampaignSpec(seeds=40, out=out, steps=150, bug="BugAckOnWrote", batch_seeds=20,
                                               audit=False))
    assert summary["reproducers"], summary["outcomes"]
    return out, summary


def test_html_is_rendered_markdown_with_linked_reproducers_and_traces(campaign):
    out, summary = campaign
    paths = write_report(out, summary)
    html = (out / "report.html").read_text()
    page = Page()
    page.feed(html)
    assert "|---|" not in html and "| outcome |" not in html and "\n# " not in html
    assert page.tags.count("table") >= 3 and "h1" in page.tags and "h2" in page.tags
    traces = [link for link in page.links if link.endswith(".ndjson")]
    assert traces and all((out / link).is_file() for link in traces)
    assert any("ackorder replay --seed" in t for t in page.text)
    assert "reproducers.txt" in page.links
    assert {Path(p).name for p in page.images} == {"violations.png", "coverage.png", "throughput.png"}
    assert all(p.exists() for p in paths)
    text = "".join(page.text)
    assert "Spec coverage" in text and "PutAppend" in text and "NoAckBeforeFlush" in text
    assert "unreached" in text and "only the spec of BugTimeoutAsOK takes it" in text   # flagged, with why
    first = (out / "reproducers.txt").read_text().splitlines()
    assert first[0].startswith("# ") and first[1].startswith("ackorder replay --seed")


def test_coverage_counts_are_kept_whole(campaign):
    """The plot's data are counts (log scale in the plot), so a rare fault is not rounded to 0."""
    out, summary = campaign
    from spark_fuzz import ledger

    rows = ledger.read_ledger(out, summary["campaign"]).to_pylist()
    configs, actions, matrix = coverage(rows)
    assert configs and actions and all(isinstance(n, int) for row in matrix for n in row)
    assert any(0 < n < max(max(r) for r in matrix) / 100 for row in matrix for n in row)


def test_a_real_browser_shows_the_page(campaign, tmp_path):
    out, summary = campaign
    write_report(out, summary)
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is missing: `make test` installs it (apt-get install chromium)"
    shot = tmp_path / "report.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", "--hide-scrollbars", "--window-size=1200,1600",
                    f"--screenshot={shot}", (out / "report.html").as_uri()],
                   check=True, capture_output=True, timeout=120)
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[0] >= 1000 and pixels.shape[1] >= 1000
    gray = pixels[..., :3].mean(axis=2)
    dark = (gray < 0.5).mean()           # text, table borders and plots
    assert 0.005 < dark < 0.6, f"the page looks blank or broken ({dark:.3%} dark pixels)"
    assert gray.std() > 0.05


def test_an_out_that_is_no_campaigns_is_one_line_and_exit_2(campaign, tmp_path):
    """fuzz-report and `tlc --coverage --fuzz-out` refuse a summary or ledger that is not what a
    campaign wrote, naming the file (they raised tracebacks: TypeError, KeyError, ArrowInvalid)."""
    from cli.tests.test_exit_codes import ackorder_in_process, assert_usage_error

    out, _ = campaign
    for name, text, needle in (("list", b"[]", "a JSON list, not a campaign's summary"),
                               ("empty", b"{}", "'campaign' is missing"),
                               ("binary", Path("/bin/ls").read_bytes()[:4096], "not a text file"),
                               ("noreps", b'{"campaign": "c1", "seeds": 1, "steps": 1, "outcomes": {}, '
                                          b'"by_config": {}, "reproducers": [1]}', "not a reproducer")):
        bad = tmp_path / name
        bad.mkdir()
        (bad / "summary.json").write_bytes(text)
        assert_usage_error(ackorder_in_process("fuzz-report", "--out", str(bad)), str(bad / "summary.json"), needle)
        assert_usage_error(ackorder_in_process("tlc", "sync_flush", "--coverage", "1", "--fuzz-out", str(bad)),
                           "--fuzz-out", needle)
    torn = tmp_path / "torn"
    shutil.copytree(out, torn)
    part = sorted(torn.glob("ledger/campaign=*/batch=*/part-*.parquet"))[0]
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    assert_usage_error(ackorder_in_process("fuzz-report", "--out", str(torn)), "not a batch of this ledger",
                       part.parent.name)
    # a damaged footer: pyarrow says so with an OSError that has no errno (not an ArrowInvalid)
    damaged = tmp_path / "damaged"
    shutil.copytree(out, damaged)
    part = sorted(damaged.glob("ledger/campaign=*/batch=*/part-*.parquet"))[0]
    data = bytearray(part.read_bytes())
    data[-48:-8] = bytes(b ^ 0xFF for b in data[-48:-8])
    part.write_bytes(bytes(data))
    assert_usage_error(ackorder_in_process("fuzz-report", "--out", str(damaged)), "not a batch of this ledger",
                       part.parent.name)


def test_a_ledger_the_disk_cannot_read_is_the_machines_failure(campaign, monkeypatch):
    """An OSError reading a ledger part (EIO) was "not a batch of this ledger", exit 2: the input's."""
    import errno

    import pyarrow.parquet as pq

    from cli.tests.test_exit_codes import ackorder_in_process

    def failing_disk(*args, **kwargs):
        raise OSError(errno.EIO, "Input/output error")

    out, _ = campaign
    monkeypatch.setattr(pq, "read_table", failing_disk)
    done = ackorder_in_process("fuzz-report", "--out", str(out))
    assert done.returncode == 3 and done.stderr == "ackorder fuzz-report: environment: Input/output error\n", \
        (done.returncode, done.stderr)
