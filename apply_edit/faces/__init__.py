"""The faces users reach: the CLI, the in-place rewrite, the gRPC and HTTP service, bench and corpus."""
