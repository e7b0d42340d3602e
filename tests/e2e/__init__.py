"""End-to-end tests: ``stacklstm`` (and the example and benchmark scripts) run as a user runs
them, mostly in child processes, on tiny runs. All are marked ``slow``
(``pytest -m slow``); the shared runs they compare against are the fixtures of
``tests/conftest.py``."""
