"""The baselines' worker processes: how many, the same numbers as in-process, failures and
progress reported."""

import numpy as np

from helpers import SEASON, seasonal_values
from stacklstm.baselines import worker


def test_worker_count_is_one_per_job_at_most_the_cpus_and_max_workers(monkeypatch):
    monkeypatch.setattr(worker.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert [worker.worker_count(n) for n in (0, 1, 2, 10)] == [1, 1, 2, 2]
    monkeypatch.setattr(worker.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert worker.worker_count(10) == worker.MAX_WORKERS == 4


def test_jobs_in_workers_equal_the_job_in_process_and_failures_are_answers():
    from statsforecast.models import AutoETS

    y = seasonal_values(60)
    origins = np.arange(40, 57)
    job = ("auto_ets", y, origins, 3, SEASON, 41)
    messages = []
    here = worker.run_job(*job, send=messages.append)
    # the reference: statsforecast's own forward from every origin, fitted on rows 0..40
    model = AutoETS(season_length=SEASON).fit(y=y[:41])
    want = np.stack([model.forward(y=y[: o + 1], h=3)["mean"] for o in origins])
    assert here[0] == "ok"
    np.testing.assert_allclose(here[1], want, rtol=1e-12)
    assert messages[0] == ("progress", "fitting", 0) and messages[-1] == ("progress", "done", 17)
    progress = []
    answers = worker.run_jobs([job, ("nope", *job[1:])], lambda *a: progress.append(a))
    assert answers[0][0] == "ok"
    np.testing.assert_array_equal(answers[0][1], here[1])
    assert answers[1] == ("fail", "'nope'")  # no such model: the job's failure, not a crash
    assert (0, "done", 17) in progress and (1, "failed", 0) in progress


def test_jobs_with_a_spare_cpu_take_every_cpu_once_a_caller_waits(monkeypatch):
    """Started beside the model's training, the jobs leave it a CPU (one worker here); once
    their caller waits for them, the jobs left start on more workers."""
    monkeypatch.setattr(worker.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    y = seasonal_values(60)
    jobs = [("auto_ets", y * k, np.arange(40, 57), 3, SEASON, 41) for k in (1, 2, 3)]
    with worker._POOL_LOCK:  # a fresh pool, so that the workers it starts can be counted
        for process in worker._POOL.values():
            process.kill()
            process.wait()
        worker._POOL.clear()
    alone = worker.run_jobs(jobs, spare=1)
    assert len(worker._POOL) == 1
    with worker.waited_for():
        waited = worker.run_jobs(jobs, spare=1)
    assert len(worker._POOL) == 2
    for a, b in zip(alone, waited, strict=True):  # the same numbers on any worker
        assert a[0] == b[0] == "ok"
        np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(alone[0][1], alone[1][1])
