"""The package others depend on: pyproject.toml's dependency ranges hold every pin of the lock
file (requirements.txt), the license is declared and shipped, and the public names import from
`ccvl_tf` without a generic top-level `agents` package."""
import os
import re
import subprocess
import sys
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _lock():
  pins = {}
  for line in open(os.path.join(ROOT, "requirements.txt")):
    m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s#;]+)", line)
    if m:
      pins[canonicalize_name(m.group(1))] = m.group(2)
  return pins


def _project():
  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    return tomllib.load(f)["project"]


def test_every_dependency_range_holds_the_lock_pin():
  pins = _lock()
  project = _project()
  reqs = [Requirement(r) for r in project["dependencies"]]
  reqs += [Requirement(r) for extra in project["optional-dependencies"].values() for r in extra]
  missing = [str(r) for r in reqs if canonicalize_name(r.name) not in pins]
  assert not missing, f"not pinned in requirements.txt: {missing}"
  outside = [(str(r), pins[canonicalize_name(r.name)]) for r in reqs
             if not r.specifier.contains(pins[canonicalize_name(r.name)], prereleases=True)]
  assert not outside, outside


def test_a_range_that_misses_its_pin_is_caught():
  # The check above can fail: a range the lock's pin lies outside of.
  pins = _lock()
  assert not Requirement("numpy>=2").specifier.contains(pins["numpy"])


def test_license_declared_and_shipped():
  assert _project()["license"] == {"text": "Apache-2.0"}
  text = open(os.path.join(ROOT, "LICENSE")).read()
  assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_only_ccvl_tf_is_packaged():
  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    find = tomllib.load(f)["tool"]["setuptools"]["packages"]["find"]
  assert find["include"] == ["ccvl_tf*"]
  assert not os.path.exists(os.path.join(ROOT, "agents"))


def test_public_names_import_without_a_top_level_agents_package():
  # A fresh interpreter, outside the checkout (its directory not on sys.path as ''), with
  # a module named `agents` poisoned: the public API must not need it.
  code = ("import sys; sys.modules['agents'] = None\n"
          "import ccvl_tf\n"
          "missing = [n for n in ccvl_tf.__all__ if n != '__version__' and "
          "not hasattr(ccvl_tf, n)]\n"
          "assert not missing, missing\n"
          "print(len(ccvl_tf.__all__))")
  env = dict(os.environ, PYTHONPATH=ROOT)
  out = subprocess.run([sys.executable, "-c", code], cwd="/", env=env, capture_output=True,
                       text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
