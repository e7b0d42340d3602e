"""Progress and Meter: the training position a checkpoint holds and the interval means."""

from stacklstm.train.progress import Meter, Progress


def test_meter_mean_counts_only_the_steps_taken():
    meter = Meter()
    assert meter.mean is None
    for loss in (None, 2.0, None, 4.0):
        meter.add(loss)
    assert (meter.mean, meter.steps, meter.skipped) == (3.0, 4, 2)
    meter.reset()
    meter.add(None)
    meter.add(None)
    assert meter.mean is None and meter.steps == 2  # all skipped: no loss, not 0.0
    # the JSON a checkpoint holds keeps its keys, so older checkpoints read back
    assert set(Progress().to_dict()) >= {"interval_loss_sum", "interval_steps", "interval_skipped"}
