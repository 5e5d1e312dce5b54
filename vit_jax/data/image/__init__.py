"""Image input: TFDS, folders and the embedded digits; augmentations; the batch pipeline."""
