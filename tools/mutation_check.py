#!/usr/bin/env python3
"""Mutation check: do the fast tests notice a wrong gradient path or a wrong expected value?

First checks that every selected mutation's pattern occurs exactly once in its file of the
working tree, and otherwise refuses to run, naming the mutation, the file and the pattern: a
pattern that matches nothing would test nothing (tests/test_mutation_check.py checks the whole
list the same way). Then copies the repository (without .venv, runs, results, .git and caches)
to a temporary directory, and for each mutation below: applies it by a textual patch of one
source file, runs the tests chosen for it in the copy with the repository's .venv Python
(`pytest -x`), and restores the file. A mutation is *caught* when a test fails; the table
names the first failing test. Before the mutations, the union of the chosen tests must pass on
the unmutated copy (otherwise "caught" would mean nothing).

Exit status: 0 when every mutation is caught; 1 when one SURVIVED, a pattern is missing or
ambiguous (then nothing runs), a run errored or timed out, or the baseline fails. The working
tree is never touched. Usage (from the repository root; about 5 minutes on 2 cores):

  .venv/bin/python tools/mutation_check.py             # all mutations
  .venv/bin/python tools/mutation_check.py --list      # names, files and tests only
  .venv/bin/python tools/mutation_check.py --only huber --only td_targets
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import List, Optional, Sequence, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXCLUDE = (".venv", "runs", "results", ".git", "__pycache__", ".pytest_cache")


@dataclasses.dataclass(frozen=True)
class Mutation:
  """One textual mutation: replace `pattern` (must occur exactly once) in `path`."""
  name: str
  description: str
  path: str
  pattern: str
  replacement: str
  tests: Tuple[str, ...]


LOSS_TESTS = ("tests/test_losses.py",)
SHORT_RUN_TESTS = "tests/test_short_run_regression.py"
MUTATIONS = (
    # ---- the three gradient mutations --------------------------------------------
    Mutation("ccvl_gap_stop_gradient",
             "CCVL: the CQL gap under tf.stop_gradient (same loss value)",
             "ccvl_tf/algorithm/readings/paper.py",
             "reg = weight * gap[:, :, None]",
             "reg = weight * tf.stop_gradient(gap[:, :, None])",
             LOSS_TESTS + ("tests/test_ccvl_agent.py::"
                           "test_objective_gradient_by_hand_on_the_tiny_linear_network",)),
    Mutation("ccvl_gap_stop_gradient_gridworld",
             "the same, seen by the gridworld-vs-tabular training test alone",
             "ccvl_tf/algorithm/readings/paper.py",
             "reg = weight * gap[:, :, None]",
             "reg = weight * tf.stop_gradient(gap[:, :, None])",
             ("tests/test_ccvl_agent.py::test_gridworld_training_against_tabular_ccvl",)),
    Mutation("td_targets_no_stop_gradient",
             "td_targets: tf.stop_gradient removed from the Bellman target",
             "ccvl_tf/algorithm/losses.py",
             "return tf.stop_gradient(target)",
             "return target",
             LOSS_TESTS),
    Mutation("huber_kappa_dropped",
             "Huber: kappa factor of the linear part dropped",
             "ccvl_tf/algorithm/losses.py",
             "huber_kappa * (abs_x - quad)",
             "(abs_x - quad)",
             LOSS_TESTS + ("tests/test_cql_agent.py",)),
    # ---- other gradient paths ------------------------------------------------------------------
    Mutation("regularizer_weight_gradient",
             "CCVL: stop_gradient removed from alpha sqrt(log(1/delta_1) n(s)^-1)",
             "ccvl_tf/algorithm/readings/paper.py",
             "return tf.stop_gradient(alpha * tf.sqrt(log_inv_d1 * inv_n))",
             "return alpha * tf.sqrt(log_inv_d1 * inv_n)",
             LOSS_TESTS),
    Mutation("max_over_pairs_is_mean",
             "CCVL: mean over the M pairs instead of max_j",
             "ccvl_tf/algorithm/readings/paper.py",
             "return (tf.reduce_max(pair_loss, axis=-1),",
             "return (tf.reduce_mean(pair_loss, axis=-1),",
             LOSS_TESTS),
    Mutation("ablation_objective_q_stop_gradient",
             "CCVL: the online Q(s, ., delta) under tf.stop_gradient (the ablation reading's "
             "objective)",
             "ccvl_tf/algorithm/readings/ablation.py",
             'res = paper.loss(out["q"], batch["action"]',
             'res = paper.loss(tf.stop_gradient(out["q"]), batch["action"]',
             ("tests/test_ccvl_agent.py::"
              "test_objective_gradient_by_hand_on_the_tiny_linear_network",)),
    Mutation("paper_objective_q_stop_gradient",
             "CCVL: the online Q(s, ., delta) under tf.stop_gradient (the paper's objective)",
             "ccvl_tf/algorithm/readings/paper.py",
             'res = loss(out["q"], batch["action"]',
             'res = loss(tf.stop_gradient(out["q"]), batch["action"]',
             ("tests/test_ccvl_agent.py::"
              "test_objective_gradient_by_hand_on_the_tiny_linear_network",)),
    Mutation("cql_target_gradient",
             "CQL: stop_gradient removed from the target in cql_loss",
             "ccvl_tf/algorithm/losses.py",
             "td_loss(q_sa - tf.stop_gradient(target), td_loss_type, huber_kappa)",
             "td_loss(q_sa - target, td_loss_type, huber_kappa)",
             LOSS_TESTS),
    Mutation("cql_gap_stop_gradient",
             "CQL / AEVL: the CQL gap under tf.stop_gradient in cql_loss",
             "ccvl_tf/algorithm/losses.py",
             "tf.reduce_mean(td + alpha * gap)",
             "tf.reduce_mean(td + alpha * tf.stop_gradient(gap))",
             ("tests/test_cql_agent.py", "tests/test_aevl_agent.py")),
    Mutation("aevl_member_sum_dropped",
             "AEVL: mean over members instead of the sum (each member's gradient / E)",
             "ccvl_tf/agents/aevl_agent.py",
             'ensemble_loss = members * res["loss"]',
             'ensemble_loss = res["loss"]',
             ("tests/test_aevl_agent.py",)),
    Mutation("rem_online_mixture_is_mean",
             "REM: online heads averaged instead of mixed with alpha",
             "ccvl_tf/agents/rem_agent.py",
             "q = losses.convex_combination(q_heads, weights)",
             "q = tf.reduce_mean(q_heads, axis=1)",
             ("tests/test_rem_agent.py",)),
    Mutation("upper_softmin_stop_gradient",
             "upper bound: softmin_a Q_u under tf.stop_gradient",
             "ccvl_tf/algorithm/upper_losses.py",
             "gap = q_sa + tf.reduce_logsumexp(-q_values, axis=-1)",
             "gap = q_sa + tf.stop_gradient(tf.reduce_logsumexp(-q_values, axis=-1))",
             ("tests/test_bounds_agent.py::test_upper_loss_gradient_wrt_q_by_hand",)),
    Mutation("upper_bonus_subtracted",
             "upper bound (bonus form): the bonus subtracted from the target instead of added",
             "ccvl_tf/algorithm/upper_losses.py",
             "y = tf.reduce_min(target, axis=-1) + weight",
             "y = tf.reduce_min(target, axis=-1) - weight",
             ("tests/test_bounds_fixed_points.py::test_upper_bonus_loss_by_hand",
              "tests/test_bounds_fixed_points.py::"
              "test_chain_closed_form_bounds_are_the_fixed_points_of_the_bonus_losses")),
    Mutation("upper_bonus_target_max_over_pairs",
             "upper bound (bonus form): max over the candidate targets instead of the min",
             "ccvl_tf/algorithm/upper_losses.py",
             "y = tf.reduce_min(target, axis=-1) + weight",
             "y = tf.reduce_max(target, axis=-1) + weight",
             ("tests/test_bounds_fixed_points.py::test_upper_bonus_loss_by_hand",)),
    # ---- n(s)^-1 that follows the online data ---------------------------------------
    Mutation("online_count_ignores_spi",
             "online counts: n_on grows by the online rows, not rows / SPI",
             "ccvl_tf/algorithm/counts.py",
             "tf.float64) / self.samples_per_insert)",
             "tf.float64))",
             ("tests/test_counts.py",)),
    Mutation("online_normalization_not_frozen",
             "online counts: the normalization's running mean still updated by online batches",
             "ccvl_tf/algorithm/counts.py",
             "      self._fold(phi[self.online_rows:], self.second_moment, self.num_seen)\n"
             "      return\n",
             "      self._fold(phi[self.online_rows:], self.second_moment, self.num_seen)\n",
             ("tests/test_counts.py",)),
    Mutation("online_gram_without_online_data",
             "online counts: Phi^T Phi without the n_on C_on part",
             "ccvl_tf/algorithm/counts.py",
             "g += tf.cast(self.online_size, tf.float32) * self.online_moment",
             "g += 0.0 * self.online_moment",
             ("tests/test_counts.py",)),
    Mutation("online_counts_keep_the_offline_trace",
             "agent: start_online_counts does not rebuild the traced train step",
             "ccvl_tf/agents/ccvl_agent.py",
             "    self._train_on_batch_fn = common.function(self._train_batch)\n"
             "    return True",
             "    return True",
             ("tests/test_online_counts.py",)),
    # ---- values that used to be copied from the implementation --------------------------------
    Mutation("cql_gap_sign_flipped",
             "CQL(H) gap with the opposite sign",
             "ccvl_tf/algorithm/losses.py",
             "return tf.reduce_logsumexp(q_values, axis=-1) - q_sa, q_sa",
             "return q_sa - tf.reduce_logsumexp(q_values, axis=-1), q_sa",
             LOSS_TESTS),
    Mutation("bounds_safe_set_ignores_beta",
             "Eq. upper policy: safe set {a : Q_l >= max Q_l} (beta ignored)",
             "ccvl_tf/algorithm/policies.py",
             "in_set = q_lower >= tf.cast(beta, tf.float32) * best",
             "in_set = q_lower >= best",
             ("tests/test_bounds_agent.py::test_exploration_policy_is_eq_upper_policy",)),
    Mutation("value_iteration_mean_backup",
             "value iteration backs up the mean over actions instead of the max",
             "ccvl_tf/tabular/value_iteration.py",
             "q_new = r + gamma * P @ q.max(axis=1)",
             "q_new = r + gamma * P @ q.mean(axis=1)",
             ("tests/test_gridworld.py",)),
    Mutation("reference_score_typo",
             "a transposed digit in one Nature-DQN reference score (Qbert)",
             "ccvl_tf/envs/scores.py",
             '"Qbert": 10596.0',
             '"Qbert": 10569.0',
             ("tests/test_scores.py::test_normalized_score_by_hand",)),
    # ---- what a short offline run trains (tests/test_short_run_regression.py) -----------------
    Mutation("short_run_td_scaled",
             "CCVL's pair loss: the TD term scaled by 1.01 in L_j (not in its metric)",
             "ccvl_tf/algorithm/readings/paper.py",
             "  return reg + td, reg, td",
             "  return reg + 1.01 * td, reg, td",
             (SHORT_RUN_TESTS,)),
    Mutation("short_run_learner_seed",
             "train_offline.py's learner seeded --seed + 1 (its delta samples)",
             "ccvl_tf/experiments/offline/config.py",
             "reward_clip=1.0, seed=seeds.learner()))",
             "reward_clip=1.0, seed=seeds.learner() + 1))",
             (SHORT_RUN_TESTS,)),
    Mutation("short_run_network_default",
             "the network's default hidden layer back at 512 units (a default the binary uses)",
             "ccvl_tf/algorithm/networks.py",
             "  hidden_units: int = 0\n",
             "  hidden_units: int = 512\n",
             (SHORT_RUN_TESTS,)),
)


def copy_repo(dest: str) -> None:
  """The repository without EXCLUDE directories (at any depth) and compiled files."""
  shutil.copytree(REPO, dest, ignore=shutil.ignore_patterns(*EXCLUDE, "*.pyc"), symlinks=True)


def test_env(root: str) -> dict:
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2",
             PYTHONDONTWRITEBYTECODE="1")
  env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
  return env


def check_imports_resolve_to(root: str, python: str) -> None:
  """The copy, not the editable install of the repository, must be what the tests import."""
  code = "import ccvl_tf, agents; print(ccvl_tf.__file__); print(agents.__file__)"
  out = subprocess.run([python, "-c", code], cwd=root, env=test_env(root), capture_output=True,
                       text=True, timeout=300)
  if out.returncode != 0:
    raise SystemExit(f"mutation_check: importing the copy failed:\n{out.stderr[-2000:]}")
  for line in out.stdout.split():
    if not os.path.realpath(line).startswith(os.path.realpath(root) + os.sep):
      raise SystemExit(f"mutation_check: the copy imports {line}, not its own files; refusing")


def run_tests(root: str, python: str, tests: Sequence[str], timeout: float
              ) -> Tuple[Optional[int], str, float]:
  """(pytest exit code or None on timeout, output, seconds) for `tests` in `root`."""
  cmd = [python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
         "-rfE", *tests]
  t0 = time.monotonic()
  try:
    out = subprocess.run(cmd, cwd=root, env=test_env(root), capture_output=True, text=True,
                         timeout=timeout)
  except subprocess.TimeoutExpired as e:
    text = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
    return None, text, time.monotonic() - t0
  return out.returncode, out.stdout + out.stderr, time.monotonic() - t0


def failed_tests(output: str) -> List[str]:
  return re.findall(r"^(?:FAILED|ERROR) (\S+)", output, flags=re.M)


def pattern_problems(root: str, mutations: Sequence[Mutation]) -> List[str]:
  """One message per mutation that cannot apply in `root`: its file is missing, its pattern
  does not occur exactly once there, or its replacement is the pattern itself."""
  problems = []
  for m in mutations:
    path = os.path.join(root, m.path)
    if not os.path.isfile(path):
      problems.append(f"mutation {m.name}: file {m.path} does not exist")
      continue
    with open(path) as f:
      count = f.read().count(m.pattern)
    if count != 1:
      problems.append(f"mutation {m.name}: pattern found {count} times in {m.path} "
                      f"(must be exactly once): {m.pattern!r}")
    elif m.replacement == m.pattern:
      problems.append(f"mutation {m.name}: replacement equals the pattern in {m.path}")
  return problems


def apply(root: str, m: Mutation) -> Tuple[Optional[str], str]:
  """Patches the copy; returns (original text or None, problem message)."""
  path = os.path.join(root, m.path)
  with open(path) as f:
    text = f.read()
  count = text.count(m.pattern)
  if count != 1:
    return None, f"PATTERN FOUND {count} TIMES in {m.path}: {m.pattern!r}"
  with open(path, "w") as f:
    f.write(text.replace(m.pattern, m.replacement))
  return text, ""


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--only", action="append", default=[],
                      help="run the mutations whose name contains this (repeatable)")
  parser.add_argument("--list", action="store_true", help="list the mutations and exit")
  parser.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"),
                      help="interpreter with the test dependencies (default: the repo .venv)")
  parser.add_argument("--timeout", type=float, default=900.0, help="seconds per pytest run")
  parser.add_argument("--keep", action="store_true", help="keep the temporary copy")
  args = parser.parse_args(argv)

  selected = [m for m in MUTATIONS if not args.only or any(o in m.name for o in args.only)]
  if not selected:
    parser.error(f"--only {args.only} matches none of {[m.name for m in MUTATIONS]}")
  problems = pattern_problems(REPO, selected)
  if args.list:
    for m in selected:
      print(f"{m.name}: {m.description}\n  {m.path}: {m.pattern!r} -> {m.replacement!r}\n"
            f"  tests: {' '.join(m.tests)}")
  for p in problems:
    print(f"mutation_check: {p}", file=sys.stderr)
  if problems:
    print(f"mutation_check: {len(problems)} mutation(s) cannot apply; refusing to run any",
          file=sys.stderr)
    return 1
  if args.list:
    return 0

  tmp = tempfile.mkdtemp(prefix="ccvl-mutation-")
  root = os.path.join(tmp, "repo")
  t_start = time.monotonic()
  try:
    copy_repo(root)
    check_imports_resolve_to(root, args.python)
    print(f"copy: {root}", flush=True)
    union = list(dict.fromkeys(t for m in selected for t in m.tests))
    code, output, secs = run_tests(root, args.python, union, args.timeout)
    if code != 0:
      print(output[-4000:])
      print(f"BASELINE FAILS (pytest exit {code}) on the unmutated copy: "
            f"{', '.join(failed_tests(output)) or 'see output'}; nothing to conclude")
      return 1
    print(f"baseline: {len(union)} test targets pass unmutated ({secs:.0f} s)", flush=True)

    rows = []
    for m in selected:
      original, problem = apply(root, m)
      if original is None:
        rows.append((m, problem, 0.0, False))
        print(f"{m.name}: {problem}", flush=True)
        continue
      try:
        code, output, secs = run_tests(root, args.python, m.tests, args.timeout)
      finally:
        with open(os.path.join(root, m.path), "w") as f:
          f.write(original)
      failed = failed_tests(output)
      if code is None:
        result, ok = f"TIMEOUT after {secs:.0f} s", False
      elif code == 0:
        result, ok = "SURVIVED", False
      elif code == 1 and failed:
        result, ok = f"caught by {failed[0]}", True
      else:
        result, ok = f"INCONCLUSIVE: pytest exit {code} {' '.join(failed)}", False
        print(output[-3000:])
      rows.append((m, result, secs, ok))
      print(f"{m.name}: {result} ({secs:.0f} s)", flush=True)
  finally:
    if args.keep:
      print(f"kept {tmp}")
    else:
      shutil.rmtree(tmp, ignore_errors=True)

  width = max(len(m.name) for m, *_ in rows)
  print(f"\n{'mutation':<{width}}  {'time':>5}  result")
  print(f"{'-' * width}  {'-' * 5}  {'-' * 40}")
  for m, result, secs, _ in rows:
    print(f"{m.name:<{width}}  {secs:4.0f}s  {result}")
  bad = [m.name for m, _, _, ok in rows if not ok]
  print(f"\n{len(rows) - len(bad)}/{len(rows)} mutations caught in "
        f"{time.monotonic() - t_start:.0f} s" + (f"; NOT caught: {', '.join(bad)}" if bad else ""))
  return 1 if bad else 0


if __name__ == "__main__":
  sys.exit(main())
