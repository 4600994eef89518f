"""Every random stream of an offline run (binaries/train_offline.py), derived from --seed here.

The values are fixed: checkpoints, run fingerprints, cached default datasets and reported scores
depend on them. A stream's offset keeps it apart from the others of the same run.
"""
from __future__ import annotations

import dataclasses

# The results table's episode seeds: row r plays its episodes in an environment seeded with
# table_eval() + the row's offset (demo_report.RANDOM_OFFSET, ...), the same seed driving the
# evaluation epsilon. Other tools that score a policy "as the demo's table does" (tools/peers)
# use the same seeds.
TABLE_EVAL_OFFSET = 60_000


@dataclasses.dataclass(frozen=True)
class Seeds:
  """The named streams of one offline run seeded `base` (--seed)."""
  base: int

  def weights(self) -> int:  # the learners' initial weights (keras.utils.set_random_seed)
    return self.base

  def learner(self) -> int:  # the learner's own draws (AgentSettings.seed: its deltas)
    return self.base

  def data_order(self) -> int:  # the training batches
    return self.base

  def probe_env(self) -> int:  # the environment read for the game's specs
    return self.base

  def behaviour_policy(self) -> int:  # the default dataset's behaviour policy's own draws
    return self.base

  def collection_env(self) -> int:  # the environment(s) the default dataset is collected in
    return self.base + 1_000

  def diagnostics(self) -> int:  # the confidence report's own draws
    return self.base

  def held_out(self) -> int:  # the batches that pick Fixed-CCVL's delta and set the belief
    return self.base + 777

  def diagnostics_held_out(self) -> int:  # the batches of the confidence diagnostics
    return self.base + 778

  def eval_env(self, step: int) -> int:  # the environment of the evaluation at `step`
    return self.base + 10_000 + step

  def eval_episodes(self, step: int) -> int:  # that evaluation's exploration draws
    return self.base + step

  def adaptive_eval(self) -> int:  # the adaptive policy's episodes in the diagnostics
    return self.base + 30_000

  def diagnostics_env(self) -> int:  # the environments of the count diagnostics
    return self.base + 40_000

  def table_behaviour(self) -> int:  # the scripted behaviour player's draws in the table's row
    return self.base + 7

  def table_eval(self) -> int:  # the results table's rows (plus each row's offset)
    return self.base + TABLE_EVAL_OFFSET
