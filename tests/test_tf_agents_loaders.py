"""Exported policies used the way TF-Agents users load and run them, in a fresh process:
`SavedModelPyTFEagerPolicy(path, load_specs_from_pbtxt=True)` with `get_initial_state()` (no
batch size: TF-Agents asks the SavedModel for batch 0) and with `get_initial_state(batch_size=n)`,
`PyDriver` on an unbatched environment, and a wrong observation shape (an error naming the
policy's observation spec)."""
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts

import ccvl_tf  # noqa: F401
from ccvl_tf.algorithm import networks, policies

OBS_SHAPE = (10, 10, 4)
NUM_ACTIONS = 3

# The fresh process: TF-Agents' own loaders, nothing of ccvl_tf.
CHILD = textwrap.dedent("""
    import json, os, sys
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import numpy as np
    from tf_agents.drivers import py_driver
    from tf_agents.environments import random_py_environment
    from tf_agents.policies import py_tf_eager_policy
    from tf_agents.specs import tensor_spec
    from tf_agents.trajectories import time_step as ts

    out = {}
    for name in sys.argv[2:]:
      path = os.path.join(sys.argv[1], name)
      policy = py_tf_eager_policy.SavedModelPyTFEagerPolicy(path, load_specs_from_pbtxt=True)
      obs_spec = policy.time_step_spec.observation
      frames = np.random.default_rng(0).integers(0, 256, (6,) + obs_spec.shape, np.uint8)
      steps = [ts.restart(frames[0])] + [
          ts.transition(f, np.float32(1.0)) for f in frames[1:]]
      runs = {}
      for how in ("no_batch_size", "batch_size_1"):
        state = (policy.get_initial_state() if how == "no_batch_size"
                 else policy.get_initial_state(batch_size=1))
        actions = []
        for t in steps:
          step = policy.action(t, state)
          state = step.state
          actions.append(int(step.action))
        runs[how] = actions
      # A batch of 3 streams (time steps batched by the caller).
      batched = py_tf_eager_policy.SavedModelPyTFEagerPolicy(
          path, load_specs_from_pbtxt=True, batch_time_steps=False)
      state = batched.get_initial_state(batch_size=3)
      t = ts.restart(np.stack([frames[0]] * 3), batch_size=3)
      runs["batch_size_3"] = [int(a) for a in batched.action(t, state).action]
      # PyDriver on an unbatched environment of the policy's specs.
      env = random_py_environment.RandomPyEnvironment(
          obs_spec, policy.action_spec, episode_end_probability=0.3, seed=1)
      counted = []
      driver = py_driver.PyDriver(env, policy, [counted.append], max_steps=25)
      driver.run(env.reset(), policy.get_initial_state(env.batch_size))
      runs["driver_steps"] = int(sum(not t.is_boundary() for t in counted))
      # A wrong observation shape, and a wrong dtype.
      for what, obs in (("wrong_shape", frames[0][..., :3]),
                        ("wrong_dtype", frames[0].astype(np.float32))):
        try:
          policy.action(ts.restart(obs), policy.get_initial_state())
          runs[what] = "accepted"
        except Exception as e:  # pylint: disable=broad-except
          runs[what] = str(e)
      out[name] = runs
    print("RESULT", json.dumps(out))
""")


def _policies():
  obs_spec = tensor_spec.BoundedTensorSpec(OBS_SHAPE, tf.uint8, 0, 255, "observation")
  tss = ts.time_step_spec(obs_spec)
  aspec = tensor_spec.BoundedTensorSpec((), tf.int32, 0, NUM_ACTIONS - 1, "action")
  config = networks.minatar_network_config()
  lower = networks.build_ccvl_network(OBS_SHAPE, "uint8", NUM_ACTIONS, config, name="lower")
  upper = networks.build_ccvl_network(OBS_SHAPE, "uint8", NUM_ACTIONS, config, name="upper")
  adaptive = policies.ConfidenceAdaptivePolicy(tss, aspec, lower.q_model, num_grid_deltas=5,
                                               seed=3, reward_clip=1.0)
  return {
      "fixed": policies.FixedDeltaPolicy(tss, aspec, lower.q_model, delta=0.5),
      "bounds": policies.BoundsPolicy(tss, aspec, lower.q_model, upper.q_model, beta=0.5,
                                      delta=0.5),
      "adaptive": adaptive,
      "adaptive_epsilon_greedy": policies.epsilon_greedy(adaptive, 0.0),
      "adaptive_bounds": policies.ConfidenceAdaptivePolicy(
          tss, aspec, lower.q_model, num_grid_deltas=5, seed=3, upper_network=upper.q_model,
          beta=0.5),
  }


class _Exported:
  """The policies of _policies(), built once for this module, each exported once to `dir`;
  `load(name)` is its SavedModel loaded in this process (once; the tests only call it)."""

  def __init__(self, directory):
    self.dir = directory
    self.built = _policies()
    for name, policy in self.built.items():
      policies.export_policy(policy, os.path.join(directory, name))
    self._loaded = {}

  def load(self, name):
    if name not in self._loaded:
      self._loaded[name] = tf.saved_model.load(os.path.join(self.dir, name))
    return self._loaded[name]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
  return _Exported(str(tmp_path_factory.mktemp("exports")))


@pytest.mark.slow
def test_exports_run_under_tf_agents_loaders_in_a_fresh_process(exported):
  built = exported.built
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.run([sys.executable, "-c", CHILD, exported.dir, *built],
                        capture_output=True, text=True, env=env, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  out = json.loads(proc.stdout.split("RESULT", 1)[1])
  for name in built:
    runs = out[name]
    # Without a batch size the state is the fresh one of the time step's batch: the same
    # actions as with batch_size=1.
    assert runs["no_batch_size"] == runs["batch_size_1"], (name, runs)
    assert all(0 <= a < NUM_ACTIONS for a in runs["no_batch_size"] + runs["batch_size_3"])
    assert runs["driver_steps"] == 25, (name, runs)  # max_steps, boundaries not counted
    assert (SPEC + "; got shape] [1 10 10 3]" in runs["wrong_shape"]), (name, runs["wrong_shape"])
    assert (SPEC + "; got float32 of shape] [1 10 10 4]" in runs["wrong_dtype"]), (
        name, runs["wrong_dtype"])


SPEC = ("the observation must be uint8 [batch, 10, 10, 4] with batch >= 1 (the "
        "time_step_spec.observation of the policy, policy_specs.pbtxt)")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fixed", "adaptive"])
def test_a_batch_of_zero_or_another_dtype_names_the_observation_spec(name, exported):
  """Before: a batch of 0 gave 'slice index 0 of dimension 0 out of bounds' (adaptive) or
  'input depth must be evenly divisible by filter depth' (fixed, Atari), a float32 observation
  TensorFlow's 23-41-line 'Could not find matching concrete function'."""
  saved = exported.load(name)
  empty = ts.restart(tf.zeros((0,) + OBS_SHAPE, tf.uint8), batch_size=0)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=re.escape(SPEC + "; got shape] [0 10 10 4]")):
    saved.action(empty, saved.get_initial_state(batch_size=0))
  for dtype in (tf.float32, tf.int64):
    t = ts.restart(tf.zeros((2,) + OBS_SHAPE, dtype), batch_size=2)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=re.escape(f"{SPEC}; got {dtype.name} of shape] [2 10 10 4] [; "
                                       f"convert it first (np.asarray(observation, np.uint8))")):
      saved.action(t, saved.get_initial_state(batch_size=2))
  good = ts.restart(tf.zeros((2,) + OBS_SHAPE, tf.uint8), batch_size=2)
  assert saved.action(good, saved.get_initial_state(batch_size=2)).action.shape == (2,)


@pytest.mark.slow
def test_a_state_of_another_batch_size_is_refused_naming_both(exported):
  saved = exported.load("adaptive")
  frames = np.zeros((2,) + OBS_SHAPE, np.uint8)
  t = ts.restart(tf.constant(frames), batch_size=2)
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r"the policy state has batch size\] \[3\] \[but the time step has\] "
                           r"\[2\]"):
    saved.action(t, saved.get_initial_state(batch_size=3))
  # Batch 0 (TF-Agents' get_initial_state() without a batch size) is the fresh state.
  a = saved.action(t, saved.get_initial_state(batch_size=0))
  b = saved.action(t, saved.get_initial_state(batch_size=2))
  np.testing.assert_array_equal(a.action, b.action)
  for k in a.state:
    np.testing.assert_array_equal(a.state[k], b.state[k], err_msg=k)


@pytest.mark.slow
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_non_finite_reward_is_refused_and_never_carried_in_the_belief(bad, exported):
  """An exported adaptive policy given reward [nan] mid-episode: before, it returned an action
  and a NaN belief that stayed in its state, and a later step failed with 'indices[0] = 5 is
  not in [0, 5)'. Now the call is refused naming the reward, and the state the caller holds is
  still the last good one."""
  saved = exported.load("adaptive")
  frames = np.random.default_rng(0).integers(0, 256, (4, 1) + OBS_SHAPE, np.uint8)
  state = saved.get_initial_state(batch_size=1)
  state = saved.action(ts.restart(tf.constant(frames[0]), batch_size=1), state).state
  state = saved.action(ts.transition(tf.constant(frames[1]), tf.constant([1.0])), state).state
  with pytest.raises(tf.errors.InvalidArgumentError) as e:
    saved.action(ts.transition(tf.constant(frames[2]), tf.constant([bad])), state)
  assert (f"the reward and discount of the time step must be finite numbers (the belief of the "
          f"adaptive policy scores them); got reward] [{bad}] [discount] [1]") in str(e.value)
  assert np.isfinite(state["log_belief"].numpy()).all()
  step = saved.action(ts.transition(tf.constant(frames[3]), tf.constant([0.5])), state)
  assert np.isfinite(step.state["log_belief"].numpy()).all()
  assert 0 <= int(step.action[0]) < NUM_ACTIONS


def test_a_belief_update_that_overflows_is_refused_not_carried():
  """Finite inputs whose Bellman errors all overflow (a reward of 1e30 with no reward_clip):
  the updated belief would be NaN; the step is refused instead."""
  adaptive = _policies()["adaptive"]
  unclipped = policies.ConfidenceAdaptivePolicy(
      adaptive.time_step_spec, adaptive.action_spec, getattr(adaptive, "_q_network"),
      num_grid_deltas=5, seed=3)
  frames = np.zeros((2, 1) + OBS_SHAPE, np.uint8)
  state = unclipped.get_initial_state(1)
  state = unclipped.action(ts.restart(tf.constant(frames[0]), batch_size=1), state).state
  with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(
      "the belief update is undefined (every Bellman error of a row overflowed")):
    unclipped.action(ts.transition(tf.constant(frames[1]), tf.constant([1e30])), state)


ADAPTIVE_STATE = "a dict with the keys delta_index, has_prev, log_belief, prev_action, " \
                 "prev_observation, rng, sq_error_count, sq_error_sum"


@pytest.mark.slow
def test_a_state_or_dtype_the_export_does_not_take_names_what_it_takes(exported):
  """Another policy's state (the adaptive's given to Fixed-CCVL, Fixed-CCVL's () to the
  adaptive), None, no state for a policy that keeps one, float16 or bool frames: before, 47-85
  lines of "Could not find matching concrete function"."""
  fixed, adaptive = exported.load("fixed"), exported.load("adaptive")
  t = ts.restart(tf.zeros((2,) + OBS_SHAPE, tf.uint8), batch_size=2)
  stateful = (f"the policy state must be {ADAPTIVE_STATE} (get_initial_state(batch_size=B), "
              f"then the state each step returns); got ")
  stateless = "the policy state must be () or left out (this policy keeps no state); got "
  cases = [
      (lambda: adaptive.action(t, None), stateful + "None"),
      (lambda: adaptive.action(t), stateful + "()"),
      (lambda: adaptive.action(t, fixed.get_initial_state(batch_size=2)), stateful + "()"),
      (lambda: fixed.action(t, adaptive.get_initial_state(batch_size=2)),
       stateless + ADAPTIVE_STATE + ": the state of another policy"),
      (lambda: fixed.action(t, None), stateless + "None"),
  ]
  for dtype in (tf.float16, tf.bool):
    frames = ts.restart(tf.zeros((2,) + OBS_SHAPE, dtype), batch_size=2)
    cases.append((lambda f=frames: fixed.action(f),
                  f"{SPEC}; got {dtype.name} of shape] [2 10 10 4] [; convert it first "
                  f"(np.asarray(observation, np.uint8))"))
  for call, message in cases:
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
      call()
    assert f"assertion failed: [{message}" in str(e.value), (message, str(e.value)[-600:])
  # What each takes still works.
  assert fixed.action(t).action.shape == (2,) and fixed.action(t, ()).action.shape == (2,)
  assert adaptive.action(t, adaptive.get_initial_state(batch_size=2)).action.shape == (2,)


@pytest.mark.slow
def test_a_state_of_other_sizes_is_refused_naming_the_tensor_and_both_shapes(exported):
  """The adaptive policy exported with K = 5 given the state of one with K = 3 (same keys, a
  belief of 3 entries), or frames of another size in its state: before, TensorFlow's "Could not
  find matching concrete function"; now the tensor, the shape it takes and the shape given."""
  built = exported.built
  saved = exported.load("adaptive")
  t = ts.restart(tf.zeros((2,) + OBS_SHAPE, tf.uint8), batch_size=2)
  good = saved.get_initial_state(batch_size=2)
  assert good["log_belief"].shape == (2, 5)
  other_k = dict(good, log_belief=tf.zeros([2, 3], good["log_belief"].dtype))
  other_frames = dict(good, prev_observation=tf.zeros([2, 4, 4, 4], tf.uint8))
  cases = [
      (other_k, "the policy state entry log_belief must be float32 [batch, 5] "
                "(get_initial_state(batch_size=B), then the state each step returns; a policy "
                "exported with another number of quantized deltas K keeps a belief of another "
                "size); got shape] [2 3]"),
      (other_frames, "the policy state entry prev_observation must be uint8 [batch, 10, 10, 4]"),
  ]
  for state, message in cases:
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
      saved.action(t, state)
    assert f"assertion failed: [{message}" in str(e.value), (message, str(e.value)[-600:])
  # The state it takes still gives the in-process policy's step.
  step = saved.action(t, good)
  want = built["adaptive"].action(t, built["adaptive"].get_initial_state(2))
  np.testing.assert_array_equal(step.action, want.action)


@pytest.mark.slow
def test_a_state_missing_a_key_or_of_another_dtype_is_refused_naming_the_entry(exported):
  """The adaptive policy's state with a key left out, or an entry of numpy's default dtype
  (float64, int64) or frames scaled to floats: before, 90-171 lines of "Could not find
  matching concrete function"; now the key missing, or the entry, the dtype it takes and the
  dtype given."""
  saved = exported.load("adaptive")
  t = ts.restart(tf.zeros((2,) + OBS_SHAPE, tf.uint8), batch_size=2)
  good = saved.get_initial_state(batch_size=2)
  no_prev = {k: v for k, v in good.items() if k != "has_prev"}
  entry = ("the policy state entry {} must be {} [batch{}] (get_initial_state(batch_size=B), "
           "then the state each step returns); got {}")
  cases = [
      (no_prev, "the policy state must be " + ADAPTIVE_STATE + " (get_initial_state("
                "batch_size=B), then the state each step returns); got a dict with the keys "
                "delta_index, log_belief, prev_action, prev_observation, rng, sq_error_count, "
                "sq_error_sum (missing has_prev)"),
      (dict(good, log_belief=tf.cast(good["log_belief"], tf.float64)),
       entry.format("log_belief", "float32", ", 5", "float64")),
      (dict(good, has_prev=tf.cast(good["has_prev"], tf.int64)),
       entry.format("has_prev", "bool", "", "int64")),
      (dict(good, prev_observation=tf.cast(good["prev_observation"], tf.float32)),
       entry.format("prev_observation", "uint8", ", 10, 10, 4", "float32")),
      (dict(good, delta_index=tf.cast(good["delta_index"], tf.int64)),
       entry.format("delta_index", "int32", "", "int64")),
      # The record of the summed squared errors: float64, and its count int64.
      (dict(good, sq_error_sum=tf.cast(good["sq_error_sum"], tf.float32)),
       entry.format("sq_error_sum", "float64", ", 5", "float32")),
      (dict(good, sq_error_count=tf.cast(good["sq_error_count"], tf.int32)),
       entry.format("sq_error_count", "int64", "", "int32")),
  ]
  for state, message in cases:
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
      saved.action(t, state)
    assert f"assertion failed: [{message}" in str(e.value), (message, str(e.value)[-600:])
  assert saved.action(t, good).action.shape == (2,)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fixed", "adaptive"])
def test_a_step_type_or_discount_out_of_range_is_refused_naming_it(name, exported):
  """Before: an exported policy took step_type 7 as MID and discount 5.0 (the adaptive policy's
  belief then pushed to -294). Now each is refused naming the field, what it takes and the
  value given; the values a TF-Agents environment gives still work."""
  saved = exported.load(name)
  frames = tf.zeros((2,) + OBS_SHAPE, tf.uint8)
  state = saved.get_initial_state(batch_size=2)
  first = ts.restart(frames, batch_size=2)
  state = saved.action(first, state).state
  cases = [
      (first._replace(step_type=tf.constant([0, 7], first.step_type.dtype)),
       "the step_type of the time step must be 0 (FIRST), 1 (MID) or 2 (LAST); got] [0 7]"),
      (first._replace(step_type=tf.constant([-1, 1], first.step_type.dtype)),
       "the step_type of the time step must be 0 (FIRST), 1 (MID) or 2 (LAST); got] [-1 1]"),
      (ts.transition(frames, tf.zeros([2]), discount=tf.constant([1.0, 5.0])),
       "the discount of the time step must be in [0, 1] (1 within an episode, 0 at its end); "
       "got] [1 5]"),
      (ts.transition(frames, tf.zeros([2]), discount=tf.constant([-0.5, 1.0])),
       "the discount of the time step must be in [0, 1] (1 within an episode, 0 at its end); "
       "got] [-0.5 1]"),
  ]
  for step, message in cases:
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
      saved.action(step, state)
    assert f"assertion failed: [{message}" in str(e.value), (message, str(e.value)[-600:])
  for step in (ts.transition(frames, tf.zeros([2])),
               ts.transition(frames, tf.zeros([2]), discount=tf.constant([0.99, 0.0])),
               ts.termination(frames, tf.ones([2]))):
    assert saved.action(step, state).action.shape == (2,)
