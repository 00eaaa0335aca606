"""Drafting: proposers that draft tokens for the engine, and the policy that sizes each draft."""
