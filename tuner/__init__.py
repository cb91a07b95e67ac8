"""tuner: auto-tuning of retrieval-augmented generation pipelines."""

from tuner import env as _env

_env.set_offline_defaults()

__version__ = "0.1.0"
