"""The mutants of a campaign: cosmic-ray's operators over the sans-IO cores, enumerated and applied.

cosmic-ray (PyPI `cosmic-ray`, maintained, parso-based) is used as a library: its operators find
each position a mutation applies at (`Operator.mutation_positions`) and rewrite one occurrence
(`cosmic_ray.mutating.mutate_code`), formatting and comments kept, so a mutant's diff is one
line of the real source.  Its own runner (a SQLite work database, a test command per mutant in
one shared tree) is not used: here each mutant runs in its own copy of the tree on a Spark task.

A mutant is named by (module, operator, occurrence) and by the hash of the module's source it was
made from, so a ledger row of an older source is never mistaken for a mutant of today's.
"""

from __future__ import annotations

import difflib
import hashlib
import random
from pathlib import Path

import attrs

from spec.config import ConfigError

ROOT = Path(__file__).resolve().parents[2]

# The cores issue 36 names: pure state machines and decision functions, and the runtime's store.
CORE_MODULES = (
    "reference/decisions.py", "reference/admission.py", "reference/master.py", "reference/replica.py",
    "reference/commitlog.py", "reference/record.py", "reference/frames.py",
    "reference/failover/sss_policy.py", "reference/failover/roles.py", "reference/failover/broker.py",
    "reference/failover/follower.py", "reference/failover/controller.py", "reference/failover/truncation.py",
    "reference/failover/epochfile.py", "reference/real/disk.py",
)

# The functions that decide an acknowledgement (issue 36 asks 100% of their non-equivalent mutants
# killed): the release of waiting requests (GroupTransferService and GroupCommitService's rule, the
# release bound), the deadlines and their statuses, the ack check, confirmOffset, and the
# SyncStateSet membership a PUT_OK waits for.  Module -> function names (a method by its own name).
ACK_DECIDING = {
    "reference/decisions.py": ("replica_coverage", "covered_count", "deadline_status"),
    "reference/master.py": ("_answer", "flush_leg_done", "flush_frontier", "replica_coverage", "_complete_covered",
                            "_register_replica_leg", "_release_bound", "_flushed", "_deadlines", "_deadline_status",
                            "_ack", "_recompute_confirm", "set_confirm_view"),
    "reference/failover/roles.py": ("sss_view", "ack_view", "ack_members", "confirm_with", "header_confirm",
                                    "change_sync_state_set", "_confirm", "may_shrink", "may_expand", "alter_answered",
                                    "alter_refused", "propose_sync_state_set"),
    "reference/failover/sss_policy.py": ("may_shrink", "may_expand", "_observe", "decide"),
}


def ack_deciding(mutant: "Mutant") -> bool:
    return mutant.definition in ACK_DECIDING.get(mutant.module, ())


# The default operators: the mistakes a person makes in this code (a comparison one off or turned,
# a condition negated or its connective swapped, a constant changed, a loop skipped, an arithmetic
# sign flipped, a break for a continue, an exception handler that no longer catches).  The other
# binary-operator swaps of cosmic-ray (Add to Pow, BitXor to LShift, ...) mostly make code that
# fails on its first call; `--operators all` takes them too.
_COMPARISONS = ("Eq", "NotEq", "Lt", "LtE", "Gt", "GtE")
DEFAULT_OPERATORS = tuple(sorted(
    {f"core/ReplaceComparisonOperator_{a}_{b}" for a in _COMPARISONS for b in _COMPARISONS if a != b}
    | {"core/ReplaceComparisonOperator_Is_IsNot", "core/ReplaceComparisonOperator_IsNot_Is"}
    | {"core/AddNot", "core/ReplaceAndWithOr", "core/ReplaceOrWithAnd", "core/ReplaceTrueWithFalse",
       "core/ReplaceFalseWithTrue", "core/NumberReplacer", "core/ZeroIterationForLoop",
       "core/ReplaceBreakWithContinue", "core/ReplaceContinueWithBreak", "core/ExceptionReplacer",
       "core/ReplaceBinaryOperator_Add_Sub", "core/ReplaceBinaryOperator_Sub_Add",
       "core/ReplaceBinaryOperator_Mul_FloorDiv", "core/ReplaceBinaryOperator_FloorDiv_Mul",
       "core/ReplaceUnaryOperator_USub_UAdd", "core/ReplaceUnaryOperator_Delete_Not"}))


@attrs.frozen
class Mutant:
    module: str            # path relative to the tree's root, e.g. reference/decisions.py
    operator: str          # cosmic-ray's operator name
    occurrence: int        # which position of that operator in the module
    line: int              # where it applies (1-based)
    definition: str        # the function or class it is in
    source_sha: str        # the module's source it was made from (12 hex digits)

    @property
    def mutant_id(self) -> str:
        key = f"{self.module}|{self.operator}|{self.occurrence}|{self.source_sha}"
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    @property
    def key(self) -> str:
        """How the equivalents file names it: stable while the module's source is unchanged."""
        return f"{self.module}:{self.operator}:{self.occurrence}@{self.source_sha}"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _operator(name: str):
    import cosmic_ray.plugins

    return cosmic_ray.plugins.get_operator(name)()


def operator_names(which: str) -> tuple[str, ...]:
    """``default``, ``all`` (every cosmic-ray operator that takes no arguments) or a comma list."""
    import cosmic_ray.plugins

    known = {n for n in cosmic_ray.plugins.operator_names() if not cosmic_ray.plugins.get_operator(n).arguments()}
    if which == "default":
        return DEFAULT_OPERATORS
    if which == "all":
        return tuple(sorted(known))
    names = tuple(n.strip() if "/" in n else f"core/{n.strip()}" for n in which.split(",") if n.strip())
    unknown = [n for n in names if n not in known]
    if not names or unknown:
        raise ConfigError(f"--operators {which!r}: {'no operator named' if not names else 'unknown: ' + ', '.join(unknown)}"
                          " (default, all, or cosmic-ray names such as ReplaceComparisonOperator_Lt_LtE)")
    return names


def check_modules(modules: tuple[str, ...], root: Path = ROOT) -> tuple[str, ...]:
    for m in modules:
        path = root / m
        if not m.endswith(".py") or not path.is_file():
            raise ConfigError(f"--module {m}: not a Python file of the tree ({root})")
    return modules


def enumerate_mutants(modules: tuple[str, ...], operators: tuple[str, ...], root: Path = ROOT) -> list[Mutant]:
    """Every (module, operator, occurrence) the operators apply at, in a fixed order."""
    from cosmic_ray.ast import ast_nodes, get_ast_from_path
    from cosmic_ray.ast.ast_query import ASTQuery

    out: list[Mutant] = []
    for module in modules:
        path = root / module
        sha = _sha(path.read_text(encoding="utf-8"))
        nodes = list(ast_nodes(get_ast_from_path(path)))
        for name in operators:
            op = _operator(name)
            positions = [(node, start) for node in nodes for start, _end in op.mutation_positions(node)]
            for occurrence, (node, start) in enumerate(positions):
                out.append(Mutant(module, name, occurrence, start[0], ASTQuery(node).get_definition_name() or "",
                                  sha))
    return out


def sample(mutants: list[Mutant], count: int | None, seed: int) -> list[Mutant]:
    """``count`` of them, drawn with ``seed`` (the same draw every time), in their original order."""
    if count is None or count >= len(mutants):
        return mutants
    chosen = set(random.Random(seed).sample(range(len(mutants)), count))
    return [m for i, m in enumerate(mutants) if i in chosen]


def mutated_source(mutant: Mutant, root: Path = ROOT) -> tuple[str, str]:
    """(original, mutated) text of the mutant's module; ValueError if the module changed since."""
    from cosmic_ray.mutating import mutate_code

    original = (root / mutant.module).read_text(encoding="utf-8")
    if _sha(original) != mutant.source_sha:
        raise ValueError(f"{mutant.module} changed since its mutants were listed")
    mutated = mutate_code(original, _operator(mutant.operator), mutant.occurrence)
    if mutated is None:
        raise ValueError(f"{mutant.key}: the operator does not apply there")
    return original, mutated


def diff_of(mutant: Mutant, original: str, mutated: str) -> str:
    return "".join(difflib.unified_diff(original.splitlines(True), mutated.splitlines(True),
                                        f"a/{mutant.module}", f"b/{mutant.module}", n=1))


def diff(mutant: Mutant, root: Path = ROOT) -> str:
    return diff_of(mutant, *mutated_source(mutant, root))
