"""The host's tests use the same ``skald`` fixture plugin authors get (pytest11)."""
