"""The Parquet seed ledger: one row per seed, written batch by batch.

Layout: ``OUT/ledger/campaign=<id>/batch=<first index>-<count>/part-*.parquet``
plus Spark's ``_SUCCESS`` marker.  A batch directory without the marker was
in flight when the driver died: it is ignored and its seeds are run again.
A seed index appears in exactly one complete batch (the driver only ever
schedules the indices the ledger lacks), so counting rows counts seeds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA_FIELDS = (
    ("campaign", "string"), ("index", "long"), ("seed", "long"), ("bug", "string"),
    ("overrides", "string"), ("config", "string"), ("outcome", "string"), ("signature", "string"),
    ("message", "string"), ("steps", "long"), ("spec_steps", "long"), ("sim_ms", "long"),
    ("wall_s", "double"), ("trace_hash", "string"), ("actions", "string"), ("worker", "string"),
    ("faults", "string"),       # injected faults by kind (JSON), the spec actions are in "actions"
    ("branches", "string"),     # spec branches taken (tla/AckOrder.tla labels, JSON counts; spec/coverage.py)
    ("antecedents", "string"),  # property antecedents reached (JSON counts)
    ("cpu_s", "double"),        # the seed's own CPU time in its task's process (user + system)
    ("violation_step", "long"),  # the step at which the violation was found; 0: none
)


class LedgerError(ValueError):
    """An OUT directory whose summary or ledger is not what a campaign writes: which file, and why."""


# What a campaign's summary.json holds that the report and the coverage tables read, by type.
SUMMARY_KEYS = {"campaign": str, "seeds": int, "steps": int, "outcomes": dict, "reproducers": list, "by_config": dict}


def load_summary(out: Path) -> dict:
    """OUT/summary.json as a campaign wrote it; LedgerError naming the file and the problem if it is
    not (FileNotFoundError when there is none)."""
    path = Path(out) / "summary.json"
    try:
        summary = json.loads(path.read_bytes())
    except UnicodeDecodeError:
        raise LedgerError(f"{path}: not a text file") from None
    except json.JSONDecodeError as err:
        raise LedgerError(f"{path}: line {err.lineno}: {err.msg}") from None
    except IsADirectoryError:
        raise LedgerError(f"{path}: a directory, not a campaign's summary") from None
    except (ValueError, RecursionError) as err:
        # an integer of more digits than int() converts (4,300), arrays nested deeper than the stack,
        # a NUL in the path: each escaped as a traceback before
        why = "nested too deeply" if isinstance(err, RecursionError) else str(err)
        raise LedgerError(f"{path!r}: not a campaign's summary ({why})") from None
    if not isinstance(summary, dict):
        raise LedgerError(f"{path}: a JSON {type(summary).__name__}, not a campaign's summary (an object)")
    for key, kind in SUMMARY_KEYS.items():
        if not isinstance(summary.get(key), kind) or (kind is int and isinstance(summary[key], bool)):
            raise LedgerError(f"{path}: {key!r} is missing or not a{'n' if kind is int else ''} {kind.__name__}: "
                              "not a summary a campaign wrote")
    if not all(isinstance(r, dict) and isinstance(r.get("outcome"), str) for r in summary["reproducers"]):
        raise LedgerError(f"{path}: 'reproducers' holds an entry that is not a reproducer")
    return summary


def spark_schema():
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    kinds = {"string": StringType(), "long": LongType(), "double": DoubleType()}
    return StructType([StructField(name, kinds[kind], nullable=False) for name, kind in SCHEMA_FIELDS])


ARROW_KINDS = {"string": pa.string(), "long": pa.int64(), "double": pa.float64()}
ARROW_SCHEMA = pa.schema([pa.field(name, ARROW_KINDS[kind], nullable=False) for name, kind in SCHEMA_FIELDS])


def write_part(batch: Path, part: int, rows: list[dict]) -> int:
    """One task's rows as ``part-NNNNN.parquet`` of a batch, written by the task itself
    (no round trip of the rows through the JVM).  Written under a hidden name and renamed, so
    a reader never sees half a file and a retried or speculative attempt of the same task
    replaces its part whole (the rows are the same: they come from the data)."""
    import os
    import uuid

    assert part >= 0, part
    table = pa.Table.from_pylist(rows, schema=ARROW_SCHEMA)
    final = Path(batch) / f"part-{part:05d}.parquet"
    hidden = Path(batch) / f".{final.name}.{uuid.uuid4().hex}.tmp"       # readers skip dot-files
    pq.write_table(table, hidden)
    os.replace(hidden, final)
    return len(rows)


def campaign_dir(out: Path, campaign: str) -> Path:
    return Path(out) / "ledger" / f"campaign={campaign}"


def batch_dir(out: Path, campaign: str, first_index: int, count: int) -> Path:
    return campaign_dir(out, campaign) / f"batch={first_index:012d}-{count}"


def complete_batches(out: Path, campaign: str) -> list[Path]:
    root = campaign_dir(out, campaign)
    if not root.exists():
        return []
    return sorted(d for d in root.iterdir() if d.name.startswith("batch=") and (d / "_SUCCESS").exists())


def read_batch(path: Path) -> pa.Table:
    return pq.read_table(path, partitioning=None)


def read_ledger(out: Path, campaign: str, columns: list[str] | None = None) -> pa.Table:
    """Every complete batch of a campaign (empty table if none)."""
    tables = []
    for batch in complete_batches(out, campaign):
        try:
            tables.append(pq.read_table(batch, columns=columns, partitioning=None))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OSError) as err:
            # a truncated, damaged or foreign file among the parts (pyarrow says a damaged footer with an
            # OSError that has no errno); an OSError with one (EIO) is the machine's
            if isinstance(err, OSError) and err.errno is not None:
                raise
            why = next((line for line in str(err).splitlines() if line.strip()), type(err).__name__)
            raise LedgerError(f"{batch}: not a batch of this ledger ({why})") from None
    if not tables:
        names = columns or [name for name, _ in SCHEMA_FIELDS]
        return pa.table({name: pa.array([], type=pa.string()) for name in names})
    return pa.concat_tables(tables, promote_options="default")


def done_indices(out: Path, campaign: str) -> set[int]:
    table = read_ledger(out, campaign, columns=["index"])
    indices = table.column("index").to_pylist()
    assert len(indices) == len(set(indices)), "a seed index appears twice in the ledger"
    return set(indices)
