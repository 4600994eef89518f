"""Test configuration: set TF_USE_LEGACY_KERAS before anything imports TensorFlow."""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Every process a test starts (a binary, a forked server, a Ray worker) imports this checkout's
# ccvl_tf, not whichever checkout the environment has installed (another worktree's).
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (_ROOT, os.environ.get("PYTHONPATH")) if p)

# The local cache (frame stores, verified replay files) of the test session, not the user's.
import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

_CACHE = tempfile.mkdtemp(prefix="ccvl-test-cache-")
os.environ["CCVL_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)


import uuid  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture
def ram_root():
  """A fresh directory on TensorFlow's in-memory file system (ram://), the stand-in for a
  remote path (gs://) in the tests of remote inputs; removed afterwards."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  root = "ram://ccvl_test_{}".format(uuid.uuid4().hex)
  tf.io.gfile.makedirs(root)
  yield root
  tf.io.gfile.rmtree(root)
