"""An offline run's fingerprint: what the learned function depends on, stored with the
checkpoints and compared on resume (training.check_fingerprint): the record's learning
settings, the preset resolved, the dataset's identity and size, and the learner's settings in
force; how a stored fingerprint is normalized before the comparison (CCVL options at their
default are no change) and which keys older runs may lack.
"""
from __future__ import annotations

from typing import Dict, Mapping

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

from ccvl_tf.agents import ccvl_agent
from ccvl_tf.experiments import agent_options

# What the learned function depends on (the run fingerprint): these OfflineConfig fields, N,
# M and policy_delta in force, the CCVL options given, and the preset's training settings
# under the flags given; the others (num_steps, intervals, evaluation settings, root_dir) may
# change between resumes.
FINGERPRINT_FIELDS = ("game", "agent", "subset", "batch_size", "num_deltas",
                      "num_pairs", "policy_delta", "seed", "ccvl_options",
                      "default_dataset_steps", "default_dataset_policy", "behaviour_epsilon")


# Settings of an agent config's record that do not change what is learned (compilation,
# acting): left out of the fingerprint's 'learner'.
_NOT_LEARNED = ("jit_compile", "belief_resample", "collect_epsilon")
# Keys the fingerprint gained after runs were first stored: compared only when the stored
# fingerprint has them (training.check_fingerprint's `since`).
FINGERPRINT_SINCE = ("learner",)


def effective_ccvl_options(options: Mapping[str, object]) -> Dict[str, object]:
  """The CCVL options of `options` that change CCVLConfig's resolved settings: one given at
  its default (e.g. --reading=paper, the default reading) is left out, so that giving a
  default explicitly is no change of configuration. A set that does not resolve is kept
  whole (the run's validation names it)."""
  base = ccvl_agent.CCVLConfig()
  options = dict(options)
  try:
    full = base.with_values(options).record()
  except (ValueError, TypeError):
    return options
  out = dict(options)
  for key in sorted(options):
    rest = {k: v for k, v in out.items() if k != key}
    try:
      if base.with_values(rest).record() == full:
        out = rest
    except (ValueError, TypeError):
      pass
  return out


def normalize_fingerprint(fp: Dict[str, object]) -> Dict[str, object]:
  """A fingerprint as it is compared (training.check_fingerprint's `normalize`): its CCVL
  options without those at their default (`effective_ccvl_options`), both those given
  ('ccvl_options') and those the preset set (top-level keys, e.g. a preset's reading 'paper',
  CCVL's default)."""
  out = dict(fp)
  options = fp.get("ccvl_options")
  if isinstance(options, dict):
    out["ccvl_options"] = effective_ccvl_options(options)
  preset_set = {k: v for k, v in fp.items() if k in agent_options.CCVL_OPTIONS}
  kept = effective_ccvl_options(preset_set)
  return {k: v for k, v in out.items() if k not in preset_set or k in kept}


FINGERPRINT_CHECK = dict(fingerprint_normalize=normalize_fingerprint,
                         fingerprint_since=FINGERPRINT_SINCE)


def fingerprint(saved: Dict[str, object], plan, identity: Dict[str, object],
                num_transitions: int) -> Dict[str, object]:
  """What the checkpoints of the learner `plan` (an offline.config.AgentPlan) were trained on
  (training.check_fingerprint): the learned function's settings of the run's record `saved`
  with the preset resolved, the dataset's identity (dataset.dataset_identity) and its size."""
  out = {k: saved[k] for k in FINGERPRINT_FIELDS}
  out["agent"] = plan.name
  out.update(plan.overrides)  # alpha, learning_rate, ... in force
  out["preset"] = saved["preset"]
  out["ccvl_options"] = dict(sorted(saved["ccvl_options"].items()))
  out["dataset"] = identity
  out["num_transitions"] = int(num_transitions)
  if saved.get("pool_checkpoints"):  # the batches come from other draws of checkpoints
    out["pool"] = {"checkpoints": saved["pool_checkpoints"],
                   "swap_steps": saved["pool_swap_steps"]}
  # Mixed precision changes what is learned (and the optimizer's checkpoint under float16);
  # recorded only when on, so that the fingerprints of float32 runs are unchanged.
  if saved.get("mixed_precision", "off") != "off":
    out["mixed_precision"] = saved["mixed_precision"]
  # XLA and the replicas change CCVL's delta draws (and every learner's rounding): compared
  # on resume like the precision, recorded only when on (default fingerprints unchanged).
  if saved.get("jit_compile"):
    out["jit_compile"] = True
  if saved.get("distribute", "none") != "none":
    out["distribute"] = saved["distribute"]
  # The learner's settings in force (the agent config's defaults under the preset and the
  # flags): a changed default is a change of configuration.
  config = plan.settings.agent_config
  if config is not None:
    out["learner"] = {k: v for k, v in config.record().items() if k not in _NOT_LEARNED}
  return out
