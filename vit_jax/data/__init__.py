"""Input data: image/ (TFDS, folders, digits, synthetic shapes), text/ and tokenizers/.

Each family checks its own config (image/checks.py, text/checks.py) before training.
"""

SPLIT_KEYS = ("train_split", "eval_split")  # the config keys that name a split of the dataset
