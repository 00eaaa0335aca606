"""Judging a result: the checks, the decision between merge and model, the arbiter, prompts, failures."""
