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
