"""Data parallelism in one process: the multi-process settings are read and checked, the
launchers detected, a batch placed whole. (The runs on several devices and processes, which
need processes of their own, are tests/e2e/test_distributed.py.)"""

import jax
import numpy as np
import pytest

from stacklstm import cli, distributed
from stacklstm.distributed import launcher_detected, make_mesh, shard_batch

# --------------------------------------------------------------------------- settings


def test_initialize_without_settings_is_a_single_process():
    assert distributed.initialize(environ={}) is False
    assert distributed.initialize(num_processes=1, environ={}) is False
    assert not jax.distributed.is_initialized()


@pytest.mark.parametrize(
    ("kwargs", "environ", "message"),
    [
        ({"coordinator": "10.0.0.1:1234"}, {}, "missing: `num_processes`, `process_id`"),
        ({}, {"STACKLSTM_NUM_PROCESSES": "2"}, "missing: `coordinator`, `process_id`"),
        ({"coordinator": "10.0.0.1"}, {}, "must be HOST:PORT (e.g. 10.0.0.1:1234), got '10.0.0.1'"),
        ({"num_processes": 0}, {}, "`num_processes` must be >= 1, got 0"),
        ({"num_processes": 2, "process_id": 2}, {}, "`process_id` must be in [0, 2)"),
        ({}, {"STACKLSTM_PROCESS_ID": "one"}, "STACKLSTM_PROCESS_ID must be an integer"),
    ],
)
def test_initialize_rejects_incomplete_or_bad_settings(kwargs, environ, message):
    with pytest.raises(ValueError) as info:
        distributed.initialize(**kwargs, environ=environ)
    assert message in str(info.value)
    assert not jax.distributed.is_initialized()


def test_launcher_detection_reads_slurm_and_open_mpi():
    slurm = {
        "SLURM_JOB_ID": "7",
        "SLURM_STEP_NODELIST": "node[1-2]",
        "SLURM_PROCID": "1",
        "SLURM_LOCALID": "0",
        "SLURM_NTASKS": "2",
    }
    assert launcher_detected(slurm) == "slurm"
    assert launcher_detected({**slurm, "SLURM_NTASKS": "1"}) is None  # one task: one process
    assert launcher_detected({"SLURM_JOB_ID": "7"}) is None  # salloc shell, no srun step
    ompi = {"OMPI_MCA_orte_hnp_uri": "1.0;tcp://10.0.0.1:1", "OMPI_COMM_WORLD_SIZE": "4"}
    assert launcher_detected(ompi) == "openmpi"
    assert launcher_detected({}) is None


def test_cli_refuses_an_incomplete_multi_process_run_in_one_line(capsys, tmp_path):
    code = cli.main(["train", "--out", str(tmp_path / "run"), "--coordinator", "h:1"])
    _, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "missing: --num-processes, --process-id" in err
    assert not (tmp_path / "run").exists()


def test_whole_batch_placement_and_host_reads_on_one_process():
    mesh = make_mesh()
    n = 2 * mesh.devices.size
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    (placed,) = shard_batch(mesh, x, whole=True)
    assert placed.sharding.spec == jax.sharding.PartitionSpec("data")
    np.testing.assert_array_equal(distributed.gather(placed), x)
    total = jax.jit(lambda a: a.sum())(placed)
    assert distributed.host_values({"sum": total})["sum"] == x.sum()
