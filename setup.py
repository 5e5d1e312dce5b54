"""Installs vit_jax: transformers (ViT, Mixer, BERT, GPT, seq2seq) in JAX/Flax."""

import setuptools

JAX_VERSION = "0.10.2"  # the oldest supported; libtpu must match the jax it compiles for
# jaxlib 0.10.2 to 0.11.0 add an f32 scatter's updates with a compare-and-swap loop on NVIDIA GPUs
# (openxla/xla issue 46225), up to orders of magnitude slower under contention (the token
# embedding's gradient): a GPU install asks for a jax with the fix.
JAX_GPU_VERSION = "0.11.1"
JAX_NEXT = "0.12"  # below it: the versions this code has run on (0.11.2 on an H200)

INSTALL_REQUIRES = [
    f"jax>={JAX_VERSION},<{JAX_NEXT}",
    "flax>=0.12.8,<0.13",
    "optax>=0.2.8",
    "orbax-checkpoint>=0.12.8,<0.13",
    # Input pipelines only; TF never touches an accelerator (see vit_jax/data).
    "tensorflow-cpu>=2.21,<2.22",
    "tensorflow-datasets>=4.9.10",
    "importlib_resources",  # tfds imports it on every Python but declares it only for <3.9
    "ml-collections>=1.1.0",
    "numpy>=2.0",
    # JAX's and TF's dtype package. 0.7.0 registers its ufunc loops and promoters with NumPy one
    # by one at import, each add scanning those before it: `import ml_dtypes` takes 1.07 s on
    # every process start here (`python -X importtime -c "import ml_dtypes"`), 0.6.0 0.11 s,
    # NumPy's import included.
    "ml-dtypes>=0.5.1,<0.7",
    "scikit-learn>=1.5",  # ships the embedded digits dataset
    "scipy",  # the sweep's power-law fits
    "threadpoolctl",  # one BLAS thread for the sweep's small L-BFGS fits (scikit-learn has it)
    "pillow",  # image files: the synthetic_shapes dataset, folder images for inspect and predict
    "matplotlib",  # the plots of vit_jax.visualize and vit_jax.sweep
    "tqdm",
    "tensorboardX",
    "safetensors",
    "sentencepiece",
    "tokenizers",
]

# `pip install -e .[gcs]`: paths in Cloud Storage (gs://BUCKET/...) for workdirs, sweep roots and
# every command's inputs and outputs (vit_jax/storage/gcs.py): fsspec's GCS file system, which etils
# epath uses where EPATH_USE_TF=false, and Google's client, for the workdir lock's generation
# preconditions and TensorBoard's event files.
GCS_REQUIRES = ["gcsfs", "google-cloud-storage>=2.14"]

# `pip install -e .[data]`: the formats researchers pretrain on today (vit_jax/data/): parquet
# (pyarrow), jsonl.zst (zstandard), the Hugging Face hub (datasets) and webdataset shards (brace
# ranges of shard names, `shards-{0000..1023}.tar`, expanded by braceexpand; the shards are read
# by byte range from an index, vit_jax/data/image/webdataset.py says why not by the webdataset
# package, which imports torch).
DATA_REQUIRES = ["pyarrow>=17", "zstandard>=0.22", "datasets>=3.0", "braceexpand>=0.1.7"]

# `pip install -e .[eval]`: the `decoding` evaluator's scores of generated text
# (vit_jax/evaluate/decoding.py): sacrebleu's BLEU and chrF, rouge-score's ROUGE.
EVAL_REQUIRES = ["sacrebleu>=2.4", "rouge-score>=0.1.2"]

TEST_REQUIRES = [
    "pytest",
    "pytest-xdist",
    # Format and lint checks (scripts/lint.sh, settings in pyproject.toml); pinned, since a new
    # release can reformat the tree or add findings.
    "pyink==26.5.1",
    "ruff==0.17.5",
    # Test-only peers (Hugging Face, timm). torch 2.14.1 + torchvision 0.29.1 are the pair that
    # import together here (the CPU-only 2.13.0 has no working torchvision: timm could not import).
    "torch==2.14.1",
    "torchvision==0.29.1",
    "timm",
    "transformers",
    "scikit-image",  # bundled photographs for scripts/photo_folder.py
    # lm-evaluation-harness, for its adapter's test (vit_jax/evaluate/lm_eval_adapter.py); its
    # registry API as of 0.4.13.
    "lm-eval==0.4.13",
    # TensorBoard's profile plugin (xprof), for the test that opens a `profile_steps` trace with
    # its own converters; tensorboard-plugin-profile 2.24 is this package under its old name.
    "xprof==2.24.2",
    # Paths in a bucket, tested on a local Cloud Storage API (tests/gcs_emulator.py); pinned,
    # since the tests add generation preconditions to its request handlers.
    *GCS_REQUIRES,
    *DATA_REQUIRES,
    *EVAL_REQUIRES,
    "webdataset>=0.2.100",  # writes the shards of tests/data/image/test_webdataset.py
    "hypothesis",  # draws the damage of tests/survival/test_damaged_inputs.py (derandomized)
    "gcp-storage-emulator==2026.7.19",
]

# `pip install -e .[cuda]`: JAX's CUDA 13 build (NVIDIA driver 580 or newer) at a fixed version.
CUDA_REQUIRES = [f"jax[cuda13]>={JAX_GPU_VERSION},<{JAX_NEXT}"]

# `pip install -e .[tpu]`: libtpu, whose compiler builds train steps for TPU slices on any machine
# (`python -m vit_jax.compile`, tests/scale/test_aot_tpu.py). Kept out of the test extras: with
# libtpu installed, JAX looks for a TPU when it starts.
TPU_REQUIRES = [f"jax[tpu]=={JAX_VERSION}", "pytest"]

setuptools.setup(
    name="vit_jax",
    version="0.1.0",
    description="Vision Transformers and friends (Mixer, BERT, GPT, seq2seq) in JAX/Flax.",
    python_requires=">=3.11",
    packages=setuptools.find_packages(include=["vit_jax", "vit_jax.*"]),
    install_requires=INSTALL_REQUIRES,
    extras_require={
        "test": TEST_REQUIRES,
        "tpu": TPU_REQUIRES,
        "gcs": GCS_REQUIRES,
        "data": DATA_REQUIRES,
        "eval": EVAL_REQUIRES,
        "cuda": CUDA_REQUIRES,
    },
)
