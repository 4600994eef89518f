"""A copy of a finished run directory with its summary.json edited, for the tests that refuse
a run whose record says something else."""
import json
import os
import shutil

# A value of copy_run's `changes` that removes the key (None writes JSON null).
REMOVED = object()


def copy_run(run_dir, where, **changes):
  """Copies `run_dir` to `where` and sets each of `changes` in its summary.json (REMOVED: the
  key taken out); returns `where` as a str."""
  shutil.copytree(run_dir, where)
  path = os.path.join(where, "summary.json")
  with open(path) as f:
    summary = json.load(f)
  for key, value in changes.items():
    if value is REMOVED:
      summary.pop(key)
    else:
      summary[key] = value
  with open(path, "w") as f:
    json.dump(summary, f)
  return str(where)
