import os

# Tests compare against float64 references and torch at 1e-5: keep XLA's CPU matmuls exact.
os.environ.setdefault("XLA_FLAGS", "")
