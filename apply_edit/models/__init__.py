"""Targets the engine can verify with: a transformers model, or a plain function (for tests)."""

from .registry import DEFAULT_MODEL, MODELS

__all__ = ["FunctionModel", "DEFAULT_MODEL", "MODELS"]


def __getattr__(name: str):
    # `FunctionModel` imports torch: loaded where it is used, so that reading the registry (the CLI's
    # start) does not pay for torch (PEP 562).
    if name == "FunctionModel":
        from .function import FunctionModel

        return FunctionModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
