"""ccvl_tf/experiments/offline/placement.py: a demo run placed against the reported seeds."""
import pytest

from ccvl_tf.experiments.offline import placement

# Hand-made reported seeds: random and behaviour fixed (one set of episodes), BC spread.
REPORTED = {"random": [1.2] * 5, "behaviour (scripted, epsilon 0.25)": [20.3] * 5,
            "BC": [20.0, 22.0, 30.0, 24.0, 26.0]}


def _record(**changes):
  rec = dict(placement.REPORTED_SETTINGS, seed=3, eval_seed=None, alpha=None,
             learning_rate=None, adam_epsilon=None, dr3_coef=None, target_update_period=None,
             root_dir="runs/x")
  rec.update(changes)
  return rec


def test_the_reported_settings_have_no_differences_and_others_are_named():
  assert placement.differences(_record()) == []
  assert placement.differences(_record(reference_agents=("bc", "cql"))) == []  # tuple or list
  diff = placement.differences(_record(batch_size=100, alpha=0.5))
  assert diff == ["batch_size: 100 (reported: 32)", "--alpha=0.5 given (reported: the preset's)"]


def test_rows_inside_below_and_above_the_reported_range():
  """BC's reported per-seed means span [20, 30] with mean 24.4."""
  rows = [{"policy": "BC", "mean": 21.0}]
  assert placement.place(_record(eval_seed=0), rows, REPORTED)[1] == (
      "  BC: 21.00 -- inside the reported range [20.00, 30.00] (mean 24.40)")
  assert "below the reported range [20.00, 30.00]" in placement.place(
      _record(), [{"policy": "BC", "mean": 19.9}], REPORTED)[1]
  assert "above the reported range [20.00, 30.00]" in placement.place(
      _record(), [{"policy": "BC", "mean": 30.1}], REPORTED)[1]


def test_the_rows_without_a_network_must_reproduce_on_the_same_episodes():
  rows = [{"policy": "random", "mean": 1.2}, {"policy": "behaviour (scripted, epsilon 0.25)",
                                               "mean": 20.4}]
  same = placement.place(_record(seed=4, eval_seed=0), rows, REPORTED)
  assert "the reported value, as it must be" in same[1]
  assert "NOT the reported 20.30 on the same episodes" in same[2]
  # --seed 0 without --eval_seed plays the same episodes too; seed 3 plays others.
  assert "as it must be" in placement.place(_record(seed=0), rows, REPORTED)[1]
  assert "reported 1.20 on other episodes" in placement.place(_record(), rows, REPORTED)[1]


def test_a_run_of_other_settings_is_not_placed_and_says_why():
  lines = placement.place(_record(num_steps=10_000), [{"policy": "BC", "mean": 25.0}], REPORTED)
  assert len(lines) == 1 and lines[0].startswith("Not placed against the reported demo")
  assert "num_steps: 10000 (reported: 17500)" in lines[0]
  assert placement.place(_record(), [{"policy": "BC", "mean": 25.0}], {}) == [
      "No reported demo to place this run against."]


@pytest.mark.parametrize("name", ["random", "behaviour (scripted, epsilon 0.25)"])
def test_fixed_rows_are_recognized(name):
  assert placement._is_fixed(name)
  assert not placement._is_fixed("CCVL (adaptive)")


def test_the_adaptive_row_is_placed_only_under_the_reported_belief_setting():
  """The reported adaptive row carried one belief over 10 episodes (belief_episodes 10): a run
  with a fresh belief per episode is placed on its other rows, not on that one."""
  reported = dict(REPORTED, **{"CCVL (adaptive)": [20.0, 22.0, 24.0, 26.0, 28.0]})
  rows = [{"policy": "BC", "mean": 25.0}, {"policy": "CCVL (adaptive)", "mean": 25.0}]
  other = placement.place(_record(belief_episodes=1), rows, reported)
  assert "BC: 25.00 -- inside the reported range" in other[1]
  assert other[2] == ("  CCVL (adaptive): 25.00 -- not placed: reported with belief_episodes 10 "
                      "(this run: 1)")
  same = placement.place(_record(belief_episodes=10), rows, reported)
  assert "CCVL (adaptive): 25.00 -- inside the reported range" in same[2]
  # The reported belief started from the uniform prior (a record without the setting did).
  informed = placement.place(_record(belief_episodes=10, belief_prior="heldout_sum"), rows,
                             reported)
  assert informed[2] == ("  CCVL (adaptive): 25.00 -- not placed: reported with belief_prior "
                         "'uniform' (this run: 'heldout_sum')")
  assert "inside the reported range" in placement.place(_record(
      belief_episodes=10, belief_prior="uniform"), rows, reported)[2]


def test_the_ccvl_rows_are_placed_only_for_the_reported_delta_head():
  """The reported CCVL rows were trained with the cosine-monotone head: a run whose learner
  settings in force name another head is placed on the other rows only."""
  reported = dict(REPORTED, **{"Fixed-CCVL": [20.0, 22.0, 24.0, 26.0, 28.0]})
  rows = [{"policy": "BC", "mean": 25.0}, {"policy": "Fixed-CCVL", "mean": 25.0}]
  other = placement.place(_record(learner_settings={"delta_head": "monotone"}), rows, reported)
  assert "BC: 25.00 -- inside" in other[1]
  assert other[2] == ("  Fixed-CCVL: 25.00 -- not placed: reported with delta_head "
                      "'cosine_monotone' (this run: 'monotone')")
  same = placement.place(_record(learner_settings={"delta_head": "cosine_monotone"}), rows,
                         reported)
  assert "Fixed-CCVL: 25.00 -- inside the reported range" in same[2]


def test_the_header_names_both_machines_when_the_run_recorded_its_own():
  rows = [{"policy": "BC", "mean": 21.0}]
  assert placement.place(_record(), rows, REPORTED)[0].endswith(
      "(5 training seeds on one machine; docs/results/demo_seeds.md):")
  head = placement.place(_record(), rows, REPORTED, machine="AMD EPYC 7B13 (avx2, avx512f; "
                         "ONEDNN_MAX_CPU_ISA=AVX512_CORE)")[0]
  assert (f"5 training seeds on one machine, {placement.REPORTED_MACHINE}; this run trained on "
          f"AMD EPYC 7B13 (avx2, avx512f; ONEDNN_MAX_CPU_ISA=AVX512_CORE): another CPU type "
          f"trains other networks") in head
