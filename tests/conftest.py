"""Test configuration: set TF_USE_LEGACY_KERAS before anything imports TensorFlow."""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
