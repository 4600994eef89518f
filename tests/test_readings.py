"""CCVL's readings as typed variants (ccvl_tf/algorithm/readings/): the flags of older runs map
to a variant or are refused naming the one to use, and a config records itself as runs did
before (their fingerprints keep resuming)."""
import pytest

from agents import ccvl_agent
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


def test_only_the_paper_reading_takes_the_papers_step():
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
    steps[variant.NAME] = agent._step_objective.__name__  # pylint: disable=protected-access
  assert steps == {"paper": "_paper_objective", "ablation": "_general_objective"}
