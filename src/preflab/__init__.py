"""preflab: auditable human feedback data for post-training."""

__version__ = "0.1.0"
