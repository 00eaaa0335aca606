"""The gRPC service (apply_edit.v1.ApplyEdit): server, servicer, metrics, and the client side."""
