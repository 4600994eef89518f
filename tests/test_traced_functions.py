"""Every function the library traces is traced without AutoGraph (TF-Agents' `common.function`,
whose default is autograph=False): the code under it writes its tensor-dependent control flow
with tf.cond / tf.while_loop, so AutoGraph's source rewrite would change nothing and costs
seconds of CPU per traced function (about 5 s of a CCVL train step's 6 s first call on this
machine). A `tf.function` anywhere in the library, the binaries or the tools is refused here;
the train step, a policy's action and the adaptive policy's belief update are traced with the
rewriter watched."""
import ast
import os

import ccvl_tf  # noqa: F401

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.autograph.pyct import transpiler
from tf_agents.trajectories import time_step as ts

from ccvl_tf.algorithm import policies
from ccvl_tf.evaluation import rollouts
from tests import test_ccvl_agent
from tests import test_policies

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tf_function_uses(path):
  """Lines of `path` that reach tf.function (as `tf.function`, `tensorflow.function` or
  `from tensorflow import function`)."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  lines = []
  for node in ast.walk(tree):
    if (isinstance(node, ast.Attribute) and node.attr == "function"
        and isinstance(node.value, ast.Name) and node.value.id in ("tf", "tensorflow")):
      lines.append(node.lineno)
    elif (isinstance(node, ast.ImportFrom) and node.module == "tensorflow"
          and any(a.name == "function" for a in node.names)):
      lines.append(node.lineno)
  return lines


def test_no_module_traces_with_tf_function():
  found = []
  for top in ("ccvl_tf", "binaries", "tools"):
    for root, _, files in os.walk(os.path.join(ROOT, top)):
      for name in sorted(files):
        if name.endswith(".py"):
          path = os.path.join(root, name)
          found += [f"{os.path.relpath(path, ROOT)}:{n}" for n in _tf_function_uses(path)]
  assert not found, ("tf.function (AutoGraph on) at " + ", ".join(found)
                     + ": use tf_agents.utils.common.function (AutoGraph off)")


def test_the_scan_sees_each_spelling(tmp_path):
  path = tmp_path / "m.py"
  path.write_text("import tensorflow as tf\nimport tensorflow\nfrom tensorflow import function\n"
                  "f = tf.function(len)\n@tensorflow.function\ndef g(): pass\n")
  assert sorted(_tf_function_uses(str(path))) == [3, 4, 5]


def test_train_step_and_policies_trace_without_autograph(monkeypatch):
  converted = []
  transform = transpiler.PyToPy.transform

  def spy(self, obj, *args, **kwargs):
    converted.append(getattr(obj, "__qualname__", repr(obj)))
    return transform(self, obj, *args, **kwargs)

  monkeypatch.setattr(transpiler.PyToPy, "transform", spy)
  agent = test_ccvl_agent._tiny_agent()  # pylint: disable=protected-access
  metrics = agent.train_on_batch(test_ccvl_agent._random_batch(8, 5, 3))  # pylint: disable=protected-access
  assert bool(metrics["finite"]) and int(agent.train_step_counter.numpy()) == 1
  greedy = rollouts.CompiledPolicy(agent.policy)
  obs = tf.constant(np.eye(5, dtype=np.float32)[:1])
  step = ts.restart(obs, batch_size=1)
  assert greedy.action(step, greedy.get_initial_state(1)).action.shape == (1,)

  tss, aspec = test_policies.specs(2, 3)
  adaptive = rollouts.CompiledPolicy(policies.ConfidenceAdaptivePolicy(
      tss, aspec, test_policies.linear_q_model(test_policies.W3, test_policies.C3),
      num_grid_deltas=2, gamma=0.5, temperature=1.0, sample_delta=False))
  state = adaptive.get_initial_state(1)
  for time_step in (test_policies.first([[1.0, 0.0]]), test_policies.mid([[0.0, 0.2]], [0.75])):
    out = adaptive.action(time_step, state)
    state = out.state
  # The belief moved (the same numbers as test_policies' hand computation): the trace ran.
  assert float(tf.exp(state["log_belief"])[0, 0]) == pytest.approx(0.562177, abs=1e-5)
  assert converted == [], f"AutoGraph converted {converted}"
