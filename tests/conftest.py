"""The host's tests use the same ``skald`` fixture plugin authors get (pytest11)."""

# ``small_disk``: a real small tmpfs for check G4 (tests/disk.py).
pytest_plugins = ["tests.disk"]
