"""The errors a user can cause and fix (bad config, missing data, wrong checkpoint).

The command-line entry points print these as one clear message and exit with code 2, instead of
a traceback.
"""

from vit_jax.checkpoint import CheckpointMismatchError
from vit_jax.data.errors import DatasetNotPreparedError
from vit_jax.data.tokenizers.base import TokenizerMismatchError
from vit_jax.interop.common import ConversionError

# Pretrained parameters that do not fit a model (fine-tuning or conversion) raise ConversionError.
PretrainedMismatchError = ConversionError

# Text datasets' not-prepared error is a FileNotFoundError; tokenizer mismatches a ValueError.
USER_ERRORS = (ValueError, FileNotFoundError, CheckpointMismatchError, DatasetNotPreparedError,
               ConversionError, TokenizerMismatchError)
