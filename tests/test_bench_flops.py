"""ccvl_tf/bench/flops.py: the multiply-adds of the built Atari network and the step / table
arithmetic, against values worked out by hand from the layer shapes."""
import numpy as np

from ccvl_tf.algorithm import networks
from ccvl_tf.bench import flops


def test_layer_macs_of_the_atari_network_match_the_hand_count():
  net = networks.build_ccvl_network(networks.NATURE_OBSERVATION_SHAPE, np.uint8, 6,
                                    delta_head="cosine_monotone")
  # conv: output positions x kernel (kh * kw * c_in * c_out); dense: in x out per position;
  # the head's layers run at the 17 knots of the monotone head.
  assert flops.layer_macs(net.q_and_phi_model) == {
      "ccvl_q_conv1": 20 * 20 * 8 * 8 * 4 * 32,      # 3,276,800
      "ccvl_q_conv2": 9 * 9 * 4 * 4 * 32 * 64,       # 2,654,208
      "ccvl_q_conv3": 7 * 7 * 3 * 3 * 64 * 64,       # 1,806,336
      "ccvl_q_torso_dense": 3136 * 512,              # 1,605,632
      "ccvl_q_delta_embed": 17 * 64 * 512,           # 557,056
      "ccvl_q_q": 17 * 512 * 6,                      # 52,224
  }


def test_step_flops_and_the_tables_steps():
  # 10 MACs per state, batch 4: DR3 on -> online fwd+bwd on 8 states (3 x 8) + target fwd on 4.
  assert flops.step_flops(10, 4, next_state_grad=True) == 2 * 10 * (24 + 4)
  assert flops.step_flops(10, 4, next_state_grad=False) == 2 * 10 * (12 + 4)
  # 17 games x 5 methods x 5 seeds x (6.25M + 12.5M + 12.5M) steps.
  assert flops.table2_steps() == 425 * 31_250_000 == 13_281_250_000
