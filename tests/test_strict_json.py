"""Every JSON the project writes is strict JSON: no bare NaN or Infinity (which Python's json
writes and reads back, and JavaScript's JSON.parse or jq refuse), a null with the reason beside
it instead. The reader here is json.loads with a parse_constant that raises, as a strict
parser does."""
import json
import math
import os

import numpy as np
import pytest

from ccvl_tf.runtime import strict_json
from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "binaries", "train_offline.py")


def _strict_parse(text: str):
  """json.loads refusing NaN, Infinity and -Infinity (written independently of the code under
  test)."""
  def refuse(name):
    raise ValueError(f"non-strict constant {name}")
  return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_become_null_with_a_note_and_finite_ones_stay():
  obj = {"a": float("nan"), "b": np.float32("inf"), "c": [1.5, float("-inf"), np.nan],
         "d": np.array([0.25, np.nan]), "e": {"f": np.float64("nan"), "f_note": "kept"},
         "g": 3, "h": None, "i": (np.int64(7), np.bool_(True)), "j": "NaN"}
  text = strict_json.dumps(obj, notes={"a": "undefined: one grid delta"}, sort_keys=True)
  back = _strict_parse(text)
  assert back == {
      "a": None, "a_note": "undefined: one grid delta",
      "b": None, "b_note": "not a finite number (inf), written as null",
      "c": [1.5, None, None], "d": [0.25, None],
      "e": {"f": None, "f_note": "kept"},  # a note the dict already has is not replaced
      "g": 3, "h": None, "i": [7, True], "j": "NaN"}
  assert math.isnan(obj["a"])  # the object in memory is not changed


def test_default_hook_results_are_made_finite_too():
  class Odd:
    pass
  text = strict_json.dumps({"x": Odd()}, default=lambda o: float("nan"))
  assert _strict_parse(text) == {"x": None}


def test_loads_refuses_what_a_strict_parser_refuses_naming_the_source():
  with pytest.raises(ValueError, match=r"summary\.json: not strict JSON: NaN is not a JSON value"):
    strict_json.loads('{"a": NaN}', source="summary.json")
  assert strict_json.loads('{"a": null}') == {"a": None}


@pytest.mark.slow
def test_every_json_of_a_short_run_with_one_grid_delta_is_strict(tmp_path):
  """A short real train_offline.py run (a tiny default dataset, 2 steps) with
  --num_grid_deltas=1, which leaves the diagnostics that compare deltas undefined: every JSON it
  wrote (and the default dataset's COMPLETE marker, and the verified-file records of the run's
  cache) parses strictly; the undefined diagnostics are null with the reason beside them."""
  root = tmp_path / "run"
  cache = tmp_path / "cache"
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3",
             CCVL_CACHE_DIR=str(cache))
  r = forked_binary.run(
      "train_offline.py",
      [f"--root_dir={root}", "--num_steps=2", "--default_dataset_steps=300",
       "--num_grid_deltas=1", "--reference_agents=none", "--batch_size=4", "--num_deltas=2",
       "--num_pairs=2", "--log_interval=2", "--checkpoint_interval=2", "--summary_interval=1",
       "--eval_episodes=1", "--eval_max_steps=30"], cwd=tmp_path, env=env)
  assert r.returncode == 0, r.stderr[-3000:]
  found = [p for base in (root, cache) for p in base.rglob("*")
           if p.is_file() and (p.suffix == ".json" or p.name == "COMPLETE")]
  names = {p.name for p in found}
  assert {"summary.json", "evals.json", "fingerprint.json", "results.json", "diagnostics.json",
          "ccvl_dataset.json", "COMPLETE"} <= names, names
  for path in found:
    _strict_parse(path.read_text())  # raises on NaN / Infinity, naming the constant
  summary = _strict_parse((root / "summary.json").read_text())
  diag = _strict_parse((root / "diagnostics" / "diagnostics.json").read_text())
  for record in (summary["diagnostics"], diag["summary"]):
    assert record["lemma1_fraction"] is None
    assert record["lemma1_fraction_note"].startswith("undefined: one grid delta"), record
  assert diag["family"]["monotone_fraction"] is None
  assert diag["family"]["monotone_fraction_note"].startswith("undefined: one grid delta")
