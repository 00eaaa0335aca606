"""The bottom layer: a user's files read and written safely (atomic writes, leftovers, fingerprints)."""
