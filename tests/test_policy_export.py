"""SavedModel round trip: export with PolicySaver, run in a FRESH process importing only TensorFlow.

The subprocess gets the time steps and the initial state from an .npz, loads each SavedModel with
plain `tf.saved_model.load`, carries the state itself step to step (through an episode boundary),
and writes actions, deltas and states back; they must equal the in-process policy's.
"""
import os

import ccvl_tf  # noqa: F401

import numpy as np
import pytest

from ccvl_tf.algorithm import belief
from ccvl_tf.algorithm import networks
from ccvl_tf.algorithm import policies
from tests import policy_compare
from tests.test_policies import C3, W3, linear_q_model, specs  # the hand-computable fake net


def _sequence():
  """Batch of 2 streams over 7 steps; row 0 ends an episode at step 3 and restarts at step 4."""
  rng = np.random.RandomState(0)
  obs = rng.uniform(-1, 1, size=(7, 2, 2)).astype(np.float32)  # [T, B, D]
  step_type = np.array([[0, 0], [1, 1], [1, 1], [2, 1], [0, 1], [1, 2], [1, 0]], np.int32)
  reward = rng.uniform(0, 1, size=(7, 2)).astype(np.float32)
  reward[step_type == 0] = 0.0
  discount = np.where(step_type == 2, 0.0, 1.0).astype(np.float32)
  return dict(step_type=step_type, reward=reward, discount=discount, observation=obs)


@pytest.mark.slow
def test_saved_model_round_trip_in_fresh_tensorflow_only_process(tmp_path):
  tss, aspec = specs(2, 3)
  model = linear_q_model(W3, C3)
  adaptive = policies.ConfidenceAdaptivePolicy(tss, aspec, model, num_grid_deltas=5, gamma=0.9,
                                               temperature=0.1, sample_delta=True, seed=11)
  prior = belief.informed_log_prior([0.3, 0.1, 0.2, 0.5, 0.4], 0.1, 2)
  built = {
      "fixed": policies.FixedDeltaPolicy(tss, aspec, model, delta=0.3),
      "adaptive": adaptive,
      # epsilon 0: the wrapper must export the inner initial state and no-reset behaviour.
      "adaptive_eps0": policies.epsilon_greedy(adaptive, 0.0),
      # A real CCVL network with the monotone delta head (its own Keras layer in the graph).
      "monotone_adaptive": policies.ConfidenceAdaptivePolicy(
          tss, aspec, networks.build_ccvl_network(
              (2,), np.float32, 3, networks.QNetworkConfig(torso="mlp", mlp_units=(8,),
                                                           hidden_units=8),
              delta_head="monotone").q_model,
          num_grid_deltas=5, gamma=0.9, temperature=0.1, sample_delta=True, seed=3,
          initial_log_belief=prior),  # and an informed initial belief
  }
  for name, policy in built.items():
    policies.export_policy(policy, str(tmp_path / name))
    assert os.path.exists(tmp_path / name / "saved_model.pb")
    assert os.path.exists(tmp_path / name / "policy_specs.pbtxt")

  data = _sequence()
  child = policy_compare.saved_policy_steps(tmp_path, list(built), data, tmp_path, timeout=120)
  for name, policy in built.items():
    policy_compare.assert_same_steps(child, policy_compare.in_process_steps(policy, data), name)
    # In that TensorFlow-only process, a time step without its batch dimension is refused
    # naming the observation (before: "Could not find matching concrete function", 94-313
    # lines).
    said = str(child[f"{name}/unbatched"])
    assert ("assertion failed: [the observation has no batch dimension: it must be float32 "
            "[batch, 2]") in said, (name, said)

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
  # The record of the errors the belief summed (compared with the in-process one above): every
  # step after a previous one is scored but the FIRST ones, so each stream scored 5 of its 7
  # steps; row 0's FIRST at step 4 (after its LAST at step 3) added nothing.
  for name in ("adaptive", "adaptive_eps0", "monotone_adaptive"):
    np.testing.assert_array_equal(child[f"{name}/state/6/sq_error_count"], [5, 5])
    np.testing.assert_array_equal(child[f"{name}/state/4/sq_error_sum"][0],
                                  child[f"{name}/state/3/sq_error_sum"][0])
    assert child[f"{name}/state/6/sq_error_sum"].dtype == np.float64
  # The exported initial state is the informed prior's, exactly.
  np.testing.assert_array_equal(child["monotone_adaptive/init/log_belief"], [prior, prior])
  np.testing.assert_array_equal(child["adaptive/init/log_belief"],
                                np.tile(belief.uniform_log_belief(5), [2, 1]))


@pytest.mark.slow
def test_failed_export_leaves_the_previous_export_and_no_temporary(tmp_path, monkeypatch):
  import errno
  from tf_agents.policies import policy_saver
  tss, aspec = specs(2, 3)
  policy = policies.FixedDeltaPolicy(tss, aspec, linear_q_model(W3, C3), delta=0.3)
  out = tmp_path / "policy"
  policies.export_policy(policy, str(out))
  before = sorted(os.listdir(out))
  real = policy_saver.PolicySaver.save

  def full_disk(self, export_dir, *args, **kwargs):
    real(self, export_dir, *args, **kwargs)  # the whole SavedModel, then the disk is full
    raise OSError(errno.ENOSPC, "No space left on device", export_dir)

  monkeypatch.setattr(policy_saver.PolicySaver, "save", full_disk)
  with pytest.raises(OSError, match="No space left on device"):
    policies.export_policy(policy, str(out))
  assert sorted(os.listdir(tmp_path)) == ["policy"]  # no .policy.tmp-* / .policy.old-*
  assert sorted(os.listdir(out)) == before
  monkeypatch.undo()
  policies.export_policy(policy, str(out))  # and a later export replaces it
  assert sorted(os.listdir(tmp_path)) == ["policy"]


def test_an_export_logs_none_of_its_known_notices_and_other_records_pass(tmp_path, caplog,
                                                                         monkeypatch):
  """PolicySaver's 'Could not serialize policy.distribution()' and TensorFlow's argument-name
  sanitizing were printed by every export (also from Python, where no binary quiets absl);
  they are dropped during the export, any other record passes, CCVL_VERBOSE=1 keeps them."""
  import logging
  import re
  from ccvl_tf.runtime import quiet
  monkeypatch.delenv("CCVL_VERBOSE", raising=False)
  absl = logging.getLogger("absl")
  with caplog.at_level(logging.WARNING, logger="absl"):
    with quiet.notices_hidden():
      absl.warning("WARNING: Could not serialize policy.distribution() for policy \"x\"")
      absl.warning("`0/step_type` is not a valid tf.function parameter name. Sanitizing to x")
      absl.warning("something else")
    absl.warning("`1/x` is not a valid tf.function parameter name. Sanitizing to y")
  assert [r.getMessage() for r in caplog.records] == [
      "something else", "`1/x` is not a valid tf.function parameter name. Sanitizing to y"]
  caplog.clear()
  monkeypatch.setenv("CCVL_VERBOSE", "1")
  with caplog.at_level(logging.WARNING, logger="absl"):
    with quiet.notices_hidden():
      absl.warning("WARNING: Could not serialize policy.distribution() for policy \"x\"")
  assert len(caplog.records) == 1
  # A real export logs the distribution notice (CCVL_VERBOSE=1 keeps it; TensorFlow's
  # sanitizing notice comes once per process) and, by default, neither.
  from ccvl_tf.algorithm import policy_export
  tss, aspec = specs(2, 3)
  fixed = policies.FixedDeltaPolicy(tss, aspec, linear_q_model(W3, C3), delta=0.3)
  for verbose, expected in (("1", True), (None, False)):
    if verbose:
      monkeypatch.setenv("CCVL_VERBOSE", verbose)
    else:
      monkeypatch.delenv("CCVL_VERBOSE", raising=False)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="absl"):
      policy_export.export_policy(fixed, str(tmp_path / f"p{int(expected)}"))
    found = {p for r in caplog.records for p in quiet.EXPORT_NOTICES
             if re.search(p, r.getMessage())}
    messages = [r.getMessage() for r in caplog.records]
    assert (quiet.EXPORT_NOTICES[0] in found) if expected else not found, messages
