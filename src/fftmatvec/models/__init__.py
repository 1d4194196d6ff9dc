"""Test problems that produce BTT maps: :mod:`fftmatvec.models.tsunami`."""

from fftmatvec.models.tsunami import (SCHEMA, ModelConfig, TsunamiModel, build_model,
                                      default_config, generate, validate_model_config)

__all__ = ["SCHEMA", "ModelConfig", "TsunamiModel", "build_model", "default_config",
           "generate", "validate_model_config"]
