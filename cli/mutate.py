"""`ackorder mutate`: a mutation campaign over the sans-IO cores on Spark (spark_fuzz/mutation/)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cli import errors
from cli.argtypes import natural_int, positive_int
from cli.ui import console as make_console


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mutate", help="mutation testing of the cores on Spark: what the checks find",
                       description="Mutate the sans-IO cores with cosmic-ray's operators, judge each mutant in its "
                                   "own copy of the tree on a Spark task (the module's unit tests, then seeded "
                                   "simulations checked against the spec, then the Hypothesis machines under ci, then chaos runs for the "
                                   "real runtime, stopping at the first kill), one Parquet "
                                   "ledger row per mutant (resumable); report the score per module and every "
                                   "survivor. Exit 0 when the campaign ran (and every score is at least "
                                   "--fail-under), 1 when a score is below it or the kill suite fails on the clean "
                                   "tree.")
    p.add_argument("--module", action="append", default=None, metavar="PATH",
                   help="a module to mutate, relative to the tree (repeatable; default: the cores issue 36 names)")
    p.add_argument("--operators", default="default",
                   help="default (comparisons, conditions, constants, loops, +/-), all, or a comma list of "
                        "cosmic-ray operator names")
    p.add_argument("--sample", type=positive_int, default=None, metavar="N",
                   help="judge N mutants drawn with --sample-seed (default: all)")
    p.add_argument("--sample-seed", type=natural_int, default=0)
    p.add_argument("--fuzz-seeds", type=positive_int, default=40, help="seeds per simulation model in the fuzz "
                                                                       "stage (default 40)")
    p.add_argument("--ack-deciding", action="store_true",
                   help="only the mutants of the functions that decide an acknowledgement (release, deadlines, the "
                        "ack check, confirmOffset, SyncStateSet membership: spark_fuzz/mutation/mutants.py "
                        "ACK_DECIDING); with no --module, of the modules that hold them")
    p.add_argument("--all-stages", action="store_true",
                   help="run every stage on every mutant, past the first kill, and report which checks reach each "
                        "guard (each `if` negated, cosmic-ray's AddNot); slower")
    p.add_argument("--mutant", action="append", default=None, metavar="ID",
                   help="judge only the mutant with this id (repeatable; `--list` names them)")
    p.add_argument("--list", action="store_true", help="list the mutants (id, module:line, operator) and stop")
    p.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    p.add_argument("--out", type=Path, default=Path(".ackorder/mutate"), help="ledger, summary and report directory")
    p.add_argument("--batch", type=positive_int, default=32, help="mutants per Spark job and ledger batch")
    p.add_argument("--fresh", action="store_true", help="judge every mutant again (default: resume the ledger)")
    p.add_argument("--fail-under", type=float, default=None, metavar="PCT",
                   help="exit 1 when a module's score is below PCT")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from spark_fuzz.mutation.campaign import MutationSpec, run_mutation_campaign
    from spark_fuzz.mutation.killsuite import UNIT_TESTS, CleanSuiteFailed, SuiteOptions
    from spark_fuzz.mutation.mutants import ACK_DECIDING, CORE_MODULES, check_modules

    modules = check_modules(tuple(args.module or (tuple(ACK_DECIDING) if args.ack_deciding else CORE_MODULES)))
    for m in modules:
        if m not in UNIT_TESTS:
            raise errors.UsageError(f"--module {m}: no unit tests are named for it in "
                                    "spark_fuzz/mutation/killsuite.py UNIT_TESTS")
    if args.fail_under is not None and not 0 <= args.fail_under <= 100:
        raise errors.UsageError(f"--fail-under {args.fail_under}: a percentage, 0 to 100")
    spec = MutationSpec(modules=modules, out=args.out, operators=args.operators, sample=args.sample,
                        sample_seed=args.sample_seed, batch=args.batch, resume=not args.fresh,
                        suite=SuiteOptions(fuzz_seeds=args.fuzz_seeds, all_stages=args.all_stages),
                        only=tuple(args.mutant or ()), ack_only=args.ack_deciding)
    console = make_console()
    mutants = spec.mutants()            # an unknown operator is exit 2 here, before Spark starts
    if args.list:
        for m in mutants:
            console.print(f"{m.mutant_id}  {m.module}:{m.line}  {m.operator}#{m.occurrence}  ({m.definition})",
                          highlight=False)
        console.print(f"{len(mutants)} mutants")
        return errors.OK
    from cli.fuzz import preflight, raise_task_failure
    from spark_fuzz.campaign import spark_session
    from spec.config import ConfigError

    from spark_fuzz.mutation.campaign import check_out

    check_out(args.out)                 # before Spark starts, as every other input
    preflight(args.master, args.out)
    try:
        spark = spark_session(args.master)
    except Exception as err:         # noqa: BLE001  (Py4J and JVM start-up errors have many types)
        raise errors.EnvironmentFailure(f"Spark did not start on {args.master}: "
                                        f"{str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__}")
    try:
        with console.status(f"{len(mutants)} mutants: measuring the clean kill suite, then judging") as status:
            summary = run_mutation_campaign(
                spark, spec, lambda done, total: status.update(f"mutants judged: {done} of {total}"))
    except CleanSuiteFailed as err:      # a kill by a red suite proves nothing: the campaign does not start
        console.print(f"[bold red]{err}[/]")
        return errors.VIOLATION
    except ConfigError:
        raise
    except Exception as err:             # noqa: BLE001  (a task's failure reaches the driver as Spark's)
        raise_task_failure(err)
    finally:
        spark.stop()
    from spark_fuzz.mutation.report import write_report

    paths = write_report(args.out, summary)
    from rich.table import Table

    table = Table(title=f"mutation campaign {summary['campaign']}", title_justify="left")
    for col in ("module", "mutants", "killed", "survived", "equivalent", "error", "score %"):
        table.add_column(col, justify="left" if col == "module" else "right")
    for module, s in summary["scores"].items():
        table.add_row(module, str(s["mutants"]), str(s["killed"]), str(s["survived"]), str(s["equivalent"]),
                      str(s["error"]), "-" if s["score"] is None else f"{s['score']:.1f}")
    console.print(table)
    console.print(f"killed by: {summary['killed_by']}; {summary['seconds']} s; report: {paths[0]}, {paths[1]}")
    if summary["contradicted"]:
        console.print(f"[bold red]{len(summary['contradicted'])} mutant(s) reviewed as equivalent were killed[/] "
                      "(spark_fuzz/mutation/equivalent.json is wrong about them; see the report)")
    # unrounded, and a module with nothing judged (every mutant an error or equivalent) is not a pass
    low = [m for m, s in summary["scores"].items()
           if args.fail_under is not None and (s["ratio"] is None or 100 * s["ratio"] < args.fail_under)]
    if low:
        console.print(f"[bold red]score below {args.fail_under}% in: {', '.join(low)}[/]")
        return errors.VIOLATION
    return errors.OK
