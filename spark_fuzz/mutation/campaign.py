"""A mutation campaign on Spark: one task per group of mutants, each mutant judged in its own copy
of the tree (killsuite.py), one Parquet ledger row per mutant, resumable as `fuzz` campaigns are.

Layout under OUT: ``ledger/campaign=<id>/batch=<first index>-<count>/part-*.parquet`` with
Spark's ``_SUCCESS`` marker (spark_fuzz/ledger.py's directories), ``baseline-<id>.json`` (the
clean tree's stage times, measured once per campaign), ``summary.json``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

import attrs
import pyarrow as pa
import pyarrow.parquet as pq

from spark_fuzz import ledger
from spec.config import ConfigError
from spark_fuzz.mutation import equivalents
from spark_fuzz.mutation.killsuite import (BUDGET_FACTOR, FAILOVER_MACHINES, MIN_BUDGET_S, REAL_STORE_MACHINES, STAGES,
                                           TREE_PARTS, UNIT_TESTS, WRITE_PATH_MACHINES, Baseline,
                                           SuiteOptions, copy_tree, judge, measure_baseline, stage_argv)
from spark_fuzz.mutation.mutants import (ACK_DECIDING, ROOT, Mutant, ack_deciding, enumerate_mutants,
                                         operator_names, sample)

GUARD_OPERATOR = "core/AddNot"       # `if c:` turned to `if not c:` (cosmic-ray): a guard that refuses the wrong inputs

FIELDS = (("mutant_id", pa.string()), ("module", pa.string()), ("operator", pa.string()),
          ("occurrence", pa.int64()), ("line", pa.int64()), ("definition", pa.string()),
          ("source_sha", pa.string()), ("outcome", pa.string()), ("killed_by", pa.string()),
          ("detail", pa.string()), ("stages", pa.string()), ("diff", pa.string()), ("wall_s", pa.float64()),
          ("index", pa.int64()))
SCHEMA = pa.schema([pa.field(name, kind, nullable=False) for name, kind in FIELDS])
KILLED = ("killed", "timeout")


@attrs.frozen
class MutationSpec:
    modules: tuple[str, ...]
    out: Path
    operators: str = "default"
    sample: int | None = None          # that many mutants drawn with sample_seed; None: all
    sample_seed: int = 0
    batch: int = 32                    # mutants per Spark job and ledger batch
    resume: bool = True
    suite: SuiteOptions = SuiteOptions()
    only: tuple[str, ...] = ()         # these mutant ids only (--mutant)
    ack_only: bool = False             # the mutants of the functions that decide an acknowledgement only
    equivalents_file: Path = equivalents.FILE

    def __attrs_post_init__(self) -> None:
        if len(set(self.modules)) != len(self.modules):
            raise ConfigError(f"--module {next(m for m in self.modules if self.modules.count(m) > 1)}: named twice "
                              "(its mutants would be judged and counted twice)")
        if self.only and self.sample is not None:
            raise ConfigError("--mutant and --sample: one or the other (a sample of named mutants drops some silently)")

    def mutants(self, root: Path = ROOT) -> list[Mutant]:
        every = enumerate_mutants(self.modules, tuple(dict.fromkeys(operator_names(self.operators))), root)
        if not every:
            raise ConfigError(f"no mutant: the operators {self.operators!r} apply nowhere in {', '.join(self.modules)}")
        if self.only:
            known = {m.mutant_id for m in every}
            if unknown := [i for i in self.only if i not in known]:
                raise ConfigError(f"--mutant {unknown[0]}: no mutant of {', '.join(self.modules)} with the operators "
                                  f"{self.operators!r} has that id (`ackorder mutate --list` names them)")
            every = [m for m in every if m.mutant_id in self.only]
        if self.ack_only:
            if outside := [m.mutant_id for m in every if self.only and not ack_deciding(m)]:
                raise ConfigError(f"--mutant {outside[0]}: not in a function that decides an acknowledgement "
                                  "(--ack-deciding judges only those: mutants.ACK_DECIDING)")
            every = [m for m in every if ack_deciding(m)]
            if not every:
                raise ConfigError(f"--ack-deciding: no function of {', '.join(self.modules)} decides an "
                                  f"acknowledgement (mutants.ACK_DECIDING names them in {', '.join(ACK_DECIDING)})")
        return sample(every, self.sample, self.sample_seed)


def tree_sha(root: Path) -> str:
    """What every verdict depends on: each file of the snapshot (the tests and the simulators as much
    as the mutated module) and the kill suite's own configuration."""
    h = hashlib.sha256(json.dumps([STAGES, UNIT_TESTS, WRITE_PATH_MACHINES, FAILOVER_MACHINES, REAL_STORE_MACHINES,
                                   BUDGET_FACTOR, MIN_BUDGET_S]).encode())
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


def campaign_id(mutants: list[Mutant], suite: SuiteOptions, tree: str) -> str:
    """A campaign is its mutants, its suite's options and the tree it runs on: a resume over an edited
    tree (a new test, a changed simulator) is a new campaign, never a ledger of mixed verdicts."""
    key = json.dumps([[m.mutant_id for m in mutants], attrs.asdict(suite), tree])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _judge_partition(batch: str, baseline: dict, suite: dict, root: str, part: int, items) -> list[int]:
    import uuid

    rows = []
    for index, mutant in items:
        row = judge(mutant, Baseline(baseline), SuiteOptions(**suite), Path(root))
        rows.append({**row, "index": index})
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    final = Path(batch) / f"part-{part:05d}.parquet"
    hidden = Path(batch) / f".{final.name}.{uuid.uuid4().hex}.tmp"     # a retried attempt has its own
    pq.write_table(table, hidden)
    hidden.replace(final)
    return [len(rows)]


def read_rows(out: Path, campaign: str) -> list[dict]:
    rows = []
    for batch in ledger.complete_batches(out, campaign):
        rows += pq.read_table(batch, partitioning=None, schema=SCHEMA).to_pylist()
    ids = [r["mutant_id"] for r in rows]
    assert len(ids) == len(set(ids)), "a mutant appears twice in the ledger"
    return rows


def _baseline(spec: MutationSpec, campaign: str, root: Path) -> Baseline:
    """The clean tree's stage times: measured (the clean suite must pass), or read back on a resume of
    the same campaign (the same tree) when the file covers every stage that has a command."""
    path = spec.out / f"baseline-{campaign}.json"
    wanted = {f"{m}|{st}" for m in spec.modules for st in STAGES if stage_argv(st, m, spec.suite) is not None}
    if spec.resume and path.exists():
        try:
            seconds = json.loads(path.read_text())
        except (ValueError, RecursionError, OSError):
            seconds = None
        if (isinstance(seconds, dict) and set(seconds) >= wanted
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in seconds.values())):
            return Baseline(seconds)
    baseline = measure_baseline(spec.modules, spec.suite, root)
    hidden = path.with_name(f".{path.name}.tmp")
    hidden.write_text(json.dumps(baseline.seconds, indent=2, sort_keys=True) + "\n")
    hidden.replace(path)
    return baseline


def _snapshot(out: Path, root: Path) -> Path:
    """The tree as it is now, in a directory of this run's own: every mutant and the baseline are
    judged on it, so an edit of the working tree during the campaign changes no verdict."""
    import tempfile

    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("tree-*"):       # a killed earlier run's (a running one holds the lock)
        shutil.rmtree(stale, ignore_errors=True)
    return copy_tree(root, Path(tempfile.mkdtemp(prefix="tree-", dir=out)) / "src")


def check_out(out: Path, root: Path = ROOT) -> None:
    resolved = out.resolve()
    for part in TREE_PARTS:
        inside = (root / part).resolve()
        if resolved == inside or inside in resolved.parents:
            raise ConfigError(f"--out {out}: inside {part}/, which every mutant's copy of the tree holds "
                              "(the copy would hold itself)")


class CampaignBusy(ConfigError):
    """Another campaign runs in the same --out."""


def _lock(out: Path):
    import fcntl

    out.mkdir(parents=True, exist_ok=True)
    handle = open(out / ".lock", "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise CampaignBusy(f"--out {out}: another mutation campaign is running there") from None
    return handle


def run_mutation_campaign(spark, spec: MutationSpec, on_batch: Callable[[int, int], None] | None = None,
                          root: Path = ROOT) -> dict:
    check_out(spec.out, root)
    reviewed = equivalents.load(spec.equivalents_file)      # a malformed file is said before any mutant runs
    lock = _lock(spec.out)
    try:
        return _run(spark, spec, on_batch, root, reviewed)
    finally:
        for stale in spec.out.glob("tree-*"):
            shutil.rmtree(stale, ignore_errors=True)
        lock.close()


def _run(spark, spec: MutationSpec, on_batch, root: Path, reviewed: dict[str, str]) -> dict:
    root = _snapshot(spec.out, root)
    mutants = spec.mutants(root)
    campaign = campaign_id(mutants, spec.suite, tree_sha(root))
    if not spec.resume:
        shutil.rmtree(ledger.campaign_dir(spec.out, campaign), ignore_errors=True)
    baseline = _baseline(spec, campaign, root)
    done = {r["mutant_id"] for r in read_rows(spec.out, campaign)}
    missing = [(i, m) for i, m in enumerate(mutants) if m.mutant_id not in done]
    start = time.perf_counter()
    report = on_batch or (lambda done, total: None)
    report(len(mutants) - len(missing), len(mutants))
    parallelism = spark.sparkContext.defaultParallelism
    for at in range(0, len(missing), spec.batch):
        chunk = missing[at: at + spec.batch]
        path = ledger.batch_dir(spec.out, campaign, chunk[0][0], len(chunk))
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        task = partial(_judge_partition, str(path), baseline.seconds, attrs.asdict(spec.suite), str(root))
        written = spark.sparkContext.parallelize(chunk, min(parallelism, len(chunk))) \
            .mapPartitionsWithIndex(task).collect()
        assert sum(written) == len(chunk), (sum(written), len(chunk))
        (path / "_SUCCESS").touch()
        report(len(mutants) - len(missing) + at + len(chunk), len(mutants))
    rows = read_rows(spec.out, campaign)
    summary = summarise(campaign, spec, rows, baseline, time.perf_counter() - start, reviewed)
    (spec.out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def _score(counts: Counter) -> dict:
    """killed / (mutants - equivalent - error), over a module's outcomes or any other set's."""
    judged = sum(counts.values()) - counts["equivalent"] - counts["error"]
    killed = counts["killed"] + counts["timeout"]
    return {"mutants": sum(counts.values()), "killed": killed, "survived": counts["survived"],
            "equivalent": counts["equivalent"], "error": counts["error"],
            "score": round(100 * killed / judged, 1) if judged else None, "ratio": killed / judged if judged else None}


def summarise(campaign: str, spec: MutationSpec, rows: list[dict], baseline: Baseline, seconds: float,
              reviewed: dict[str, str]) -> dict:
    verdicts = []
    for row in rows:
        key = f"{row['module']}:{row['operator']}:{row['occurrence']}@{row['source_sha']}"
        outcome = row["outcome"]
        if outcome == "survived" and key in reviewed:
            outcome = "equivalent"
        verdicts.append((row, key, outcome))
    by_module: dict[str, Counter] = {}
    for row, _key, outcome in verdicts:
        by_module.setdefault(row["module"], Counter())[outcome] += 1
    scores = {module: _score(counts) for module, counts in sorted(by_module.items())}
    killed_by = Counter(row["killed_by"] for row, _k, o in verdicts if o in KILLED)
    # the lines that decide an acknowledgement, over every module (ACK_DECIDING): the goal is all killed
    ack = Counter(o for row, _k, o in verdicts if row["definition"] in ACK_DECIDING.get(row["module"], ()))
    return {"campaign": campaign, "modules": list(spec.modules), "operators": spec.operators,
            "sample": spec.sample, "sample_seed": spec.sample_seed, "suite": attrs.asdict(spec.suite),
            "mutants": len(rows), "outcomes": dict(Counter(o for _r, _k, o in verdicts)),
            "killed_by": dict(killed_by), "scores": scores, "ack_deciding": _score(ack), "seconds": round(seconds, 1),
            "cpu_wall_s": round(sum(r["wall_s"] for r in rows), 1), "baseline": baseline.seconds,
            "survivors": [{"key": k, "mutant_id": r["mutant_id"], "line": r["line"], "definition": r["definition"],
                           "diff": r["diff"], "closest": r["stages"]}
                          for r, k, o in verdicts if o == "survived"],
            "equivalents": [{"key": k, "reason": reviewed[k], "diff": r["diff"]}
                            for r, k, o in verdicts if o == "equivalent"],
            # with every stage run: each negated condition (a guard turned around), and what each check said
            "guards": [{"module": r["module"], "line": r["line"], "definition": r["definition"],
                        "stages": json.loads(r["stages"] or "{}"), "outcome": o}
                       for r, _k, o in verdicts if r["operator"] == GUARD_OPERATOR] if spec.suite.all_stages else [],
            # a reviewed claim a check has since refuted: the review was wrong, or the checks got better
            "contradicted": [{"key": k, "reason": reviewed[k], "killed_by": r["killed_by"]}
                             for r, k, o in verdicts if o in KILLED and k in reviewed]}
