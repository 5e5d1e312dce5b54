"""The third-party log noise our commands must not print (vit_jax/startup.py's quiet start-up
hides it): TF C++ notices, the absl preamble, glog-style lines, orbax warnings.

tests/test_quiet_commands.py checks single commands with it; scripts/smoke_base_install.sh checks
the output of every documented command, on the base install:

  python -m tests.quiet LOG...    # exit 1 naming each noisy line, 0 when every log is quiet
"""

import re
import sys

NOISE = re.compile(
    r"oneDNN|absl::InitializeLog|Metadata file does not exist|cpu_feature_guard"
    r"|^[IWEF]\d{4} \d\d:\d\d:\d\d"  # glog-style lines: TF/XLA C++ and absl's Python handler
    r"|^(WARNING|INFO):(absl|tensorflow):",  # absl/TF Python logging before absl is set up
    re.MULTILINE,
)


def noisy_lines(text: str) -> list[str]:
  """The lines of `text` that hold noise."""
  return [line for line in text.splitlines() if NOISE.search(line)]


def main(paths: list[str]) -> int:
  found = 0
  for path in paths:
    with open(path, errors="replace") as f:
      for line in noisy_lines(f.read()):
        print(f"noise in {path}: {line}")
        found += 1
  return 1 if found else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
