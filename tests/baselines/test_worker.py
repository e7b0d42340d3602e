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
