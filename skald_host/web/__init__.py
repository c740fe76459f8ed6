"""The web layer: the only code that knows HTTP. Blueprints translate requests into
core calls and back; the core owns storage (a handler writing SQL is a smell)."""
