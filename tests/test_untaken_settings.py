"""Settings the chosen learners do not take are refused in one line, at every entry point that
takes agent settings (ccvl_tf/experiments/agent_registry.check_taken: train_offline.py's
--agent, compare.py's and alpha_sweep.py's --methods), and --belief_temperature without a
policy that has a belief. Before, `--agent=cql --reading=bonus --support_threshold=0.5` trained
CQL and recorded the CCVL options, and `--agent=bc --alpha=5 --num_pairs=7` printed
"bc: alpha=5" and recorded alpha 5."""
import os

import pytest

from ccvl_tf.experiments import agent_registry
from ccvl_tf.experiments.compare import config as compare_config
from ccvl_tf.experiments.offline import config as offline_config
from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = forked_binary.binary_env()


def _offline(tmp_path, **kw):
  return offline_config.OfflineConfig(game="Breakout", root_dir=str(tmp_path / "r"), **kw)


def test_check_taken_names_each_untaken_setting_and_who_takes_it():
  # BC takes learning_rate, adam_epsilon, collect_epsilon (agent_registry._BC), nothing else.
  agent_registry.check_taken(["learning_rate"], ["bc"], "--agent=bc", ("learning_rate",))
  with pytest.raises(ValueError) as e:
    agent_registry.check_taken(["learning_rate", "alpha", "num_heads"], ["bc"], "--agent=bc",
                               ("learning_rate", "alpha", "num_heads"))
  msg = str(e.value)
  assert msg.startswith("--agent=bc does not take --alpha (a setting of ccvl, fixed_ccvl, cql, "
                        "aevl, aevl_td), --num_heads (a setting of rem);"), msg
  assert "--learning_rate (" not in msg
  # Only the offered flags are listed as what the agent takes.
  assert msg.endswith("(--agent=bc takes: --learning_rate)"), msg
  # A setting one of several agents takes passes.
  agent_registry.check_taken(["num_heads", "alpha"], ["rem", "cql"], "--methods=REM,CQL", ())


@pytest.mark.parametrize("agent,values,named", [
    ("cql", {"reading": "bonus", "support_threshold": 0.5},
     ("--reading (a setting of ccvl, fixed_ccvl)",
      "--support_threshold (a setting of ccvl, fixed_ccvl)")),
    ("bc", {"alpha": 5.0, "num_pairs": 7},
     ("--alpha (a setting of ccvl, fixed_ccvl, cql, aevl, aevl_td)",
      "--num_pairs (a setting of ccvl, fixed_ccvl)")),
    ("rem", {"num_deltas": 4}, ("--num_deltas (a setting of ccvl, fixed_ccvl)",)),
    ("dqn", {"dr3_coef": 0.1}, ("--dr3_coef (a setting of ccvl, fixed_ccvl, cql, rem, aevl",)),
])
def test_train_offline_refuses_settings_its_agent_does_not_take(tmp_path, agent, values, named):
  with pytest.raises(ValueError) as e:
    _offline(tmp_path, agent=agent, agent_values=values).validate()
  for part in named:
    assert part in str(e.value), str(e.value)
  assert str(e.value).startswith(f"--agent={agent} does not take ")


def test_train_offline_accepts_what_its_agent_takes(tmp_path):
  _offline(tmp_path, agent="cql", agent_values={"alpha": 5.0, "dr3_coef": 0.1}).validate()
  _offline(tmp_path, agent="ccvl", agent_values={"reading": "bonus", "num_pairs": 3}).validate()
  _offline(tmp_path, agent="bc", agent_values={"learning_rate": 1e-3}).validate()


def test_belief_temperature_needs_a_policy_with_a_belief(tmp_path):
  with pytest.raises(ValueError, match=r"^--belief_temperature is a setting of the belief "
                     r"policies of ccvl, fixed_ccvl, aevl, aevl_td; neither --agent=cql nor "
                     r"--reference_agents=bc has one: leave it out$"):
    _offline(tmp_path, agent="cql", reference_agents=("bc",),
             belief_temperature=2.0).validate()
  # A CCVL reference acts with the belief: accepted.
  _offline(tmp_path, agent="cql", reference_agents=("ccvl",), belief_temperature=2.0).validate()
  with pytest.raises(ValueError, match=r"--methods=REM,BC has none of them"):
    compare_config.CompareConfig(methods=("REM", "BC"), belief_temperature=1.0).validate()


@pytest.mark.parametrize("kw,named", [
    ({"methods": ("CQL", "BC"), "num_pairs": 7}, "--num_pairs (a setting of ccvl, fixed_ccvl)"),
    ({"methods": ("CQL", "BC"), "ccvl_options": {"reading": "bonus"}},
     "--reading (a setting of ccvl, fixed_ccvl)"),
    ({"methods": ("CCVL",), "num_heads": 3}, "--num_heads (a setting of rem)"),
])
def test_compare_refuses_settings_no_method_takes(kw, named):
  with pytest.raises(ValueError) as e:
    compare_config.CompareConfig(**kw).validate()
  assert str(e.value).startswith(f"--methods={','.join(kw['methods'])} does not take {named}")


def test_compare_accepts_a_setting_some_method_takes():
  compare_config.CompareConfig(methods=("CQL", "CCVL"), num_pairs=7).validate()
  compare_config.CompareConfig(methods=("REM", "CQL"), num_heads=3, alpha=2.0).validate()


@pytest.mark.slow
@pytest.mark.parametrize("args,message", [
    (["--agent=cql", "--reading=bonus", "--support_threshold=0.5"],
     "train_offline.py: error: --agent=cql does not take --reading (a setting of ccvl, "
     "fixed_ccvl), --support_threshold (a setting of ccvl, fixed_ccvl); leave them out"),
    (["--agent=bc", "--alpha=5", "--num_pairs=7"],
     "train_offline.py: error: --agent=bc does not take --alpha"),
])
def test_the_probes_end_in_one_line_and_write_nothing(tmp_path, args, message):
  root = tmp_path / "r"
  r = forked_binary.run("train_offline.py", ["--game=Breakout", f"--root_dir={root}"] + args,
                        env=ENV, timeout=300)
  assert r.returncode != 0
  lines = r.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith(message), r.stderr[-3000:]
  assert not root.exists()
