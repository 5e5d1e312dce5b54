"""experiments/crossover.py: accuracy curves from runs.csv rows and where the ViT overtakes."""

from experiments import crossover


def _rows(model, params, accuracies):
  return [
      dict(
          model=model,
          params=params,
          status="finished",
          train_examples=size,
          final_error=1 - acc,
          flops=3e6 * 100,
          examples_seen=100,
      )
      for size, acc in accuracies.items()
  ]


def test_crossover_is_the_size_from_which_the_vit_stays_ahead():
  vit = crossover.curve(_rows("vit", 10, {1000: 0.5, 2000: 0.7, 4000: 0.85, 8000: 0.9}))
  resnet = crossover.curve(_rows("resnet", 12, {1000: 0.6, 2000: 0.72, 4000: 0.8, 8000: 0.84}))
  assert vit["accuracy"] == {1000: 0.5, 2000: 0.7, 4000: 0.85, 8000: 0.9}
  assert "1.0 MFLOPs/img" in vit["label"]
  assert crossover.crossover(vit, resnet) == 4000
  assert crossover.crossover(resnet, vit) is None  # the ResNet is behind at the largest size


def test_missing_results_exit_2(tmp_path, capsys):
  assert crossover.main([f"--vit={tmp_path}", f"--resnet={tmp_path}", f"--out={tmp_path}"]) == 2
  assert "vit_jax.sweep all" in capsys.readouterr().err
