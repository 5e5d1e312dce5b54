"""Loads any model we can read for inspection and prediction: one of our workdirs (with the task,
image size, dataset and tokenizer it was trained with), or an imported checkpoint (`.npz`,
Hugging Face directory) through `vit_jax.interop`."""

import dataclasses
import json

from vit_jax import errors
from vit_jax import interop
from vit_jax import storage
from vit_jax import tasks
from vit_jax import workdir as workdir_lib
from vit_jax.config import args as config_args
from vit_jax.config import defaults as config_defaults
from vit_jax.interop import assets as interop_assets
from vit_jax.interop import models as interop_models

TEXT_MODELS = ("gpt",) + interop_models.BERT_NAMES
DEFAULT_IMAGE_SIZE = 224  # for imported models whose size the params do not tell (sin-cos)


@dataclasses.dataclass
class Loaded:
  """A model ready to apply: `module.apply({"params": params}, ...)`."""

  path: str
  model: dict  # our model config
  module: object
  params: dict  # nested
  flat: dict  # "a/b/c" -> array
  workdir_config: dict  # the workdir's config.json; {} for an imported checkpoint
  notes: list

  @property
  def name(self) -> str:
    return self.model["name"]

  @property
  def is_text(self) -> bool:
    return self.name in TEXT_MODELS

  @property
  def task(self) -> str:
    """The workdir's task, or the one an imported model's head implies."""
    if self.workdir_config:
      return self.workdir_config["task"]
    return tasks.task_of_model(self.name)


def _workdir_config(path: str) -> dict:
  """Our workdir's config.json, with the keys added since (`defaults.from_saved`); {} for
  anything else (a Hugging Face config has no "task")."""
  config_path = workdir_lib.config_path(path)
  if not storage.isfile(config_path):
    return {}
  config = json.loads(storage.read_text(config_path))
  return config_defaults.from_saved(config) if "task" in config else {}


def load(path: str) -> Loaded:
  """Reads `path` with every layer its own module (no scan, no remat: same params, and the
  attention weights can be sown per layer)."""
  if not storage.exists(path):
    raise errors.MissingFileError(
        f"{path} does not exist; pass one of our workdirs, an .npz or a "
        "Hugging Face model directory."
    )
  config = _workdir_config(path) if storage.isdir(path) else {}
  if config and not _has_checkpoint(path):
    raise errors.MissingFileError(
        f"The workdir {path} has no checkpoint yet (nothing in "
        f"{workdir_lib.checkpoints_dir(path)}); train it with vit_jax.main "
        "first or pass another workdir."
    )
  probe = interop.load(path)
  if probe.model.get("name") not in ("vit",) + TEXT_MODELS:
    raise errors.ConfigError(
        f"Cannot visualize a {probe.model.get('name')!r} model; ViT, BERT and GPT "
        "models can be visualized."
    )
  ckpt = interop.Checkpoint(
      probe.params, {**probe.model, "scan_layers": False, "remat": "none"}, probe.notes
  )
  return Loaded(
      path=path,
      model=ckpt.model,
      module=ckpt.module(),
      params=ckpt.tree(),
      flat=ckpt.params,
      workdir_config=config,
      notes=list(ckpt.notes),
  )


def _has_checkpoint(workdir: str) -> bool:
  directory = workdir_lib.checkpoints_dir(workdir)
  return storage.isdir(directory) and any(
      config_args.is_digits(d) and storage.isdir(storage.join(directory, d, workdir_lib.STATE_ITEM))
      for d in storage.listdir(directory)
  )


def patch_size(loaded: Loaded):
  return tuple(int(s) for s in loaded.flat["embedding/kernel"].shape[:2])


def image_size(loaded: Loaded, override: int | None = None) -> int:
  """The resolution the model was trained at: the workdir's, or the learned position table's."""
  if override:
    return override
  if loaded.workdir_config:
    return int(loaded.workdir_config["image_size"])
  table = loaded.flat.get("Transformer/posembed_input/pos_embedding")
  if table is None:
    return DEFAULT_IMAGE_SIZE
  rows, _ = interop_models.grid_of(table.shape[1], loaded.model.get("classifier") == "token")
  return rows * patch_size(loaded)[0]


def prefix_tokens(loaded: Loaded) -> int:
  return 1 if loaded.model.get("classifier", "token") == "token" else 0


def require_image_model(loaded: Loaded) -> None:
  if loaded.name != "vit":
    raise errors.ConfigError(
        f"{loaded.path} is a text model ({loaded.name}); image plots need a ViT. "
        "Pass --text instead of --image."
    )


def require_text_model(loaded: Loaded) -> None:
  if not loaded.is_text:
    raise errors.ConfigError(
        f"{loaded.path} is an image model ({loaded.name}); pass --image files, " "not --text."
    )


def tokenizer(loaded: Loaded):
  """The workdir's tokenizer, or an imported directory's `tokenizer.json`."""
  from vit_jax.data import tokenizers  # pylint: disable=g-import-not-at-top

  if loaded.workdir_config:
    return tokenizers.load_tokenizer(workdir_lib.tokenizer_dir(loaded.path))
  hf_file = storage.join(loaded.path, interop_assets.HF_TOKENIZER)
  if storage.isdir(loaded.path) and storage.isfile(hf_file):
    return tokenizers.load_pretrained(hf_file)
  raise errors.MissingFileError(
      f"No tokenizer for {loaded.path}: text needs one of our workdirs or a "
      "Hugging Face directory with tokenizer.json."
  )
