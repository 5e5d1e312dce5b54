"""Draws the synthetic_shapes examples: 32x32 RGB images, each a pure function of (seed, index).

An example's label is `index % 10` (every split is balanced), and all its randomness is a
counter-based hash of (seed, index) (`hashed_uniforms`): a fixed vector of uniforms that sets
every parameter, then the pixel noise. So examples can be drawn in any order or alone, and
`draw_many` renders a batch at once (vectorised over examples) with the very same result,
about 0.25 ms of CPU per image. Each image is

  background  a linear gradient between two random colours, with 0-5 faint strokes and dots,
  object      the class's shape at a random position (centre within 7 px of the image centre),
              scale (radius 4.5..11 px) and rotation, in a random colour at least 0.25 away in
              luminance from the background's mean, lit by a mild linear gradient,
  noise       uniform pixel noise with a standard deviation of 0.02..0.08 (of the 0..1 range).

The two texture classes fill a disk or square window with their pattern (stripes within 20
degrees of horizontal, or a checkerboard at any angle; period 2.5..5 px), alternating the
object's colour with the background, so their outline says nothing about the class.

Every item is a signed distance field in pixels (negative inside), evaluated at the 32x32 pixel
centres; a pixel's coverage is 0.5 - distance clipped to [0, 1], which anti-aliases edges about
as well as 4x4 supersampling at a sixteenth of the cost.
"""

from typing import Sequence

import numpy as np

CLASS_NAMES = (
    "disk",
    "square",
    "triangle",
    "plus",
    "ring",
    "star",
    "hexagon",
    "stripes",
    "checkerboard",
    "ellipse",
)
NUM_CLASSES = len(CLASS_NAMES)
IMAGE_SIZE = 32
_MIN_CONTRAST = 0.25  # luminance difference (0..1) between object and background
_LUMA_3 = np.array([0.299, 0.587, 0.114], np.float32)
_MAX_CLUTTER = 5
_COLOUR_TRIES = 8  # candidate object colours; the first with enough contrast is used
_NUM_UNIFORMS = 128  # per example; the parameters take a fixed prefix (changing it changes data)

# Pixel centres, (32, 32), relative to the image centre.
_COORDS = np.arange(IMAGE_SIZE, dtype=np.float32) + 0.5 - IMAGE_SIZE / 2
Y_SxS, X_SxS = np.meshgrid(_COORDS, _COORDS, indexing="ij")


def label_of(index: int) -> int:
  return index % NUM_CLASSES


def draw(seed: int, index: int) -> np.ndarray:
  """The example `index` of the split seeded `seed`: uint8 (32, 32, 3) of class label_of(index)."""
  return draw_many(seed, [index])[0]


def draw_many(seed: int, indices: Sequence[int]) -> np.ndarray:
  """uint8 (N, 32, 32, 3): example i is draw(seed, indices[i])."""
  indices_N = np.asarray(indices, np.int64).reshape(-1)
  pixels = IMAGE_SIZE * IMAGE_SIZE * 3
  uniforms_NxK = hashed_uniforms(seed, indices_N, _NUM_UNIFORMS + pixels)
  p = _Params(uniforms_NxK[:, :_NUM_UNIFORMS])
  # Uniform noise with unit variance (Gaussian would cost a log and a cosine per value).
  noise_NxSxSx3 = (uniforms_NxK[:, _NUM_UNIFORMS:] - 0.5).reshape(-1, IMAGE_SIZE, IMAGE_SIZE, 3)
  noise_NxSxSx3 *= np.sqrt(12.0)
  labels_N = indices_N % NUM_CLASSES

  image_NxSxSx3, background_Nx3 = _background(p)
  _add_clutter(p, image_NxSxSx3)
  coverage_NxSxS = _coverage(_object_distance(p, labels_N))
  colour_NxSxSx3 = _object_colour(p, background_Nx3)
  image_NxSxSx3 += coverage_NxSxS[..., None] * (colour_NxSxSx3 - image_NxSxSx3)
  image_NxSxSx3 += _bcast(p.uniform(0.02, 0.08), 4) * noise_NxSxSx3
  return np.round(np.clip(image_NxSxSx3, 0.0, 1.0) * 255.0).astype(np.uint8)


def hashed_uniforms(seed: int, indices_N: np.ndarray, count: int) -> np.ndarray:
  """float32 (N, count) in [0, 1): the first `count` numbers of a SplitMix64 stream keyed by
  (seed, index) for each index. Counter-based, so computed for all examples at once; and it
  depends on no library's generator, so the data cannot change with a numpy upgrade."""
  key_N = _mix64(_mix64(np.full(len(indices_N), seed, np.uint64)) ^ indices_N.astype(np.uint64))
  steps_K = np.arange(1, count + 1, dtype=np.uint64) * _GOLDEN
  z_NxK = _mix64(key_N[:, None] + steps_K[None, :])
  return (z_NxK >> np.uint64(40)).astype(np.float32) * np.float32(2.0**-24)


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix64(z: np.ndarray) -> np.ndarray:
  """SplitMix64's finaliser, a bijective hash of uint64 arrays (arithmetic wraps mod 2^64)."""
  z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
  z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
  return z ^ (z >> np.uint64(31))


class _Params:
  """Hands out the per-example uniforms column by column: each parameter has a fixed column."""

  def __init__(self, uniforms_NxK: np.ndarray):
    self._uniforms_NxK = uniforms_NxK
    self._used = 0

  def uniform(self, low: float, high: float, count: int | None = None) -> np.ndarray:
    """(N,) values in [low, high), or (N, count) if count is given."""
    n = 1 if count is None else count
    if self._used + n > self._uniforms_NxK.shape[1]:
      raise AssertionError("_NUM_UNIFORMS is too small for the parameters drawn")
    u = self._uniforms_NxK[:, self._used : self._used + n]
    self._used += n
    values = low + (high - low) * u
    return values[:, 0] if count is None else values


def _bcast(x_N: np.ndarray, ndim: int = 3) -> np.ndarray:
  """(N,) -> (N, 1, ...) with `ndim` dimensions, to broadcast against images."""
  return x_N.reshape(x_N.shape + (1,) * (ndim - x_N.ndim))


def _coverage(distance: np.ndarray) -> np.ndarray:
  """Signed distance in pixels -> anti-aliased coverage in [0, 1]."""
  return np.clip(0.5 - distance, 0.0, 1.0)


def _ramp(angle_N: np.ndarray) -> np.ndarray:
  """(N, 32, 32): a linear ramp along each angle, -1 .. 1 corner to corner."""
  cos, sin = _bcast(np.cos(angle_N)), _bcast(np.sin(angle_N))
  return (X_SxS * cos + Y_SxS * sin) / (IMAGE_SIZE / 2**0.5)


def _background(p: _Params):
  """A linear gradient between two colours (float (N, 32, 32, 3) in 0..1) and its mean colour."""
  mean_Nx3 = p.uniform(0.0, 1.0, 3)
  half_difference_Nx3 = p.uniform(-0.15, 0.15, 3)
  ramp_NxSxSx1 = _ramp(p.uniform(0.0, 2 * np.pi))[..., None]
  image_NxSxSx3 = mean_Nx3[:, None, None, :] + ramp_NxSxSx1 * half_difference_Nx3[:, None, None, :]
  return image_NxSxSx3, mean_Nx3


def _add_clutter(p: _Params, image_NxSxSx3: np.ndarray) -> None:
  """0-5 faint strokes (4..14 px long, 0.6..1.2 px wide) or dots (radius 0.8..2.5 px), in place.

  Each item is a capsule: the points within `half_width` of a segment (of length 0: a dot).
  """
  count_N = np.floor(p.uniform(0, _MAX_CLUTTER + 1))
  for slot in range(_MAX_CLUTTER):  # later items paint over earlier ones
    x0_N, y0_N = p.uniform(-16, 16), p.uniform(-16, 16)
    is_stroke_N = p.uniform(0, 1) < 0.5
    length_N = np.where(is_stroke_N, p.uniform(4, 14), 0.0)
    half_width_N = np.where(is_stroke_N, p.uniform(0.3, 0.6), p.uniform(0.8, 2.5))
    angle_N, alpha_N, colour_Nx3 = p.uniform(0, np.pi), p.uniform(0.25, 0.6), p.uniform(0, 1, 3)
    m = slot < count_N  # the examples with an item in this slot; only they are drawn on
    dx, dy = _bcast(np.cos(angle_N[m])), _bcast(np.sin(angle_N[m]))
    rx, ry = X_SxS - _bcast(x0_N[m]), Y_SxS - _bcast(y0_N[m])
    along = np.clip(rx * dx + ry * dy, 0, _bcast(length_N[m]))
    distance_mxSxS = np.hypot(rx - along * dx, ry - along * dy) - _bcast(half_width_N[m])
    alpha_mxSxSx1 = (_bcast(alpha_N[m]) * _coverage(distance_mxSxS))[..., None]
    image_mxSxSx3 = image_NxSxSx3[m]
    image_NxSxSx3[m] = image_mxSxSx3 + alpha_mxSxSx1 * (
        colour_Nx3[m][:, None, None, :] - image_mxSxSx3
    )


def _object_colour(p: _Params, background_Nx3: np.ndarray) -> np.ndarray:
  """(N, 32, 32, 3): the first candidate colour with luminance at least _MIN_CONTRAST from the
  background's (black or white if none has: rare, mid-grey backgrounds), lit by a gradient."""
  candidates_NxTx3 = p.uniform(0.0, 1.0, _COLOUR_TRIES * 3).reshape(-1, _COLOUR_TRIES, 3)
  background_luma_N = background_Nx3 @ _LUMA_3
  contrast_NxT = np.abs(candidates_NxTx3 @ _LUMA_3 - background_luma_N[:, None])
  ok_NxT = contrast_NxT >= _MIN_CONTRAST
  first_N = np.argmax(ok_NxT, axis=1)
  colour_Nx3 = candidates_NxTx3[np.arange(len(first_N)), first_N]
  fallback_Nx3 = np.repeat((background_luma_N <= 0.5).astype(np.float32)[:, None], 3, axis=1)
  colour_Nx3 = np.where(ok_NxT.any(axis=1)[:, None], colour_Nx3, fallback_Nx3)
  light_NxSxS = 1.0 + _bcast(p.uniform(0.0, 0.2)) * _ramp(p.uniform(0.0, 2 * np.pi))
  return colour_Nx3[:, None, None, :] * light_NxSxS[..., None]


def _object_distance(p: _Params, labels_N: np.ndarray) -> np.ndarray:
  """Signed distance in pixels (N, 32, 32) to each example's shape at its random pose."""
  cx, cy = _bcast(p.uniform(-7.0, 7.0)), _bcast(p.uniform(-7.0, 7.0))
  radius_N = p.uniform(4.5, 11.0)
  angle_N = p.uniform(0.0, 2 * np.pi)
  angle_N = np.where(labels_N == CLASS_NAMES.index("stripes"), (angle_N - np.pi) / 9, angle_N)
  shape_Nx4 = p.uniform(0.0, 1.0, 4)  # what varies within a class, e.g. a ring's thickness
  dx_NxSxS, dy_NxSxS = X_SxS - cx, Y_SxS - cy
  cos, sin, radius = _bcast(np.cos(angle_N)), _bcast(np.sin(angle_N)), _bcast(radius_N)
  # Each object's frame: rotated by its angle, in units of its radius.
  u_NxSxS = (dx_NxSxS * cos + dy_NxSxS * sin) / radius
  v_NxSxS = (-dx_NxSxS * sin + dy_NxSxS * cos) / radius
  distance_NxSxS = np.empty_like(u_NxSxS)
  for label, name in enumerate(CLASS_NAMES):
    m = labels_N == label
    if m.any():
      shape_4xnx1x1 = [_bcast(s) for s in shape_Nx4[m].T]
      unit = _unit_distance(name, u_NxSxS[m], v_NxSxS[m], radius[m], shape_4xnx1x1)
      distance_NxSxS[m] = radius[m] * unit
  return distance_NxSxS


def _unit_distance(name: str, u, v, radius, shape_4) -> np.ndarray:
  """Signed distance, in radii, to the shape `name` in its own frame (about unit size).

  u, v, radius and each of shape_4 (uniforms in [0, 1)) broadcast to (n, 32, 32).
  """
  a, b, c, d = shape_4
  rho = np.hypot(u, v)
  if name == "disk":
    return rho - 0.9
  if name == "ring":
    return np.maximum(rho - 1.0, 0.45 + 0.25 * a - rho)
  if name == "ellipse":  # first-order distance: the implicit function over its gradient's norm
    minor = 0.35 + 0.25 * a
    q = np.hypot(u, v / minor)
    gradient = np.hypot(u, v / minor**2) / np.maximum(q, 1e-9)
    return (q - 1.0) / np.maximum(gradient, 1.0)
  if name == "square":
    return _star_distance(u, v, 4, np.cos(np.pi / 4))
  if name == "triangle":
    return 1.15 * _star_distance(u / 1.15, v / 1.15, 3, np.cos(np.pi / 3))
  if name == "hexagon":
    return _star_distance(u, v, 6, np.cos(np.pi / 6))
  if name == "star":
    return 1.1 * _star_distance(u / 1.1, v / 1.1, 5, 0.38 + 0.12 * a)
  if name == "plus":  # the union of two crossed bars
    half_width = 0.2 + 0.14 * a
    bar_u = np.maximum(np.abs(u) - 1.0, np.abs(v) - half_width)
    bar_v = np.maximum(np.abs(v) - 1.0, np.abs(u) - half_width)
    return np.minimum(bar_u, bar_v)
  # Textures: a pattern inside a disk or square window (the intersection: the larger distance).
  window = np.where(b < 0.5, rho - 1.0, np.maximum(np.abs(u), np.abs(v)) - 0.85)
  period = (2.5 + 2.5 * d) / radius
  rows = _stripes_distance(v, period, c)
  if name == "stripes":
    return np.maximum(window, rows)
  assert name == "checkerboard", name
  columns = _stripes_distance(u, period, a)
  # A cell is inside when it is inside both or neither stripe sets; the nearer edge decides.
  checker = np.where((rows < 0) == (columns < 0), -1.0, 1.0) * np.minimum(
      np.abs(rows), np.abs(columns)
  )
  return np.maximum(window, checker)


def _stripes_distance(w, period, phase) -> np.ndarray:
  """Signed distance to bands of width period/2 repeating every `period` along w."""
  t = np.mod(w / period + phase + 0.25, 1.0)  # 0.5 at a band's centre
  return period * (np.abs(t - 0.5) - 0.25)


def _star_distance(u, v, points: int, inner) -> np.ndarray:
  """Signed distance to a regular `points`-star of outer radius 1 with a tip on +u and valleys
  at radius `inner`; inner = cos(pi / points) makes it the regular polygon.

  Every point is folded onto the half-sector between a tip and a valley and measured against
  that edge's line: exact along the edges, which is all that anti-aliasing needs.
  """
  sector = 2 * np.pi / points
  a = np.mod(np.arctan2(v, u), sector)
  a = np.minimum(a, sector - a)
  rho = np.hypot(u, v)
  px, py = rho * np.cos(a), rho * np.sin(a)
  # The edge from the tip (1, 0) to the valley (bx, by); its normal points away from the origin.
  bx, by = inner * np.cos(sector / 2), inner * np.sin(sector / 2)
  nx, ny = by, 1.0 - bx
  return ((px - 1.0) * nx + py * ny) / np.hypot(nx, ny)
