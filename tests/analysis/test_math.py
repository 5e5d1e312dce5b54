"""The numbers behind the plots, on inputs whose answers are known by hand."""

import numpy as np

from vit_jax.analysis import attention
from vit_jax.analysis import structure
from vit_jax.models import position


def test_rollout_of_identity_attention_is_identity():
  eye_BxHxTxT = np.broadcast_to(np.eye(5), (2, 3, 5, 5))
  np.testing.assert_allclose(
      attention.rollout([eye_BxHxTxT] * 4), np.broadcast_to(np.eye(5), (2, 5, 5))
  )


def test_rollout_adds_the_residual_and_multiplies_layers():
  uniform_1x1x2x2 = np.full((1, 1, 2, 2), 0.5)
  # One layer: (0.5 + I) / 2 -> [[0.75, 0.25], [0.25, 0.75]]; two layers: its square.
  one = np.array([[0.75, 0.25], [0.25, 0.75]])
  np.testing.assert_allclose(attention.rollout([uniform_1x1x2x2])[0], one)
  np.testing.assert_allclose(attention.rollout([uniform_1x1x2x2] * 2)[0], one @ one)


def test_mean_attention_distance_of_a_hand_built_matrix():
  # A 1x3 grid of 4-pixel patches plus a cls token (index 0), two heads.
  weights_1x2x4x4 = np.zeros((1, 2, 4, 4))
  weights_1x2x4x4[0, 0, 1:, 1:] = np.eye(3)  # head 0: every patch attends to itself
  weights_1x2x4x4[0, 0, 0, :] = 0.25
  # Head 1: patch 0 -> half itself, half patch 2 (8 px away); patch 1 -> all on patch 0 (4 px);
  # patch 2 -> 0.4 on cls, 0.4 on patch 1, 0.2 on itself: cls has no place in the image, so
  # the patch weights are renormalized to 2/3 on patch 1 (4 px) and 1/3 on itself.
  weights_1x2x4x4[0, 1, 1, [1, 3]] = 0.5
  weights_1x2x4x4[0, 1, 2, 1] = 1.0
  weights_1x2x4x4[0, 1, 3, [0, 2, 3]] = [0.4, 0.4, 0.2]
  distances = attention.mean_attention_distance(
      weights_1x2x4x4, grid=(1, 3), patch=(4, 4), prefix_tokens=1
  )
  expected_head1 = np.mean([0.5 * 8, 4.0, 2 / 3 * 4])
  np.testing.assert_allclose(distances, [0.0, expected_head1])


def test_patch_distances_are_euclidean_in_pixels():
  distances_NxN = attention.patch_distances((2, 2), (16, 16))
  np.testing.assert_allclose(distances_NxN[0], [0, 16, 16, 16 * np.sqrt(2)])


def test_sincos_position_similarity_decreases_with_grid_distance():
  rows = cols = 8
  similarity_NxN = structure.position_similarity(position.sincos_2d(rows, cols, 64))
  y_N, x_N = [a.reshape(-1) for a in np.mgrid[:rows, :cols]]
  for centre in (0, 3 * cols + 4, rows * cols - 1):
    step_N = np.maximum(abs(y_N - y_N[centre]), abs(x_N - x_N[centre]))  # grid rings
    ring_means = [similarity_NxN[centre][step_N == d].mean() for d in range(step_N.max() + 1)]
    assert np.all(np.diff(ring_means) < 0), ring_means
    # Along a row, each of the first steps away is less similar (far off, sin-cos oscillates).
    same_row = similarity_NxN[centre][y_N == y_N[centre]]
    nearby = same_row[x_N[centre] : x_N[centre] + 4]
    assert np.all(np.diff(nearby) < 0), nearby


def test_filter_pca_recovers_known_components():
  rng = np.random.default_rng(0)
  shape, num_filters = (4, 4, 3), 500
  basis_FxK, _ = np.linalg.qr(rng.normal(size=(np.prod(shape), 3)))
  scales_K = np.array([5.0, 2.0, 0.5])  # distinct variances fix the order
  coefficients_DxK = rng.normal(size=(num_filters, 3)) * scales_K
  filters_DxF = coefficients_DxK @ basis_FxK.T + 3.0  # an offset PCA must centre away
  kernel_PxQxCxD = filters_DxF.T.reshape(*shape, num_filters)
  components_KxPxQxC, ratios_K = structure.filter_pca(kernel_PxQxCxD, 3)
  recovered_KxF = components_KxPxQxC.reshape(3, -1)
  cosines_K = np.abs(np.sum(recovered_KxF * basis_FxK.T, axis=1))
  np.testing.assert_allclose(cosines_K, 1.0, atol=1e-3)
  np.testing.assert_allclose(ratios_K, scales_K**2 / np.sum(scales_K**2), atol=0.05)
  assert np.all(np.diff(ratios_K) < 0)
