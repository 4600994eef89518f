"""Every random stream of an offline run (binaries/train_offline.py), derived from --seed here.

The values are fixed: checkpoints, run fingerprints, cached default datasets and reported scores
depend on them. A stream's offset keeps it apart from the others of the same run.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

# The results table's episode seeds: row r plays its episodes in an environment seeded with
# table_eval() + the row's offset (demo_report.RANDOM_OFFSET, ...), the same seed driving the
# evaluation epsilon. Other tools that score a policy "as the demo's table does" (tools/peers)
# use the same seeds.
TABLE_EVAL_OFFSET = 60_000


@dataclasses.dataclass(frozen=True)
class Seeds:
  """The named streams of one offline run seeded `base` (--seed). The evaluation episodes'
  streams (the evaluations during training, the diagnostics' adaptive episodes, the results
  table's rows) are derived from `eval_base` instead when it is given (--eval_seed): runs of
  several training seeds then score their policies on the same episodes."""
  base: int
  eval_base: Optional[int] = None

  @property
  def _eval(self) -> int:
    return self.base if self.eval_base is None else self.eval_base

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

  def count_states(self) -> int:  # count_gram_states' fixed subsample of the dataset's states
    return self.base + 779

  def pool_draws(self) -> int:  # which checkpoints a checkpoint pool holds (--pool_checkpoints)
    return self.base + 780

  def held_out(self) -> int:  # the batches that pick Fixed-CCVL's delta and set the belief
    return self.base + 777

  def diagnostics_held_out(self) -> int:  # the batches of the confidence diagnostics
    return self.base + 778

  def eval_env(self, step: int) -> int:  # the environment of the evaluation at `step`
    return self._eval + 10_000 + step

  def eval_episodes(self, step: int) -> int:  # that evaluation's exploration draws
    return self._eval + step

  def adaptive_eval(self) -> int:  # the adaptive policy's episodes in the diagnostics
    return self._eval + 30_000

  def diagnostics_env(self) -> int:  # the environments of the count diagnostics
    return self.base + 40_000

  def table_behaviour(self) -> int:  # the scripted behaviour player's draws in the table's row
    return self._eval + 7

  def table_eval(self) -> int:  # the results table's rows (plus each row's offset)
    return self._eval + TABLE_EVAL_OFFSET

  def headroom_eval(self) -> int:  # binaries/headroom.py: every policy's episodes (the same)
    return self._eval + 70_000
