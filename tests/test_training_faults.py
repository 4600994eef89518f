"""The training loop under faults: exactly-once evaluation across SIGKILL, fallback
to an intact checkpoint, refusal to resume another configuration."""
import csv
import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ccvl_tf.runtime import training

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A real training process: the tiny CCVL agent of tests/test_training.py, 4-transition batches
# that depend only on the batch index (exact resume), evaluations that return a number derived
# from the step. KILL=phase:step makes the process SIGKILL itself at that point:
#   'after_eval:S'  when the batch of step S + 1 is requested (the evaluation of S is done),
#   'during_eval:S' inside the evaluation of step S (before it returns).
SCRIPT = textwrap.dedent('''
    import json, os, signal, sys
    sys.path.insert(0, %(root)r)
    sys.path.insert(0, os.path.join(%(root)r, "tests"))
    import ccvl_tf
    from ccvl_tf.runtime import training
    import test_training as tt
    root, num_steps = sys.argv[1], int(sys.argv[2])
    kill = os.environ.get("KILL", "")
    phase, kill_step = (kill.split(":")[0], int(kill.split(":")[1])) if kill else ("", -1)
    def die():
      sys.stdout.flush()
      os.kill(os.getpid(), signal.SIGKILL)
    base = tt._make_dataset()
    def make_dataset(start):
      for i, b in enumerate(base(start)):
        if phase == "after_eval" and start + i == kill_step:  # batch of step kill_step + 1
          die()
        yield b
    def evaluate(step):
      if phase == "during_eval" and step == kill_step:
        die()
      return {"score": float(step) / 10.0}
    agent = tt._agent()
    out = training.train(agent, make_dataset, training.LoopConfig(
        root, num_steps, checkpoint_interval=5, log_interval=100, summary_interval=100,
        eval_interval=3), evaluate=evaluate)
    print("RESULT", json.dumps({"step": out["step"], "last_eval": out["last_eval"]}))
''') % {"root": ROOT}


def _run(tmp_path, root, num_steps, kill=""):
  script = tmp_path / "train_script.py"
  script.write_text(SCRIPT)
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3", KILL=kill)
  return subprocess.run([sys.executable, str(script), str(root), str(num_steps)],
                        capture_output=True, text=True, env=env, timeout=300)


def _eval_rows(root):
  with open(os.path.join(root, "eval.csv")) as f:
    return [(int(r["step"]), float(r["score"])) for r in csv.DictReader(f)]


def _result(proc):
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.split("RESULT", 1)[1])


@pytest.mark.slow
@pytest.mark.parametrize("kill, rerun_steps, expected_steps", [
    # Killed after the evaluation of step 6 (the old loop had no checkpoint at 6, retrained
    # from 5 and wrote 6 twice); rerun to 15.
    ("after_eval:6", 15, [3, 6, 9, 12, 15]),
    # Killed during the evaluation of step 6 (the old loop resumed past it and never
    # evaluated it).
    ("during_eval:6", 12, [3, 6, 9, 12]),
    # Killed during the final evaluation (the old loop said "nothing to do", rc 0, no row).
    ("during_eval:12", 12, [3, 6, 9, 12]),
])
def test_sigkill_then_rerun_gives_each_evaluation_exactly_once(tmp_path, kill, rerun_steps,
                                                               expected_steps):
  root = tmp_path / "run"
  first = _run(tmp_path, root, 12, kill=kill)
  assert first.returncode == -signal.SIGKILL, first.stderr[-2000:]
  out = _result(_run(tmp_path, root, rerun_steps))
  rows = _eval_rows(root)
  assert rows == [(s, s / 10.0) for s in expected_steps]
  assert out["step"] == rerun_steps
  assert out["last_eval"] == {"score": rerun_steps / 10.0}
  # A rerun of the finished command reports the recorded evaluation and changes nothing.
  again = _result(_run(tmp_path, root, rerun_steps))
  assert again["last_eval"] == {"score": rerun_steps / 10.0}
  assert _eval_rows(root) == rows


def _weights(agent):
  return [v.numpy() for v in agent.online_network.variables]


def _train(root, steps, log=lambda s: None, **kwargs):
  import test_training as tt  # tests/ is on sys.path (pytest rootdir conftest)
  agent = tt._agent()
  training.train(agent, tt._make_dataset(), training.LoopConfig(
      str(root), steps, checkpoint_interval=2, log_interval=100, summary_interval=100),
      log=log, **kwargs)
  return agent


def _damage(ckpt_dir, step, how):
  data = [f for f in os.listdir(ckpt_dir) if f.startswith(f"ckpt-{step}.data")]
  index = os.path.join(ckpt_dir, f"ckpt-{step}.index")
  if how == "truncated":
    path = os.path.join(ckpt_dir, data[0])
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
      f.truncate(size // 2)
  elif how == "garbage_index":
    with open(index, "wb") as f:
      f.write(b"this is not a checkpoint index" * 10)
  elif how == "missing_data":
    for d in data:
      os.remove(os.path.join(ckpt_dir, d))


@pytest.mark.slow
@pytest.mark.parametrize("how", ["truncated", "garbage_index", "missing_data"])
def test_corrupt_latest_checkpoint_falls_back_to_the_newest_intact_one(tmp_path, how):
  sys.path.insert(0, os.path.join(ROOT, "tests"))
  reference = _train(tmp_path / "ref", 8)              # uninterrupted to 8
  _train(tmp_path / "run", 6)                          # checkpoints 2, 4, 6
  _damage(tmp_path / "run" / "checkpoints", 6, how)
  lines = []
  resumed = _train(tmp_path / "run", 8, log=lines.append)
  text = "\n".join(lines)
  assert "Skipping checkpoint" in text and "ckpt-6" in text
  assert "Resumed from the older checkpoint" in text and "train step 4" in text
  assert "Training from step 4 to 8." in text
  for a, b in zip(_weights(reference), _weights(resumed)):
    np.testing.assert_array_equal(a, b)                # exact resume from ckpt-4


def test_no_intact_checkpoint_is_a_clear_error_listing_each(tmp_path):
  sys.path.insert(0, os.path.join(ROOT, "tests"))
  _train(tmp_path / "run", 4)                          # checkpoints 2, 4
  ckpt_dir = tmp_path / "run" / "checkpoints"
  _damage(ckpt_dir, 4, "garbage_index")
  _damage(ckpt_dir, 2, "missing_data")
  with pytest.raises(ValueError) as e:
    _train(tmp_path / "run", 6)
  msg = str(e.value)
  assert "no checkpoint under" in msg and "ckpt-4:" in msg and "ckpt-2:" in msg
  assert "fresh --root_dir" not in msg


def test_resume_with_another_fingerprint_is_refused_listing_the_differences(tmp_path):
  sys.path.insert(0, os.path.join(ROOT, "tests"))
  fp = {"agent": "ccvl", "alpha": 0.1, "dataset": "a"}
  _train(tmp_path / "run", 2, fingerprint=fp)
  with pytest.raises(training.FingerprintMismatch) as e:
    _train(tmp_path / "run", 4, fingerprint=dict(fp, alpha=0.5, dataset="b"))
  msg = str(e.value)
  assert "alpha: 0.1 -> 0.5" in msg and "dataset: 'a' -> 'b'" in msg
  assert "--allow_config_change" in msg
  lines = []
  agent = _train(tmp_path / "run", 4, log=lines.append, fingerprint=dict(fp, alpha=0.5),
                 allow_config_change=True)
  assert int(agent.train_step_counter.numpy()) == 4
  assert any("--allow_config_change" in l for l in lines)
  _train(tmp_path / "run", 6, fingerprint=fp)          # the stored fingerprint is kept


def test_checkpoints_without_their_state_file_are_refused_and_kept(tmp_path):
  """Before: "Training from step 0", the checkpoints overwritten, the old evaluation rows
  kept."""
  sys.path.insert(0, os.path.join(ROOT, "tests"))
  _train(tmp_path / "run", 4)                          # checkpoints 2, 4
  ckpt_dir = tmp_path / "run" / "checkpoints"
  os.remove(ckpt_dir / training.STATE_FILE)
  before = {n: (ckpt_dir / n).read_bytes() for n in os.listdir(ckpt_dir)}
  with pytest.raises(training.FingerprintMismatch) as e:
    _train(tmp_path / "run", 6)
  assert str(e.value).startswith(
      f"{ckpt_dir} holds the checkpoints ckpt-2, ckpt-4 but not their state file "
      f"{ckpt_dir}/checkpoint (which names them): the run would train from step 0"), str(e.value)
  assert {n: (ckpt_dir / n).read_bytes() for n in os.listdir(ckpt_dir)} == before


def test_fingerprinted_checkpoints_without_their_fingerprint_are_refused(tmp_path):
  """Before: the fingerprint was written afresh, so a resume with --alpha=50 trained on the
  weights trained at 3 and recorded alpha 50."""
  sys.path.insert(0, os.path.join(ROOT, "tests"))
  fp = {"agent": "ccvl", "alpha": 3.0}
  _train(tmp_path / "run", 2, fingerprint=fp)
  ckpt_dir = tmp_path / "run" / "checkpoints"
  os.remove(ckpt_dir / training.FINGERPRINT)
  with pytest.raises(training.FingerprintMismatch) as e:
    _train(tmp_path / "run", 4, fingerprint=dict(fp, alpha=50.0))
  assert str(e.value).startswith(
      f"{ckpt_dir} holds the checkpoints ckpt-2 but not their {ckpt_dir}/fingerprint.json "
      f"(the settings and data they were trained with)"), str(e.value)
  assert not (ckpt_dir / training.FINGERPRINT).exists()
  # --allow_config_change resumes and records this run's settings, saying so.
  lines = []
  agent = _train(tmp_path / "run", 4, log=lines.append, fingerprint=dict(fp, alpha=50.0),
                 allow_config_change=True)
  assert int(agent.train_step_counter.numpy()) == 4
  assert any("without its fingerprint.json (--allow_config_change)" in l for l in lines), lines
  assert json.loads((ckpt_dir / training.FINGERPRINT).read_text())["alpha"] == 50.0
  # A run that does not fingerprint (fingerprint=None) is not asked for one.
  _train(tmp_path / "run", 6)


def test_the_fingerprint_compares_normalized_settings_and_later_keys_only_when_stored(tmp_path):
  sys.path.insert(0, os.path.join(ROOT, "tests"))
  drop_defaults = lambda fp: {k: v for k, v in fp.items() if v != "default"}
  fp = {"agent": "ccvl", "alpha": 3.0}
  _train(tmp_path / "run", 2, fingerprint=fp)            # stored before "learner" existed
  lines = []
  # An explicit default is no change; a key the stored fingerprint predates is not compared,
  # and the log says so.
  _train(tmp_path / "run", 4, log=lines.append,
         fingerprint=dict(fp, reading="default", learner={"head": "b"}),
         fingerprint_normalize=drop_defaults, fingerprint_since=("learner",))
  assert any("predates learner: that is not compared on this resume" in l for l in lines), lines
  # Without the normalization the explicit default is a change.
  with pytest.raises(training.FingerprintMismatch, match="reading: None -> 'default'"):
    _train(tmp_path / "run", 6, fingerprint=dict(fp, reading="default"))
  # A stored "learner" is compared: a changed default is a change.
  _train(tmp_path / "new", 2, fingerprint=dict(fp, learner={"head": "a"}),
         fingerprint_since=("learner",))
  with pytest.raises(training.FingerprintMismatch,
                     match=r"learner.head: 'a' -> 'b'"):
    _train(tmp_path / "new", 4, fingerprint=dict(fp, learner={"head": "b"}),
           fingerprint_since=("learner",))


def test_a_dataset_that_only_moved_resumes_and_another_one_is_refused(tmp_path):
  sys.path.insert(0, os.path.join(ROOT, "tests"))
  data = {"path": "/old/run/default_dataset/Breakout", "files": 8, "listing_sha256": "ab12"}
  fp = {"agent": "ccvl", "dataset": data}
  _train(tmp_path / "run", 2, fingerprint=fp)
  lines = []
  moved = dict(data, path="/new/run/default_dataset/Breakout")
  agent = _train(tmp_path / "run", 4, log=lines.append, fingerprint=dict(fp, dataset=moved))
  assert int(agent.train_step_counter.numpy()) == 4
  assert any("The same data in another place" in l and "/old/run/default_dataset/Breakout -> "
             "/new/run/default_dataset/Breakout" in l for l in lines), lines
  stored = json.loads((tmp_path / "run" / "checkpoints" / training.FINGERPRINT).read_text())
  assert stored["dataset"]["path"] == "/new/run/default_dataset/Breakout"
  # Another listing in the new place, or the same path with other files: refused.
  for other in (dict(moved, listing_sha256="cd34", path="/x"), dict(moved, files=9)):
    with pytest.raises(training.FingerprintMismatch, match="dataset"):
      _train(tmp_path / "run", 6, fingerprint=dict(fp, dataset=other))


# ------------------------------------------------------------------ failed writes (disk full)

ENOSPC_TEXT = ("{{function_node __wrapped__SaveV2_dtypes_7_device_/job:localhost/replica:0/task:0/"
               "device:CPU:0}} %s/part-00000-of-00001.data-00000-of-00001.tempstate1; No space "
               "left on device [Op:SaveV2]")


def disk_full_at_checkpoint(monkeypatch, step):
  """The SaveV2 of checkpoint `step` writes its shard into ckpt-<step>_temp/ and then fails
  as a full disk does (the other saves are untouched)."""
  import tensorflow as tf
  from tensorflow.python.ops import io_ops
  real = io_ops.save_v2

  def save_v2(prefix, *args, **kwargs):
    out = real(prefix, *args, **kwargs)
    path = prefix.numpy().decode() if hasattr(prefix, "numpy") else str(prefix)
    if f"ckpt-{step}_temp" in path:
      raise tf.errors.ResourceExhaustedError(None, None, ENOSPC_TEXT % os.path.dirname(path))
    return out

  monkeypatch.setattr(io_ops, "save_v2", save_v2)


def _checkpoint_files(root):
  return sorted(os.listdir(os.path.join(root, "checkpoints")))


def test_disk_full_during_a_checkpoint_is_one_line_and_the_run_resumes_from_the_last_good(
    tmp_path, monkeypatch):
  import test_training as tt
  loop = lambda root, n: training.LoopConfig(str(root), n, checkpoint_interval=2,
                                             log_interval=100, summary_interval=1,
                                             eval_interval=2)
  evaluate = lambda step: {"score": float(step)}
  full = tmp_path / "full"
  training.train(tt._agent(), tt._make_dataset(), loop(full, 6), evaluate=evaluate,
                 log=lambda s: None)

  root = tmp_path / "run"
  with monkeypatch.context() as m:
    disk_full_at_checkpoint(m, 4)
    with pytest.raises(training.WriteFailed) as e:
      training.train(tt._agent(), tt._make_dataset(), loop(root, 6), evaluate=evaluate,
                     log=lambda s: None)
  msg = str(e.value)
  ckpt = os.path.join(root, "checkpoints")
  assert msg == (f"could not write {ckpt}/ckpt-4: No space left on device [Op:SaveV2]; the last "
                 f"good checkpoint {ckpt}/ckpt-2 is intact: free space (or make the path "
                 f"writable) and rerun the same command to resume from it"), msg
  # Nothing of the failed save is left: no ckpt-4_temp/ folder, no partial ckpt-4 files.
  assert _checkpoint_files(root) == ["checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index",
                                     training.MACHINES]
  assert _eval_rows(root) == [(2, 2.0)]
  # The same command resumes from ckpt-2 and ends where an uninterrupted run ends.
  agent = tt._agent()
  logs = []
  out = training.train(agent, tt._make_dataset(), loop(root, 6), evaluate=evaluate,
                       log=logs.append)
  assert out["resumed_from"] == 2 and out["step"] == 6
  assert _eval_rows(root) == _eval_rows(full) == [(2, 2.0), (4, 4.0), (6, 6.0)]
  ref = tt._agent()
  training.train(ref, tt._make_dataset(), loop(full, 6), log=lambda s: None)  # restores 6
  for a, b in zip(tt._weights(agent), tt._weights(ref)):
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_disk_full_writing_eval_csv_leaves_no_temporary_and_the_rerun_completes_it(
    tmp_path, monkeypatch):
  import errno
  import test_training as tt
  cfg = training.LoopConfig(str(tmp_path), 4, checkpoint_interval=2, log_interval=100,
                            summary_interval=100, eval_interval=2)
  evaluate = lambda step: {"score": float(step)}
  real_replace = os.replace

  def replace(src, dst):
    if str(dst).endswith("eval.csv") and "4" in open(src).read().splitlines()[-1][:1]:
      raise OSError(errno.ENOSPC, "No space left on device", str(src))
    return real_replace(src, dst)

  with monkeypatch.context() as m:
    m.setattr(os, "replace", replace)
    with pytest.raises(training.WriteFailed, match=r"^could not write .*eval\.csv: No space "
                                                   r"left on device; the last good checkpoint "
                                                   r".*ckpt-4 is intact"):
      training.train(tt._agent(), tt._make_dataset(), cfg, evaluate=evaluate,
                     log=lambda s: None)
  assert not [n for n in os.listdir(tmp_path) if ".tmp" in n]
  out = training.train(tt._agent(), tt._make_dataset(), cfg, evaluate=evaluate,
                       log=lambda s: None)
  assert out["step"] == 4 and _eval_rows(tmp_path) == [(2, 2.0), (4, 4.0)]
