"""The paper's illustrative gridworld experiment (Fig. 1-2, Theorem 1), solved exactly.

Entry point: `runner.run(Config(...))` (binaries/gridworld.py). Its steps, in order:
  1. per seed, the offline dataset at p = 0.3 (`ccvl_tf.tabular.dataset`);
  2. the learners (CQL, Fixed-CCVL, CCVL, CCVL-bonus) solved exactly on the empirical MDP for
     every alpha (`ccvl_tf.tabular.learners`), scored at p = 0.15;
  3. CCVL's delta over the evaluation episodes, the greedy routes, and Theorem 1's coverage
     over resampled datasets;
  4. the CSVs, summary.json and the figures (plots.py).

Beside it: bounds.py, the exact references (Q* by value iteration, the tabular bounds of the
same objective on the same data) that online fine-tuning checks CCVL's Q_l and Q_u against.
"""
