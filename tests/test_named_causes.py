"""Inputs whose refusal once buried its cause: each is one line naming it (the flag, the
variable, the file, the value and what was expected), checked before anything runs."""
import json
import os
import re
import shutil

import ccvl_tf  # noqa: F401

import pytest
from absl import app
from absl import flags

from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime import env_flags
from ccvl_tf.runtime import training

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")


# ------------------------------------------------------------------ on/off environment variables
@pytest.mark.parametrize("value, on", [("false", False), ("off", False), ("0", False),
                                       ("no", False), ("", False), ("OFF", False),
                                       ("1", True), ("true", True), ("on", True),
                                       ("Yes", True)])
def test_an_on_off_variable_reads_false_and_off_as_off(monkeypatch, value, on):
  """Before: CCVL_VERIFY_PREFIXES=false or =off turned verification on."""
  from ccvl_tf.data import replay_files
  monkeypatch.setenv(env_flags.VERIFY_PREFIXES, value)
  assert env_flags.boolean(env_flags.VERIFY_PREFIXES) is on
  assert replay_files.verifies_prefix(1, 100) is on  # a short prefix: verified only when on


@pytest.mark.parametrize("name", env_flags.BOOLEANS)
def test_an_on_off_variable_of_another_value_is_refused_naming_it(monkeypatch, name):
  monkeypatch.setenv(name, "maybe")
  with pytest.raises(ValueError, match=f"^{name}='maybe' is neither on"):
    env_flags.boolean(name)
  # Refused for every binary where its flags are read, before anything runs.
  fv = flags.FlagValues()
  config_flags.define(training_like := _Tiny, flag_values=fv)
  fv(["x"])
  with pytest.raises(app.UsageError, match=f"^{name}='maybe' is neither on"):
    config_flags.from_flags(training_like, flag_values=fv)


def test_no_module_reads_an_on_off_variable_its_own_way():
  """Every on/off environment variable goes through env_flags (a sibling reading "0" as the
  only off value is how =false came to mean on)."""
  own = re.compile(r"os\.environ\.get\([^)]*\)\s*(not )?in \(\"\", \"0\"\)")
  found = []
  for top in ("ccvl_tf", "binaries", "tools"):
    for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
      for n in names:
        if n.endswith(".py"):
          path = os.path.join(dirpath, n)
          if own.search(open(path).read()):
            found.append(os.path.relpath(path, ROOT))
  assert not found, found


import dataclasses  # noqa: E402


@dataclasses.dataclass
class _Tiny:
  steps: int = config_flags.setting(1, "steps", lower_bound=1)


# ------------------------------------------------------------------------------- the GPU check
def _gpu_config(**values):
  from ccvl_tf.bench import gpu_check
  return gpu_check.GpuCheckConfig(**values)


@pytest.mark.parametrize("values, message", [
    (dict(loss_rtol=-1.0), "--loss_rtol must be > 0"),
    (dict(weight_rtol=0.0), "--weight_rtol must be > 0"),
    (dict(device="garbage"), "--device=garbage: not a device name"),
    (dict(device="/TPU:0"), r"--device=/TPU:0: expected /GPU:<index> or /CPU:0"),
    (dict(device="/CPU:7"), r"--device=/CPU:7: TensorFlow sees no CPU:7 on this machine"),
])
def test_the_gpu_checks_device_and_tolerances_are_checked_before_it_runs(values, message):
  """Before: --loss_rtol=-1 ran and then said FAILED; --device=garbage a device_spec traceback;
  --device=/GPU:0 without a GPU timed the CPU under the label /GPU:0."""
  with pytest.raises(ValueError, match=message):
    _gpu_config(**values).validate()
  _gpu_config(device="/CPU:0").validate()


def test_a_gpu_the_machine_does_not_have_is_refused_naming_what_it_has():
  import tensorflow as tf
  if tf.config.list_logical_devices("GPU"):
    pytest.skip("this machine has a GPU")
  with pytest.raises(ValueError, match=r"--device=/GPU:0: TensorFlow sees no GPU:0 on this "
                     r"machine \(it sees no GPU\)"):
    _gpu_config(device="/GPU:0").validate()


# ---------------------------------------------------------------------------------- Ray address
@pytest.mark.parametrize("address, env, message", [
    ("127.0.0.1:99999", None, r"^--ray_address=127.0.0.1:99999: port 99999 is out of range "
                              r"\(a TCP port is 1..65535\)"),
    ("127.0.0.1:0", None, r"^--ray_address=127.0.0.1:0: port 0 is out of range"),
    (None, "garbage", r"^RAY_ADDRESS=garbage: expected auto, local or HOST:PORT"),
    (None, "10.0.0.1:70000", r"^RAY_ADDRESS=10.0.0.1:70000: port 70000 is out of range"),
])
def test_a_ray_address_is_checked_naming_where_it_came_from(monkeypatch, address, env,
                                                            message):
  """Before: port 99999 was tried and the advice was `ray start --port=99999`; a garbage
  RAY_ADDRESS (what Ray reads without --ray_address) was not named."""
  from ccvl_tf.experiments.compare import ray_engine
  if env is None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
  else:
    monkeypatch.setenv("RAY_ADDRESS", env)
  with pytest.raises(ValueError, match=message):
    ray_engine.check_reachable(address, timeout_s=0.1)


# ------------------------------------------------------------------------- --dataset_dir commas
def test_a_local_dataset_dir_with_a_comma_is_named(tmp_path):
  """Before: split silently ("names 2 directories" / "does not exist"), the comma never
  named."""
  from ccvl_tf.experiments.offline import config
  d = tmp_path / "runs,2024" / "replay_logs"
  shutil.copytree(TESTDATA, d)
  with pytest.raises(ValueError, match=r"the path holds a comma, which separates the runs of "
                     r"a pool"):
    config.OfflineConfig(dataset_dir=str(d), root_dir=str(tmp_path / "r"),
                         pool_checkpoints=1).validate()
  with pytest.raises(ValueError, match=r"the path holds a comma"):
    config.OfflineConfig(dataset_dir=str(d), root_dir=str(tmp_path / "r")).validate()
  # Two runs, one of them missing: named as one of the comma-separated runs.
  with pytest.raises(ValueError, match=r"does not exist .*\(one of the 2 runs --dataset_dir "
                     r"names, split at its commas\)"):
    config.OfflineConfig(dataset_dir=f"{TESTDATA},{tmp_path}/nope", pool_checkpoints=1,
                         root_dir=str(tmp_path / "r")).validate()


# ------------------------------------------------------------- the offline share of a pooled run
def test_offline_fraction_from_a_pooled_offline_run_says_pooling_is_not_supported(tmp_path):
  """Before: the joined path 'RUN1,RUN2' "does not exist"."""
  from ccvl_tf.experiments.online import offline_share
  summary = {"dataset_dir": f"{TESTDATA},{TESTDATA}2", "subset": "all",
             "config": {"pool_checkpoints": 1}}
  with pytest.raises(ValueError, match=r"^--offline_fraction > 0 is not supported for a "
                     r"pooled offline run: .*'pool_checkpoints' 1"):
    offline_share.open_share(str(tmp_path), summary, "Breakout", 4, num_deltas=1)


# --------------------------------------------------------------- a refusal names each change once
def test_an_alpha_and_learning_rate_change_is_named_once_each(tmp_path):
  """Before: one ~1,500-character line printing the learner's settings twice (the whole
  'learner' record, old and new)."""
  from ccvl_tf.experiments.offline import config, run_fingerprint
  def fp(*args):
    plan = config.resolve(config.config_from_args([f"--root_dir={tmp_path}/r", *args]))
    return run_fingerprint.fingerprint(plan.record, plan.learner, {}, 10)
  ckpt = str(tmp_path / "ckpt")
  training.check_fingerprint(ckpt, fp(), **_check())
  with pytest.raises(training.FingerprintMismatch) as e:
    training.check_fingerprint(ckpt, fp("--alpha=50", "--learning_rate=0.01"), **_check())
  text = str(e.value)
  assert re.search(r"alpha: [0-9.e-]+ -> 50\.0", text) and "learning_rate: " in text, text
  assert text.count(" -> ") == 2 and "learner" not in text, text
  assert len(text) < 400, len(text)


def _check():
  from ccvl_tf.experiments.offline import run_fingerprint
  return dict(normalize=run_fingerprint.normalize_fingerprint,
              since=run_fingerprint.FINGERPRINT_SINCE)


# ------------------------------------------------------------------------- an exported policy
@pytest.fixture(scope="module")
def adaptive():
  from ccvl_tf.algorithm import policies
  from tests.test_policies import C3, W3, linear_q_model, specs
  tss, aspec = specs(2, 3)
  return policies.ConfidenceAdaptivePolicy(tss, aspec, linear_q_model(W3, C3),
                                           num_grid_deltas=5, gamma=0.9, temperature=0.1,
                                           sample_delta=True, seed=11)


@pytest.fixture(scope="module")
def exported(tmp_path_factory, adaptive):
  import tensorflow as tf
  from ccvl_tf.algorithm import policies
  path = str(tmp_path_factory.mktemp("export") / "adaptive")
  policies.export_policy(adaptive, path)
  return tf.saved_model.load(path)


def test_a_negative_initial_state_batch_is_named(exported):
  """Before: get_initial_state(-1) a Fill error."""
  import tensorflow as tf
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"get_initial_state\(batch_size\) takes the number of environments"):
    exported.get_initial_state(-1)
  assert tf.nest.flatten(exported.get_initial_state(0))[0].shape[0] == 0  # the empty state


def test_a_step_type_of_another_batch_than_the_observation_is_named(exported):
  """Before: step_type of batch 1 with observations of batch 2 was blamed on the state."""
  import tensorflow as tf
  from tf_agents.trajectories import time_step as ts
  step = ts.TimeStep(step_type=tf.constant([0], tf.int32), reward=tf.zeros([2]),
                     discount=tf.ones([2]), observation=tf.constant([[0.1, 0.2], [0.3, 0.4]]))
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"the time step.{1,3}s step_type, reward and discount must each "
                     r"have the shape \[batch\] of the observation.{1,3}s batch\] \[2\] "
                     r"\[; got step_type\] \[1\]"):
    exported.action(step, exported.get_initial_state(2))


# What every refusal of an initial-state batch size says (in process and exported).
BATCH_SIZE = (r"get_initial_state\(batch_size\) takes the number of environments the time "
              r"steps batch, an integer >= 1 \(0: an empty state that action\(\) replaces by "
              r"the initial state of the batch of the time step\); got")


@pytest.mark.parametrize("bad", [-1, -3, 2.5, None, True, "2"])
def test_an_initial_state_batch_that_is_no_count_is_named_in_process(adaptive, bad):
  """Before, the adaptive policy in process: get_initial_state(-1) a Fill error, 2.5 'Cannot
  convert (2.5,) to EagerTensor of dtype int32', None a conversion error, True a state of 1."""
  with pytest.raises((ValueError, TypeError), match="^" + BATCH_SIZE + " " + re.escape(
      repr(bad))):
    adaptive.get_initial_state(bad)


def test_an_initial_state_of_batch_zero_is_the_empty_state_action_replaces(adaptive):
  """0 is what TF-Agents' py policies ask for without a batch size (PyTFEagerPolicy,
  SavedModelPyTFEagerPolicy): in process as exported, the empty state, which action() replaces
  by the initial state of the time step's batch. Before, in process: a GatherV2 error."""
  import numpy as np
  import tensorflow as tf
  from tf_agents.trajectories import time_step as ts
  empty = adaptive.get_initial_state(0)
  assert all(x.shape[0] == 0 for x in tf.nest.flatten(empty))
  for batch in (1, 2):
    t = ts.restart(tf.constant(np.full((batch, 2), 0.25, np.float32)), batch_size=batch)
    a = adaptive.action(t, empty)
    b = adaptive.action(t, adaptive.get_initial_state(batch))
    np.testing.assert_array_equal(a.action, b.action)
    for k in b.state:
      np.testing.assert_array_equal(a.state[k], b.state[k], err_msg=k)
  # A state of another batch (not 0) is refused naming both.
  t = ts.restart(tf.zeros([2, 2]), batch_size=2)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"(?s)the policy state has batch size\W+3\W.*but the time step has"
                           r"\W+2\W"):
    adaptive.action(t, adaptive.get_initial_state(3))


@pytest.mark.parametrize("bad", [2.5, None])
def test_an_initial_state_batch_that_is_no_integer_is_named_exported(exported, bad):
  """Before: TensorFlow's 11-line 'Could not find matching concrete function'."""
  import tensorflow as tf
  with pytest.raises(tf.errors.InvalidArgumentError, match=BATCH_SIZE):
    exported.get_initial_state(bad)


def test_an_observation_without_the_batch_dimension_is_named(exported):
  """Before: ts.restart(observation) without a batch (scalar step_type, reward, discount and an
  observation [2]) gave TensorFlow's 313-line 'Could not find matching concrete function'."""
  import tensorflow as tf
  from tf_agents.trajectories import time_step as ts
  with pytest.raises(tf.errors.InvalidArgumentError) as e:
    exported.action(ts.restart(tf.constant([0.1, 0.2])), exported.get_initial_state(1))
  text = str(e.value)
  assert ("assertion failed: [the observation has no batch dimension: it must be float32 "
          "[batch, 2] with batch >= 1 (the time_step_spec.observation of the policy, "
          "policy_specs.pbtxt), and step_type, reward and discount [batch]; add one (x[None] "
          "for each) or load it with TF-Agents SavedModelPyTFEagerPolicy, which does; got "
          "shape] [2]") in text, text
  assert len(text.splitlines()) < 10
  # Of another dtype too: the dtype's refusal (before: the same 313 lines).
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=re.escape("got float64 of shape] [2] [; convert it first")):
    exported.action(ts.restart(tf.constant([0.1, 0.2], tf.float64)),
                    exported.get_initial_state(1))


def test_a_step_type_without_the_batch_dimension_is_named(exported):
  """A batched observation with a scalar step_type, reward and discount: before, TensorFlow's
  'Could not find matching concrete function'; now the step_type against the observation's
  batch."""
  import tensorflow as tf
  from tf_agents.trajectories import time_step as ts
  step = ts.TimeStep(step_type=tf.constant(0, tf.int32), reward=tf.constant(0.0),
                     discount=tf.constant(1.0), observation=tf.constant([[0.1, 0.2]]))
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"the time step.{1,3}s step_type, reward and discount must each "
                     r"have the shape \[batch\] of the observation.{1,3}s batch\] \[1\] "
                     r"\[; got step_type\] \[\]"):
    exported.action(step, exported.get_initial_state(1))
