"""tools/mutation_check.py's list of mutations still points at code (pure text checks).

A mutation whose pattern no longer occurs in its file would test nothing; these tests fail as
soon as code moves away from under a mutation, without running any mutation.
"""
import os
import re

from tools import mutation_check as mc


def test_every_mutation_pattern_occurs_exactly_once_in_its_file():
  assert mc.pattern_problems(mc.REPO, mc.MUTATIONS) == []


def test_mutation_names_are_unique():
  names = [m.name for m in mc.MUTATIONS]
  assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_every_test_a_mutation_names_exists():
  """Each 'tests/file.py' exists, and each 'tests/file.py::name' defines `name` there."""
  missing = []
  for m in mc.MUTATIONS:
    for target in m.tests:
      path, _, name = target.partition("::")
      full = os.path.join(mc.REPO, path)
      if not os.path.isfile(full):
        missing.append(f"{m.name}: {path}")
        continue
      with open(full) as f:
        text = f.read()
      if name and not re.search(rf"^def {re.escape(name)}\(", text, flags=re.M):
        missing.append(f"{m.name}: {target}")
  assert missing == []


def test_pattern_problems_names_the_mutation_the_file_and_the_pattern(tmp_path):
  (tmp_path / "m.py").write_text("x = 1\ny = 1\n")
  stale = mc.Mutation("stale", "", "m.py", "z = 1", "z = 2", ("tests/t.py",))
  twice = mc.Mutation("twice", "", "m.py", " = 1", " = 2", ("tests/t.py",))
  gone = mc.Mutation("gone", "", "n.py", "x", "y", ("tests/t.py",))
  same = mc.Mutation("same", "", "m.py", "x = 1", "x = 1", ("tests/t.py",))
  fine = mc.Mutation("fine", "", "m.py", "x = 1", "x = 2", ("tests/t.py",))
  problems = mc.pattern_problems(str(tmp_path), [stale, twice, gone, same, fine])
  assert len(problems) == 4
  assert "stale" in problems[0] and "m.py" in problems[0] and "'z = 1'" in problems[0]
  assert "found 0 times" in problems[0]
  assert "twice" in problems[1] and "found 2 times" in problems[1]
  assert "gone" in problems[2] and "n.py does not exist" in problems[2]
  assert "same" in problems[3]


def test_a_stale_pattern_is_refused_before_any_copy_or_test_run(monkeypatch, capsys):
  stale = mc.Mutation("stale_one", "", "tools/mutation_check.py", "no such text \x00", "x",
                      ("tests/test_mutation_check.py",))
  monkeypatch.setattr(mc, "MUTATIONS", (stale,))
  def must_not_run(*args, **kwargs):
    raise AssertionError("ran before refusing")
  monkeypatch.setattr(mc, "copy_repo", must_not_run)
  monkeypatch.setattr(mc, "run_tests", must_not_run)
  assert mc.main(["--only", "stale_one"]) == 1
  err = capsys.readouterr().err
  assert "stale_one" in err and "tools/mutation_check.py" in err and "no such text" in err
  assert mc.main(["--list"]) == 1
