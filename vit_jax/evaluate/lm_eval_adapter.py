"""Our causal LMs in EleutherAI's lm-evaluation-harness (`pip install lm-eval`), as model "vit_jax".

    import lm_eval
    from vit_jax.evaluate import lm_eval_adapter  # registers "vit_jax"
    lm_eval.simple_evaluate(model="vit_jax", model_args="workdir=W", tasks=["lambada_openai"])

or the harness's own command line with the model registered first:

    python -m vit_jax.evaluate.lm_eval_adapter --model vit_jax --model_args workdir=W \
        --tasks hellaswag

`workdir` is anything `vit_jax.convert` reads that holds a GPT and its tokenizer: one of our
workdirs, or a Hugging Face GPT-2 directory with tokenizer.json. Context and continuation are
tokenized separately and joined (an empty context is the EOS token); a sequence longer than the
model's context keeps its last max_len + 1 tokens. `loglikelihood_rolling` scores every token once
in the harness's disjoint windows of max_len tokens after an EOS prefix; `generate_until` decodes
greedily with the KV cache (vit_jax.models.sampling) and cuts at the first stop string.
"""

import functools

import jax
import jax.numpy as jnp
from lm_eval import utils as lm_eval_utils
from lm_eval.api import model as lm_eval_model
from lm_eval.api import registry as lm_eval_registry
import numpy as np

from vit_jax import errors
from vit_jax import interop
from vit_jax import tasks
from vit_jax.config import args as config_args
from vit_jax.models import sampling

NAME = "vit_jax"


@lm_eval_registry.register_model(NAME)
class VitJaxLM(lm_eval_model.LM):
  """A causal LM of ours, scored in batches of `batch_size` rows."""

  def __init__(self, workdir: str, batch_size=16, max_gen_toks: int = 256, **unused):
    super().__init__()
    del unused  # the harness passes device and max_batch_size to every model
    ckpt = interop.load(workdir)
    if tasks.task_of_model(ckpt.model["name"]) != "causal_lm":
      raise errors.ConfigError(
          f"{workdir} holds a {ckpt.model['name']!r} model; the harness scores causal LMs (GPT)."
      )
    if ckpt.tokenizer is None:
      raise errors.MissingFileError(f"{workdir} has no tokenizer; the harness needs one.")
    self.model_config = dict(ckpt.model)
    self.params = ckpt.tree()
    self.tokenizer = ckpt.tokenizer
    self.max_length = int(self.model_config["max_len"])
    size = str(batch_size)
    self.batch_size = int(size) if config_args.is_digits(size) else 16  # "auto": 16
    self.max_gen_toks = int(max_gen_toks)
    self.eos_id = self.tokenizer.eos_id if self.tokenizer.eos_id is not None else 0
    model = ckpt.module()

    @jax.jit
    def token_logprobs(params, inputs_BxL, targets_BxL, segment_ids_BxL):
      """log p(target) at each position, and whether the target is the argmax."""
      positions_BxL = jnp.broadcast_to(jnp.arange(inputs_BxL.shape[1]), inputs_BxL.shape)
      logits_BxLxV = model.apply({"params": params}, inputs_BxL, positions_BxL, segment_ids_BxL)
      logp_BxLxV = jax.nn.log_softmax(logits_BxLxV.astype(jnp.float32), axis=-1)
      picked_BxL = jnp.take_along_axis(logp_BxLxV, targets_BxL[..., None], axis=-1)[..., 0]
      return picked_BxL, jnp.argmax(logp_BxLxV, axis=-1) == targets_BxL

    self._token_logprobs = functools.partial(token_logprobs, self.params)

  # ---- Scoring --------------------------------------------------------------------------------
  def encode(self, text: str) -> list[int]:
    return list(self.tokenizer.encode(text))

  def score(self, pairs: list[tuple[list[int], list[int]]]) -> list[tuple[float, bool]]:
    """(sum of log p(continuation | context), whether greedy decoding gives the continuation)
    for (context ids, continuation ids) pairs, in batches."""
    results = []
    for start in range(0, len(pairs), self.batch_size):
      chunk = pairs[start : start + self.batch_size]
      rows = [(context + continuation)[-(self.max_length + 1) :] for context, continuation in chunk]
      width = _bucket(max(len(row) - 1 for row in rows), self.max_length)
      inputs, targets, segments = (np.zeros((self.batch_size, width), np.int32) for _ in range(3))
      for i, row in enumerate(rows):
        inputs[i, : len(row) - 1], targets[i, : len(row) - 1] = row[:-1], row[1:]
        segments[i, : len(row) - 1] = 1
      logp_BxL, greedy_BxL = jax.device_get(self._token_logprobs(inputs, targets, segments))
      for i, (row, (_, continuation)) in enumerate(zip(rows, chunk)):
        scored = slice(len(row) - 1 - len(continuation), len(row) - 1)  # the continuation's
        results.append((float(np.sum(logp_BxL[i, scored])), bool(np.all(greedy_BxL[i, scored]))))
    return results

  # ---- The harness's three requests ------------------------------------------------------------
  def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
    del disable_tqdm
    pairs = []
    for context, continuation in (request.args for request in requests):
      pairs.append((self.encode(context) if context else [self.eos_id], self.encode(continuation)))
    return self.score(pairs)

  def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
    del disable_tqdm
    totals = []
    for (text,) in (request.args for request in requests):
      windows = lm_eval_utils.get_rolling_token_windows(
          token_list=self.encode(text),
          prefix_token=self.eos_id,
          max_seq_len=self.max_length,
          context_len=1,
      )
      pairs = [lm_eval_utils.make_disjoint_window(window) for window in windows]
      totals.append(sum(logprob for logprob, _ in self.score(pairs)))
    return totals

  def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
    del disable_tqdm
    outputs = []
    for context, gen_kwargs in (request.args for request in requests):
      until = gen_kwargs.get("until") or []
      until = [until] if isinstance(until, str) else list(until)
      max_new = int(gen_kwargs.get("max_gen_toks", self.max_gen_toks))
      prompt = (self.encode(context) or [self.eos_id])[-(self.max_length - max_new) :]
      (new_ids,) = sampling.generate(
          self.model_config,
          self.params,
          [prompt],
          max_new_tokens=max_new,
          temperature=0.0,  # greedy, as the harness asks of generate_until
          eos_id=self.tokenizer.eos_id,
      )
      text = self.tokenizer.decode(new_ids)
      cuts = [text.index(stop) for stop in until if stop and stop in text]
      outputs.append(text[: min(cuts)] if cuts else text)
    return outputs


def _bucket(length: int, max_length: int) -> int:
  """A row width of at least `length`: the next power of two (few shapes to compile)."""
  return min(max_length, 1 << max(length - 1, 0).bit_length())


if __name__ == "__main__":
  from lm_eval import __main__ as lm_eval_main  # pylint: disable=g-import-not-at-top

  lm_eval_main.cli_evaluate()
