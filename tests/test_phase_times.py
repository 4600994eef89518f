"""The phase-times table of train_offline.py (ccvl_tf/experiments/offline/phase_times.py)."""
import time

from ccvl_tf.experiments.offline.phase_times import PhaseTimes


def test_nested_phases_are_subtracted_and_repeated_names_summed():
  timer = PhaseTimes()
  with timer.phase("training"):
    time.sleep(0.05)
    with timer.phase("evaluation"):
      time.sleep(0.1)
  with timer.phase("evaluation"):
    time.sleep(0.05)
  times = timer.as_dict()
  # Outer block ~0.15 s, of which 0.1 s was the nested evaluation.
  assert 0.04 <= times["training"] < 0.09
  assert 0.15 <= times["evaluation"] < 0.25
  assert times["total"] >= times["training"] + times["evaluation"]
  text = timer.render()
  assert text.count("| evaluation |") == 1 and "| training |" in text and "| total |" in text
