"""README's commands (and those of the results pages it links to) stay true: every
`python binaries/X.py --flag...` names an existing binary and flags that binary defines (its
--helpfull), and every `make TARGET` is a target of the Makefile. A renamed flag breaks the
build, not the reader."""
import concurrent.futures
import glob
import os
import re

import pytest

import markdown_docs as md
from tests import forked_binary

PAGES = [os.path.join(md.ROOT, "README.md")] + sorted(
    glob.glob(os.path.join(md.ROOT, "docs", "results", "*.md")))


def _commands():
  return [(os.path.relpath(p, md.ROOT), c) for p in PAGES for c in md.shell_commands(p)]


def _defined_flags(binary):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=md.ROOT)
  out = forked_binary.run(binary + ".py", ["--helpfull"], cwd=md.ROOT, env=env)
  assert "--helpfull" in out.stdout, (binary, out.returncode, out.stderr[-2000:])
  return set(re.findall(r"^\s+--(?:\[no\])?([\w-]+):", out.stdout, re.M))


def test_readme_shows_the_two_commands_and_a_binary():
  commands = [c for _, c in _commands()]
  assert "make demo" in commands and "make test" in commands
  assert any(md.binary_flags(c)[0] == "train_offline" for c in commands)


def test_every_make_target_exists():
  makefile = open(os.path.join(md.ROOT, "Makefile")).read()
  targets = set(re.findall(r"^([\w.-]+):", makefile, re.M))
  missing = [(page, c) for page, c in _commands()
             if not set(md.make_targets(c)) <= targets]
  assert not missing, missing


@pytest.mark.slow
def test_every_binary_and_flag_exists():
  used = {}
  for page, command in _commands():
    binary, flags = md.binary_flags(command)
    if binary:
      assert os.path.exists(os.path.join(md.ROOT, "binaries", binary + ".py")), (page, command)
      used.setdefault(binary, set()).update(flags)
  with_flags = sorted(b for b, f in used.items() if f)
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    defined = dict(zip(with_flags, pool.map(_defined_flags, with_flags)))
  unknown = {b: sorted(used[b] - defined[b]) for b in with_flags if used[b] - defined[b]}
  assert not unknown, f"flags the binaries do not define: {unknown}"


def test_the_command_reader_joins_lines_and_finds_flags(tmp_path):
  page = tmp_path / "p.md"
  page.write_text("Run `python binaries/b.py --x=1`.\n```bash\n"
                  "python binaries/a.py --one=1 \\\n    --two 2   # --not_a_flag\nmake demo\n"
                  "```\n```\npython binaries/c.py --ignored\n```\n")
  commands = md.shell_commands(str(page))
  assert commands == ["python binaries/a.py --one=1 --two 2", "make demo",
                      "python binaries/b.py --x=1"]
  assert md.binary_flags(commands[0]) == ("a", ["one", "two"])
  assert md.make_targets("make PYTHON=/x/python3.11 test") == ["test"]
