"""Counts the test suite's tests and assertions, so a change that speeds the suite can show it
dropped neither.

Tests: the items `pytest --collect-only -q tests` lists (parametrized cases counted one by one).
Assertions: read from the source of tests/*.py with `ast`, not run: every `assert` statement,
every call of a function or method whose name starts with `assert` (numpy.testing's, unittest's,
the suite's own helpers such as `policy_compare.assert_same_steps`), and every `pytest.raises`,
`pytest.warns` and `pytest.fail`. A helper's assertions are counted once where they are written,
however many tests call it.

  .venv/bin/python tools/test_inventory.py            # tests and assertions, per file and total
  .venv/bin/python tools/test_inventory.py --no-collect   # assertions only (no pytest run)
  .venv/bin/python tools/test_inventory.py --json=F   # also write the counts to F
"""
import argparse
import ast
import collections
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")
_PYTEST_CHECKS = {"raises", "warns", "fail"}


def _call_name(func):
  """The called name of a Call's func node: `f` for f(...), `m` for x.y.m(...)."""
  if isinstance(func, ast.Name):
    return func.id, None
  if isinstance(func, ast.Attribute):
    owner = func.value.id if isinstance(func.value, ast.Name) else None
    return func.attr, owner
  return None, None


def assertions_in(source):
  """The number of assertions written in one file's source (see the module docstring)."""
  count = 0
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Assert):
      count += 1
    elif isinstance(node, ast.Call):
      name, owner = _call_name(node.func)
      if name is None:
        continue
      if name.startswith("assert") and not name.startswith("assert_never"):
        count += 1
      elif owner == "pytest" and name in _PYTEST_CHECKS:
        count += 1
  return count


def count_assertions(tests_dir=TESTS):
  """{file name: assertions} for every .py file of the tests folder."""
  out = {}
  for name in sorted(os.listdir(tests_dir)):
    if name.endswith(".py"):
      with open(os.path.join(tests_dir, name), encoding="utf-8") as f:
        out[name] = assertions_in(f.read())
  return out


def count_tests(python=sys.executable, root=ROOT):
  """{file name: collected test items}, from `pytest --collect-only -q`."""
  proc = subprocess.run([python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                         "tests"], cwd=root, capture_output=True, text=True, check=False)
  if proc.returncode != 0:
    raise SystemExit(f"test_inventory.py: error: pytest --collect-only failed:\n{proc.stdout}"
                     f"\n{proc.stderr}")
  per_file = collections.Counter()
  for line in proc.stdout.splitlines():
    if "::" in line:  # one item per line (pytest -q)
      per_file[os.path.basename(line.split("::", 1)[0])] += 1
    elif line.startswith("tests/") and line.rsplit(": ", 1)[-1].isdigit():  # "file: N" (-qq)
      name, n = line.rsplit(": ", 1)
      per_file[os.path.basename(name)] += int(n)
  return dict(per_file)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--no-collect", action="store_true", help="count assertions only")
  parser.add_argument("--json", help="also write the counts to this file")
  args = parser.parse_args(argv)
  asserts = count_assertions()
  tests = {} if args.no_collect else count_tests()
  for name in sorted(set(asserts) | set(tests)):
    print(f"{name:45s} tests {tests.get(name, '-'):>5}  assertions {asserts.get(name, 0):>5}")
  total = {"tests": sum(tests.values()) if tests else None, "assertions": sum(asserts.values())}
  print(f"{'total':45s} tests {total['tests'] if tests else '-':>5}  "
        f"assertions {total['assertions']:>5}")
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump({"total": total, "tests": tests, "assertions": asserts}, f, indent=1,
                sort_keys=True)
      f.write("\n")


if __name__ == "__main__":
  main()
