"""The offline training loop: exact resume, checkpoints, summaries, eval.csv, NaN stop."""
import csv
import os

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.algorithm import networks
from ccvl_tf.runtime import training

OBS_DIM, NUM_ACTIONS = 5, 3


def _agent(seed=0, lr=1e-3):
  obs_spec = tensor_spec.TensorSpec([OBS_DIM], tf.float32, "observation")
  action_spec = tensor_spec.BoundedTensorSpec([], tf.int32, 0, NUM_ACTIONS - 1, "action")
  keras_seed = 1234 + seed
  import keras
  keras.utils.set_random_seed(keras_seed)
  return ccvl_agent.CCVLAgent(
      ts.time_step_spec(obs_spec), action_spec,
      config=ccvl_agent.CCVLConfig(num_deltas=2, num_pairs=2, learning_rate=lr,
                                   target_update_period=3, dr3_coef=0.0, seed=seed),
      network_config=networks.QNetworkConfig(torso="mlp", mlp_units=(8,), n_cos=4,
                                             hidden_units=8),
      dataset_size=100.0)


def _make_dataset(reward_scale=1.0):
  def make(start):
    def batch(i):
      rng = np.random.default_rng([7, i])  # batch i depends only on i: exact resume
      return dict(observation=rng.normal(size=(4, OBS_DIM)).astype(np.float32),
                  action=rng.integers(NUM_ACTIONS, size=4).astype(np.int32),
                  reward=(reward_scale * rng.normal(size=4)).astype(np.float32),
                  next_observation=rng.normal(size=(4, OBS_DIM)).astype(np.float32),
                  terminal=np.zeros(4, np.float32))
    i = start
    while True:
      yield batch(i)
      i += 1
  return make


def _weights(agent):
  return [v.numpy() for v in agent.online_network.variables]


def test_resume_is_exact(tmp_path):
  # Uninterrupted: 6 steps.
  a = _agent()
  training.train(a, _make_dataset(), training.LoopConfig(str(tmp_path / "a"), 6,
                                                          checkpoint_interval=3), log=lambda s: None)
  # Interrupted after 3 steps, then a *new* agent object resumes to 6.
  b = _agent()
  training.train(b, _make_dataset(), training.LoopConfig(str(tmp_path / "b"), 3,
                                                          checkpoint_interval=3), log=lambda s: None)
  c = _agent(seed=0)
  logs = []
  out = training.train(c, _make_dataset(), training.LoopConfig(str(tmp_path / "b"), 6,
                                                                checkpoint_interval=3),
                       log=logs.append)
  assert out["resumed_from"] == 3 and out["step"] == 6
  assert any("Resumed from" in line and "train step 3" in line for line in logs)
  for wa, wc in zip(_weights(a), _weights(c)):
    np.testing.assert_allclose(wa, wc, rtol=0, atol=1e-6)
  # and training really changed the weights
  assert any(not np.allclose(wa, wf) for wa, wf in zip(_weights(a), _weights(_agent())))


def test_outputs_progress_summaries_and_eval(tmp_path):
  agent = _agent()
  logs = []
  evals = []
  out = training.train(
      agent, _make_dataset(),
      training.LoopConfig(str(tmp_path), 4, checkpoint_interval=2, log_interval=2,
                          summary_interval=1, eval_interval=2),
      evaluate=lambda step: evals.append(step) or {"mean_return": float(step)}, log=logs.append)
  assert evals == [2, 4]
  assert sorted(os.listdir(tmp_path / "checkpoints")) == sorted(
      ["checkpoint", "ckpt-2.index", "ckpt-2.data-00000-of-00001", "ckpt-4.index",
       "ckpt-4.data-00000-of-00001", training.MACHINES])
  assert os.listdir(tmp_path / "summaries" / "train")
  rows = list(csv.reader(open(tmp_path / "eval.csv")))
  assert rows == [["step", "mean_return"], ["2", "2.0"], ["4", "4.0"]]
  progress = [l for l in logs if l.startswith("step ")]
  assert progress and "steps/s" in progress[-1] and "ETA" in progress[-1] and "loss=" in progress[-1]
  assert np.isfinite(out["last_metrics"]["loss"])
  # Running again with the same target does nothing.
  out2 = training.train(agent, _make_dataset(), training.LoopConfig(str(tmp_path), 4),
                        log=logs.append)
  assert out2["step"] == 4 and "nothing to do" in logs[-1]


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
  agent = _agent()
  make_good = _make_dataset()

  def make(start):
    it = make_good(start)
    i = start
    while True:
      b = next(it)
      if i == 3:  # the batch of train step 3 carries a NaN reward
        b["reward"] = np.full(4, np.nan, np.float32)
      yield b
      i += 1

  with pytest.raises(training.TrainingStopped, match="train step 3") as err:
    training.train(agent, make, training.LoopConfig(str(tmp_path), 6, checkpoint_interval=2),
                   log=lambda s: None)
  assert err.value.checkpoint.endswith("ckpt-2")
  assert sorted(f for f in os.listdir(tmp_path / "checkpoints") if f.endswith(".index")) == [
      "ckpt-2.index"]
  # the weights are still finite (the bad update was not applied)
  assert all(np.all(np.isfinite(w)) for w in _weights(agent))


def test_bad_data_met_during_training_is_one_line_naming_what_is_written(tmp_path):
  """A ValueError from the batches' iterator (a checkpoint pool's draw of a damaged file, found
  when training reaches it) keeps its line and says what the run directory holds."""
  make_good = _make_dataset()

  def make(start):
    it = make_good(start)
    for i in range(start, 10):
      if i == 3:
        raise ValueError("checkpoint pool draw 1 (batches 3 to 5): /data/x.gz is corrupt")
      yield next(it)

  with pytest.raises(training.BadBatches) as err:
    training.train(_agent(), make, training.LoopConfig(str(tmp_path), 6, checkpoint_interval=2),
                   log=lambda s: None)
  msg = str(err.value)
  assert msg.startswith("checkpoint pool draw 1 (batches 3 to 5): /data/x.gz is corrupt (at "
                        "train step 3; the last checkpoint "), msg
  assert err.value.checkpoint.endswith("ckpt-2") and "resume from it" in msg
  assert len(msg.splitlines()) == 1 and isinstance(err.value, ValueError)


def test_mismatched_checkpoint_is_a_clear_error(tmp_path):
  training.train(_agent(), _make_dataset(), training.LoopConfig(str(tmp_path), 2),
                 log=lambda s: None)
  obs_spec = tensor_spec.TensorSpec([OBS_DIM], tf.float32, "observation")
  action_spec = tensor_spec.BoundedTensorSpec([], tf.int32, 0, NUM_ACTIONS - 1, "action")
  other = ccvl_agent.CCVLAgent(
      ts.time_step_spec(obs_spec), action_spec,
      config=ccvl_agent.CCVLConfig(num_deltas=2, num_pairs=2),
      network_config=networks.QNetworkConfig(torso="mlp", mlp_units=(16,), n_cos=4,
                                             hidden_units=8),
      dataset_size=100.0)
  with pytest.raises(ValueError, match="no checkpoint under .* restores into this learner"):
    training.train(other, _make_dataset(), training.LoopConfig(str(tmp_path), 4),
                   log=lambda s: None)


def test_bad_config():
  with pytest.raises(ValueError, match="checkpoint_interval"):
    training.LoopConfig("/tmp/x", 5, checkpoint_interval=0).validate()


def test_check_output_dir_refuses_files_and_names_the_flag(tmp_path):
  a_file = tmp_path / "afile"
  a_file.write_text("x")
  with pytest.raises(ValueError, match=r"--root_dir .*afile is a file, not a directory"):
    training.check_output_dir(str(a_file))
  with pytest.raises(ValueError, match=r"--output_dir .*afile is a file, so the directory"):
    training.check_output_dir(str(a_file / "sub" / "run"), "--output_dir")
  training.check_output_dir(str(tmp_path / "new" / "nested"))  # creatable: fine
  training.check_output_dir(str(tmp_path))                      # exists: fine
  assert not (tmp_path / "new").exists()                              # nothing created
  with pytest.raises(ValueError, match="--root_dir must be a directory path"):
    training.check_output_dir("")
  for remote in ("gs://bucket/run", "ram://run"):
    with pytest.raises(ValueError, match=f"--root_dir {remote} is a remote path; outputs must"):
      training.check_output_dir(remote)


def test_check_output_dir_refuses_a_name_longer_than_the_file_system_allows(tmp_path):
  """os.makedirs raised 'OSError: File name too long' as a traceback; the limit is the file
  system's own (os.pathconf)."""
  name_max = os.pathconf(str(tmp_path), "PC_NAME_MAX")
  long_name = "a" * (name_max + 1)
  with pytest.raises(ValueError, match=rf"^--root_dir: the path component 'a{{37}}\.\.\.' is "
                                       rf"{name_max + 1} bytes long, longer than the file system "
                                       rf"allows \({name_max}\); use a shorter name$"):
    training.check_output_dir(str(tmp_path / long_name / "run"))
  training.check_output_dir(str(tmp_path / ("a" * name_max) / "run"))  # at the limit: fine


def test_check_output_dir_says_a_read_only_file_system(tmp_path, monkeypatch):
  """A read-only mount, as os.access and os.statvfs report it (this machine runs the tests as
  root, and mounting one needs privileges the tests do not take)."""
  real_statvfs = os.statvfs

  class ReadOnly:
    def __init__(self, st):
      self.f_flag = st.f_flag | os.ST_RDONLY

  monkeypatch.setattr(os, "access", lambda path, mode: False)
  monkeypatch.setattr(os, "statvfs", lambda path: ReadOnly(real_statvfs(path)))
  with pytest.raises(ValueError, match=rf"^--output_dir {tmp_path}/out: {tmp_path} is on a "
                                       rf"read-only file system$"):
    training.check_output_dir(str(tmp_path / "out"), "--output_dir")


def test_record_evaluation_keeps_one_row_per_step(tmp_path):
  """The online runner's end-of-run evaluation: recording a step twice (a rerun) and another
  step leaves eval.csv with one row per step, in step order, and the record returns them."""
  root = str(tmp_path)
  assert training.recorded_evaluation(root, 40) is None
  training.record_evaluation(root, 40, {"mean_return": 1.0})
  training.record_evaluation(root, 40, {"mean_return": 2.0})   # a rerun of the same step
  training.record_evaluation(root, 20, {"mean_return": 0.5})
  rows = list(csv.reader(open(tmp_path / "eval.csv")))
  assert rows == [["step", "mean_return"], ["20", "0.5"], ["40", "2.0"]]
  assert training.recorded_evaluation(root, 40) == {"mean_return": 2.0}


def test_an_interrupt_stops_the_input_pipeline_before_the_exception_leaves_the_loop(tmp_path):
  """Ctrl-C while waiting for a batch: the dataset's iterator is released inside the loop, not
  kept alive by the exception's traceback until interpreter shutdown (a tf.data iterator whose
  threads run Python then stalls the exit)."""
  import gc  # pylint: disable=g-import-not-at-top
  import weakref  # pylint: disable=g-import-not-at-top
  batches = _make_dataset()(0)
  alive = []

  class Pipeline:
    def __init__(self):
      self.served = 0

    def __iter__(self):
      return self

    def __next__(self):
      if self.served == 3:  # the fourth batch is never served: Ctrl-C lands here
        raise KeyboardInterrupt
      self.served += 1
      return next(batches)

  def make(start):
    del start
    p = Pipeline()
    alive.append(weakref.ref(p))
    return p

  gc.disable()  # only reference counting may free it: what happens in the loop, not later
  try:
    with pytest.raises(training.Interrupted) as raised:
      training.train(_agent(), make, training.LoopConfig(str(tmp_path), 10,
                                                         checkpoint_interval=2),
                     log=lambda s: None)
    # The exception and its traceback (every frame of the loop) are still held here.
    assert raised.value.step == 3
    assert raised.value.checkpoint.endswith("ckpt-2")
    assert len(alive) == 1 and alive[0]() is None
  finally:
    gc.enable()


def test_each_training_segment_records_its_machine(tmp_path):
  """checkpoints/machines.json: one entry per segment that trains (from its first step), none
  for a call with nothing left to train; `train` returns the record, which names this CPU."""
  from ccvl_tf.runtime import machine
  root = str(tmp_path / "run")
  cfg = lambda n: training.LoopConfig(root, n, checkpoint_interval=3)
  training.train(_agent(), _make_dataset(), cfg(3), log=lambda s: None)
  out = training.train(_agent(), _make_dataset(), cfg(6), log=lambda s: None)
  assert [m["from_step"] for m in out["machines"]] == [0, 3]
  again = training.train(_agent(), _make_dataset(), cfg(6), log=lambda s: None)
  assert [m["from_step"] for m in again["machines"]] == [0, 3]
  here = machine.record()
  assert out["machines"][1]["cpu"] == here["cpu"]
  assert out["machines"][1]["versions"] == here["versions"]
  assert out["machines"] == training.read_machines(os.path.join(root, "checkpoints"))
  training.record_machine(os.path.join(root, "checkpoints"), 3)  # a restart from step 3
  assert [m["from_step"] for m in training.read_machines(
      os.path.join(root, "checkpoints"))] == [0, 3]
  for text, said in (('[{"from_step": 0', "Expecting"), ('{"from_step": 0}', "a JSON list"),
                     ('[3]', "entry 0 must be an object"),
                     ('[{"from_step": 0}, {"from_step": "3"}]', "entry 1 must be .* got")):
    with open(os.path.join(root, "checkpoints", training.MACHINES), "w") as f:
      f.write(text)
    with pytest.raises(training.FingerprintMismatch,
                       match=f"machines.json .* cannot be read .*{said}"):
      training.train(_agent(), _make_dataset(), cfg(9), log=lambda s: None)
