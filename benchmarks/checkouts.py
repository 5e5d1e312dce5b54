"""Where the peers' checkouts are: each peer's environment variable, and a file its checkout's
root holds (the check that the folder given is one)."""

import os
import sys

VARIABLES = {"big_vision": "BIG_VISION", "nanodo": "NANODO", "nanoGPT": "NANOGPT"}
MARKERS = {
    "big_vision": "big_vision/models/vit.py",
    "nanodo": "nanodo/model.py",
    "nanoGPT": "model.py",
}


def checkout_from_environment(peer: str) -> str | None:
  """The peer's checkout its variable names, None if unset; a folder that is not one is a
  one-line error, exit code 2, before anything compiles."""
  variable = VARIABLES[peer]
  checkout = os.environ.get(variable)
  if checkout and not os.path.isfile(os.path.join(checkout, MARKERS[peer])):
    print(
        f"error: {variable}={checkout} has no {MARKERS[peer]}; give the root folder of a "
        f"{peer} checkout",
        file=sys.stderr,
    )
    sys.exit(2)
  return checkout
