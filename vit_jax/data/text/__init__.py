"""Text input: datasets by name, the embedded corpus, packing, MLM masking, batches."""
