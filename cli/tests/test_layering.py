"""The packages form a DAG: spec/ is the twin and its checkers only and imports no other
package of the project; tla/ and reference/ build on spec/; the test machines and the fuzzer
on those; cli/ (argument parsing and console output) on everything, and nothing on cli/."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {
    "spec": set(),
    "tla": {"spec"},
    "reference": {"spec"},
    "stateful_tests": {"spec", "reference"},
    "spark_fuzz": {"spec", "reference", "tla"},     # tla: TLC's simulation fanned out (spark_fuzz/tlcsim.py)
    "cli": {"spec", "tla", "reference", "stateful_tests", "spark_fuzz"},
}


def imports(package: str) -> dict[str, set[str]]:
    """Project packages each non-test module of ``package`` imports (absolute imports)."""
    out: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        if "tests" in path.relative_to(ROOT).parts or path.name.startswith("test_") or path.name == "conftest.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
            for name in names:
                top = name.split(".")[0]
                if top in ALLOWED and top != package:
                    out.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return out


def test_packages_import_only_what_their_layer_allows():
    bad = {pkg: {dep: sorted(files) for dep, files in imports(pkg).items() if dep not in allowed}
           for pkg, allowed in ALLOWED.items()}
    assert not {k: v for k, v in bad.items() if v}, bad


# Harnesses that judge outcomes (not runtimes): they read what a switch does to know what to expect.
SWITCH_READERS_ALLOWED = {
    "reference/real/powerloss.py": "reads back the records as a torn-keeping recovery would, to judge it",
    "reference/real/chaos_reach.py": "which switches each chaos mode is shown to reach (the rest are refused)",
    "reference/real/metadata_store.py": "declares ETCD_BUG_NAMES, the etcd adapter's own switch list",
    "reference/real/etcd_store.py": "BugEtcdNoCompare is the adapter's compare-and-set itself (issue 37)",
}


def test_the_real_runtimes_read_no_bug_switch_a_core_decides():
    """Every bug switch is read in a core (reference/, reference/failover/, reference/config.py);
    the real runtimes perform what the cores' effects say (WriteEpochFile.durable,
    TruncateLog.on_disk, ...) and name no switch, so the code they run is the code the
    simulators check.  A switch named in a runtime is a rule no refinement check sees."""
    import re

    found = []
    for path in sorted((ROOT / "reference" / "real").glob("*.py")):
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    re.fullmatch(r"Bug[A-Z]\w+", node.value) and rel not in SWITCH_READERS_ALLOWED:
                found.append(f"{rel}:{node.lineno} {node.value}")
    assert not found, found
