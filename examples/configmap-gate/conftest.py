"""Makes the example importable for its own tests without installing it."""
