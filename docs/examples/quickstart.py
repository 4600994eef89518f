import ccvl_tf

# Your data as numpy arrays with d3rlpy's MDPDataset meaning (here: a random CartPole player).
steps = ccvl_tf.collect("gymnasium:CartPole-v1", num_steps=5_000, seed=0)
data = ccvl_tf.Transitions.from_arrays(steps["observations"], steps["actions"], steps["rewards"],
                                       steps["terminals"], steps["timeouts"])
result = ccvl_tf.fit(data, "ccvl", env="gymnasium:CartPole-v1", root_dir="runs/quickstart",
                     num_steps=2_000, eval_episodes=10)
for row in result.table:
  print(f"{row['policy']:>20}  {row['mean']:6.1f}  95% CI ({row['ci_low']:.1f}, {row['ci_high']:.1f})")
