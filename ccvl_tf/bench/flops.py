"""Floating-point work of one CCVL train step, counted from the built network, and the cost of
the paper's Table 2 that follows from it (BUILD.md, "The paper's Table 2: an estimate").

A multiply-add (MAC) of a Conv2D or dense layer is 2 FLOPs; the backward pass of a layer is
counted as twice its forward pass (the input and the weight gradients), the usual convention;
element-wise ops, the cosine embedding, the monotone interpolation and Adam are left out (each
under 1% of the convolutions here). An estimate, not a measurement: the measured step times
are the benchmark's (binaries/benchmark.py).
"""
from __future__ import annotations

import math
from typing import Dict, Mapping

# The paper's Table 2: 17 games x 3 data kinds x 5 methods x 5 seeds, 6.25M gradient steps on
# the 1% data and 12.5M on 5% and initial 10% (the caption of its Atari table).
TABLE2_GAMES = 17
TABLE2_METHODS = 5
TABLE2_SEEDS = 5
TABLE2_STEPS = {"1%": 6_250_000, "5%": 12_500_000, "initial10%": 12_500_000}


def layer_macs(model) -> Dict[str, int]:
  """Multiply-adds per input row (one state) of each Conv2D / dense layer of the built Keras
  functional `model`, by layer name: a Conv2D's output positions x its kernel size; a dense
  layer's leading output positions (FlatDense: one per knot) x its kernel size."""
  out = {}
  for layer in model.layers:
    kernels = [w for w in layer.weights if len(w.shape) >= 2]
    if not kernels:
      continue
    kernel = math.prod(int(d) for d in kernels[0].shape)
    positions = math.prod(int(d) for d in layer.output.shape[1:-1])  # [B, ..., units]
    out[layer.name] = positions * kernel
  return out


def step_flops(macs_per_state: int, batch_size: int, next_state_grad: bool) -> int:
  """FLOPs of one update of a network of `macs_per_state` MACs per state: the online network
  forward and backward on the batch's states (and on the next states too when
  `next_state_grad`: DR3's phi(s') takes a gradient), the target network forward on the next
  states."""
  online_states = batch_size * (2 if next_state_grad else 1)
  forward_equivalents = 3 * online_states + batch_size  # forward + 2 x forward backward
  return 2 * macs_per_state * forward_equivalents


def table2_steps(steps: Mapping[str, int] = TABLE2_STEPS, games: int = TABLE2_GAMES,
                 methods: int = TABLE2_METHODS, seeds: int = TABLE2_SEEDS) -> int:
  """Gradient steps of the whole table: every game x method x seed on each data kind."""
  return games * methods * seeds * sum(steps.values())
