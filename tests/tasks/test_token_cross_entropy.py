"""The one-pass token cross-entropy against optax's loss and argmax: values, gradients, ties."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from vit_jax.tasks import token_cross_entropy


def _case(seed, shape=(3, 5, 1001), scale=4.0):
  rng = np.random.default_rng(seed)
  logits = jnp.asarray(rng.normal(size=shape) * scale, jnp.float32)
  targets = jnp.asarray(rng.integers(0, shape[-1], shape[:-1]), jnp.int32)
  weights = jnp.asarray(rng.random(shape[:-1]), jnp.float32)
  return logits, targets, weights


def _reference(logits, targets, weights):
  nll = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), targets)
  hits = (jnp.argmax(logits, -1) == targets).astype(jnp.float32)
  return jnp.sum(nll * weights), jnp.sum(hits * weights)


@pytest.mark.parametrize("seed", [0, 1])
def test_loss_hits_and_gradient_match_optax_and_argmax(seed):
  logits, targets, weights = _case(seed)
  # Some targets are the argmax, so the hits are not all zero.
  targets = targets.at[0].set(jnp.argmax(logits[0], -1))
  ours = jax.jit(token_cross_entropy.weighted_cross_entropy)(logits, targets, weights)
  reference = _reference(logits, targets, weights)
  np.testing.assert_allclose(ours[0], reference[0], rtol=1e-6)
  np.testing.assert_allclose(ours[1], reference[1], rtol=1e-6)
  assert float(ours[1]) > 0
  loss = lambda f: lambda x: f(x, targets, weights)[0]
  grad = jax.jit(jax.grad(loss(token_cross_entropy.weighted_cross_entropy)))(logits)
  expected = jax.grad(loss(_reference))(logits)
  np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-7)


def test_ties_count_the_first_maximum_only_as_argmax_does():
  logits = jnp.zeros((1, 3, 7)).at[0, 2, 4].set(1.0).at[0, 2, 6].set(1.0)
  targets = jnp.array([[0, 3, 6]])
  _, hits = token_cross_entropy.nll_and_hits(logits, targets)
  np.testing.assert_array_equal(hits, jnp.argmax(logits, -1) == targets)
  np.testing.assert_array_equal(hits, [[True, False, False]])


def test_large_logits_stay_finite_and_bf16_gives_a_bf16_gradient():
  logits, targets, weights = _case(2, shape=(2, 4, 300), scale=1e4)  # exp overflows unshifted
  nll, _ = token_cross_entropy.weighted_cross_entropy(logits, targets, weights)
  np.testing.assert_allclose(nll, _reference(logits, targets, weights)[0], rtol=1e-5)
  bf16 = logits.astype(jnp.bfloat16) / 1e4
  grad = jax.grad(lambda x: token_cross_entropy.weighted_cross_entropy(x, targets, weights)[0])(
      bf16
  )
  assert grad.dtype == jnp.bfloat16
  expected = jax.grad(lambda x: _reference(x, targets, weights)[0])(bf16.astype(jnp.float32))
  np.testing.assert_allclose(grad.astype(jnp.float32), expected, atol=1e-2)


def test_nan_logits_give_a_nan_loss_for_the_guard():
  logits, targets, weights = _case(3, shape=(1, 2, 50))
  nll, _ = token_cross_entropy.weighted_cross_entropy(
      logits.at[0, 1, 7].set(jnp.nan), targets, weights
  )
  assert np.isnan(float(nll))


def test_logits_masked_to_minus_infinity_give_optax_s_loss():
  """Two parts of a row whose maxima are both -inf merge into a finite sum: the reduction may
  combine any two parts (a GPU's tree does), not only an element with the running value."""
  minus_inf = jnp.float32(-jnp.inf)
  part = (minus_inf, jnp.int32(3), jnp.float32(1.0), jnp.float32(0.0))
  row_max, _, exp_sum, _ = token_cross_entropy._combine(part, part)  # pylint: disable=protected-access
  assert row_max == minus_inf and float(exp_sum) == 2.0  # two elements at the row's max
  logits, targets, weights = _case(4, shape=(2, 3, 64))
  masked = logits.at[..., 1::2].set(minus_inf)  # every other token impossible
  targets = targets - targets % 2  # the targets among the possible ones
  ours = jax.jit(token_cross_entropy.weighted_cross_entropy)(masked, targets, weights)
  np.testing.assert_allclose(ours[0], _reference(masked, targets, weights)[0], rtol=1e-6)
