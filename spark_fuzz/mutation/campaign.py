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
from spark_fuzz.mutation.killsuite import Baseline, SuiteOptions, copy_tree, judge, measure_baseline
from spark_fuzz.mutation.mutants import ROOT, Mutant, enumerate_mutants, operator_names, sample

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
    equivalents_file: Path = equivalents.FILE

    def mutants(self, root: Path = ROOT) -> list[Mutant]:
        every = enumerate_mutants(self.modules, operator_names(self.operators), root)
        if self.only:
            known = {m.mutant_id for m in every}
            if unknown := [i for i in self.only if i not in known]:
                raise ConfigError(f"--mutant {unknown[0]}: no mutant of {', '.join(self.modules)} with the operators "
                                  f"{self.operators!r} has that id (`ackorder mutate --list` names them)")
            every = [m for m in every if m.mutant_id in self.only]
        return sample(every, self.sample, self.sample_seed)


def campaign_id(mutants: list[Mutant], suite: SuiteOptions) -> str:
    key = json.dumps([[m.mutant_id for m in mutants], attrs.asdict(suite)])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _judge_partition(batch: str, baseline: dict, suite: dict, root: str, part: int, items) -> list[int]:
    rows = []
    for index, mutant in items:
        row = judge(mutant, Baseline(baseline), SuiteOptions(**suite), Path(root))
        rows.append({**row, "index": index})
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    final = Path(batch) / f"part-{part:05d}.parquet"
    hidden = Path(batch) / f".{final.name}.tmp"
    pq.write_table(table, hidden)
    hidden.replace(final)
    return [len(rows)]


def read_rows(out: Path, campaign: str) -> list[dict]:
    rows = []
    for batch in ledger.complete_batches(out, campaign):
        rows += pq.read_table(batch, partitioning=None, schema=SCHEMA).to_pylist()
    return rows


def _baseline(spec: MutationSpec, campaign: str, root: Path) -> Baseline:
    path = spec.out / f"baseline-{campaign}.json"
    if spec.resume and path.exists():
        return Baseline(json.loads(path.read_text()))
    baseline = measure_baseline(spec.modules, spec.suite, root)
    spec.out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(baseline.seconds, indent=2, sort_keys=True) + "\n")
    return baseline


def run_mutation_campaign(spark, spec: MutationSpec, on_batch: Callable[[int, int], None] | None = None,
                          root: Path = ROOT) -> dict:
    mutants = spec.mutants(root)
    campaign = campaign_id(mutants, spec.suite)
    if not spec.resume:
        shutil.rmtree(ledger.campaign_dir(spec.out, campaign), ignore_errors=True)
    # the tree as it is now: every mutant and the baseline are judged on this copy, so an edit of the
    # working tree during the campaign (or between a run and its resume) changes no verdict
    snapshot = spec.out / "tree"
    shutil.rmtree(snapshot, ignore_errors=True)
    spec.out.mkdir(parents=True, exist_ok=True)
    root = copy_tree(root, snapshot)
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
    summary = summarise(campaign, spec, rows, baseline, time.perf_counter() - start)
    (spec.out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return summary


def summarise(campaign: str, spec: MutationSpec, rows: list[dict], baseline: Baseline, seconds: float) -> dict:
    reviewed = equivalents.load(spec.equivalents_file)
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
    scores = {}
    for module, counts in sorted(by_module.items()):
        judged = sum(counts.values()) - counts["equivalent"] - counts["error"]
        killed = counts["killed"] + counts["timeout"]
        scores[module] = {"mutants": sum(counts.values()), "killed": killed, "survived": counts["survived"],
                          "equivalent": counts["equivalent"], "error": counts["error"],
                          "score": round(100 * killed / judged, 1) if judged else None}
    killed_by = Counter(row["killed_by"] for row, _k, o in verdicts if o in KILLED)
    return {"campaign": campaign, "modules": list(spec.modules), "operators": spec.operators,
            "sample": spec.sample, "sample_seed": spec.sample_seed, "suite": attrs.asdict(spec.suite),
            "mutants": len(rows), "outcomes": dict(Counter(o for _r, _k, o in verdicts)),
            "killed_by": dict(killed_by), "scores": scores, "seconds": round(seconds, 1),
            "cpu_wall_s": round(sum(r["wall_s"] for r in rows), 1), "baseline": baseline.seconds,
            "survivors": [{"key": k, "mutant_id": r["mutant_id"], "line": r["line"], "definition": r["definition"],
                           "diff": r["diff"], "closest": r["stages"]}
                          for r, k, o in verdicts if o == "survived"],
            "equivalents": [{"key": k, "reason": reviewed[k], "diff": r["diff"]}
                            for r, k, o in verdicts if o == "equivalent"]}
