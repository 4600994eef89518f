"""CCVL's readings as typed variants (ccvl_tf/algorithm/readings/): the flags of older runs map
to a variant or are refused naming the one to use, and a config records itself as runs did
before (their fingerprints keep resuming)."""
import pytest

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.algorithm import readings
from ccvl_tf.algorithm.readings import ablation, bonus, bound, paper

# What CCVLConfig() recorded when the readings were flat fields (its reading settings as
# dataclasses.asdict gave them, written out by hand from that declaration).
FLAT_DEFAULTS = {"objective": "algorithm1", "gap": "logsumexp", "gap_weight": 0.0,
                 "bonus_counts": "state", "support_threshold": 0.0, "count_weight": "linear",
                 "delta_weight": "sqrt_log", "train_delta": None}


@pytest.mark.parametrize("flat,variant", [
    ({}, paper.Paper()),
    ({"objective": "algorithm1"}, paper.Paper()),
    # the paper preset of older runs: every option at the paper's value
    ({"objective": "algorithm1", "gap": "logsumexp", "count_weight": "linear",
      "delta_weight": "sqrt_log", "support_threshold": 0.0}, paper.Paper()),
    ({"objective": "algorithm1", "gap": "max"}, ablation.Ablation(gap="max")),
    ({"count_weight": "off"}, ablation.Ablation(count_weight="off")),
    # the ladder's rung 1 (docs/ladder.md)
    ({"objective": "bound", "train_delta": 0.5, "delta_weight": "constant",
      "count_weight": "off", "support_threshold": 0.0},
     bound.Bound(train_delta=0.5, delta_weight="constant", count_weight="off")),
    ({"objective": "bonus", "gap": "max", "gap_weight": 0.3, "support_threshold": 0.05,
      "bonus_counts": "state_action"},
     bonus.Bonus(gap="max", gap_weight=0.3, support_threshold=0.05,
                 bonus_counts="state_action")),
    ({"reading": "bound", "objective": "bound"}, bound.Bound()),
])
def test_older_flags_map_to_a_variant_and_record_as_before(flat, variant):
  assert readings.from_options(flat) == variant
  recorded = ccvl_agent.CCVLConfig(reading=variant).record()
  want = dict(FLAT_DEFAULTS, **{k: v for k, v in flat.items() if k != "reading"})
  assert {k: recorded[k] for k in FLAT_DEFAULTS} == want
  # and the record maps back to the same variant
  assert readings.from_options({k: recorded[k] for k in FLAT_DEFAULTS}) == variant


def test_a_config_records_the_keys_older_runs_stored():
  # The fields of CCVLConfig when the readings were flat, by hand: a fingerprint stored then
  # has exactly these CCVL keys, so a run resumes unless a value changed.
  older = {"gamma", "learning_rate", "adam_epsilon", "target_update_period", "collect_epsilon",
           "seed", "td_loss", "huber_kappa", "dr3_coef", "num_deltas", "num_pairs", "alpha",
           "delta_head", "count_ridge", "count_ridge_mode", "count_normalization",
           "count_decay", "count_refresh_period", "policy_delta", "belief_resample",
           "jit_compile"} | set(FLAT_DEFAULTS)
  assert set(ccvl_agent.CCVLConfig().record()) == older
  # Settings added since are recorded once set, so a run trained with them does not resume
  # under the default (nor the reverse).
  exact = ccvl_agent.CCVLConfig(count_gram="exact", count_normalization="none",
                                count_gram_states=10).record()
  assert set(exact) == older | {"count_gram", "count_gram_states"}
  assert (exact["count_gram"], exact["count_gram_states"]) == ("exact", 10)
  quantized = ccvl_agent.CCVLConfig(delta_head="quantized", delta_members=4).record()
  assert set(quantized) == older | {"delta_members"} and quantized["delta_members"] == 4


@pytest.mark.parametrize("flat,message", [
    ({"reading": "paper", "gap": "max"},
     r"^--gap='max' is not an option of reading 'paper' \(it takes none\); give "
     r"--reading=ablation or bound or bonus$"),
    ({"objective": "bonus", "train_delta": 0.5},
     r"^--train_delta=0.5 is not an option of reading 'bonus' \(it takes gap, gap_weight, "
     r"support_threshold, bonus_counts\); give --reading=ablation or bound$"),
    ({"objective": "bound", "support_threshold": 0.05},
     r"^--support_threshold=0.05 is not an option of reading 'bound'.*give --reading=bonus$"),
    ({"reading": "bound", "objective": "bonus"},
     r"^--objective='bonus' is the older name of another reading than --reading='bound': "
     r"give --reading alone$"),
    ({"reading": "ablation", "train_delta": 1.0}, r"^--train_delta must be in \(0, 1\)"),
    ({"objective": "bonus", "gap_weight": -1.0}, r"^--gap_weight must be"),
    ({"reading": "bonus", "bonus_counts": "state_action"},
     r"^bonus_counts='state_action' needs a support head"),
    ({"lemma": 1}, r"^unknown reading option\(s\) \['lemma'\]"),
])
def test_a_combination_no_reading_takes_is_refused_in_one_line(flat, message):
  with pytest.raises(ValueError, match=message):
    readings.from_options(flat)


def test_the_config_refuses_what_is_not_a_reading():
  with pytest.raises(ValueError, match="reading must be one of the readings paper, ablation"):
    ccvl_agent.CCVLConfig(reading="bound").validate()
  ccvl_agent.CCVLConfig(reading=bonus.Bonus(gap_weight=0.3)).validate()


def test_each_reading_is_the_objective_its_agent_steps():
  from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top
  from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top
  from ccvl_tf.algorithm import networks  # pylint: disable=g-import-not-at-top
  specs = (ts.time_step_spec(tensor_spec.TensorSpec([3], "float32")),
           tensor_spec.BoundedTensorSpec([], "int32", 0, 1))
  net = networks.QNetworkConfig(torso="mlp", mlp_units=(4,), n_cos=4, hidden_units=4)
  steps = {}
  for variant in (paper.Paper(), ablation.Ablation()):
    agent = ccvl_agent.CCVLAgent(*specs, ccvl_agent.CCVLConfig(reading=variant), net,
                                 dataset_size=10.0)
    assert agent._reading == variant  # pylint: disable=protected-access
    steps[variant.NAME] = type(agent._reading).objective  # pylint: disable=protected-access
  assert steps == {"paper": paper.objective, "ablation": ablation.Ablation.objective}


@pytest.mark.parametrize("d1,d2", [("uniform", "delta"), ("delta", "uniform"),
                                   ("delta", "delta")])
def test_the_factorial_cells_are_ablation_variants_recorded_only_when_set(d1, d2):
  flat = {"pair_delta_1": d1, "pair_delta_2": d2}
  variant = readings.from_options(flat)
  assert variant == ablation.Ablation(pair_delta_1=d1, pair_delta_2=d2)
  recorded = ccvl_agent.CCVLConfig(reading=variant).record()
  assert {k: recorded.get(k, "uniform") for k in flat} == flat
  assert set(recorded) - set(FLAT_DEFAULTS) >= {k for k, v in flat.items() if v != "uniform"}
  assert readings.from_options({k: v for k, v in recorded.items()
                                if k in readings.FLAGS}) == variant


def test_the_factorial_samplings_give_the_hand_computed_loss():
  """One transition, N = 1, M = 2, two actions, n(s)^-1 = 1, alpha 1, squared TD, gap 'max'.
  Q(s, ., delta) = (1, 0), a_D = 1 (gap 1, Q(s, a_D) 0), delta 0.5, delta_1 = (0.25, 0.125),
  sampled targets y_j = (1, 3), the target at delta 2 (by hand below)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  q = tf.constant([[[1.0, 0.0]]])
  a = tf.constant([1])
  delta = tf.constant([[0.5]])
  d1 = tf.constant([[[0.25, 0.125]]])
  y = {"uniform": tf.constant([[[1.0, 3.0]]]), "delta": tf.constant([[[2.0, 2.0]]])}
  inv_n = tf.constant([1.0])
  # L_j = sqrt(log(1/delta_1j)) * 1 + 0.5 (0 - y_j)^2
  w = {"uniform": np.sqrt(np.log([4.0, 8.0])), "delta": np.sqrt(np.log([2.0, 2.0]))}
  for d_1 in ("uniform", "delta"):
    for d_2 in ("uniform", "delta"):
      r = ablation.Ablation(gap="max", pair_delta_1=d_1, pair_delta_2=d_2)
      targets_at = r.target_confidences(delta, tf.constant([[[0.3, 0.1]]]))
      want_at = [[[0.5, 0.5]]] if d_2 == "delta" else [[[0.3, 0.1]]]
      np.testing.assert_allclose(targets_at.numpy(), want_at)
      yy = y[d_2].numpy()[0, 0]
      want = max(w[d_1][j] + 0.5 * yy[j] ** 2 for j in range(2))
      with tf.GradientTape() as tape:
        tape.watch(q)
        out = r.loss(q, a, y[d_2], delta, d1, inv_n, 1.0, "squared")
      np.testing.assert_allclose(out["loss"].numpy(), want, rtol=1e-6)
      # d loss / d Q(s, a_D): -w_j* (the gap's a_D term) + (Q - y_j*) at the chosen pair j*;
      # d / d Q(s, a_0) = w_j* (the max action of the gap).
      j = int(np.argmax([w[d_1][k] + 0.5 * yy[k] ** 2 for k in range(2)]))
      np.testing.assert_allclose(tape.gradient(out["loss"], q).numpy()[0, 0],
                                 [w[d_1][j], -w[d_1][j] - yy[j]], rtol=1e-5)
