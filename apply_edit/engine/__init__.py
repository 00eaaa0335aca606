"""The engine: speculative and plain decoding over a target, and the types it consumes (`api`)."""
