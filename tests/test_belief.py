"""The delta belief: grid, Bellman errors and the surrogate-likelihood update by hand."""
import numpy as np
import pytest

from ccvl_tf.algorithm import belief


def test_delta_grid_and_uniform():
  np.testing.assert_allclose(belief.delta_grid(4), [0.125, 0.375, 0.625, 0.875])
  np.testing.assert_allclose(belief.uniform_log_belief(4), np.log(0.25))
  with pytest.raises(ValueError, match="num_grid_deltas"):
    belief.delta_grid(0)


def test_bellman_sq_errors_by_hand():
  # K = 2 deltas. Q(s,a,.) = (1.0, 2.0), r = 0.5, gamma (1 - terminal) = 0.9,
  # max_a' Q(s',a',.) = (0.5, 1.0):
  #   delta_1: (1.0 - 0.5 - 0.45)^2 = 0.0025;  delta_2: (2.0 - 0.5 - 0.9)^2 = 0.36
  e = belief.bellman_sq_errors([1.0, 2.0], 0.5, 0.9, [0.5, 1.0]).numpy()
  np.testing.assert_allclose(e, [0.0025, 0.36], rtol=1e-5)
  # terminal transition: discount 0 -> (1 - 0.5)^2, (2 - 0.5)^2
  np.testing.assert_allclose(belief.bellman_sq_errors([1.0, 2.0], 0.5, 0.0, [9, 9]).numpy(),
                             [0.25, 2.25])


def test_update_log_belief_worked_example():
  # Uniform prior over 2 deltas, errors (0, 1), temperature 0.5:
  #   log b ~ (log .5 - 0, log .5 - 2)  ->  b = (1, e^-2) / (1 + e^-2) = (0.880797, 0.119203)
  lb = belief.update_log_belief(belief.uniform_log_belief(2), [0.0, 1.0], 0.5).numpy()
  np.testing.assert_allclose(np.exp(lb), [0.880797, 0.119203], atol=1e-6)
  # A second identical observation multiplies the odds again: (1, e^-4) normalized.
  lb2 = belief.update_log_belief(lb, [0.0, 1.0], 0.5).numpy()
  np.testing.assert_allclose(np.exp(lb2), [1 / (1 + np.exp(-4)), np.exp(-4) / (1 + np.exp(-4))],
                             atol=1e-6)


def test_belief_concentrates_on_consistent_delta():
  rng = np.random.default_rng(0)
  lb = belief.uniform_log_belief(3)
  for _ in range(50):
    # delta index 1 is Bellman consistent (small noise), 0 and 2 are off by 0.3
    err = (rng.normal(0, 0.05, 3) + np.array([0.3, 0.0, -0.3])) ** 2
    lb = belief.update_log_belief(lb, err, 0.1).numpy()
  assert np.argmax(lb) == 1 and np.exp(lb[1]) > 0.99


def test_bad_temperature():
  with pytest.raises(ValueError, match="temperature"):
    belief.update_log_belief([0.0], [0.0], 0.0)


def test_informed_prior_by_hand_and_as_the_belief_after_the_data():
  # errors (1, 2), T = 2, one transition: logits (-0.5, -1); b = (1, e^-0.5) / (1 + e^-0.5).
  lb = belief.informed_log_prior([1.0, 2.0], 2.0)
  z = 1 + np.exp(-0.5)
  np.testing.assert_allclose(np.exp(lb), [1 / z, np.exp(-0.5) / z], rtol=1e-6)
  # N transitions with the mean errors: the same as N surrogate-likelihood updates from the
  # uniform prior (here N = 3, errors (0, 1, 0.5), T = 0.5).
  step = belief.uniform_log_belief(3)
  for _ in range(3):
    step = belief.update_log_belief(step, [0.0, 1.0, 0.5], 0.5).numpy()
  np.testing.assert_allclose(belief.informed_log_prior([0.0, 1.0, 0.5], 0.5, 3), step,
                             atol=1e-6)
  # |D| large: all mass on the lowest error (Fixed-CCVL's delta), still finite.
  big = belief.informed_log_prior([0.3, 0.1, 0.2], 0.2, 2500)
  assert np.all(np.isfinite(big)) and np.argmax(big) == 1 and np.exp(big[1]) > 0.999999


@pytest.mark.parametrize("args, name", [(([1.0, np.nan], 1.0), "mean_sq_errors"),
                                        (([1.0, -1.0], 1.0), "mean_sq_errors"),
                                        (([], 1.0), "mean_sq_errors"),
                                        (([1.0], 0.0), "temperature"),
                                        (([1.0], 1.0, 0), "num_transitions")])
def test_informed_prior_refuses_bad_input_naming_it(args, name):
  with pytest.raises(ValueError, match=f"^{name} must be"):
    belief.informed_log_prior(*args)
