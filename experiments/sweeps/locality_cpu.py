"""The locality experiment's two runs on `marks_pair` (do two 3x3 marks d px apart have the same
colour?): a CNN whose receptive field is 7 px against a ViT of about the same compute.

  python -m experiments.locality --root=workdirs/locality --out=experiments/results/locality_cpu

runs both (through `vit_jax.sweep`'s runner, each an ordinary `python -m vit_jax.main`), then
writes accuracy against distance. The runs:

  local_cnn  3 layers of 3x3 convs, 32 channels, ReLU, global average pool, linear head
             (configs/local_cnn.py): 22.2 MFLOPs forward per 24-px image, 19k parameters.
  vit        4x4 patches (36 tokens + cls), width 96, 4 blocks of 4 heads, MLP 192
             (configs/vit.py:dataset=marks_pair): 24.3 MFLOPs, 0.31 M parameters.

Both take the dataset's recipe from configs/vit.py (batch 64, 2,000 steps, AdamW, cosine, no
augmentation), the CNN with a learning rate of 3e-3 against the ViT's 1e-3, and are evaluated
once at the end on 2,000 test images per distance.
"""

import ml_collections

VIT = {
    "config": "configs/vit.py:dataset=marks_pair",
    "model.name": "vit",
    "model.width": 96,
    "model.depth": 4,
    # GELU's exact (erf) form, as the results were measured: the experiment fixes its ViT rather
    # than follow the config's default (the tanh form).
    "model.activation": "gelu",
}
CNN = {
    "config": "configs/local_cnn.py",
    "model.name": "local_cnn",
    "model.width": 32,
    "model.depth": 3,
}


def get_sweep():
  return ml_collections.ConfigDict(
      dict(
          config=VIT["config"],
          runs=[CNN, VIT],
          name="{model.name}-w{model.width}-d{model.depth}",
          metric="error",
      ),
      allow_dotted_keys=True,
  )
