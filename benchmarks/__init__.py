"""Public benchmark model suite: small, deterministic, randomly initialised reference models."""
