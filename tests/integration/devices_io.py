"""Direct reads on a block device, for the device-profile tests: run as a program (so it can be started inside a
profile's cgroup) and print one JSON line.

    python devices_io.py single DEV N [BYTES]  median latency of N random O_DIRECT reads (4 KiB), one at a time
    python devices_io.py parallel DEV K TRIES  K random 4 KiB O_DIRECT reads submitted at once (Linux AIO, one
                                               io_submit), the time until all K completed: min and all TRIES
    python devices_io.py rate DEV BYTES SECONDS direct|buffered   reads of BYTES for SECONDS: IOPS and MiB/s
    python devices_io.py depth DEV BYTES DEPTH SECONDS   random O_DIRECT reads of BYTES kept DEPTH in flight (Linux
                                               AIO: each completion resubmitted) for SECONDS: IOPS and MiB/s
    python devices_io.py flush FILE N          pg_test_fsync's loop: 8 kB written at the start of FILE and
                                               fdatasync'ed, N times; median and min milliseconds per write+flush
    python devices_io.py wrate FILE BYTES SECONDS direct|fsync   writes of BYTES into FILE (O_DIRECT, or buffered
                                               with an fdatasync after each) for SECONDS: IOPS and MiB/s

FILE lies on the emulated disk's file system and must exist (it is rewritten in place, as WAL segments are).

Linux AIO through ctypes (io_setup/io_submit/io_getevents), not threads: Python threads wake one by one and add
milliseconds on a loaded 2-core machine, which would hide whether the device itself overlaps reads.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import random
import statistics
import sys
import time

_SYS_IO_SETUP, _SYS_IO_DESTROY, _SYS_IO_GETEVENTS, _SYS_IO_SUBMIT = 206, 207, 208, 209  # x86_64
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _Iocb(ctypes.Structure):  # struct iocb, include/uapi/linux/aio_abi.h (little-endian layout)
    _fields_ = [("aio_data", ctypes.c_uint64), ("aio_key", ctypes.c_uint32), ("aio_rw_flags", ctypes.c_int32),
                ("aio_lio_opcode", ctypes.c_uint16), ("aio_reqprio", ctypes.c_int16), ("aio_fildes", ctypes.c_uint32),
                ("aio_buf", ctypes.c_uint64), ("aio_nbytes", ctypes.c_uint64), ("aio_offset", ctypes.c_int64),
                ("aio_reserved2", ctypes.c_uint64), ("aio_flags", ctypes.c_uint32), ("aio_resfd", ctypes.c_uint32)]


class _Event(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64), ("obj", ctypes.c_uint64), ("res", ctypes.c_int64), ("res2", ctypes.c_int64)]


def _offsets(size: int, n: int, block: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [b * block for b in rng.sample(range(size // block), n)]


def single(dev: str, n: int, block: int = 4096) -> dict[str, float]:
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, block)
    times = []
    for off in _offsets(os.lseek(fd, 0, os.SEEK_END), n, block, 1):
        t = time.perf_counter()
        os.preadv(fd, [buf], off)
        times.append(time.perf_counter() - t)
    os.close(fd)
    return {"median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3}


def parallel(dev: str, k: int, tries: int) -> dict[str, object]:
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    size = os.lseek(fd, 0, os.SEEK_END)
    ctx = ctypes.c_ulong(0)
    if _libc.syscall(_SYS_IO_SETUP, k, ctypes.byref(ctx)) != 0:
        raise OSError(ctypes.get_errno(), "io_setup")
    bufs = [mmap.mmap(-1, 4096) for _ in range(k)]
    addrs = [ctypes.addressof(ctypes.c_char.from_buffer(b)) for b in bufs]
    results = []
    for attempt in range(tries):
        iocbs = (_Iocb * k)()
        for i, off in enumerate(_offsets(size, k, 4096, 100 + attempt)):
            iocbs[i].aio_data, iocbs[i].aio_fildes, iocbs[i].aio_buf = i, fd, addrs[i]
            iocbs[i].aio_nbytes, iocbs[i].aio_offset, iocbs[i].aio_lio_opcode = 4096, off, 0  # IOCB_CMD_PREAD
        ptrs = (ctypes.POINTER(_Iocb) * k)(*[ctypes.pointer(iocbs[i]) for i in range(k)])
        events = (_Event * k)()
        t = time.perf_counter()
        if _libc.syscall(_SYS_IO_SUBMIT, ctx, k, ptrs) != k:
            raise OSError(ctypes.get_errno(), "io_submit")
        got = 0
        while got < k:
            n = _libc.syscall(_SYS_IO_GETEVENTS, ctx, 1, k - got, events, None)
            if n < 0:
                raise OSError(ctypes.get_errno(), "io_getevents")
            if any(events[i].res != 4096 for i in range(n)):
                raise OSError("a read failed")
            got += n
        results.append((time.perf_counter() - t) * 1e3)
    _libc.syscall(_SYS_IO_DESTROY, ctx)
    os.close(fd)
    return {"min_ms": min(results), "all_ms": results}


def depth(dev: str, block: int, k: int, seconds: float) -> dict[str, float]:
    """A stream of random reads with ``k`` always in flight: what a deep queue (PostgreSQL's prefetch, fio's
    iodepth) gets from the device. The first half second is not counted (the throttle's first slice may let a
    burst through)."""
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    blocks = os.lseek(fd, 0, os.SEEK_END) // block
    ctx = ctypes.c_ulong(0)
    if _libc.syscall(_SYS_IO_SETUP, k, ctypes.byref(ctx)) != 0:
        raise OSError(ctypes.get_errno(), "io_setup")
    bufs = [mmap.mmap(-1, block) for _ in range(k)]
    addrs = [ctypes.addressof(ctypes.c_char.from_buffer(b)) for b in bufs]
    iocbs = (_Iocb * k)()
    rng = random.Random(11)

    def submit(slots: list[int]) -> None:
        for i in slots:
            iocbs[i].aio_data, iocbs[i].aio_fildes, iocbs[i].aio_buf = i, fd, addrs[i]
            iocbs[i].aio_nbytes, iocbs[i].aio_offset = block, rng.randrange(blocks) * block
            iocbs[i].aio_lio_opcode = 0
        ptrs = (ctypes.POINTER(_Iocb) * len(slots))(*[ctypes.pointer(iocbs[i]) for i in slots])
        if _libc.syscall(_SYS_IO_SUBMIT, ctx, len(slots), ptrs) != len(slots):
            raise OSError(ctypes.get_errno(), "io_submit")

    events = (_Event * k)()
    submit(list(range(k)))
    warm, n = 0.5, 0
    t0 = time.perf_counter()
    start = None
    while (elapsed := time.perf_counter() - t0) < warm + seconds:
        got = _libc.syscall(_SYS_IO_GETEVENTS, ctx, 1, k, events, None)
        if got < 0:
            raise OSError(ctypes.get_errno(), "io_getevents")
        if any(events[i].res != block for i in range(got)):
            raise OSError("a read failed")
        if elapsed >= warm:
            if start is None:
                start = time.perf_counter()
            else:
                n += got
        submit([int(events[i].data) for i in range(got)])
    span = time.perf_counter() - (start or t0)
    _libc.syscall(_SYS_IO_DESTROY, ctx)  # waits for the reads still in flight
    os.close(fd)
    return {"iops": n / span, "mib_s": n * block / span / 2**20, "reads": n}


def rate(dev: str, block: int, seconds: float, mode: str) -> dict[str, float]:
    direct = mode == "direct"
    fd = os.open(dev, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    size = os.lseek(fd, 0, os.SEEK_END)
    if not direct:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # one read, one request: no readahead
    buf = mmap.mmap(-1, block)
    rng = random.Random(7)
    n = 0
    t0 = time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < seconds:
        off = rng.randrange(size // block) * block
        if not direct:
            os.posix_fadvise(fd, off, block, os.POSIX_FADV_DONTNEED)  # a read the page cache cannot answer
        os.preadv(fd, [buf], off)
        n += 1
    os.close(fd)
    return {"iops": n / elapsed, "mib_s": n * block / elapsed / 2**20, "reads": n}


def flush(path: str, n: int) -> dict[str, float]:
    fd = os.open(path, os.O_WRONLY)
    block = b"\x5a" * 8192
    times = []
    for _ in range(n):
        t = time.perf_counter()
        os.pwrite(fd, block, 0)
        os.fdatasync(fd)
        times.append(time.perf_counter() - t)
    os.close(fd)
    return {"median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3, "per_s": n / sum(times)}


def wrate(path: str, block: int, seconds: float, mode: str) -> dict[str, float]:
    direct = mode == "direct"
    fd = os.open(path, os.O_WRONLY | (os.O_DIRECT if direct else 0))
    size = os.lseek(fd, 0, os.SEEK_END)
    buf = mmap.mmap(-1, block)
    buf.write(os.urandom(block))
    n, off = 0, 0
    t0 = time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < seconds:
        os.pwritev(fd, [buf], off)
        if not direct:
            os.fdatasync(fd)
        off = (off + block) % (size - size % block)
        n += 1
    os.close(fd)
    return {"iops": n / elapsed, "mib_s": n * block / elapsed / 2**20, "writes": n}


if __name__ == "__main__":
    what, dev, *rest = sys.argv[1:]
    if what == "single":
        out: dict[str, object] = dict(single(dev, int(rest[0]), *map(int, rest[1:])))
    elif what == "depth":
        out = dict(depth(dev, int(rest[0]), int(rest[1]), float(rest[2])))
    elif what == "parallel":
        out = parallel(dev, int(rest[0]), int(rest[1]))
    elif what == "flush":
        out = dict(flush(dev, int(rest[0])))
    elif what == "wrate":
        out = dict(wrate(dev, int(rest[0]), float(rest[1]), rest[2]))
    else:
        out = dict(rate(dev, int(rest[0]), float(rest[1]), rest[2]))
    print(json.dumps(out))
