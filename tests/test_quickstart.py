"""README's quickstart is docs/examples/quickstart.py, shown with its output, and runs: the
code block on the front page and in docs/your_data.md is the file, and the file prints the
rows of the output shown beside it (the numbers are this machine's: another CPU's kernels
train other weights)."""
import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "docs", "examples", "quickstart.py")
ROW = re.compile(r"^\s*(.+?)\s+(-?\d+\.\d)\s+95% CI \((-?\d+\.\d), (-?\d+\.\d)\)$")


def _blocks(path, heading):
  """The fenced blocks (language, text) of the section of `path` under `heading`."""
  text = open(path).read()
  start = text.index(heading)
  end = text.find("\n## ", start + len(heading))
  section = text[start:end if end >= 0 else None]
  return re.findall(r"```(\w*)\n(.*?)```", section, re.S)


def _shown():
  blocks = _blocks(os.path.join(ROOT, "README.md"), "## Quickstart: your own data")
  code = [b for lang, b in blocks if lang == "python"]
  output = [b for lang, b in blocks if lang == "text"]
  assert len(code) == 1 and len(output) == 1, blocks
  return code[0], output[0]


def test_the_front_page_and_the_guide_show_the_example_file():
  code, _ = _shown()
  assert code == open(EXAMPLE).read()
  guide = [b for lang, b in _blocks(os.path.join(ROOT, "docs", "your_data.md"),
                                    "## The example") if lang == "python"]
  assert guide == [code]


def test_the_shown_output_is_a_table_of_the_runs_policies():
  _, output = _shown()
  rows = [ROW.match(line) for line in output.strip().splitlines()]
  assert all(rows), output
  assert [r.group(1) for r in rows] == ["CCVL (adaptive)", "Fixed-CCVL", "random",
                                        "data (its episodes)"]
  for r in rows:  # each mean inside its CI
    assert float(r.group(3)) <= float(r.group(2)) <= float(r.group(4)), r.group(0)


# The example run at a tenth of its sizes (the same calls, the same file): what the test checks
# is that the file's code runs end to end and prints the table's rows, not the numbers shown
# (another CPU trains other weights), so the full two minutes of training buy nothing here.
SHRINK = """
import runpy, sys
import ccvl_tf
_fit, _collect = ccvl_tf.fit, ccvl_tf.collect
ccvl_tf.fit = lambda *a, **k: _fit(*a, **dict(k, num_steps=20, eval_episodes=3))
ccvl_tf.collect = lambda *a, **k: _collect(*a, **dict(k, num_steps=500))
runpy.run_path(sys.argv[1], run_name="__main__")
"""


@pytest.mark.slow
def test_the_example_runs_and_prints_those_rows(tmp_path):
  _, output = _shown()
  code = open(EXAMPLE).read()
  # The sizes the shrink replaces are keyword arguments of the two calls, as shown.
  assert "num_steps=5_000" in code and "num_steps=2_000, eval_episodes=10" in code
  env = dict(os.environ, PYTHONPATH=ROOT)
  out = subprocess.run([sys.executable, "-c", SHRINK, EXAMPLE], cwd=tmp_path,
                       capture_output=True, text=True, timeout=900, env=env)
  assert out.returncode == 0, out.stderr[-3000:]
  printed = [ROW.match(line) for line in out.stdout.strip().splitlines()[-4:]]
  assert all(printed), out.stdout[-2000:]
  shown = [ROW.match(line) for line in output.strip().splitlines()]
  assert [p.group(1) for p in printed] == [s.group(1) for s in shown]
  assert os.path.isfile(tmp_path / "runs" / "quickstart" / "policy" / "saved_model.pb")
  summary = json.load(open(tmp_path / "runs" / "quickstart" / "summary.json"))
  assert summary["step"] == 20, summary.get("step")
