"""Targets the engine can verify with: a transformers model, or a plain function (for tests)."""

from .function import FunctionModel
from .registry import DEFAULT_MODEL, MODELS

__all__ = ["FunctionModel", "DEFAULT_MODEL", "MODELS"]
