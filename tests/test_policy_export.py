"""SavedModel round trip: export with PolicySaver, run in a FRESH process importing only TensorFlow.

The subprocess gets the time steps and the initial state from an .npz, loads each SavedModel with
plain `tf.saved_model.load`, carries the state itself step to step (through an episode boundary),
and writes actions, deltas and states back; they must equal the in-process policy's.
"""
import os
import subprocess
import sys
import textwrap

import ccvl_tf  # noqa: F401

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

from ccvl_tf import policies
from tests.test_policies import C3, W3, linear_q_model, specs  # the hand-computable fake net

# Runs in the fresh process. Imports only TensorFlow (and numpy/stdlib).
_CHILD = textwrap.dedent("""
    import collections, sys
    import numpy as np
    import tensorflow as tf
    TimeStep = collections.namedtuple('TimeStep', ['step_type', 'reward', 'discount', 'observation'])
    data = dict(np.load(sys.argv[1]))
    out = {}
    for name in sys.argv[3:]:
      saved = tf.saved_model.load(sys.argv[2] + '/' + name)
      n = data['step_type'].shape[0]
      state = saved.get_initial_state(batch_size=data['step_type'].shape[1])
      for key, value in (state.items() if isinstance(state, dict) else []):
        out[f'{name}/init/{key}'] = value.numpy()
      for i in range(n):
        t = TimeStep(tf.constant(data['step_type'][i]), tf.constant(data['reward'][i]),
                     tf.constant(data['discount'][i]), tf.constant(data['observation'][i]))
        step = saved.action(t, state)
        state = step.state
        out[f'{name}/action/{i}'] = step.action.numpy()
        out[f'{name}/delta/{i}'] = step.info.delta.numpy()
        for key, value in (state.items() if isinstance(state, dict) else []):
          out[f'{name}/state/{i}/{key}'] = value.numpy()
      # The flat serving signature (what non-Python TensorFlow programs call) agrees too.
      state = saved.get_initial_state(batch_size=data['step_type'].shape[1])
      kwargs = {'0/step_type': data['step_type'][0], '0/reward': data['reward'][0],
                '0/discount': data['discount'][0], '0/observation': data['observation'][0]}
      kwargs.update({'1/' + k: v for k, v in (state.items() if isinstance(state, dict) else [])})
      out[f'{name}/signature_action0'] = saved.signatures['action'](**kwargs)['action'].numpy()
    bad = sorted(m for m in sys.modules
                 if m.split('.')[0] in ('ccvl_tf', 'tf_agents', 'tensorflow_probability', 'gin'))
    assert not bad, bad
    np.savez(sys.argv[1] + '.out.npz', **out)
    print('child ok')
""")


def _sequence():
  """Batch of 2 streams over 7 steps; row 0 ends an episode at step 3 and restarts at step 4."""
  rng = np.random.RandomState(0)
  obs = rng.uniform(-1, 1, size=(7, 2, 2)).astype(np.float32)  # [T, B, D]
  step_type = np.array([[0, 0], [1, 1], [1, 1], [2, 1], [0, 1], [1, 2], [1, 0]], np.int32)
  reward = rng.uniform(0, 1, size=(7, 2)).astype(np.float32)
  reward[step_type == 0] = 0.0
  discount = np.where(step_type == 2, 0.0, 1.0).astype(np.float32)
  return dict(step_type=step_type, reward=reward, discount=discount, observation=obs)


def _run_in_process(policy, data):
  out = {}
  state = policy.get_initial_state(data["step_type"].shape[1])
  for key, value in (state.items() if isinstance(state, dict) else []):
    out[f"init/{key}"] = value.numpy()
  for i in range(data["step_type"].shape[0]):
    t = ts.TimeStep(tf.constant(data["step_type"][i]), tf.constant(data["reward"][i]),
                    tf.constant(data["discount"][i]), tf.constant(data["observation"][i]))
    step = policy.action(t, state)
    state = step.state
    out[f"action/{i}"] = step.action.numpy()
    out[f"delta/{i}"] = step.info.delta.numpy()
    for key, value in (state.items() if isinstance(state, dict) else []):
      out[f"state/{i}/{key}"] = value.numpy()
  return out


@pytest.mark.slow
def test_saved_model_round_trip_in_fresh_tensorflow_only_process(tmp_path):
  tss, aspec = specs(2, 3)
  model = linear_q_model(W3, C3)
  adaptive = policies.ConfidenceAdaptivePolicy(tss, aspec, model, num_deltas=5, gamma=0.9,
                                               temperature=0.1, sample_delta=True, seed=11)
  built = {
      "fixed": policies.FixedDeltaPolicy(tss, aspec, model, delta=0.3),
      "adaptive": adaptive,
      # epsilon 0: the wrapper must export the inner initial state and no-reset behaviour.
      "adaptive_eps0": policies.epsilon_greedy(adaptive, 0.0),
  }
  for name, policy in built.items():
    policies.export_policy(policy, str(tmp_path / name))
    assert os.path.exists(tmp_path / name / "saved_model.pb")
    assert os.path.exists(tmp_path / name / "policy_specs.pbtxt")

  data = _sequence()
  np.savez(tmp_path / "steps.npz", **data)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.run(
      [sys.executable, "-c", _CHILD, str(tmp_path / "steps.npz"), str(tmp_path), *built],
      capture_output=True, text=True, timeout=120, env=env, cwd=str(tmp_path))
  assert proc.returncode == 0, proc.stderr[-3000:]
  child = dict(np.load(tmp_path / "steps.npz.out.npz"))

  for name, policy in built.items():
    expected = _run_in_process(policy, data)
    for key, value in expected.items():
      if key.startswith(("action/", "delta/")) or value.dtype != np.float32:
        # Actions, chosen deltas, integer/bool state: bit-exact.
        np.testing.assert_array_equal(child[f"{name}/{key}"], value, err_msg=f"{name}/{key}")
      else:
        # Float state (log-belief): graph vs eager float32 rounding, ~1e-6 after 7 updates.
        np.testing.assert_allclose(child[f"{name}/{key}"], value, rtol=1e-5, atol=1e-5,
                                   err_msg=f"{name}/{key}")
    np.testing.assert_array_equal(child[f"{name}/signature_action0"], expected["action/0"])

  # The adaptive belief moved during the run and survived row 0's boundary (step 3 LAST ->
  # step 4 FIRST): at step 4 it equals step 3's, and it is not uniform.
  for name in ("adaptive", "adaptive_eps0"):
    b3 = child[f"{name}/state/3/log_belief"][0]
    b4 = child[f"{name}/state/4/log_belief"][0]
    np.testing.assert_allclose(b4, b3, atol=1e-6)
    assert np.ptp(b4) > 1e-3
    np.testing.assert_array_equal(child[f"{name}/init/rng"], [[11, 0], [11, 0]])
  # Sampling actually varied delta over the run (otherwise the rng check above proves little).
  deltas = np.concatenate([child[f"adaptive/delta/{i}"] for i in range(7)])
  assert len(set(deltas.tolist())) > 1
