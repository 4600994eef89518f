"""Exported SavedModel vs in-process policy, step for step (a helper, not a test module).

`saved_policy_steps` runs exported policies in a FRESH process that imports only TensorFlow
(without TF_USE_LEGACY_KERAS), carrying the policy state itself from step to step;
`in_process_steps` runs a TF-Agents policy here on the same time steps; `assert_same_steps`
requires the same actions and chosen deltas (bit-exact) and the same policy state (integer
and bool entries exact, float entries such as the log-belief and the summed squared errors to
~1e-5) at every step. The child
also records what each export says of one time step without its batch dimension
(`<name>/unbatched`).
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

# Runs in the fresh process. Imports only TensorFlow (and numpy/stdlib).
CHILD = textwrap.dedent("""
    import collections, sys
    import numpy as np
    import tensorflow as tf
    TimeStep = collections.namedtuple('TimeStep',
                                      ['step_type', 'reward', 'discount', 'observation'])
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
      # One environment's time step without the batch dimension: what the refusal says.
      t = TimeStep(*(tf.constant(data[k][0][0])
                     for k in ('step_type', 'reward', 'discount', 'observation')))
      try:
        saved.action(t, saved.get_initial_state(batch_size=1))
        out[f'{name}/unbatched'] = np.array('accepted')
      except tf.errors.InvalidArgumentError as e:
        out[f'{name}/unbatched'] = np.array(str(e))
    bad = sorted(m for m in sys.modules
                 if m.split('.')[0] in ('ccvl_tf', 'tf_agents', 'tensorflow_probability', 'gin'))
    assert not bad, bad
    np.savez(sys.argv[1] + '.out.npz', **out)
    print('child ok')
""")

# Two streams over 7 steps; stream 0 ends an episode at step 3 (LAST, discount 0) and restarts
# at step 4 (FIRST); stream 1 ends at step 5 and restarts at step 6.
STEP_TYPES = np.array([[0, 0], [1, 1], [1, 1], [2, 1], [0, 1], [1, 2], [1, 0]], np.int32)


def time_steps(observation, seed=0):
  """The time steps of STEP_TYPES for observations [7, 2, ...]: rewards U(0, 1) (0 at FIRST),
  discount 0 at LAST. Returns a dict of arrays [T, B, ...]."""
  observation = np.asarray(observation)
  assert observation.shape[:2] == STEP_TYPES.shape, observation.shape
  reward = np.random.RandomState(seed).uniform(0, 1, size=STEP_TYPES.shape).astype(np.float32)
  reward[STEP_TYPES == 0] = 0.0
  discount = np.where(STEP_TYPES == 2, 0.0, 1.0).astype(np.float32)
  return dict(step_type=STEP_TYPES, reward=reward, discount=discount, observation=observation)


def saved_policy_steps(root, names, data, work_dir, timeout=300):
  """Runs the SavedModels root/<name> for each name in a fresh TensorFlow-only process on
  `data`; returns {'<name>/<key>': array} (keys as in `in_process_steps`)."""
  path = os.path.join(str(work_dir), "steps.npz")
  np.savez(path, **data)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  env.pop("TF_USE_LEGACY_KERAS", None)       # plain TensorFlow 2.16 must load the exports
  proc = subprocess.run([sys.executable, "-c", CHILD, path, str(root), *names],
                        capture_output=True, text=True, timeout=timeout, env=env,
                        cwd=str(work_dir))
  assert proc.returncode == 0, proc.stderr[-3000:]
  return dict(np.load(path + ".out.npz"))


def in_process_steps(policy, data):
  """The same run with a policy object here: {'init/..', 'action/i', 'delta/i', 'state/i/..'}."""
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


def assert_same_steps(child, expected, name, rtol=1e-5):
  """Every action, delta and state entry of `expected` equals the child's `name/...` one.

  Float state (the log-belief, the float64 sums of squared errors) is compared to `rtol` (and
  atol 1e-5): graph vs eager float32 rounding is ~1e-6 after 7 updates of a small network;
  with a conv torso and beliefs in the hundreds (random frames, tiny belief temperature) it
  reaches ~1e-5 relative.
  """
  assert expected, name
  for key, value in expected.items():
    if key.startswith(("action/", "delta/")) or value.dtype.kind != "f":
      # Actions, chosen deltas, integer/bool state: bit-exact.
      np.testing.assert_array_equal(child[f"{name}/{key}"], value, err_msg=f"{name}/{key}")
    else:
      np.testing.assert_allclose(child[f"{name}/{key}"], value, rtol=rtol, atol=1e-5,
                                 err_msg=f"{name}/{key}")
  np.testing.assert_array_equal(child[f"{name}/signature_action0"], expected["action/0"])
