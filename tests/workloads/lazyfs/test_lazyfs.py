"""lazyfs for real: a FUSE mount on this machine, driven through
LazyMount as a broker's node is. Writes that were fsynced survive a power
loss; everything else (appended data, a truncation) is gone, while a
process crash (the daemon alive) loses nothing."""

import mmap
import os
import shutil

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
