"""Output paths: regular files replaced atomically with the umask's mode, symlinks followed,
FIFOs, devices and ``-`` written as streams."""

import os
import stat
import threading

import pytest

from helpers import _main
from stacklstm.rundir.folder import umask_mode
from stacklstm.rundir.info import CONFIG_FILE
from stacklstm.rundir.outputs import check_output, is_stream, write_output


@pytest.fixture
def umask():
    """Set the umask for one test; restore it after."""
    old = os.umask(0o022)
    os.umask(old)
    yield os.umask
    os.umask(old)


def test_a_regular_file_is_replaced_atomically_with_the_umasks_mode(tmp_path, umask):
    path = tmp_path / "out.csv"
    for mask, mode in ((0o022, 0o644), (0o027, 0o640), (0o077, 0o600)):
        path.unlink(missing_ok=True)
        umask(mask)
        assert umask_mode() == mode
        write_output(path, b"new\n")
        assert stat.S_IMODE(path.stat().st_mode) == mode and path.read_bytes() == b"new\n"
    umask(0o022)
    os.chmod(path, 0o664)  # a file the user made group-writable keeps its mode
    inode = path.stat().st_ino
    write_output(path, b"newer\n")
    assert path.read_bytes() == b"newer\n" and stat.S_IMODE(path.stat().st_mode) == 0o664
    assert path.stat().st_ino != inode  # replaced, not written in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]  # no temporary left


def test_a_symlink_is_followed_and_kept(tmp_path):
    (tmp_path / "data").mkdir()
    target = tmp_path / "data" / "forecasts.csv"
    target.write_text("old\n")
    link = tmp_path / "latest.csv"
    link.symlink_to(os.path.join("data", "forecasts.csv"))  # relative, as users write them
    chain = tmp_path / "chain.csv"
    chain.symlink_to(link)
    write_output(chain, b"new\n")
    assert chain.is_symlink() and link.is_symlink()
    assert os.readlink(link) == os.path.join("data", "forecasts.csv")
    assert target.read_bytes() == b"new\n" and not target.is_symlink()
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "data" / "new.csv")
    write_output(dangling, b"made\n")
    assert dangling.is_symlink() and (tmp_path / "data" / "new.csv").read_bytes() == b"made\n"


def test_a_fifo_is_written_as_a_stream(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_output(fifo, b"a,b\n1,2\n")
    reader.join(timeout=30)
    assert got == [b"a,b\n1,2\n"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # still a FIFO, not a file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_is_written_as_a_stream_not_replaced(tmp_path):
    null = os.stat("/dev/null")
    device = tmp_path / "null"
    os.mknod(device, 0o666 | stat.S_IFCHR, null.st_rdev)  # the null device, in tmp_path
    assert is_stream(device) and is_stream("/dev/stdout") and is_stream("-")
    write_output(device, b"gone\n")
    assert stat.S_ISCHR(device.stat().st_mode) and device.stat().st_rdev == null.st_rdev
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]


def test_check_output_refuses_a_folder_or_a_missing_folder(tmp_path):
    with pytest.raises(ValueError, match="it is a folder"):
        check_output(tmp_path)
    with pytest.raises(ValueError, match=r"folder .*nope does not exist"):
        check_output(tmp_path / "nope" / "out.csv")
    check_output("-")
    check_output(tmp_path / "new.csv")


def test_predict_output_dash_writes_the_csv_to_stdout(trained_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = _main("predict", trained_run.out_dir, "--output", "-", "--quiet", "--history")
    assert code == 0, err
    assert out.splitlines()[0] == "origin,co2_h1" and len(out.splitlines()) > 100
    assert err.startswith(f"wrote {len(out.splitlines()) - 1} forecasts to -")
    assert list(tmp_path.iterdir()) == []  # no file named "-"
    link = tmp_path / "link.csv"
    link.symlink_to(tmp_path / "real.csv")
    code, _out2, err = _main(
        "predict", trained_run.out_dir, "--output", link, "--quiet", "--history"
    )
    assert code == 0, err
    assert link.is_symlink() and (tmp_path / "real.csv").read_text() == out


def test_run_folder_files_have_the_umasks_mode(trained_run):
    for name in (CONFIG_FILE, "report.json", "forecast.png", "loss.png"):
        assert stat.S_IMODE((trained_run.out_dir / name).stat().st_mode) == umask_mode(), name
