"""The serving tests' shared fixture: the tiny run exported once per test module."""

import pytest

from stacklstm.forecasting.export import export_run


@pytest.fixture(scope="module")
def forecaster_file(trained_run, tmp_path_factory):
    path = tmp_path_factory.mktemp("serving") / "co2.stacklstm"
    export_run(trained_run.out_dir, path)
    return path
