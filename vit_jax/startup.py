"""Process start-up: quiet third-party logs in our commands, and TensorFlow kept off accelerators.

Every command line (main, generate, convert, visualize, predict, evaluate, compile, prepare,
sweep) calls `quiet_startup()` first thing. Without it a run prints TensorFlow's C++ notices
(oneDNN, CPU features, "All log messages before absl::InitializeLog() is called ..."), tf.data
warnings, and orbax's warnings on every checkpoint read ("Metadata file does not exist"). To see
them all again, set VIT_JAX_VERBOSE=1 or pass absl's --verbosity (main, generate). Library use
(tests, notebooks) keeps the libraries' logging.

`hide_accelerators_from_tf()` is the one place that keeps TensorFlow off GPUs and TPUs; the image
data package calls it on import, before any TF op can run.

`use_compilation_cache(path)` points JAX's persistent compilation cache at `path` (the trainer:
`compilation_cache_path`, WORKDIR/compilation_cache unless `--config.compilation_cache_dir` or
JAX_COMPILATION_CACHE_DIR says otherwise), so a restarted
or resumed run loads its compiled programs instead of compiling them again. Programs that took
less than `CACHE_MIN_COMPILE_SECS` to compile are not written: reading them back would save
little. JAX's own JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS, when set, is the threshold instead
(the tests set 0: they compile the same small programs many times over). Only process 0 of a
multi-process job writes entries (JAX's rule); every process reads.

`set_cpu_xla_defaults()` sets the XLA flags the trainer wants on CPU (read when the backend
starts): `--xla_cpu_experimental_ynn_fusion_type=-individual_dot,-individual_convolution`.
XLA:CPU by default hands each lone dot and convolution to the YNNPACK library; at the widths of
our small models (192-384) its own emitted loops are faster for those. `python -m
benchmarks.flag_ab` on 2 cores: ViT-Ti/16 and ViT-S/16 steps 1.25x and 1.35x, BERT 1.22x, the
GPTs 0.95-0.99x, a lone 4096^2 matmul 0.60x (benchmarks/README.md). The flag is a CPU-backend
option: runs on GPU or TPU never get it. A value the user already put in XLA_FLAGS wins.

`threefry_kernel_lowering(on)` sets JAX's option of that name while a program is traced and
lowered: the trainer's fresh state is drawn with it on where INIT_THREEFRY_KERNEL_PLATFORMS says
(GPUs), which compiles GPT-2's initialisation about eight times faster.
"""

import contextlib
import importlib.util
import logging
import os
import sys

VERBOSE_ENV = "VIT_JAX_VERBOSE"
# Python loggers of libraries that report benign events at WARNING (orbax logs through absl;
# urllib3 each retry of a download, which its failure sums up in one line: data/tfds_builders.py;
# Hugging Face's datasets, at INFO on import, the frameworks it finds: data/hub.py).
_QUIETED_LOGGERS = ("absl", "tensorflow", "urllib3.connectionpool", "datasets")


class _ErrorsOnly(logging.Filter):
  """Drops records below ERROR. A filter, not a level: main and generate set absl's verbosity."""

  def filter(self, record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR


_ERRORS_ONLY = _ErrorsOnly()


def verbose_requested() -> bool:
  """True when the user asked for library logs: VIT_JAX_VERBOSE=1, or absl's --verbosity/-v."""
  if os.environ.get(VERBOSE_ENV, "").strip().lower() not in ("", "0", "false", "no"):
    return True
  from absl import flags  # pylint: disable=g-import-not-at-top  (absl is light; argparse CLIs)

  return flags.FLAGS.is_parsed() and "verbosity" in flags.FLAGS and flags.FLAGS["verbosity"].present


def quiet_startup(verbose: bool | None = None) -> None:
  """Silences TF's C++ logs and absl/orbax/TF Python warnings, unless `verbose` (or requested).

  Call before TensorFlow is imported: TF reads TF_CPP_MIN_LOG_LEVEL when it loads. Errors still
  print. A TF_CPP_MIN_LOG_LEVEL the user set is kept.
  """
  if verbose is None:
    verbose = verbose_requested()
  if verbose:
    return
  # 2: C++ INFO and WARNING hidden (TF and XLA), errors kept. Nothing logged before absl's
  # InitializeLog also means absl prints no "All log messages before ..." notice.
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  # TF 2.21 logs its oneDNN notice while it loads, whatever TF_CPP_MIN_LOG_LEVEL says; only
  # turning oneDNN's TF kernels off removes it. TF only feeds data here (decode, crop, resize,
  # augment), and the digits pipeline's train and eval batches are bit-identical either way.
  os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
  for name in _QUIETED_LOGGERS:
    logger = logging.getLogger(name)
    if _ERRORS_ONLY not in logger.filters:
      logger.addFilter(_ERRORS_ONLY)


def import_tensorflow():
  """TensorFlow, imported without Keras where Keras is not loaded yet: TF imports Keras's
  optimizers at import time, to register them for loading SavedModels, which we never do; that
  took 1.4 of TF's 3.5 s to import here. TF handles the refused import as Keras being absent;
  `tf.keras` still loads Keras on first use."""
  # pylint: disable=g-import-not-at-top
  if "tensorflow" in sys.modules or "keras" in sys.modules:
    import tensorflow as tf

    return tf
  sys.modules["keras"] = None  # `import keras...` raises ImportError while TF imports
  try:
    import tensorflow as tf
  finally:
    del sys.modules["keras"]
  return tf


def hide_accelerators_from_tf() -> None:
  """TF only feeds data: the GPUs/TPUs (and their memory) belong to JAX. Imports TensorFlow.

  Effective until TF runs its first op; later calls change nothing (TF allows no change then).
  """
  tf = import_tensorflow()

  for kind in ("GPU", "TPU"):
    try:
      tf.config.set_visible_devices([], kind)
    except (RuntimeError, ValueError):  # TF already initialized its devices: too late to change.
      pass


CPU_FLAGS = {
    "--xla_cpu_experimental_ynn_fusion_type": "-individual_dot,-individual_convolution",
}


def runs_on_cpu() -> bool:
  """Whether JAX will pick the CPU: JAX_PLATFORMS says so, or no accelerator plugin (libtpu,
  CUDA, ROCm) is installed. Decided before the backend starts, so nothing of JAX is imported."""
  platforms = os.environ.get("JAX_PLATFORMS", "")
  if platforms:
    return platforms.split(",")[0].strip() == "cpu"
  plugins = ("libtpu", "jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm7_plugin")
  return not any(importlib.util.find_spec(name) for name in plugins)


def set_cpu_xla_defaults() -> None:
  """Appends each default to XLA_FLAGS unless the user set that flag, on CPU only; call before
  jax starts."""
  if not runs_on_cpu():
    return
  current = os.environ.get("XLA_FLAGS", "")
  extra = [f"{flag}={value}" for flag, value in CPU_FLAGS.items() if flag not in current]
  if extra:
    os.environ["XLA_FLAGS"] = " ".join([current, *extra]).strip()


# Where a run's fresh state (training/train.py's `Setup.fresh_state`) draws its random numbers by
# JAX's Threefry kernel, one kernel call per hash, rather than by the hash's rounds inlined into
# the program (JAX's default on GPUs since 0.4.27). GPT-2 124M's initialisation then compiles for
# an H100 in 11 to 13 s instead of 91 to 101 s, its program 2.8 M characters instead of 8.7 M
# (2-core CPU, deviceless compile: `benchmarks/gpu_choices.py --program --only gpt2_init`,
# benchmarks/README.md); the price is 0.43 GiB of temporaries, once. The bits are the same: one
# algorithm on the same keys and counts, in integer arithmetic. The update step keeps JAX's
# default: there a dropout mask's bits are made inside the fusion that uses them, where the
# kernel writes them, its keys and counts to memory (7 times the bytes of a bf16 array's dropout,
# the same README).
INIT_THREEFRY_KERNEL_PLATFORMS = ("gpu",)


@contextlib.contextmanager
def threefry_kernel_lowering(on: bool):
  """JAX's `jax_threefry_gpu_kernel_lowering` set to `on` for what is traced and lowered inside.
  Only the hash's CUDA and ROCm lowerings read it: CPU and TPU programs are the same either way."""
  import jax  # pylint: disable=g-import-not-at-top  (jax starts only when a command asks for it)

  before = jax.config.jax_threefry_gpu_kernel_lowering
  jax.config.update("jax_threefry_gpu_kernel_lowering", on)
  try:
    yield
  finally:
    jax.config.update("jax_threefry_gpu_kernel_lowering", before)


# jaxlib releases whose NVIDIA GPU build adds an fp32 scatter's updates with a compare-and-swap
# loop (openxla/xla issue 46225, jax-ml/jax issue 38806), from the first to the fixed one.
SLOW_GPU_SCATTER_JAXLIB = ((0, 10, 2), (0, 11, 1))


def slow_gpu_scatter_note() -> str | None:
  """A one-line note when this process runs on a GPU with one of those jaxlibs, else None."""
  # pylint: disable-next=g-import-not-at-top  (jax starts only when a command asks for it)
  import jax
  import jaxlib

  if jax.default_backend() != "gpu":
    return None
  version = tuple(int(part) for part in jaxlib.__version__.split(".")[:3] if part.isdigit())
  first, fixed = SLOW_GPU_SCATTER_JAXLIB
  if not first <= version < fixed:
    return None
  return (
      f"note: jaxlib {jaxlib.__version__} adds scatters on a GPU with a slow compare-and-swap loop "
      f"(fixed in {'.'.join(map(str, fixed))}): steps whose gradients scatter (token embeddings) "
      "run slower; upgrade with pip install -e '.[cuda]'"
  )


CACHE_MIN_COMPILE_SECS = 0.5
MIN_COMPILE_SECS_VARIABLE = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"


def compilation_cache_path(configured: str | None, workdir_cache: str) -> str | None:
  """The persistent compilation cache a run uses: `configured` (`--config.compilation_cache_dir`)
  when given, "" meaning none; else JAX's own JAX_COMPILATION_CACHE_DIR when set, one cache that
  every run on a machine shares (a sweep's runs, a CI job's); else `workdir_cache`, the
  workdir's own."""
  if configured is not None:
    return configured or None
  return os.environ.get("JAX_COMPILATION_CACHE_DIR") or workdir_cache


def use_compilation_cache(path: str | None) -> None:
  """Compiled programs are read from and written to `path` from now on (None: no cache)."""
  # pylint: disable=g-import-not-at-top  (jax starts only when a command asks for it)
  import jax
  from jax.experimental.compilation_cache import compilation_cache

  if jax.config.jax_compilation_cache_dir == path:
    return
  # JAX opens its cache once, at the first compile after a path is set: forget the old one, for
  # a process that trains in several workdirs (tests, notebooks).
  compilation_cache.reset_cache()
  jax.config.update("jax_compilation_cache_dir", path)
  if MIN_COMPILE_SECS_VARIABLE not in os.environ:  # JAX read the user's own value at import
    jax.config.update("jax_persistent_cache_min_compile_time_secs", CACHE_MIN_COMPILE_SECS)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)  # any size
