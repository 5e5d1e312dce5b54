"""Configs: the keys and their defaults (`defaults.py`), `k=v` config arguments (`args.py`) and
the checks every command runs on a config before any work starts (`checks.py`)."""
