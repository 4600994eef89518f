"""ccvl-tf: Confidence-Conditioned Value Learning (Hong, Kumar & Levine, ICLR 2023).

Importing this package sets ``TF_USE_LEGACY_KERAS=1`` before TensorFlow is first
imported, so that ``tf.keras`` is Keras 2 (``tf_keras``, needed by TF-Agents and
TensorFlow Probability) while ``import keras`` is Keras 3 (our own models).
See BUILD.md, "TF_USE_LEGACY_KERAS".
"""
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# Whether the user chose TensorFlow's C++ log level (ccvl_tf.runtime.quiet raises the default to 3
# in the binaries only when they did not).
USER_SET_TF_LOG_LEVEL = "TF_CPP_MIN_LOG_LEVEL" in os.environ
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

if "tensorflow" in sys.modules and os.environ.get("TF_USE_LEGACY_KERAS") != "1":
  raise ImportError(
      "ccvl_tf must be imported before TensorFlow, or TF_USE_LEGACY_KERAS=1 must be "
      "set in the environment: TensorFlow was already imported without it, so "
      "TF-Agents would fail. See BUILD.md, 'Troubleshooting'.")

__version__ = "0.1.0"

# The public API, importable from the package itself: each name is loaded on first use, so
# `import ccvl_tf` stays light (no TensorFlow) and still sets the environment above first.
# name -> the module that defines it (docs/api.md is generated from this table).
_PUBLIC = {
    # the one call that does a run, and what it returns
    "fit": "ccvl_tf.experiments.fit",
    "FitResult": "ccvl_tf.experiments.fit",
    # online fine-tuning of a run (finetune_online.py's call)
    "finetune": "ccvl_tf.experiments.online.finetune",
    # data in (and a policy's play of a Gymnasium environment as such data)
    "Transitions": "ccvl_tf.data.transitions",
    "collect": "ccvl_tf.experiments.offline.gym_dataset",
    # environments by name ('gymnasium:CartPole-v1', 'minatar/Breakout', 'Pong', 'gridworld')
    "make_env": "ccvl_tf.envs.factory",
    # the learners and their settings
    "CCVLAgent": "ccvl_tf.agents.ccvl_agent",
    "CCVLConfig": "ccvl_tf.agents.ccvl_agent",
    "CQLAgent": "ccvl_tf.agents.cql_agent",
    "CQLConfig": "ccvl_tf.agents.cql_agent",
    "REMAgent": "ccvl_tf.agents.rem_agent",
    "REMConfig": "ccvl_tf.agents.rem_agent",
    "AEVLAgent": "ccvl_tf.agents.aevl_agent",
    "AEVLConfig": "ccvl_tf.agents.aevl_agent",
    "BCAgent": "ccvl_tf.agents.bc_agent",
    "BCConfig": "ccvl_tf.agents.bc_agent",
    "DQNLearner": "ccvl_tf.agents.dqn_agent",
    "DQNConfig": "ccvl_tf.agents.dqn_agent",
    "QNetworkConfig": "ccvl_tf.algorithm.networks",
    # the policies (TF-Agents policies; exported as SavedModels)
    "FixedDeltaPolicy": "ccvl_tf.algorithm.policies",
    "ConfidenceAdaptivePolicy": "ccvl_tf.algorithm.policies",
    "load_saved_policy": "ccvl_tf.evaluation.rollouts",
}
__all__ = sorted(_PUBLIC) + ["__version__"]


def __getattr__(name):
  if name not in _PUBLIC:
    raise AttributeError(f"module 'ccvl_tf' has no attribute {name!r}")
  import importlib
  value = getattr(importlib.import_module(_PUBLIC[name]), name)
  globals()[name] = value
  return value


def __dir__():
  return sorted(set(globals()) | set(_PUBLIC))
