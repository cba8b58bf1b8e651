"""Every benchmark imports, and every attribute it reads off a tuner module exists: the benchmarks are run by
hand, not by the suite, so a name moved inside ``tuner`` would otherwise break them unseen (devices_pg18.py read
``tuner.families.iouring`` and ``concurrency._PROBES_SQL`` for a whole session after both had moved)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# In a child process: the benchmarks import the whole session stack, and some register benchmark-only families.
CHECK = r"""
import ast, importlib, sys, types
from pathlib import Path
sys.path.insert(0, '.')
missing = []
for path in sorted(Path('benchmarks').glob('*.py')):
    mod = importlib.import_module('benchmarks.' + path.stem)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            target = getattr(mod, node.value.id, None)
            if (isinstance(target, types.ModuleType) and target.__name__.startswith('tuner')
                    and not hasattr(target, node.attr)):
                missing.append(f'{path}:{node.lineno}: {target.__name__}.{node.attr}')
print('\n'.join(missing))
sys.exit(1 if missing else 0)
"""


def test_every_benchmark_imports_and_finds_the_tuner_names_it_uses() -> None:
    assert len(list((ROOT / "benchmarks").glob("*.py"))) >= 10
    proc = subprocess.run([sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


# The device benchmarks measure what a session measures through the families' public functions (issue #53): a name
# with a leading underscore is a family's to move, and a benchmark that reads one breaks unseen when it does.
PRIVATE = r"""
import ast, importlib, sys, types
from pathlib import Path
sys.path.insert(0, '.')
found = []
for path in sorted(Path('benchmarks').glob('devices*.py')):
    mod = importlib.import_module('benchmarks.' + path.stem)
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or '').startswith('tuner'):
            found += [f'{path}:{node.lineno}: from {node.module} import {a.name}' for a in node.names
                      if a.name.startswith('_')]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr.startswith('_') \
                and not node.attr.startswith('__'):
            target = getattr(mod, node.value.id, None)
            if isinstance(target, types.ModuleType) and target.__name__.startswith('tuner'):
                found.append(f'{path}:{node.lineno}: {target.__name__}.{node.attr}')
print('\n'.join(found))
sys.exit(1 if found else 0)
"""


def test_the_device_benchmarks_read_no_private_name_of_tuner() -> None:
    proc = subprocess.run([sys.executable, "-c", PRIVATE], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
