"""binaries/diagnose.py on a real (tiny) train_offline run, and its refusals."""
import csv
import json
import os

import pytest
from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
# PYTHONPATH: the binaries import this checkout's ccvl_tf, whatever is installed.
ENV = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3",
           PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))


def _run(binary, args, cwd, fresh=False):
  """`binary` on `args` in its own process (tests/forked_binary.py; `fresh`: a subprocess
  start of its own, as a user's)."""
  return forked_binary.run(binary, args, cwd=cwd, env=ENV, fresh=fresh)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
  """A tiny CCVL run on the testdata (4 steps, checkpoints at 2 and 4) and its stdout."""
  tmp_path = tmp_path_factory.mktemp("diagnose")
  root = tmp_path / "run"
  r = _run("train_offline.py", [
      f"--dataset_dir={TESTDATA}", f"--root_dir={root}", "--num_steps=4", "--batch_size=4",
      "--reference_agents=none",
      "--num_deltas=2", "--num_pairs=2", "--log_interval=2", "--checkpoint_interval=2",
      "--eval_interval=0", "--eval_episodes=1", "--eval_max_steps=20", "--num_grid_deltas=3",
      "--objective=bound", "--count_ridge_mode=relative", "--count_ridge=1e-3",
      "--count_normalization=mean"], tmp_path)
  assert r.returncode == 0, r.stderr[-3000:]
  return root, r.stdout


@pytest.mark.slow
def test_train_offline_writes_diagnostics_and_diagnose_recomputes_them(tiny_run, tmp_path):
  root, stdout = tiny_run
  assert "[diagnostics]" in stdout
  summary = json.loads((root / "summary.json").read_text())
  diag = summary["diagnostics"]
  assert 0.0 <= diag["lemma1_fraction"] <= 1.0
  assert 0.0 <= diag["count_auc"] <= 1.0
  # The greedy policy's action statistics on dataset states (shares of at most 4 actions).
  assert 0.25 <= diag["greedy_mode_share"] <= 1.0 and 0.25 <= diag["behaviour_mode_share"] <= 1
  assert 0.0 <= diag["behaviour_agreement"] <= 1.0
  assert diag["belief_prior_entropy"] == pytest.approx(1.0986, abs=1e-3)  # log 3
  assert summary["config"]["ccvl_options"] == {
      "objective": "bound", "count_ridge_mode": "relative", "count_ridge": 1e-3,
      "count_normalization": "mean"}
  for name in ("diagnostics.json", "delta_family.png", "belief.csv", "belief.png"):
    assert (root / "diagnostics" / name).stat().st_size > 0
  # belief.csv: per episode the squared Bellman errors the belief summed, one column per grid
  # delta (3), and over how many transitions (at least one: an episode has a step).
  with open(root / "diagnostics" / "belief.csv", newline="") as f:
    belief_rows = list(csv.DictReader(f))
  columns = list(belief_rows[0])
  assert columns[-4] == "sq_error_count"
  assert [c.split("@")[0] for c in columns[-3:]] == ["sq_error_sum"] * 3
  assert all(int(r["sq_error_count"]) >= 1 and min(float(r[c]) for c in columns[-3:]) >= 0
             for r in belief_rows)
  written = json.loads((root / "diagnostics" / "diagnostics.json").read_text())
  assert (written["step"], written["checkpoint"]) == (4, str(root / "checkpoints" / "ckpt-4"))
  first = written["summary"]

  r = _run("diagnose.py", [f"--root_dir={root}"], tmp_path, fresh=True)  # as a user starts it
  assert r.returncode == 0, r.stderr[-3000:]
  assert "family_spread" in r.stdout and "count_auc" in r.stdout
  again = json.loads((root / "diagnostics" / "diagnostics.json").read_text())["summary"]
  # Same checkpoint, same held-out states and evaluation seeds: the same numbers.
  for key in ("family_spread", "lemma1_fraction", "count_auc", "effective_rank",
              "belief_max_shift", "greedy_mode_share", "behaviour_agreement"):
    assert again[key] == pytest.approx(first[key], rel=1e-5, abs=1e-7), key


@pytest.mark.slow
def test_diagnose_refuses_a_directory_without_a_run(tmp_path):
  r = _run("diagnose.py", [f"--root_dir={tmp_path}"], tmp_path)
  assert r.returncode != 0
  assert "has no summary.json" in r.stderr and str(tmp_path) in r.stderr


def test_bad_ccvl_option_is_refused_naming_the_flag(tmp_path):
  r = _run("train_offline.py", [f"--dataset_dir={TESTDATA}", f"--root_dir={tmp_path / 'r'}",
                                "--objective=maximum"], tmp_path)
  assert r.returncode != 0
  assert "objective must be one of algorithm1, bound, bonus" in r.stderr
  assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_diagnose_falls_back_to_the_newest_intact_checkpoint(tiny_run, tmp_path):
  """A copy of the run whose latest checkpoint's data file is truncated: before, diagnose.py
  stopped with 'IndexError: Read less bytes than requested'; now it skips it, naming it, and
  restores ckpt-2 as a resumed training does."""
  import shutil
  root = tmp_path / "copy"
  shutil.copytree(tiny_run[0], root)
  data = root / "checkpoints" / "ckpt-4.data-00000-of-00001"
  data.write_bytes(data.read_bytes()[:data.stat().st_size // 2])
  r = _run("diagnose.py", [f"--root_dir={root}", "--episodes=1"], tmp_path)
  assert r.returncode == 0, r.stderr[-3000:]
  ckpt = root / "checkpoints"
  assert f"Skipping checkpoint {ckpt}/ckpt-4: it does not restore (" in r.stdout
  assert f"Restored the older checkpoint {ckpt}/ckpt-2; skipped: ckpt-4." in r.stdout
  assert "family_spread" in r.stdout
  # Beside a summary.json and policies of step 4, diagnostics.json says it describes step 2:
  # before, it was overwritten with no step or checkpoint recorded.
  assert (f"Note: the diagnostics describe step 2 ({ckpt}/ckpt-2), not step 4 of summary.json "
          f"and the exported policies; diagnostics.json records which.") in r.stdout
  written = json.loads((root / "diagnostics" / "diagnostics.json").read_text())
  assert (written["step"], written["checkpoint"]) == (2, f"{ckpt}/ckpt-2")


@pytest.mark.parametrize("text,match", [
    ("{}", "has no 'config' record of the run"),
    ('{"config": {"game": "Breakout", "num_', "is not valid JSON (Unterminated string"),
    ('{"config": {"num_steps": -3}}', "its 'config' record is not a valid run configuration: "
                                      "--num_steps must be an integer >= 1, got -3"),
])
def test_diagnose_refuses_a_summary_that_is_not_one_naming_the_file(text, match, tmp_path):
  (tmp_path / "summary.json").write_text(text)
  r = _run("diagnose.py", [f"--root_dir={tmp_path}"], tmp_path)
  assert r.returncode != 0
  lines = r.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(
      f"diagnose.py: error: {tmp_path / 'summary.json'}"), r.stderr[-2000:]
  assert match in lines[0]


@pytest.mark.slow
def test_the_same_data_in_another_spelling_resumes_and_diagnose_runs_from_any_directory(
    tmp_path):
  """A run trained with the relative run-directory spelling `testdata/dqn_replay/Breakout/1`:
  before, summary.json kept that relative path (diagnose.py from another directory failed),
  and a resume with `.../1/replay_logs` was refused as another dataset ('files': 19 -> 1). Now
  the dataset is recorded absolute, as the replay_logs directory itself."""
  root = tmp_path / "run"
  tiny = ["--reference_agents=none", "--batch_size=4", "--num_deltas=2", "--num_pairs=2",
          "--log_interval=2", "--checkpoint_interval=2", "--eval_interval=0",
          "--eval_episodes=1", "--eval_max_steps=10", "--num_grid_deltas=3"]
  r = _run("train_offline.py", ["--dataset_dir=testdata/dqn_replay/Breakout/1",
                                f"--root_dir={root}", "--num_steps=2", *tiny], ROOT)
  assert r.returncode == 0, r.stderr[-3000:]
  summary = json.loads((root / "summary.json").read_text())
  assert summary["config"]["dataset_dir"] == TESTDATA and summary["dataset_dir"] == TESTDATA
  r = _run("train_offline.py", [f"--dataset_dir={TESTDATA}/", f"--root_dir={root}",
                                "--num_steps=4", *tiny], tmp_path)
  assert r.returncode == 0, r.stderr[-3000:]
  assert f"Resumed from {root}/checkpoints/ckpt-2 (train step 2)" in r.stdout
  elsewhere = tmp_path / "elsewhere"
  elsewhere.mkdir()
  r = _run("diagnose.py", [f"--root_dir={root}", "--episodes=1"], elsewhere)
  assert r.returncode == 0, r.stderr[-3000:]
  assert "family_spread" in r.stdout


def test_diagnose_on_a_run_directory_it_cannot_write_blames_the_disk(tmp_path, monkeypatch):
  """A read-only run directory: before, the error blamed summary.json's configuration record
  ('its config record is not a valid run configuration: --root_dir ...')."""
  from ccvl_tf.experiments.offline import runner
  (tmp_path / "summary.json").write_text('{"config": {"game": "Breakout"}}')
  real_access = os.access
  monkeypatch.setattr(os, "access", lambda p, mode: False if os.path.abspath(p) == str(
      tmp_path) else real_access(p, mode))
  with pytest.raises(ValueError) as e:
    runner.diagnose(str(tmp_path))
  assert str(e.value) == f"--root_dir {tmp_path}: {tmp_path} is not writable"
