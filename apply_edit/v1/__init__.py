"""Generated gRPC modules for apply_edit.v1 (made from proto/ at build time; not in git)."""
