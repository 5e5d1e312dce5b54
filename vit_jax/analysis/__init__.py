"""Looking inside trained models: attention maps and rollout, mean attention distance, position
embedding similarity and patch-embedding filter PCA (the ViT paper's Figure 7), and the plots.

The command lines are `python -m vit_jax.visualize` and `python -m vit_jax.predict`.
"""
