"""A local-window CNN (vit_jax/models/local_cnn.py: 3x3 convs, global average pool, linear head)
on configs/vit.py's data, recipe and evaluators: the model that cannot compare far-apart parts.

Arguments after the colon, `k=v` separated by commas (as configs/vit.py):
  dataset   marks_pair (default) or any dataset configs/vit.py takes.
  depth     conv layers (default 3): a receptive field of 2 x depth + 1 px.
  width     channels of each conv (default 32).
  runlocal  shrink everything to a smoke run of a few steps.

On marks_pair (do two 3x3 marks d px apart have the same colour?), the CNN half of the locality
experiment:
  python -m vit_jax.main --config=configs/local_cnn.py --workdir=workdirs/local_cnn
  -> should take about 3 min on 2 CPU cores and reach about 91% test accuracy at d = 3..6 px
     (one 7x7 window sees both) and chance (about 50%) at every d from 9 to 21.
     `python -m experiments.locality` runs it beside configs/vit.py:dataset=marks_pair; the
     measured figures are in experiments/results/locality_cpu/README.md.
"""

import ml_collections

from vit_jax.config import args
from vit_jax.config import defaults


def get_config(arg=None):
  options = args.parse(arg, dict(dataset="marks_pair", depth=3, width=32, runlocal=False))
  c = args.load_beside(__file__, "vit.py").get_config(f"dataset={options['dataset']}")
  c.model = ml_collections.ConfigDict(
      dict(
          name="local_cnn",
          depth=options["depth"],
          width=options["width"],
          head_bias_init=0.0,
          dtype="float32",
      )
  )
  # A plain CNN takes a larger step than the ViT recipe's 1e-3: on marks_pair, 1e-2 left 50%
  # later than 3e-3 did (1e-3 was not tried).
  c.optimizer.lr = 3e-3
  if options["runlocal"]:
    defaults.shrink_for_runlocal(c)
  return c
