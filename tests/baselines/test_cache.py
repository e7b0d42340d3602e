"""The baselines' in-process results and background computations."""

import threading
import time

import numpy as np
import pytest

from helpers import seasonal_values
from stacklstm import baselines
from stacklstm.baselines import cache


def test_a_key_changes_with_the_values_the_origins_and_the_settings():
    history, origins = np.arange(10.0)[:, None], np.array([6, 7])
    first = cache.key(history, origins, 2, 4, 7)
    assert cache.key(history.copy(), origins.copy(), 2, 4, 7) == first
    changed = history.copy()
    changed[3] += 1e-12
    assert cache.key(changed, origins, 2, 4, 7) != first
    assert cache.key(history, np.array([6, 8]), 2, 4, 7) != first
    assert cache.key(history, origins, 3, 4, 7) != first
    assert cache.key(history, origins, 2, 4, 6) != first


def test_remember_keeps_copies_and_forgets_the_oldest(monkeypatch):
    cache.clear()
    monkeypatch.setattr(cache, "LIMIT_BYTES", 10 * 8)  # ten float64 values
    values = np.ones((2, 1, 1))
    cache.remember("a", {"auto_ets": values, "auto_arima": None})
    values[:] = 5.0  # the kept result is a copy
    got = cache.recall("a")
    assert got["auto_arima"] is None and got["auto_ets"].tolist() == [[[1.0]], [[1.0]]]
    got["auto_ets"][:] = 7.0  # and so is what recall gives
    assert cache.recall("a")["auto_ets"][0, 0, 0] == 1.0
    for k in range(8):  # 2 + 8 values: all kept
        cache.remember(f"k{k}", {"auto_ets": np.zeros(1)})
    assert cache.recall("a") is not None
    cache.remember("k8", {"auto_ets": np.zeros(1)})  # 11 values: the oldest goes
    assert cache.recall("a") is None and cache.recall("k0") is not None
    cache.remember("big", {"auto_ets": np.zeros(50)})  # alone over the limit: still kept
    assert cache.recall("big") is not None and cache.recall("k8") is None
    cache.clear()
    assert cache.recall("k1") is None


def test_wait_relays_the_progress_so_far_and_from_then_on():
    cache.clear()
    go, seen = threading.Event(), []

    def compute(progress):
        progress("auto_ets", 1, 4, "forecasting")
        go.wait(10)
        progress("auto_ets", 4, 4, "done")
        cache.remember("x", {"auto_ets": np.zeros(1)})

    assert cache.start(["x"], compute)
    assert not cache.start(["x"], compute)  # under way: not started twice
    timer = threading.Timer(0.2, go.set)
    timer.start()
    assert cache.wait(["x"], lambda *a: seen.append(a))
    assert seen == [("auto_ets", 1, 4, "forecasting"), ("auto_ets", 4, 4, "done")]
    assert cache.recall("x") is not None
    assert not cache.wait(["x"]) and not cache.start(["x"], compute)  # known now
    cache.clear()


def test_a_failed_background_computation_leaves_the_keys_to_compute_again():
    cache.clear()

    def compute(progress):
        raise RuntimeError("a worker died")

    assert cache.start(["y"], compute)
    cache.wait(["y"])
    assert cache.recall("y") is None
    assert cache.start(["y"], lambda progress: None)  # no longer under way
    cache.wait(["y"])


def test_forecast_parts_wait_for_a_prefetch_and_compute_nothing_again(monkeypatch):
    pytest.importorskip("statsforecast")
    from stacklstm.baselines import worker

    history = seasonal_values(60)[:, None]
    parts = [(history, np.arange(40, 57))]
    cache.clear()
    direct = baselines.forecast_parts(parts, 3, 4)[0]
    cache.clear()
    real, calls = worker.run_jobs, []

    def run_jobs(*args, **kwargs):  # slow enough that forecast_parts finds it under way
        calls.append(1)
        time.sleep(0.3)
        return real(*args, **kwargs)

    monkeypatch.setattr(worker, "run_jobs", run_jobs)
    assert baselines.prefetch(parts, 3, 4)
    assert not baselines.prefetch(parts, 3, 4)  # under way
    seen = []
    waited = baselines.forecast_parts(parts, 3, 4, lambda *a: seen.append(a))[0]
    assert calls == [1]  # one computation: the background one
    assert {a[0] for a in seen} == set(baselines.STATISTICAL)  # its bars, once waited for
    for name in baselines.STATISTICAL:
        np.testing.assert_array_equal(waited[name], direct[name])
    cache.clear()
