"""A file system that loses what was not fsynced, as Jepsen's lazyfs does.

Run on a node as `python3 fs.py BACKING MOUNT PIDFILE` (mfusepy next to it).
MOUNT shows BACKING's files. Metadata (create, mkdir, rename, unlink) goes
to BACKING at once; file data and size changes stay in this process's
memory, page by page, until the file is fsynced, when they are written to
BACKING and fsynced there. A broker that crashes (SIGKILL) loses nothing:
this process still holds its writes, like the kernel's page cache. Power
loss is this process dying and the mount going with it: every write not
fsynced is gone, as after a real power cut with the disk's cache empty.

Disk faults (nemesis/disk.py) are set through an extended attribute on
any path, FAULT: "disk-full N" (the disk may grow by N more bytes, then
a write or allocation that grows a file fails with ENOSPC, and statfs
says so), "fsync-stall S" (each fsync blocks S seconds, or until the
fault is cleared), "none" (space back, fsyncs at once). Each change
writes what the faults it ends did (writes refused, and on which files;
fsyncs stalled) to
BACKING.faults.json, beside the mount: a getxattr of ours would cost every
write a call (the kernel asks for security.capability before each).

Self-contained (standard library and mfusepy): it is pushed to nodes that
have no queuecheck.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import threading

import mfusepy as fuse

PAGE = 4096
NAMED_FILES = 16  # files a refusal names at most: which kinds were hit, not a listing
CHECKPOINT = "user.lazyfs.checkpoint"  # setxattr(any path, CHECKPOINT): fsync everything
FAULT = "user.lazyfs.fault"  # setxattr(any path, FAULT, b"disk-full N"): the disk faults


class DiskFaults:
    """The disk faults in effect, and what they did since they were set."""

    def __init__(self) -> None:
        self.space: int | None = None  # bytes the files may still grow by; None: no limit
        self.stall = 0.0  # seconds each fsync blocks
        self.cleared = threading.Event()  # set: a stalled fsync goes on at once
        self.refused_writes = 0
        self.refused_files: dict[str, int] = {}  # path in the mount -> writes refused
        self.stalled_fsyncs = 0

    @classmethod
    def parse(cls, text: str) -> DiskFaults:
        """The faults FAULT's value asks for; ValueError for anything else."""
        kind, _, amount = text.strip().partition(" ")
        faults = cls()
        if kind == "disk-full":
            faults.space = int(amount)
            if faults.space < 0:
                raise ValueError(text)
        elif kind == "fsync-stall":
            faults.stall = float(amount)
            if not faults.stall > 0:
                raise ValueError(text)
        elif kind != "none" or amount:
            raise ValueError(text)
        return faults

    def grow(self, path: str, by: int) -> None:
        """The file at `path` grows by `by` bytes: refused with ENOSPC past
        the space left."""
        if self.space is None or by <= 0:
            return
        if by > self.space:
            self.refused_writes += 1
            if path in self.refused_files or len(self.refused_files) < NAMED_FILES:
                self.refused_files[path] = self.refused_files.get(path, 0) + 1
            raise fuse.FuseOSError(errno.ENOSPC)
        self.space -= by

    def stats(self) -> dict[str, int]:
        return {
            "refused_writes": self.refused_writes,
            "refused_files": self.refused_files,
            "stalled_fsyncs": self.stalled_fsyncs,
        }


class Dirty:
    """A file's writes since its last fsync: whole pages, its size, and the
    size below which BACKING's bytes still count (a truncation hides the rest)."""

    def __init__(self, size: int):
        self.pages: dict[int, bytearray] = {}
        self.size = size
        self.valid_below = size


class LazyFS(fuse.Operations):
    use_ns = True

    def __init__(self, backing: str):
        self.root = os.path.realpath(backing)
        self.faults_file = backing.rstrip("/") + ".faults.json"  # mount.py reads it there
        self.dirty: dict[str, Dirty] = {}
        self._mutex = threading.RLock()  # not `lock`: that is the POSIX lock operation
        self.faults = DiskFaults()

    def _real(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    # -- data -------------------------------------------------------------
    def _backing(self, real: str, start: int, end: int, d: Dirty | None) -> bytearray:
        """BACKING's bytes [start, end), zeros where it has none (or a
        truncation not yet synced hid them)."""
        have = 0 if end <= start else end - start
        buf = bytearray(have)
        limit = end if d is None else min(end, d.valid_below)
        if limit > start:
            with open(real, "rb", buffering=0) as f:
                got = os.pread(f.fileno(), limit - start, start)
            buf[: len(got)] = got
        return buf

    def _page(self, real: str, d: Dirty, p: int) -> bytearray:
        page = d.pages.get(p)
        if page is None:
            page = self._backing(real, p * PAGE, (p + 1) * PAGE, d)
            d.pages[p] = page
        return page

    def _dirty(self, path: str) -> Dirty:
        d = self.dirty.get(path)
        if d is None:
            d = self.dirty[path] = Dirty(os.lstat(self._real(path)).st_size)
        return d

    def read(self, path, size, offset, fh):
        with self._mutex:
            real, d = self._real(path), self.dirty.get(path)
            total = d.size if d else os.lstat(real).st_size
            end = min(offset + size, total)
            if end <= offset:
                return b""
            buf = self._backing(real, offset, end, d)
            if d:
                for p in range(offset // PAGE, (end - 1) // PAGE + 1):
                    page = d.pages.get(p)
                    if page is None:
                        continue
                    lo, hi = max(offset, p * PAGE), min(end, (p + 1) * PAGE)
                    buf[lo - offset : hi - offset] = page[lo - p * PAGE : hi - p * PAGE]
            return bytes(buf)

    def write(self, path, data, offset, fh):
        with self._mutex:
            real, d = self._real(path), self._dirty(path)
            end = offset + len(data)
            self.faults.grow(path, end - d.size)
            for p in range(offset // PAGE, (end - 1) // PAGE + 1):
                page = self._page(real, d, p)
                lo, hi = max(offset, p * PAGE), min(end, (p + 1) * PAGE)
                page[lo - p * PAGE : hi - p * PAGE] = data[lo - offset : hi - offset]
            d.size = max(d.size, end)
            return len(data)

    def truncate(self, path, length, fh=None):
        with self._mutex:
            real, d = self._real(path), self._dirty(path)
            if length < d.size:
                for p in [p for p in d.pages if p * PAGE >= length]:
                    del d.pages[p]
                if length % PAGE:
                    page = self._page(real, d, length // PAGE)
                    page[length % PAGE :] = bytes(PAGE - length % PAGE)
                d.valid_below = min(d.valid_below, length)
            d.size = length

    def fallocate(self, path, mode, offset, length, fh):
        if mode:
            raise fuse.FuseOSError(errno.EOPNOTSUPP)
        with self._mutex:
            d = self._dirty(path)
            self.faults.grow(path, offset + length - d.size)
            d.size = max(d.size, offset + length)
        return 0

    def fsync(self, path, datasync, fh):
        """Writes the file's pages to BACKING and fsyncs it there; first
        blocks while an fsync-stall is set (outside the mutex: reads and
        writes go on, as on a disk whose flushes hang)."""
        with self._mutex:
            stall, cleared = self.faults.stall, self.faults.cleared
            if stall:
                self.faults.stalled_fsyncs += 1
        if stall:
            cleared.wait(stall)
        self._sync(path)
        return 0

    def _sync(self, path: str) -> None:
        with self._mutex:
            d = self.dirty.pop(path, None)
            if d is None:
                return
            fd = os.open(self._real(path), os.O_WRONLY)
            try:
                for p, page in sorted(d.pages.items()):
                    n = min(PAGE, d.size - p * PAGE)
                    if n > 0:
                        os.pwrite(fd, bytes(page[:n]), p * PAGE)
                os.ftruncate(fd, d.size)
                os.fsync(fd)
            finally:
                os.close(fd)

    def flush(self, path, fh):
        return 0  # close() is no fsync

    def setxattr(self, path, name, value, options, position=0):
        """CHECKPOINT on any path fsyncs every file: what the set-up wrote is
        on disk before the faults begin (a real page cache would have written
        it back by then), as Jepsen's lazyfs checkpoint does. FAULT sets the
        disk faults (the module's docstring), clearing what was set."""
        if name == FAULT:
            try:
                faults = DiskFaults.parse(bytes(value).decode())
            except ValueError:
                raise fuse.FuseOSError(errno.EINVAL) from None
            with self._mutex:
                self.faults.cleared.set()  # a stalled fsync goes on
                done, self.faults = self.faults.stats(), faults
                with open(self.faults_file, "w") as f:
                    json.dump(done, f)
            return 0
        if name != CHECKPOINT:
            raise fuse.FuseOSError(errno.ENOTSUP)
        with self._mutex:
            for dirty in list(self.dirty):
                self._sync(dirty)
        return 0

    # -- metadata: at once ------------------------------------------------
    def getattr(self, path, fh=None):
        with self._mutex:
            st = os.lstat(self._real(path))
            out = {
                k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size")
            }
            # mfusepy with use_ns: times in nanoseconds
            out.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
            d = self.dirty.get(path)
            if d:
                out["st_size"] = d.size
            return out

    def readdir(self, path, fh):
        return [".", "..", *os.listdir(self._real(path))]

    def access(self, path, amode):
        if not os.access(self._real(path), amode):
            raise fuse.FuseOSError(errno.EACCES)
        return 0

    def open(self, path, flags):
        if flags & os.O_TRUNC:
            self.truncate(path, 0)
        return 0

    def create(self, path, mode, fi=None):
        os.close(os.open(self._real(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode))
        with self._mutex:
            self.dirty.pop(path, None)
        return 0

    def release(self, path, fh):
        return 0

    def unlink(self, path):
        with self._mutex:
            os.unlink(self._real(path))
            self.dirty.pop(path, None)

    def rename(self, old, new):
        with self._mutex:
            os.rename(self._real(old), self._real(new))
            self.dirty.pop(new, None)
            if old in self.dirty:
                self.dirty[new] = self.dirty.pop(old)
            prefix = old.rstrip("/") + "/"
            for p in [p for p in self.dirty if p.startswith(prefix)]:
                self.dirty[new.rstrip("/") + "/" + p[len(prefix) :]] = self.dirty.pop(p)

    def mkdir(self, path, mode):
        os.mkdir(self._real(path), mode)

    def rmdir(self, path):
        os.rmdir(self._real(path))

    def chmod(self, path, mode):
        os.chmod(self._real(path), mode)

    def chown(self, path, uid, gid):
        os.chown(self._real(path), uid, gid)

    def utimens(self, path, times=None):
        os.utime(self._real(path), ns=times)

    def link(self, target, source):
        os.link(self._real(source), self._real(target))

    def symlink(self, target, source):
        os.symlink(source, self._real(target))

    def readlink(self, path):
        return os.readlink(self._real(path))

    def statfs(self, path):
        st = os.statvfs(self._real(path))
        out = {
            k: getattr(st, k)
            for k in (
                "f_bavail",
                "f_bfree",
                "f_blocks",
                "f_bsize",
                "f_favail",
                "f_ffree",
                "f_files",
                "f_flag",
                "f_frsize",
                "f_namemax",
            )
        }
        with self._mutex:
            space = self.faults.space
        if space is not None:  # a full disk says so to a broker's own free-space checks
            out["f_bavail"] = out["f_bfree"] = min(out["f_bfree"], space // max(1, st.f_bsize))
        return out


def main() -> None:
    backing, mount, pidfile = sys.argv[1:4]
    with open(pidfile, "w") as f:
        f.write(f"{os.getpid()}\n")
    fuse.FUSE(LazyFS(backing), mount, foreground=True, nothreads=False)


if __name__ == "__main__":
    main()
