"""binaries/headroom.py: every grid delta's fixed policy, the adaptive policy and references,
played on the same episodes of a finished train_offline CCVL run (protocol: docs/headroom.md).

E = S x L episodes per policy on S vector slots (ccvl_tf/evaluation/atari_vector.py), slot j playing
its L episodes one after another with one policy state: the adaptive policy's belief is carried over
the L episodes of a sequence. Every policy is seeded the same (Seeds.headroom_eval), so episode i of
every policy starts from the same ALE seed. The grid members are the run's network restored from its
newest intact checkpoint at each grid delta (FixedDeltaPolicy); Fixed-CCVL is the member at the
delta the run chose (summary.json), so its row is that member's. The adaptive policy and the
references are the run's exported SavedModels.

Each policy's episodes are written to OUT/episodes/<name>.json as soon as they are played; a
rerun with the same settings reuses them (a stopped evaluation resumes at the next policy).
The numbers: ccvl_tf.evaluation.headroom.analyze. Files: OUT/headroom.json, headroom.md,
headroom.png, scores.csv (one row per policy and episode) and belief.csv (the adaptive belief
after every episode).
"""
from __future__ import annotations

import csv
import dataclasses
import json
import os
from typing import Callable, Dict, List, Mapping, Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import numpy as np

from ccvl_tf.algorithm import belief, policies
from ccvl_tf.runtime import config_flags
from ccvl_tf.evaluation import atari_vector
from ccvl_tf.evaluation import diagnostics, headroom, rollouts
from ccvl_tf.experiments.offline import runner
from ccvl_tf.runtime import run_lock, strict_json
from ccvl_tf.runtime.config_flags import setting

ADAPTIVE = "CCVL (adaptive)"


def parse_references(text) -> tuple:
  """'cql=DIR,bc=DIR2' -> (('cql', 'DIR'), ('bc', 'DIR2')); 'auto' -> ('auto',) (the run's own
  reference agents); 'none' or '' -> ()."""
  items = [t.strip() for t in str(text).split(",") if t.strip()]
  if items in (["auto"], ["none"], []):
    return tuple(i for i in items if i == "auto")
  out = []
  for item in items:
    name, sep, path = item.partition("=")
    if not sep or not name.strip() or not path.strip():
      raise ValueError(f"--references items are NAME=SAVEDMODEL_DIR, got {item!r}")
    out.append((name.strip(), path.strip()))
  return tuple(out)


# Each field compared when stored episodes are reused (their key: the checkpoint and step,
# the seed, S, L, epsilon, the step cap, a reference's SavedModel), or not, and why.
@config_flags.compared_settings(
    compared=("sequences", "episodes_per_sequence", "references"),
    not_compared={"root_dir": "the run evaluated: its episodes are keyed by its checkpoint "
                              "and step",
                  "output_dir": "where the files go"})
@dataclasses.dataclass
class HeadroomConfig:
  """Settings of binaries/headroom.py (its flags, ccvl_tf/runtime/config_flags.py)."""
  root_dir: str = setting(help="A finished train_offline.py CCVL run directory (Atari).",
                          flag_default=None, required=True, output="dir")
  sequences: int = setting(10, "S: vector slots, each playing its episodes in sequence with "
                           "one belief; even (the split-half oracle halves them).",
                           lower_bound=2)
  episodes_per_sequence: int = setting(10, "L: episodes per sequence (E = S x L per policy; "
                                       "docs/headroom.md has the power calculation).",
                                       lower_bound=1)
  references: Sequence = setting(
      ("auto",), "Other policies played on the same episodes: 'auto' (the run's reference "
      "agents, e.g. CQL), 'none', or NAME=SAVEDMODEL_DIR,... .", kind="csv",
      parse=lambda text: parse_references(text))
  output_dir: Optional[str] = setting(None, "Where the files go (default ROOT/headroom).",
                                      output="dir")


def _reference_dirs(cfg: HeadroomConfig, summary: dict) -> Dict[str, str]:
  """name -> SavedModel directory of the references to play."""
  if tuple(cfg.references) == ("auto",):
    refs = summary.get("references") or {}
    return {name: rec["policy_dir"] for name, rec in refs.items()
            if isinstance(rec, dict) and rec.get("policy_dir")}
  return dict(cfg.references)


def _episodes_file(out_dir: str, name: str) -> str:
  safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
  return os.path.join(out_dir, "episodes", f"{safe}.json")


def _played(path: str, key: dict) -> Optional[List[dict]]:
  """The episodes a previous evaluation wrote to `path` under the same `key`, else None."""
  if not os.path.exists(path):
    return None
  try:
    with open(path) as f:
      saved = json.load(f)
  except ValueError:
    return None  # a file cut short by a stop mid-write: played again
  return saved["episodes"] if saved.get("key") == key else None


def _record_dict(r) -> dict:
  return {"episode": r.episode, "raw_score": r.raw_score, "length": r.length,
          "mean_delta": float(np.mean(r.deltas)) if r.deltas else None,
          "log_belief": None if r.log_belief is None else np.asarray(r.log_belief).tolist(),
          "sq_error_sum": None if r.sq_error_sum is None else np.asarray(
              r.sq_error_sum, np.float64).tolist(),
          "sq_error_count": r.sq_error_count}


def run(cfg: HeadroomConfig, log: Callable[[str], None] = print) -> Dict[str, object]:
  """Plays every policy (module docstring) and returns headroom.analyze's numbers, also
  written to OUT/headroom.json with the per-episode scores."""
  if cfg.sequences % 2:
    raise ValueError(f"--sequences must be even (the split-half oracle halves them), got "
                     f"{cfg.sequences}")
  plan = runner.saved_ccvl_plan(cfg.root_dir, None, "the headroom evaluation")
  game = plan.config.game
  if not atari_vector.use_vector_env(game, "vector"):
    raise ValueError(f"{cfg.root_dir} is a run of {game!r}; headroom.py plays Atari games on "
                     f"the vector environment")
  with open(os.path.join(cfg.root_dir, "summary.json")) as f:
    summary = json.load(f)
  for key in ("fixed_delta", "exported_policies"):
    if key not in summary:
      raise ValueError(f"{cfg.root_dir}/summary.json has no {key!r}: not a finished CCVL run "
                       f"(rerun train_offline.py with this --root_dir to finish it)")
  exported = summary["exported_policies"]
  adaptive_dir = exported.get("policy_adaptive", exported.get("policy"))
  refs = _reference_dirs(cfg, summary)
  out_dir = cfg.output_dir or os.path.join(cfg.root_dir, "headroom")
  os.makedirs(os.path.join(out_dir, "episodes"), exist_ok=True)
  s, l = int(cfg.sequences), int(cfg.episodes_per_sequence)
  episodes = s * l
  with run_lock.hold(cfg.root_dir, "--root_dir"):
    run_setup, checkpoint = runner.restore_finished(plan, log, "the fixed-delta policies",
                                                    "headroom.json")
    evaluation, seed = run_setup.evaluation, run_setup.seeds.headroom_eval()
    grid = belief.delta_grid(run_setup.settings.num_grid_deltas)
    key = {"checkpoint": os.path.basename(checkpoint), "step": int(
        run_setup.agent.train_step_counter.numpy()), "seed": seed, "sequences": s,
           "episodes_per_sequence": l, "epsilon": evaluation.epsilon,
           "max_steps": evaluation.max_steps}
    members = {f"delta={d:.4f}": float(d) for d in grid}

    def make(name):
      if name in members:
        return rollouts.CompiledPolicy(policies.FixedDeltaPolicy(
            run_setup.time_step_spec, run_setup.action_spec, run_setup.agent.q_network,
            delta=members[name]))
      path = adaptive_dir if name == ADAPTIVE else refs[name]
      loaded, _ = rollouts.load_saved_policy(
          path, num_actions=policies.action_count(run_setup.action_spec), game=game,
          action_set=run_setup.action_set)
      return rollouts.CompiledPolicy(loaded)

    played: Dict[str, List[dict]] = {}
    names = [*members, ADAPTIVE, *refs]
    for i, name in enumerate(names):
      path = _episodes_file(out_dir, name)
      # A reference is named by its SavedModel too; the members and the adaptive export are
      # the run's own at the checkpoint's step.
      own = dict(key, policy=name, **({"path": os.path.abspath(refs[name])} if name in refs
                                      else {}))
      done = _played(path, own)
      if done is None:
        records = atari_vector.evaluate_atari(
            make(name), game, episodes, seed=seed, epsilon=evaluation.epsilon,
            max_episode_steps=evaluation.max_steps, max_slots=s)
        done = [_record_dict(r) for r in records]
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
          strict_json.dump({"key": own, "episodes": done}, f)
        os.replace(tmp, path)
        how = "played"
      else:
        how = "reused (already played with these settings)"
      played[name] = done
      log(f"[headroom] {i + 1}/{len(names)} {name}: mean {np.mean([e['raw_score'] for e in done]):.2f} "
          f"over {episodes} episodes, {how}")

  def seq(name, field="raw_score"):
    return headroom.as_sequences([e[field] for e in played[name]], s)  # [S, L]

  trace = diagnostics.belief_trace(
      [rollouts.EpisodeRecord(run=0, episode=e["episode"], return_=0.0,
                              raw_score=e["raw_score"], length=e["length"], deltas=[
                                  e["mean_delta"]] if e["mean_delta"] is not None else [],
                              map_delta=float("nan"), log_belief=np.asarray(e["log_belief"]),
                              # Episodes played before the belief kept the record: none.
                              sq_error_sum=(None if e.get("sq_error_sum") is None
                                            else np.asarray(e["sq_error_sum"], np.float64)),
                              sq_error_count=e.get("sq_error_count"))
       for e in played[ADAPTIVE] if e["log_belief"] is not None], grid)
  entropy = (headroom.as_sequences([t["entropy"] for t in trace], s)
             if len(trace) == episodes else None)
  fixed_delta = float(summary["fixed_delta"])
  result = headroom.analyze(grid, np.stack([seq(n) for n in members]), fixed_delta,
                            seq(ADAPTIVE), {n: seq(n) for n in refs}, belief_entropy=entropy)
  result.update(root_dir=cfg.root_dir, checkpoint=checkpoint, step=key["step"], seed=seed,
                epsilon=evaluation.epsilon, max_steps=evaluation.max_steps,
                belief_temperature=summary.get("belief_temperature"),
                policies={n: [e["raw_score"] for e in played[n]] for n in names},
                belief_entropy=None if entropy is None else entropy.tolist())
  _write(out_dir, result, played, members, trace, s, fixed_delta)
  log(render(result).rstrip())
  log(f"Files: {out_dir}/ (headroom.json, headroom.md, headroom.png, scores.csv, belief.csv)")
  return result


def _write(out_dir, result, played, members, trace, s, fixed_delta) -> None:
  with open(os.path.join(out_dir, "headroom.json"), "w") as f:
    strict_json.dump(result, f, indent=1)
  with open(os.path.join(out_dir, "headroom.md"), "w") as f:
    f.write(render(result))
  with open(os.path.join(out_dir, "scores.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["policy", "delta", "episode", "sequence", "position", "raw_score", "length",
                "mean_delta_acted"])
    for name, eps in played.items():
      for e in eps:
        w.writerow([name, members.get(name, ""), e["episode"], e["episode"] % s,
                    e["episode"] // s, e["raw_score"], e["length"],
                    "" if e["mean_delta"] is None else e["mean_delta"]])
  # The squared Bellman errors the belief summed in each episode, where it recorded them.
  sums = [c for c in dict.fromkeys(k for t in trace for k in t)
          if c == "sq_error_count" or c.startswith(rollouts.SQ_ERROR_SUM_COLUMN)]
  with open(os.path.join(out_dir, "belief.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["sequence", "position", "expected_delta", "entropy", "map_delta",
                "delta_acted"] + sums)
    for t in trace:
      w.writerow([t["episode"] % s, t["episode"] // s, t["expected_delta"], t["entropy"],
                  t["map_delta"], t["mean_acted_delta"]] + ["" if t.get(c) is None else t[c]
                                                            for c in sums])
  plot(os.path.join(out_dir, "headroom.png"), result, played, members, fixed_delta)


def render(result: Dict[str, object]) -> str:
  """headroom.md: the members' means, the oracles, the paired differences and the power."""
  def ci(d):
    return f"{d['mean']:+.2f} ({d['ci_low']:+.2f}, {d['ci_high']:+.2f})"
  e = result["sequences"] * result["episodes_per_sequence"]
  lines = [f"# Headroom of the family: {e} episodes per policy ({result['sequences']} "
           f"sequences x {result['episodes_per_sequence']}), the same episodes for every "
           f"policy", "", "| policy | mean score |", "| --- | --- |"]
  for d, m in zip(result["grid"], result["member_means"]):
    tag = " (Fixed-CCVL)" if abs(d - result["fixed_delta"]) < 1e-6 else ""
    lines.append(f"| delta = {d:.4f}{tag} | {m:.2f} |")
  lines.append(f"| {ADAPTIVE} | {result['adaptive_mean']:.2f} |")
  for name, r in (result.get("references") or {}).items():
    lines.append(f"| {name} | {r['mean']:.2f} |")
  sh = result["split_half_oracle"]
  p = result["power"]
  lines += ["", f"Grid mean (today's 10-episode adaptive row in expectation) "
            f"{result['grid_mean']:.2f}; spread (best minus worst member) "
            f"{result['spread']:.2f}; oracle in hindsight delta {result['oracle_delta']:.4f} "
            f"({result['oracle_mean']:.2f}); split-half oracle {sh['value']:.2f}.", "",
            "Paired differences, mean and 95% CI by a bootstrap over sequences:", "",
            f"* split-half oracle - Fixed-CCVL: {ci(result['split_half_oracle_minus_fixed'])}",
            f"* oracle in hindsight - Fixed-CCVL: {ci(result['oracle_minus_fixed'])}",
            f"* adaptive - Fixed-CCVL: {ci(result['adaptive_minus_fixed'])}",
            f"* adaptive - grid mean: {ci(result['adaptive_minus_grid_mean'])}"]
  for name, r in (result.get("references") or {}).items():
    lines += [f"* adaptive - {name}: {ci(r['adaptive_minus'])}",
              f"* Fixed-CCVL - {name}: {ci(r['fixed_minus'])}"]
  lines += ["", f"Power: the per-episode SD of adaptive - Fixed-CCVL is "
            f"{result['adaptive_minus_fixed']['sd_episode']:.2f}; {e} episodes resolve a "
            f"difference of {p['detectable_difference']:.2f} (two-sided 5%, power 0.8); 10% of "
            f"Fixed-CCVL's mean ({p['relative_difference']:.2f}) needs "
            f"{p['episodes_for_relative']:.0f} episodes."]
  if "belief" in result:
    b = result["belief"]
    settled = [x for x in b["settle_episode"] if x is not None]
    lines += ["", f"Belief: entropy after the first episode {b['entropy_after_first']:.3f}, "
              f"after the last {b['entropy_after_last']:.3f} (log K = "
              f"{np.log(len(result['grid'])):.3f}); settled (entropy below "
              f"{b['settle_threshold']:.3f} to the end) in {b['settled_sequences']} of "
              f"{result['sequences']} sequences"
              + (f", after {min(settled)}-{max(settled)} episodes." if settled else ".")]
  return "\n".join(lines) + "\n"


def plot(path, result, played, members, fixed_delta) -> None:
  """headroom.png: each member's mean with its 95% CI over sequences against delta, the
  adaptive policy and the references as horizontal lines."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  s = result["sequences"]
  fig, ax = plt.subplots(figsize=(6, 3.6))
  deltas = np.array(list(members.values()))
  seq_means = np.array([headroom.as_sequences([e["raw_score"] for e in played[n]], s).mean(-1)
                        for n in members])                         # [K, S]
  means = seq_means.mean(-1)
  half = 1.96 * seq_means.std(-1, ddof=1) / np.sqrt(s)
  ax.errorbar(deltas, means, yerr=half, fmt="o-", capsize=3, label="fixed delta (95% CI)")
  ax.axvline(fixed_delta, color="C0", ls=":", label="Fixed-CCVL's delta")
  ax.axhline(result["adaptive_mean"], color="C1", label="CCVL (adaptive)")
  for i, (name, r) in enumerate((result.get("references") or {}).items()):
    ax.axhline(r["mean"], color=f"C{i + 2}", ls="--", label=name)
  ax.set_xlabel("delta")
  ax.set_ylabel("mean raw score")
  ax.set_title("Headroom: every grid delta on the same episodes")
  ax.legend(fontsize=7)
  ax.grid(alpha=0.3)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def render_runs(results: Mapping[str, Mapping[str, object]]) -> str:
  """One row per run (name -> headroom.json's numbers): Fixed-CCVL, adaptive, the grid mean,
  the oracles, the spread, the paired differences with their CIs and the power
  (docs/results/headroom.md)."""
  def ci(d):
    return f"{d['mean']:+.2f} ({d['ci_low']:+.2f}, {d['ci_high']:+.2f})"
  lines = ["| run | Fixed-CCVL (delta) | adaptive | grid mean | oracle in hindsight (delta) "
           "| split-half oracle | spread | split-half oracle - fixed | adaptive - fixed | "
           "adaptive - CQL | SD of adaptive - fixed; resolves; episodes for 10% |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
  for name, r in results.items():
    cql = (r.get("references") or {}).get("CQL")
    p = r["power"]
    lines.append(
        f"| {name} | {r['fixed_mean']:.2f} ({r['fixed_delta']:.4f}) | {r['adaptive_mean']:.2f} "
        f"| {r['grid_mean']:.2f} | {r['oracle_mean']:.2f} ({r['oracle_delta']:.4f}) | "
        f"{r['split_half_oracle']['value']:.2f} | {r['spread']:.2f} | "
        f"{ci(r['split_half_oracle_minus_fixed'])} | {ci(r['adaptive_minus_fixed'])} | "
        f"{ci(cql['adaptive_minus']) if cql else '-'} | "
        f"{r['adaptive_minus_fixed']['sd_episode']:.1f}; {p['detectable_difference']:.1f}; "
        f"{p['episodes_for_relative']:.0f} |")
  return "\n".join(lines) + "\n"
