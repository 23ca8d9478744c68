"""PoCL's binary cache: a folder of ours, checked before PoCL reads it.

PoCL, the OpenCL driver this project runs on, keeps every program it
builds in a cache folder (``POCL_CACHE_DIR``, else ``~/.cache/pocl``) and
reads an entry back when the same source is built again. PoCL 3.1 trusts
those files: a truncated ``program.bc`` fails an assertion inside
``clBuildProgram`` and a truncated kernel library fails ``dlopen`` at the
first launch; both abort the process (SIGABRT), which Python can neither
catch nor retry. So the files are checked before PoCL sees them:

1. :func:`use_private_pocl_cache` (run by ``import pytato_like``) points
   ``POCL_CACHE_DIR`` at ``<cache folder>/pocl``
   (:func:`~pytato_like.cache_files.cache_base_dir`) unless
   the user set ``POCL_CACHE_DIR`` or turned the disk cache off
   (``PYTATO_LIKE_CACHE=0``). PoCL reads the variable when the first
   OpenCL context of the process is created: a context created before
   ``import pytato_like`` keeps PoCL's default folder.
2. :func:`check_pocl_cache` (started in a background thread by
   :func:`start_background_check` when
   :func:`~pytato_like.target.loopy.generate_loopy` misses its plan
   cache, and waited for, or run, by
   :func:`~pytato_like.opencl_build.build_program` before the
   first build from source of the process) validates every file of that
   folder modified since the last check: LLVM bitcode (``program.bc``) by
   walking its top-level blocks, whose recorded lengths must add up to
   the file's size; kernel libraries (``*.so``) by their ELF header,
   whose header tables and segments must lie inside the file. A PoCL
   entry holding a bad file is removed, and PoCL builds it afresh. The
   time of the last check is the modification time of
   ``<cache folder>/pytato_like-pocl-checked``. Cost: one ``stat`` per
   file, plus reading the headers of changed files: ~50 ms for 560
   entries, ~0.5 s for 68 000 files, spent beside code generation
   rather than before the first build. A warm start that loads saved
   binaries (4.) builds nothing from source and does not walk the
   folder.
3. A build that fails or lacks its kernels is retried once with a
   source PoCL has not cached (:func:`uncached_source`).
4. A program binary saved in our disk cache (a warm start loads it
   instead of building the source, see
   :func:`~pytato_like.opencl_build.save_binaries`) names the PoCL entry
   it unpacks into; that entry is checked whole before PoCL loads the
   binary (:func:`check_binary_entry`).

Limits: the checks find truncated, emptied and foreign files, not bytes
changed inside a file of the right length; and only our folder is
checked (a ``POCL_CACHE_DIR`` the user set is theirs).

.. autofunction:: use_private_pocl_cache
.. autofunction:: pocl_cache_dir
.. autofunction:: is_pocl_platform
.. autofunction:: private_pocl_cache_dir
.. autofunction:: check_pocl_cache
.. autofunction:: start_background_check
.. autofunction:: is_valid_bitcode
.. autofunction:: is_valid_elf
.. autofunction:: uncached_source
.. autofunction:: binary_entry
.. autofunction:: check_binary_entry
"""

from __future__ import annotations

import logging
import os
import re
import stat
import struct
import sys
import threading
import time

from pytato_like._env import SWITCH_OFF

logger = logging.getLogger("pytato_like.cache")

_STAMP_NAME = "pytato_like-pocl-checked"
# the environment variable holding the POCL_CACHE_DIR this package set
_SET_BY_US = "PYTATO_LIKE_POCL_CACHE_DIR"
# set by use_private_pocl_cache: the folder we gave PoCL (None: PoCL's
# folder is the user's or PoCL's default, and not ours to check)
_OURS: str | None = None
_CHECKED = False
# the check running in the background (start_background_check), the number
# of entries it removed, and the lock guarding _CHECKED and the thread
_BACKGROUND: threading.Thread | None = None
_REMOVED_IN_BACKGROUND = 0
_LOCK = threading.Lock()


def is_pocl_platform(platform) -> bool:
    """Whether the OpenCL *platform* (a ``pyopencl.Platform``) is PoCL's."""
    return "portable computing language" in platform.name.lower()


def pocl_cache_dir() -> str:
    """The folder this package gives PoCL: ``<cache folder>/pocl``."""
    base = os.environ.get("PYTATO_LIKE_CACHE_DIR")
    if not base and sys.platform.startswith("linux"):
        # platformdirs' answer on Linux (tests check they agree), without
        # importing it (~12 ms) at ``import pytato_like``
        xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
        base = os.path.join(xdg if os.path.isabs(xdg)
                            else os.path.expanduser("~/.cache"), "pytato_like")
    if not base:
        from pytato_like.cache_files import cache_base_dir
        base = cache_base_dir()
    return os.path.join(base, "pocl")


def private_pocl_cache_dir() -> str | None:
    """The PoCL folder :func:`use_private_pocl_cache` set (the package's
    own), or None when PoCL's folder is the user's or PoCL's default."""
    return _OURS


def use_private_pocl_cache() -> str | None:
    """Set ``POCL_CACHE_DIR`` to :func:`pocl_cache_dir` unless the user set
    it or the disk cache is off; returns the folder set, or None. A value
    this package set in a parent process (noted in
    ``PYTATO_LIKE_POCL_CACHE_DIR``) is not the user's: a process started
    from it (``mpiexec``, a test's subprocess) sets its own."""
    global _OURS
    if ("POCL_CACHE_DIR" in os.environ
            and os.environ.get(_SET_BY_US) != os.environ["POCL_CACHE_DIR"]):
        return None     # the user's (a value we set, inherited, is not)
    if os.environ.get("PYTATO_LIKE_CACHE", "1").strip().lower() in SWITCH_OFF:
        return None
    folder = pocl_cache_dir()
    try:
        st = os.stat(os.path.dirname(folder))
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            return None  # a folder the disk cache refuses (cache_files)
    except OSError:
        pass  # not made yet: PoCL makes it, private
    os.environ["POCL_CACHE_DIR"] = folder
    # (so that processes started from this one, which inherit the variable,
    # know it is not the user's)
    os.environ[_SET_BY_US] = folder
    _OURS = folder
    return folder


# {{{ file checks

_BITCODE_MAGIC = b"BC\xc0\xde"
_WRAPPER_MAGIC = b"\xde\xc0\x17\x0b"


def _read_vbr(data: bytes, pos: int, width: int) -> tuple[int, int]:
    """An LLVM variable-width integer at bit *pos*: (value, next pos)."""
    value = shift = 0
    high = 1 << (width - 1)
    while True:
        if pos + width > len(data) * 8:
            raise ValueError("truncated")
        chunk = 0
        for i in range(width):
            bit = pos + i
            chunk |= ((data[bit >> 3] >> (bit & 7)) & 1) << i
        pos += width
        value |= (chunk & (high - 1)) << shift
        shift += width - 1
        if not chunk & high:
            return value, pos
        if shift > 64:
            raise ValueError("overlong integer")


def is_valid_bitcode(data: bytes) -> bool:
    """Whether *data* is LLVM bitcode whose top-level blocks end exactly at
    its end (a truncated or padded file is not)."""
    if data[:4] == _WRAPPER_MAGIC:  # offset and size of the bitcode inside
        if len(data) < 20:
            return False
        offset, size = struct.unpack_from("<II", data, 8)
        if offset + size > len(data):
            return False
        data = data[offset:offset + size]
    if len(data) < 8 or data[:4] != _BITCODE_MAGIC or len(data) % 4:
        return False
    pos = 32
    end = len(data) * 8
    try:
        while pos < end:
            abbrev = (data[pos >> 3] >> (pos & 7)) & 3
            if abbrev != 1:  # only ENTER_SUBBLOCK at the top level
                # a writer may pad the last word with zeros
                return not any(data[pos >> 3:]) and end - pos < 32
            _, pos = _read_vbr(data, pos + 2, 8)   # block id
            _, pos = _read_vbr(data, pos, 4)       # abbreviation width
            pos = (pos + 31) & ~31                  # align to 32 bits
            if pos + 32 > end:
                return False
            n_words, = struct.unpack_from("<I", data, pos >> 3)
            pos += 32 + 32 * n_words
    except ValueError:
        return False
    return pos == end


def is_valid_elf(data: bytes) -> bool:
    """Whether *data* is an ELF file whose program header table, section
    header table and loaded segments lie inside it."""
    if len(data) < 52 or data[:4] != b"\x7fELF" or data[4] not in (1, 2):
        return False
    order = {1: "<", 2: ">"}.get(data[5])
    if order is None:
        return False
    if data[4] == 2:  # 64-bit
        if len(data) < 64:
            return False
        phoff, shoff = struct.unpack_from(order + "QQ", data, 32)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(
            order + "HHHH", data, 54)
        ph_format, offset_at = order + "IIQQQQQQ", (2, 5)
    else:
        phoff, shoff = struct.unpack_from(order + "II", data, 28)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(
            order + "HHHH", data, 42)
        ph_format, offset_at = order + "IIIIIIII", (1, 4)
    size = len(data)
    if phoff + phnum * phentsize > size or shoff + shnum * shentsize > size:
        return False
    if phnum and phentsize < struct.calcsize(ph_format):
        return False
    for i in range(phnum):
        fields = struct.unpack_from(ph_format, data, phoff + i * phentsize)
        if fields[offset_at[0]] + fields[offset_at[1]] > size:
            return False
    return True


def _file_is_valid(path: str) -> bool:
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".bc"):
        return is_valid_bitcode(data)
    return is_valid_elf(data)

# }}}


def start_background_check() -> None:
    """Run :func:`check_pocl_cache` in a daemon thread, once per process
    (nothing to do when PoCL's folder is not ours): the walk of PoCL's
    folder is mostly system calls, which run beside the code generation
    or cache lookup of the first program; the first build waits for it."""
    global _BACKGROUND
    with _LOCK:
        if _OURS is None or _CHECKED or _BACKGROUND is not None:
            return
        _BACKGROUND = threading.Thread(target=_check_in_background,
                                       name="pytato_like-pocl-check",
                                       daemon=True)
        _BACKGROUND.start()


def _check_in_background() -> None:
    global _CHECKED, _REMOVED_IN_BACKGROUND
    try:
        _REMOVED_IN_BACKGROUND = check_pocl_cache()
    except Exception:  # noqa: BLE001 - the first build checks again
        logger.warning("cache: background check of PoCL's cache failed; "
                       "checking before the first build", exc_info=True)
        with _LOCK:
            _CHECKED = False


def check_pocl_cache(force: bool = False) -> int:
    """Remove the entries of our PoCL folder holding a truncated or
    foreign ``program.bc`` or ``*.so`` modified since the last check (all
    of them with *force*); returns the number removed. Runs once per
    process unless *force* (waiting for the check
    :func:`start_background_check` started, if any); nothing to do when
    PoCL's folder is not ours."""
    global _CHECKED
    thread = _BACKGROUND
    if thread is not None and thread is not threading.current_thread():
        thread.join()
        if not force and _CHECKED:
            return _REMOVED_IN_BACKGROUND
    with _LOCK:
        if _OURS is None or (_CHECKED and not force):
            return 0
        _CHECKED = True
    folder = _OURS
    if not os.path.isdir(folder):
        return 0
    stamp = os.path.join(os.path.dirname(folder), _STAMP_NAME)
    try:
        since = 0.0 if force else os.stat(stamp).st_mtime - 2.0
    except OSError:
        since = 0.0
    started = time.time()
    removed = 0
    # PoCL's layout: <folder>/<2 letters>/<hash letters>/{program.bc,
    # <kernel>/<work-group shape>/<kernel>.so, ...}
    with os.scandir(folder) as tops:
        entries = [entry.path for top in tops
                   if top.is_dir(follow_symlinks=False) and len(top.name) == 2
                   for entry in os.scandir(top.path)
                   if entry.is_dir(follow_symlinks=False)]
    for entry in entries:
        if not _entry_is_valid(entry, since):
            logger.warning("cache: PoCL cache entry %s holds a truncated "
                           "or foreign binary; removed (PoCL rebuilds "
                           "it)", entry)
            import shutil
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    try:
        with open(stamp, "a"):
            pass
        os.utime(stamp, (started, started))
    except OSError:
        pass
    return removed


def _entry_is_valid(entry: str, since: float) -> bool:
    # scandir's entries know whether they are folders without a system
    # call: one lstat per binary file (half the time of os.walk)
    folders = [entry]
    while folders:
        try:
            with os.scandir(folders.pop()) as it:
                for item in it:
                    if item.is_dir(follow_symlinks=False):
                        folders.append(item.path)
                        continue
                    name = item.name
                    if not (name == "program.bc" or name.endswith(".so")):
                        continue
                    st = item.stat(follow_symlinks=False)
                    if st.st_mtime < since:
                        continue
                    if (not stat.S_ISREG(st.st_mode)
                            or not _file_is_valid(item.path)):
                        return False
        except OSError:
            return False
    return True


_ENTRY_IN_BINARY = re.compile(rb"([A-P]{2})/([A-P]{16,64})\x00")


def binary_entry(binary: bytes) -> str | None:
    """The entry of PoCL's folder that PoCL's program *binary* unpacks into
    and reads back (its header names it, as ``XX/<hash letters>``), or
    None for a binary of another format."""
    if not binary.startswith(b"poclbin\0"):
        return None
    found = _ENTRY_IN_BINARY.search(binary, 0, 512)
    if found is None:
        return None
    return os.path.join(found[1].decode(), found[2].decode())


def check_binary_entry(binary: bytes) -> bool:
    """Before PoCL loads *binary* (a program binary saved by
    :mod:`~pytato_like.opencl_build`): PoCL reads the files of the entry
    the binary names from its folder, trusting them, so in our folder that
    entry is checked whole, whatever the age of its files, and removed if
    a file is damaged (PoCL then unpacks the binary again). Whether the
    binary may be loaded: False for a binary that names no entry, and
    when PoCL's folder is not ours (the user's folder is not checked, and
    PoCL aborts on a damaged entry it reads for a binary: the source build
    is left to PoCL's cache there)."""
    folder = _OURS
    if folder is None:
        return False
    name = binary_entry(binary)
    if name is None:
        return False
    entry = os.path.join(folder, name)
    if os.path.isdir(entry) and not _entry_is_valid(entry, 0.0):
        logger.warning("cache: PoCL cache entry %s holds a truncated or "
                       "foreign binary; removed (PoCL unpacks it again)", entry)
        import shutil
        shutil.rmtree(entry, ignore_errors=True)
    return True


def uncached_source(code: str) -> str:
    """*code* with a comment PoCL has not seen: its build skips PoCL's
    cache entry of *code* (PoCL keys entries by the source text)."""
    import secrets
    return (f"/* pytato_like: rebuilt past PoCL's cache entry "
            f"{secrets.token_hex(8)} */\n{code}")
