"""The paper's illustrative gridworld experiment (Sec. "Illustrative Example on Gridworld").

More in docs/library.md "Module notes", `ccvl_tf/experiments/gridworld/runner.py`.
"""
from __future__ import annotations

import csv
import dataclasses
import os
import time

import numpy as np

from ccvl_tf.algorithm import belief
from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime import run_settings
from ccvl_tf.runtime.config_flags import setting
from ccvl_tf.tabular.gridworld import (DATA_SLIP_PROB, DEFAULT_EXPERIMENT_LAYOUT, EVAL_SLIP_PROB,
                                       LAYOUTS, GridWorld, layout)
from ccvl_tf.experiments.gridworld import family as family_lib
from ccvl_tf.experiments.gridworld import plots
from ccvl_tf.tabular import dataset as dataset_lib
from ccvl_tf.tabular import evaluation as ev_lib
from ccvl_tf.tabular import learners
from ccvl_tf.tabular import value_iteration as vi
from ccvl_tf.runtime import strict_json

DEFAULT_ALPHAS = (0.01, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


def parse_readings(values) -> tuple:
  """--readings -> a tuple of readings; ValueError naming the flag."""
  for r in values:
    if r not in learners.READINGS:
      raise ValueError(f"--readings must be among {', '.join(learners.READINGS)}, got {r!r}")
  return tuple(values)


def parse_alphas(values) -> tuple:
  """--alphas (strings) -> a tuple of floats; ValueError naming the flag."""
  try:
    return tuple(float(a) for a in values)
  except ValueError as e:
    raise ValueError(f"--alphas must be numbers, got {values}: {e}") from None
# CQL: Eq. (cql). CCVL: Eq. (cql update) + confidence-adaptive policy (the paper's method).
# Fixed-CCVL: Eq. (cql update) at the delta of lowest Bellman error on the data.
# CCVL-bonus: Eq. (update) (explicit bonuses, Theorem 1) + the same adaptive policy.
# CCVL and Fixed-CCVL are solved in each reading; their rows name it (reading "" otherwise).
METHODS = ("CQL", "Fixed-CCVL", "CCVL", "CCVL-bonus")
# oracle.csv: per (reading, alpha, seed) every grid delta's greedy policy's exact normalized
# return at p = 0.15 and route, the data's mean squared Bellman error at that delta, the
# belief's final probability of it, the evaluation episodes acted with it and whether
# Fixed-CCVL picks it; one CQL row per (alpha, seed) (its return and route; the rest empty).
ORACLE_HEADER = ("method", "reading", "alpha", "seed", "delta", "normalized_return", "route",
                 "data_bellman_error", "final_belief", "episodes_acted", "fixed_choice")


def method_label(method: str, reading: str) -> str:
  """'CCVL [max+monotone]' for a method solved in a reading, else the method."""
  return f"{method} [{reading}]" if reading else method


@dataclasses.dataclass
class Config:
  """Settings of one run; defaults reproduce the paper's setup (see the module notes). The
  `setting` fields are binaries/gridworld.py's flags (ccvl_tf/runtime/config_flags.py)."""
  output_dir: str = setting(help="Directory for the CSV/PNG/JSON outputs.", flag_default=None,
                            required=True, output="dir")
  layout: str = setting(DEFAULT_EXPERIMENT_LAYOUT,
                        "The gridworld's layout by name (docs/gridworld_layout.md).",
                        enum_values=sorted(LAYOUTS))
  seeds: int = setting(10, "Datasets / evaluation runs per alpha (>= 1).")
  # The datasets' seeds; the coverage studies draw from seeds disjoint from them.
  first_seed: int = run_settings.borrow("first_seed")
  readings: tuple = setting(learners.READINGS,
                            "Readings of Eq. (cql update) CCVL and Fixed-CCVL are solved in.",
                            kind="list", flag_default=list(learners.READINGS),
                            parse=parse_readings)
  family_seeds: int = setting(2, "Datasets of the family study (family.csv), from first_seed.")
  family_steps: int = setting(6000, "Train steps of each neural family run (0: exact rows only).")
  theorem2_datasets: int = setting(200, "Resampled datasets for the Theorem 2 coverage study.")
  alphas: tuple = setting(DEFAULT_ALPHAS, "alpha grid of the sweep (Fig. 1 left), each >= 0.",
                          kind="list", flag_default=[str(a) for a in DEFAULT_ALPHAS],
                          parse=parse_alphas)
  # K, the quantized delta grid (midpoints of K bins of (0, 1)); its flag and summary.json key
  # are gridworld.py's --num_deltas / num_deltas.
  num_grid_deltas: int = setting(
      10, "K, size of the quantized delta grid.", flag_name="num_deltas")
  # Evaluation episodes per seed: CCVL's belief adapts across them.
  eval_episodes: int = run_settings.borrow("eval_episodes")
  adaptation_alpha: float = setting(0.2, "alpha of Fig. 1 right.")
  trajectory_alpha: float = setting(  # Fig. 2 ("for large settings of alpha")
      1.0, "alpha of Fig. 2.")
  coverage_datasets: int = setting(200, "Resampled datasets for the Theorem 1 coverage study.")
  coverage_alpha: float = setting(  # a practical alpha, shown beside the theorem's alpha
      0.2, "A practical alpha shown beside the theorem's in coverage.csv.")
  num_transitions: int = setting(dataset_lib.NUM_TRANSITIONS, "Transitions per offline dataset.")
  delta_select: str = setting("sample", "How the adaptive policy picks delta from its belief.",
                              enum_values=["sample", "argmax"])

  def validate(self):
    if int(self.seeds) != self.seeds or self.seeds < 1:
      raise ValueError(f"--seeds must be an integer >= 1, got {self.seeds!r}")
    if not self.alphas:
      raise ValueError("--alphas must name at least one alpha")
    for a in (*self.alphas, self.adaptation_alpha, self.trajectory_alpha, self.coverage_alpha):
      if not (np.isfinite(a) and a >= 0):
        raise ValueError(f"alpha must be a finite number >= 0, got {a!r}")
    for name, flag in (("num_grid_deltas", "num_deltas"), ("eval_episodes",) * 2,
                       ("coverage_datasets",) * 2, ("num_transitions",) * 2,
                       ("family_seeds",) * 2, ("theorem2_datasets",) * 2):
      v = getattr(self, name)
      if int(v) != v or v < 1:
        raise ValueError(f"--{flag} must be an integer >= 1, got {v!r}")
    for name in ("first_seed", "family_steps"):
      v = getattr(self, name)
      if int(v) != v or v < 0:
        raise ValueError(f"--{name} must be an integer >= 0, got {v!r}")
    if not self.readings:
      raise ValueError("--readings must name at least one reading")
    parse_readings(self.readings)
    layout(self.layout)  # ValueError naming the layouts
    if self.delta_select not in ("sample", "argmax"):
      raise ValueError(f"--delta_select must be 'sample' or 'argmax', got {self.delta_select!r}")


def theorem1_alpha(delta: float, num_pairs: int, value_range: float = 1.0) -> float:
  """The alpha with which the bonus alpha*sqrt(log(1/delta)/n) covers Hoeffding's deviation.

  Theorem 1 needs b(s, a, delta) >= |B* Q* - B^* Q*|(s, a) for all (s, a) at once with
  probability 1 - delta. Each empirical backup is a mean of n targets r + gamma V*(s') in an
  interval of width `value_range` (here [0, 1]: reward 1 ends the episode, V* <= 1), so with a
  union bound over `num_pairs` pairs, Hoeffding gives the deviation
      sqrt(log(2 * num_pairs / delta) / (2 n)),
  and alpha * sqrt(log(1/delta) / n) covers it iff
      alpha >= value_range * sqrt(1/2 + log(2 * num_pairs) / (2 log(1/delta))).
  This is the paper's sqrt(iota) made explicit; it grows as delta -> 1 (log(1/delta) -> 0).
  """
  return float(value_range * np.sqrt(0.5 + np.log(2.0 * num_pairs) / (2.0 * np.log(1.0 / delta))))


def _write_csv(path, header, rows):
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(header)
    w.writerows(rows)


class _Progress:
  """Prints 'label done/total, elapsed, ETA' about every 10% (one line each: logs stay readable)."""

  def __init__(self, total, label, log):
    self.total, self.label, self.log, self.done, self.t0 = total, label, log, 0, time.time()
    self.next_report = 1

  def step(self, n=1):
    self.done += n
    if self.done >= self.next_report or self.done == self.total:
      el = time.time() - self.t0
      eta = el / self.done * (self.total - self.done)
      self.log(f"[{self.label}] {self.done}/{self.total}  {el:5.1f}s elapsed  ETA {eta:5.1f}s")
      self.next_report = self.done + max(1, self.total // 10)


def run(cfg: Config, log=print) -> dict:
  """Runs every part of the experiment, writes the CSV/PNG/JSON files, returns the summary."""
  cfg.validate()
  os.makedirs(cfg.output_dir, exist_ok=True)
  t0 = time.time()
  data_env = GridWorld(slip_prob=DATA_SLIP_PROB, layout=layout(cfg.layout))
  eval_env = GridWorld(slip_prob=EVAL_SLIP_PROB, layout=layout(cfg.layout))
  grid = belief.delta_grid(cfg.num_grid_deltas)
  v_opt = ev_lib.optimal_return(eval_env)
  alphas = sorted(set(map(float, cfg.alphas)) | {float(cfg.adaptation_alpha),
                                                 float(cfg.trajectory_alpha)})
  sweep_rows, adapt_rows, detail, route_rows, oracle_rows = [], [], {}, [], []
  default = family_lib.default_reading()
  seeds = range(cfg.first_seed, cfg.first_seed + cfg.seeds)
  prog = _Progress(cfg.seeds * len(alphas), "alpha sweep", log)
  for seed in seeds:
    data = dataset_lib.make_gridworld_dataset(seed, cfg.num_transitions, data_env)
    model = learners.empirical_model(data, data_env.num_states, data_env.num_actions)
    # Every alpha of a reading in one vectorized solve: [C, K, S, A].
    q_readings = [family_lib.exact_family(model, data_env.gamma, np.asarray(alphas), grid,
                                          reading) for reading in cfg.readings]
    for ai, alpha in enumerate(alphas):
      q_cql = learners.cql_q(model, data_env.gamma, alpha)
      sweep_rows.append(("CQL", "", alpha, seed,
                         round(ev_lib.expected_return(eval_env, q_cql) / v_opt, 6)))
      oracle_rows.append(("CQL", "", alpha, seed, "", sweep_rows[-1][-1],
                          data_env.route_name(vi.greedy_policy(q_cql)), "", "", "", ""))
      for ri, reading in enumerate(cfg.readings):
        q_ccvl = q_readings[ri][ai]
        errors = learners.data_bellman_errors(q_ccvl, data, data_env.gamma)
        k_fixed = int(np.argmin(errors))
        rng = np.random.default_rng([seed, ai, ri])
        episodes, log_b = ev_lib.run_adaptive(eval_env, q_ccvl, cfg.eval_episodes,
                                              ev_lib.auto_temperature(errors), rng,
                                              cfg.delta_select)
        sweep_rows.append(("Fixed-CCVL", reading, alpha, seed, round(
            ev_lib.expected_return(eval_env, q_ccvl[k_fixed]) / v_opt, 6)))
        sweep_rows.append(("CCVL", reading, alpha, seed, round(
            float(np.mean([e.discounted_return for e in episodes])) / v_opt, 6)))
        routes = [data_env.route_name(vi.greedy_policy(q_ccvl[k])) for k in range(len(grid))]
        # The oracle: every grid delta's greedy policy scored exactly at p = 0.15, beside what
        # the belief saw (the data's Bellman error at that delta, its final probability, how
        # many episodes acted with it).
        final_b = np.exp(log_b[-1].astype(np.float64))
        final_b /= final_b.sum()
        acted = np.bincount([e.delta_index for e in episodes], minlength=len(grid))
        oracle_rows += [("CCVL", reading, alpha, seed, round(float(grid[k]), 4), round(
            ev_lib.expected_return(eval_env, q_ccvl[k]) / v_opt, 6), routes[k],
                         round(float(errors[k]), 8), round(float(final_b[k]), 6), int(acted[k]),
                         int(k == k_fixed)) for k in range(len(grid))]
        route_rows += [(reading, alpha, seed, i + 1, round(float(grid[e.delta_index]), 4),
                        routes[e.delta_index]) for i, e in enumerate(episodes)]
        if alpha == cfg.adaptation_alpha:
          adapt_rows += [(reading, seed, i + 1, round(float(grid[e.delta_index]), 4))
                         for i, e in enumerate(episodes)]
        if alpha == cfg.trajectory_alpha and seed == cfg.first_seed and reading == (
            default if default in cfg.readings else cfg.readings[0]):
          detail = dict(q_cql=q_cql, q_ccvl=q_ccvl, episodes=episodes, k_fixed=k_fixed,
                        log_b=log_b, data=data, reading=reading)
      # The bonus form, Eq. (update) (the one Theorem 1 covers), acted with the same adaptive
      # policy: a reference for what the regularizer changes.
      q_bonus = learners.ccvl_bonus_q(model, data_env.gamma, alpha, grid)
      errors_bonus = learners.data_bellman_errors(q_bonus, data, data_env.gamma)
      episodes_bonus, _ = ev_lib.run_adaptive(eval_env, q_bonus, cfg.eval_episodes,
                                              ev_lib.auto_temperature(errors_bonus),
                                              np.random.default_rng([seed, ai, 99]),
                                              cfg.delta_select)
      sweep_rows.append(("CCVL-bonus", "", alpha, seed, round(
          float(np.mean([e.discounted_return for e in episodes_bonus])) / v_opt, 6)))
      prog.step()
  # Only the requested alphas go into the sweep table (the extra ones fed Fig. 1 right / Fig. 2).
  requested = set(map(float, cfg.alphas))
  _write_csv(os.path.join(cfg.output_dir, "alpha_sweep.csv"),
             ("method", "reading", "alpha", "seed", "normalized_return"),
             [r for r in sweep_rows if r[2] in requested])
  _write_csv(os.path.join(cfg.output_dir, "delta_adaptation.csv"),
             ("reading", "seed", "episode", "delta"), adapt_rows)
  _write_csv(os.path.join(cfg.output_dir, "routes.csv"),
             ("reading", "alpha", "seed", "episode", "delta", "route"), route_rows)
  _write_csv(os.path.join(cfg.output_dir, "oracle.csv"), ORACLE_HEADER, oracle_rows)

  coverage_rows = run_coverage(cfg, data_env, grid, log)
  _write_csv(os.path.join(cfg.output_dir, "coverage.csv"),
             ("delta", "coverage", "n_datasets", "alpha", "alpha_kind", "target"), coverage_rows)

  # Lemma 1 / V <= 1 on exact and neural families, and Theorem 2 coverage, for every reading.
  family_alphas = sorted({float(cfg.adaptation_alpha), float(cfg.trajectory_alpha)})
  family_rows = family_lib.family_rows(
      data_env, range(cfg.first_seed, cfg.first_seed + cfg.family_seeds), family_alphas, grid,
      cfg.readings, cfg.family_steps, cfg.num_transitions, log)
  _write_csv(os.path.join(cfg.output_dir, "family.csv"), family_lib.FAMILY_HEADER, family_rows)
  thm2_rows = family_lib.theorem2_coverage(
      data_env, grid, family_alphas, cfg.readings, cfg.theorem2_datasets,
      seed=20_000 + cfg.first_seed + cfg.seeds, num_transitions=cfg.num_transitions,
      progress=_Progress(cfg.theorem2_datasets, "Theorem 2 coverage", log))
  _write_csv(os.path.join(cfg.output_dir, "coverage_theorem2.csv"), family_lib.THEOREM2_HEADER,
             thm2_rows)

  summary = summarize(sweep_rows, adapt_rows, coverage_rows, cfg, requested)
  summary["family"] = summarize_family(family_rows)
  summary["theorem2_coverage"] = [dict(zip(family_lib.THEOREM2_HEADER, r)) for r in thm2_rows]
  summary["short_route_share"] = summarize_routes(route_rows)
  summary["optimal_return_eval"] = v_opt
  last = detail["episodes"][-1].delta_index
  summary["routes"] = {
      "CQL@alpha=%g" % cfg.trajectory_alpha: data_env.route_name(vi.greedy_policy(detail["q_cql"])),
      "CCVL[%s]@alpha=%g,final_delta=%g" % (detail["reading"], cfg.trajectory_alpha, grid[last]):
          data_env.route_name(vi.greedy_policy(detail["q_ccvl"][last])),
  }
  plots.alpha_sweep(sweep_rows, requested, os.path.join(cfg.output_dir, "alpha_sweep.png"))
  plots.delta_adaptation(adapt_rows, cfg.adaptation_alpha,
                         os.path.join(cfg.output_dir, "delta_adaptation.png"))
  plots.trajectories(eval_env, detail, grid, cfg.trajectory_alpha,
                     os.path.join(cfg.output_dir, "trajectories.png"))
  plots.coverage(coverage_rows, os.path.join(cfg.output_dir, "coverage.png"))
  plots.theorem2_coverage(thm2_rows, os.path.join(cfg.output_dir, "coverage_theorem2.png"))
  summary["wall_time_s"] = round(time.time() - t0, 1)
  with open(os.path.join(cfg.output_dir, "summary.json"), "w") as f:
    strict_json.dump(summary, f, indent=2)
  log(format_summary(summary))
  return summary


def run_coverage(cfg: Config, env: GridWorld, grid: np.ndarray, log=print) -> list:
  """Theorem 1: for each grid delta, the fraction of resampled datasets on which the bonus-form
  CCVL Q(s, a, delta) <= Q*(s, a) at every (s, a) visited in that dataset.

  Two alphas: the theorem's (per delta, `theorem1_alpha`, union bound over the decision pairs),
  and `cfg.coverage_alpha` for contrast. The datasets are drawn exactly as the offline dataset
  (2,500 transitions, same behavior policy, p = 0.3), from seeds disjoint from the sweep's.
  """
  q_star, _ = vi.value_iteration(env.P, env.R, env.gamma)
  decision = ~env.terminal_mask
  decision[env.wall_states] = False
  num_pairs = int(decision.sum()) * env.num_actions
  thm_alpha = np.array([theorem1_alpha(d, num_pairs) for d in grid])
  datasets = dataset_lib.collect(env, dataset_lib.behavior_policy(env), cfg.num_transitions,
                                 seed=10_000 + cfg.first_seed + cfg.seeds,
                                 num_datasets=cfg.coverage_datasets)
  alphas = np.concatenate([thm_alpha, [cfg.coverage_alpha]])  # [K + 1]
  held = np.zeros((2, len(grid)), np.int64)  # [theorem / practical, K]
  prog = _Progress(cfg.coverage_datasets, "coverage", log)
  for i in range(cfg.coverage_datasets):
    model = learners.empirical_model(datasets.dataset(i), env.num_states, env.num_actions)
    q = learners.ccvl_bonus_q(model, env.gamma, alphas, grid)  # [K + 1, K, S, A]
    ok = np.all((q <= q_star + 1e-9) | ~model.seen_sa, axis=(-2, -1))  # [K + 1, K]
    held[0] += np.diag(ok[:-1])  # delta_k judged with the theorem's alpha for delta_k
    held[1] += ok[-1]
    prog.step()
  n = cfg.coverage_datasets
  rows = []
  for k, d in enumerate(grid):
    rows.append((round(float(d), 4), held[0, k] / n, n, round(float(thm_alpha[k]), 4), "theorem1",
                 round(1 - float(d), 4)))
  for k, d in enumerate(grid):
    rows.append((round(float(d), 4), held[1, k] / n, n, cfg.coverage_alpha, "fixed",
                 round(1 - float(d), 4)))
  return rows


def summarize_family(rows) -> dict:
  """family.csv rows -> {'exact'|'neural': {reading: {alpha: means over seeds}}}."""
  out = {}
  idx = {k: i for i, k in enumerate(family_lib.FAMILY_HEADER)}
  for r in rows:
    key = out.setdefault(r[idx["method"]], {}).setdefault(r[idx["reading"]], {}).setdefault(
        f"{r[idx['alpha']]:g}", [])
    key.append(r)
  for method, by_reading in out.items():
    for reading, by_alpha in by_reading.items():
      for a, rs in by_alpha.items():
        by_alpha[a] = {k: round(float(np.mean([x[idx[k]] for x in rs])), 4) for k in (
            "v_nondecreasing_share", "q_nondecreasing_share", "v_end_ordered_share", "v_max")}
        if method == "neural":
          by_alpha[a]["policy_agreement_with_exact"] = round(float(np.mean(
              [x[idx["policy_agreement_with_exact"]] for x in rs])), 4)
        by_alpha[a]["seeds"] = len(rs)
  return out


def summarize_routes(route_rows) -> dict:
  """Share of CCVL's evaluation episodes acted with a delta whose greedy route is the short
  one, per reading and alpha."""
  out = {}
  for reading, alpha, _, _, _, route in route_rows:
    out.setdefault(reading, {}).setdefault(f"{alpha:g}", []).append(route == "short")
  return {r: {a: round(float(np.mean(v)), 4) for a, v in by.items()} for r, by in out.items()}


def sweep_stats(sweep_rows, requested) -> dict:
  """{method label: {alpha as '%g': {'mean', 'std', 'n'}}} of the normalized returns over
  seeds of the alpha sweep's rows (method, reading, alpha, seed, normalized_return), the alphas
  in `requested`; the label is method_label(method, reading): the printed table's numbers
  (alpha_sweep.csv holds the rows)."""
  table = {}
  for method, reading, alpha, _, score in sweep_rows:
    if alpha in requested:
      table.setdefault(method_label(method, reading), {}).setdefault(alpha, []).append(score)
  return {m: {f"{a:g}": {"mean": float(np.mean(v)), "std": float(np.std(v)), "n": len(v)}
              for a, v in sorted(by.items())} for m, by in table.items()}


def summarize(sweep_rows, adapt_rows, coverage_rows, cfg, requested) -> dict:
  stats = sweep_stats(sweep_rows, requested)
  adaptation = {}
  for reading in cfg.readings:
    deltas = np.array([r[3] for r in adapt_rows if r[0] == reading]).reshape(
        cfg.seeds, cfg.eval_episodes)
    adaptation[reading] = [round(float(x), 4) for x in deltas.mean(0)]
  return {
      "alpha_sweep": stats,
      "delta_adaptation": {"alpha": cfg.adaptation_alpha,
                           "mean_delta_per_episode": adaptation},
      "coverage": [dict(zip(("delta", "coverage", "n_datasets", "alpha", "alpha_kind", "target"),
                            map(lambda x: x.item() if hasattr(x, "item") else x, r)))
                   for r in coverage_rows],
      # keyed by flag name (K: num_deltas)
      "config": {_flag_names().get(k, k): v for k, v in dataclasses.asdict(cfg).items()
                 if k != "output_dir"},
  }


def _flag_names() -> dict:
  """Config field -> its flag's name, where they differ."""
  return {f.name: spec.flag_name for f, spec in config_flags.flag_fields(Config)
          if spec.flag_name}


def format_summary(summary: dict) -> str:
  """The summary table printed at the end of a run (markdown)."""
  sweep = summary["alpha_sweep"]
  alphas = list(next(iter(sweep.values())).keys())
  lines = ["", "Normalized return at p = 0.15 (mean +- std over seeds)", "",
           "| method | " + " | ".join(f"alpha={a}" for a in alphas) + " |",
           "|---|" + "---|" * len(alphas)]
  for m in sorted(sweep, key=lambda k: (METHODS.index(k.split(" [")[0]), k)):
    lines.append(f"| {m} | " + " | ".join(
        f"{sweep[m][a]['mean']:.3f} +- {sweep[m][a]['std']:.3f}" for a in alphas) + " |")
  da = summary["delta_adaptation"]
  lines += [""]
  for reading, per_episode in da["mean_delta_per_episode"].items():
    lines.append(f"CCVL [{reading}] delta per evaluation episode at alpha={da['alpha']:g} "
                 "(mean over seeds): " + ", ".join(f"{d:.2f}" for d in per_episode))
  if summary.get("short_route_share"):
    lines += ["", "Share of CCVL's evaluation episodes acted with a delta whose greedy route is "
              "the short one:"]
    for reading, by in summary["short_route_share"].items():
      lines.append(f"  [{reading}] " + ", ".join(f"alpha={a}: {v:.2f}" for a, v in by.items()))
  if summary.get("family"):
    lines += ["", "The family (family.csv; means over seeds): share of visited states with V "
              "nondecreasing in delta | with every Q nondecreasing | max V | neural agreement",
              "", "| method | reading | alpha | V nondecr. | Q nondecr. | max V | agreement |",
              "|---|---|---|---|---|---|---|"]
    for method, by_reading in summary["family"].items():
      for reading, by_alpha in by_reading.items():
        for a, st in by_alpha.items():
          lines.append(f"| {method} | {reading} | {a} | {st['v_nondecreasing_share']:.2f} | "
                       f"{st['q_nondecreasing_share']:.2f} | {st['v_max']:.3f} | "
                       f"{st.get('policy_agreement_with_exact', float('nan')):.2f} |")
  if summary.get("theorem2_coverage"):
    lines += ["", "Theorem 2 coverage: P[V(s, delta) <= V*(s) at every visited s] "
              "(coverage_theorem2.csv; target 1 - delta), at the smallest and largest delta:"]
    by = {}
    for r in summary["theorem2_coverage"]:
      by.setdefault((r["reading"], r["alpha"]), []).append(r)
    for (reading, alpha), rs in by.items():
      lines.append(f"  [{reading}] alpha={alpha:g}: delta {rs[0]['delta']:.2f} -> "
                   f"{rs[0]['coverage']:.3f} (target {rs[0]['target']:.2f}), delta "
                   f"{rs[-1]['delta']:.2f} -> {rs[-1]['coverage']:.3f} "
                   f"(target {rs[-1]['target']:.2f})")
  cov = summary["coverage"]
  lines += ["", "Theorem 1 coverage: P[Q(s,a,delta) <= Q*(s,a) for all visited (s,a)]", "",
            "| delta | target 1-delta | coverage (theorem alpha) | theorem alpha | "
            f"coverage (alpha={cov[-1]['alpha']:g}) |", "|---|---|---|---|---|"]
  half = len(cov) // 2
  for a, b in zip(cov[:half], cov[half:]):
    lines.append(f"| {a['delta']:.2f} | {a['target']:.2f} | {a['coverage']:.3f} | "
                 f"{a['alpha']:.2f} | {b['coverage']:.3f} |")
  if "routes" in summary:
    first = summary.get("config", {}).get("first_seed", 0)
    lines += ["", f"Routes (no-slip path of the greedy policy, seed {first}): "
              + ", ".join(f"{k}: {v}" for k, v in summary["routes"].items())]
  if "wall_time_s" in summary:
    lines += [f"Wall time: {summary['wall_time_s']} s"]
  return "\n".join(lines)
