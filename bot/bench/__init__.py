"""Benchmark runner and baselines: `setupbot bench --repos FILE` (see bot/commands/bench.py)."""
