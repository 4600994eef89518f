"""The paper's CCVL update: Eq. (cql update) as Algorithm 1 writes it (section 5).

For a batch of transitions (s, a_D, r, s'), N confidences delta ~ U(0, 1) per transition and M
pairs delta_{j,1}, delta_{j,2} ~ U(0, delta) per delta (losses.sample_confidences):

  y_j   = r + gamma (1 - terminal) max_a' Q_target(s', a', delta_{j,2})
  w_j   = alpha sqrt(log(1 / delta_{j,1}) n(s)^-1)                       (n(s)^-1 <= 1: n wedge 1)
  L_j   = w_j (logsumexp_a Q(s, a, delta) - Q(s, a_D, delta))            (Eq. cql update, with
          + TD(Q(s, a_D, delta) - y_j)                                     R(pi) the entropy)
  loss  = mean over transitions and deltas of max_j L_j  +  c DR3(phi)    (Algorithm 1, line 6)

n(s)^-1 is the linear estimate phi(s)^T (Phi^T Phi)^-1 phi(s) of the last layer's features
(ccvl_tf/algorithm/counts.py). TD is 1/2 x^2 in the paper (td_loss 'squared'; CCVLConfig's default
is Huber). This is CCVLConfig's default reading, `Paper` (reading 'paper'), which takes no
option; `objective` below is the whole step objective of the lower bound, with nothing else in
it, and the one the agent's tape calls (`Paper.objective`). The research readings sit beside it (ablation.py, bound.py, bonus.py). Shapes: B batch, N
deltas, M pairs, A actions, D features.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, ClassVar, Dict, Tuple

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import tensorflow as tf

from ccvl_tf.algorithm import losses
from ccvl_tf.algorithm import networks
from ccvl_tf.algorithm.readings import options


def regularizer_weight(delta_1: tf.Tensor, inverse_count: tf.Tensor, alpha: float,
                       delta_weight: str = "sqrt_log") -> tf.Tensor:
  """w_j = alpha sqrt(log(1/delta_{j,1}) n(s)^-1): delta_1 [B, N, M], n(s)^-1 [B] -> [B, N, M],
  no gradient (delta_weight 'constant', a research option: alpha sqrt(n(s)^-1))."""
  inv_n = tf.stop_gradient(tf.cast(inverse_count, tf.float32))[:, None, None]  # [B] -> [B,1,1]
  log_inv_d1 = losses.log_inverse_delta(delta_1, delta_weight)     # log(1/delta_1) [B, N, M]
  return tf.stop_gradient(alpha * tf.sqrt(log_inv_d1 * inv_n))     # [B, N, M]


def pair_losses(q_sa: tf.Tensor, gap: tf.Tensor, target: tf.Tensor, delta_1: tf.Tensor,
                inverse_count: tf.Tensor, alpha: float, td_loss_type: str = "squared",
                huber_kappa: float = 1.0, delta_weight: str = "sqrt_log"
                ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
  """L_j of every transition, delta and pair: q_sa = Q(s, a_D, delta) [B, N], gap [B, N],
  target y_j [B, N, M], delta_1 [B, N, M], n(s)^-1 [B] -> (L, w_j gap, TD), each [B, N, M]."""
  weight = regularizer_weight(delta_1, inverse_count, alpha, delta_weight)  # [B, N, M]
  reg = weight * gap[:, :, None]                       # [B, N, 1] broadcast -> [B, N, M]
  td = losses.td_loss(q_sa[:, :, None] - tf.stop_gradient(target), td_loss_type,
                      huber_kappa)                                 # [B, N, M]
  return reg + td, reg, td


def max_over_pairs(pair_loss: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
  """max_j L_j: [B, N, M] -> ([B, N], argmax j [B, N] int32); the gradient flows through the
  selected pair only (Algorithm 1, line 6)."""
  return (tf.reduce_max(pair_loss, axis=-1),
          tf.argmax(pair_loss, axis=-1, output_type=tf.int32))


def loss(q_values: tf.Tensor, actions: tf.Tensor, target: tf.Tensor, delta_1: tf.Tensor,
         inverse_count: tf.Tensor, alpha: float, td_loss_type: str = "squared",
         huber_kappa: float = 1.0, gap: str = "logsumexp", delta_weight: str = "sqrt_log"
         ) -> Dict[str, tf.Tensor]:
  """mean_{B, N} max_j L_j from Q(s, ., delta) [B, N, A], a_D [B], y_j [B, N, M], delta_{j,1}
  [B, N, M] and n(s)^-1 [B]. `gap` 'max' (R(pi) = 0) and `delta_weight` 'constant' are
  research options; the defaults are the paper's.

  Returns: 'loss' (scalar), 'pair_losses' [B, N, M], 'max_losses' and 'argmax_j' [B, N],
  'regularizer' and 'td' [B, N, M] (the two terms of L_j), 'gap' and 'q_sa' [B, N].
  """
  losses.validate_alpha(alpha)
  gap_value, q_sa = losses.cql_gap(q_values, actions, gap)         # [B, N], [B, N]
  pair, reg, td = pair_losses(q_sa, gap_value, target, delta_1, inverse_count, alpha,
                              td_loss_type, huber_kappa, delta_weight)  # [B, N, M] each
  max_l, arg_j = max_over_pairs(pair)                              # [B, N]
  return {"loss": tf.reduce_mean(max_l), "pair_losses": pair, "max_losses": max_l,
          "argmax_j": arg_j, "regularizer": reg, "td": td, "gap": gap_value, "q_sa": q_sa}


def q_and_targets(online: networks.CCVLNetwork, target: networks.CCVLNetwork,
                  batch: Dict[str, tf.Tensor], delta: tf.Tensor, delta_2: tf.Tensor,
                  gamma: float, with_next_phi: bool, training: bool = False):
  """The network passes of one step: the online network's outputs at (s, delta) (a dict:
  'q' [B, N, A], 'phi' [B, D], and with a support head 'q_raw', 'support_logits'), phi(s')
  [B, D] with gradients when `with_next_phi` (DR3; one torso pass over [s; s']) else None, and
  the targets y_j [B, N, M] of the target network at delta_2 [B, N, M] (no gradient)."""
  obs, next_obs = batch["observation"], batch["next_observation"]
  b = tf.shape(obs)[0]
  n, m = tf.shape(delta_2)[1], tf.shape(delta_2)[2]
  if with_next_phi:
    out, next_phi = networks.outputs_and_next_phi(online, obs, next_obs, delta,
                                                  training=training)  # [B,N,A], [B,D], [B,D]
  else:
    out = online.q_and_phi_model({"observation": obs, "delta": delta}, training=training)
    next_phi = None
  # [B, N, M] -> [B, N*M] (row-major: column i*M + j is pair j of delta i).
  next_q = tf.stop_gradient(target.q_model(
      {"observation": next_obs, "delta": tf.reshape(delta_2, [b, n * m])}))  # [B, N*M, A]
  targets = losses.td_targets(batch["reward"], batch["terminal"], gamma, next_q)  # [B, N*M]
  return out, next_phi, tf.reshape(targets, [b, n, m])            # [B, N*M] -> [B, N, M]


def objective(online: networks.CCVLNetwork, target: networks.CCVLNetwork,
              batch: Dict[str, tf.Tensor], delta: tf.Tensor, delta_1: tf.Tensor,
              delta_2: tf.Tensor, inverse_count_fn: Callable[[tf.Tensor, tf.Tensor], tf.Tensor],
              config, training: bool = False) -> Dict[str, tf.Tensor]:
  """The step objective of Algorithm 1 at sampled confidences delta [B, N], delta_1, delta_2
  [B, N, M]: the loss above plus c DR3 (config.dr3_coef; config also gives gamma, alpha,
  td_loss, huber_kappa). inverse_count_fn(observation, phi) -> n(s)^-1 [B].

  Returns the scalars 'loss', 'ccvl_loss', 'dr3_penalty', 'td_term', 'regularizer_term',
  'cql_gap', 'q_data', 'inverse_count' and phi(s) 'phi' [B, D].
  """
  out, next_phi, targets = q_and_targets(online, target, batch, delta, delta_2, config.gamma,
                                         config.dr3_coef > 0, training)
  phi = out["phi"]                                                 # [B, D]
  inv_count = tf.stop_gradient(inverse_count_fn(batch["observation"], phi))  # [B]
  res = loss(out["q"], batch["action"], targets, delta_1, inv_count, config.alpha,
             config.td_loss, config.huber_kappa)
  total = res["loss"]
  if next_phi is not None:
    dr3 = losses.dr3_penalty(phi, next_phi)
    total = total + config.dr3_coef * dr3
  else:
    dr3 = tf.zeros([])
  return {"loss": total, "ccvl_loss": res["loss"],
          "dr3_penalty": dr3, "td_term": tf.reduce_mean(res["td"]),
          "regularizer_term": tf.reduce_mean(res["regularizer"]),
          "cql_gap": tf.reduce_mean(res["gap"]), "q_data": tf.reduce_mean(res["q_sa"]),
          "inverse_count": tf.reduce_mean(inv_count), "phi": phi}


@dataclasses.dataclass(frozen=True)
class Paper(options.Reading):
  """Reading 'paper': Eq. (cql update) as Algorithm 1 writes it, the `loss` and `objective`
  above. No option:
  the CQL(H) gap, the weight alpha sqrt(log(1/delta_1) n(s)^-1) with the linear n(s)^-1,
  delta ~ U(0, 1), no data-support head."""
  NAME: ClassVar[str] = "paper"
  OBJECTIVE: ClassVar[str] = "algorithm1"

  def loss(self, q_values, actions, target, delta, delta_1, inverse_count, alpha,
           td_loss_type="squared", huber_kappa=1.0):
    del delta
    return loss(q_values, actions, target, delta_1, inverse_count, alpha, td_loss_type,
                huber_kappa)

  # The reading's step objective is the module's `objective` itself (it takes no option).
  objective = staticmethod(objective)
