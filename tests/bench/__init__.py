"""The speed benchmark's own tests: FLOP counts, the summary, the worker protocol and the
harness (its end-to-end run is tests/e2e/test_bench.py). A package, so that its test modules
(test_worker.py) do not clash with those of tests/baselines/."""
