"""lazyfs for real: a FUSE mount on this machine, driven through
LazyMount as a broker's node is. Writes that were fsynced survive a power
loss; everything else (appended data, a truncation) is gone, while a
process crash (the daemon alive) loses nothing."""

import errno
import mmap
import os
import shutil
import threading
import time

import pytest

from tests.here import Here
from workloads.lazyfs.mount import LazyMount, lose

pytestmark = pytest.mark.integration


@pytest.fixture
def mounted(tmp_path):
    if not shutil.which("fusermount3"):
        pytest.fail("fuse3 is not installed (make setup installs it)")
    node, data = Here("here"), str(tmp_path / "data")
    lazy = LazyMount(tmp_path / "state", str(tmp_path / "dist"))
    lazy.home = str(lazy.local)  # run from the staged copy: nothing to push here
    lazy.mount(node, data)
    yield node, lazy, data
    lose(node, data)


def test_only_fsynced_writes_survive_a_power_loss(mounted):
    node, lazy, data = mounted
    path = f"{data}/00000.log"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"A" * 5000)
    os.fsync(fd)
    os.write(fd, b"B" * 3000)  # acknowledged by the page cache, never synced
    os.close(fd)
    with open(f"{data}/00000.index", "w+b") as f:  # mmapped, as Kafka's indexes
        f.truncate(8192)
        m = mmap.mmap(f.fileno(), 8192)
        m[:4] = b"IDX1"
        m.flush()  # msync: fsync
        m.close()
    with open(path, "rb") as f:
        assert f.read() == b"A" * 5000 + b"B" * 3000  # read back through the mount
    os.truncate(f"{data}/00000.index", 100)  # not synced either
    assert lose(node, data) is True
    assert not os.path.ismount(data)
    backing = f"{data}.backing"
    with open(f"{backing}/00000.log", "rb") as f:
        assert f.read() == b"A" * 5000
    with open(f"{backing}/00000.index", "rb") as f:
        kept = f.read()
    assert len(kept) == 8192 and kept[:4] == b"IDX1"
    lazy.mount(node, data)  # power back: what was synced, through the mount again
    with open(path, "rb") as f:
        assert f.read() == b"A" * 5000


def test_renames_and_new_files_keep_their_unsynced_data_until_the_power_goes(mounted):
    node, _, data = mounted
    os.mkdir(f"{data}/topic-0")
    with open(f"{data}/topic-0/leader-epoch-checkpoint.tmp", "wb") as f:
        f.write(b"0\n1\n0 0\n")
        f.flush()
        os.fsync(f.fileno())
    os.rename(f"{data}/topic-0/leader-epoch-checkpoint.tmp", f"{data}/topic-0/ckpt")
    with open(f"{data}/topic-0/new.log", "wb") as f:
        f.write(b"unsynced")
    assert open(f"{data}/topic-0/new.log", "rb").read() == b"unsynced"
    lose(node, data)
    assert open(f"{data}.backing/topic-0/ckpt", "rb").read() == b"0\n1\n0 0\n"
    assert os.path.getsize(f"{data}.backing/topic-0/new.log") == 0  # created, never synced
    assert lose(node, data) is False  # nothing mounted any more: a no-op


def test_a_full_disk_refuses_growth_past_its_space_and_gives_it_back(mounted):
    node, lazy, data = mounted
    path = f"{data}/00000.log"
    with open(path, "wb") as f:
        f.write(b"A" * 1000)
    assert lazy.set_fault(node, data, "disk-full 1500") == {
        "refused_writes": 0,
        "refused_files": {},
        "stalled_fsyncs": 0,
    }
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, b"B" * 1000, 0)  # an overwrite takes no space
        assert os.pwrite(fd, b"C" * 1500, 1000) == 1500  # the space left, exactly
        with pytest.raises(OSError) as full:
            os.pwrite(fd, b"D", 2500)
        assert full.value.errno == errno.ENOSPC
        with pytest.raises(OSError):
            os.posix_fallocate(fd, 0, 10_000)
        assert os.statvfs(data).f_bavail == 0  # and the file system says so
    finally:
        os.close(fd)
    assert lazy.set_fault(node, data, "none") == {
        "refused_writes": 2,
        "refused_files": {"/00000.log": 2},  # the write and the allocation, on the file they hit
        "stalled_fsyncs": 0,
    }
    with open(path, "ab") as f:
        f.write(b"E" * 10_000)  # space back
    assert os.path.getsize(path) == 12_500
    assert os.statvfs(data).f_bavail > 0


def test_a_stalled_fsync_blocks_until_its_time_or_the_fault_is_cleared(mounted):
    node, lazy, data = mounted
    path = f"{data}/00000.log"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.write(fd, b"A" * 100)
        lazy.set_fault(node, data, "fsync-stall 1.5")
        t = time.monotonic()
        os.fsync(fd)
        assert time.monotonic() - t >= 1.4
        with open(path, "rb") as f:  # reads go on while an fsync hangs
            assert f.read() == b"A" * 100
        lazy.set_fault(node, data, "fsync-stall 60")
        waiting = threading.Thread(target=os.fsync, args=(fd,))
        t = time.monotonic()
        waiting.start()
        time.sleep(0.5)
        assert waiting.is_alive()
        assert lazy.set_fault(node, data, "none") == {
            "refused_writes": 0,
            "refused_files": {},
            "stalled_fsyncs": 1,
        }
        waiting.join(timeout=10)
        assert not waiting.is_alive() and time.monotonic() - t < 10  # freed at once
        t = time.monotonic()
        os.fsync(fd)
        assert time.monotonic() - t < 1
    finally:
        os.close(fd)
    assert open(f"{data}.backing/00000.log", "rb").read() == b"A" * 100  # synced
    with pytest.raises(Exception, match="Invalid argument"):
        lazy.set_fault(node, data, "disk-full lots")
