"""A research reading of CCVL's update: Algorithm 1's pair loss (paper.py) with the changes of
the ladder from CQL to CCVL (docs/ladder.md), reading 'ablation'.

Each option changes one part of Eq. (cql update) and is the paper's at its default (with every
option at its default the loss is reading 'paper''s): the gap ('max': R(pi) = 0), how delta_1
enters the weight ('constant': no log(1/delta_1)), n(s)^-1 ('off': 1 everywhere) and delta
(`train_delta`: one fixed training delta instead of U(0, 1)). Shapes as paper.py.
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar

from ccvl_tf.algorithm.readings import options
from ccvl_tf.algorithm.readings import paper


@dataclasses.dataclass(frozen=True)
class Ablation(options.LadderOptions):
  """Reading 'ablation': mean_{B,N} max_j L_j (paper.loss) with a research change (the
  options of options.LadderOptions)."""
  NAME: ClassVar[str] = "ablation"
  OBJECTIVE: ClassVar[str] = "algorithm1"

  def loss(self, q_values, actions, target, delta, delta_1, inverse_count, alpha,
           td_loss_type="squared", huber_kappa=1.0):
    del delta
    return paper.loss(q_values, actions, target, delta_1, inverse_count, alpha, td_loss_type,
                      huber_kappa, self.gap, self.delta_weight)
