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
