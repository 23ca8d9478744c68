"""The compile cache's files: a private folder, signed entries, eviction.

:mod:`~pytato_like.target.loopy.cache` decides *what* is cached; this
module owns *how* it lies on disk and what the package refuses to read.

**Why not** :mod:`pytools.persistent_dict`. The version loopy and
pyopencl use (pytools 2026.1) keeps entries in one sqlite file and
unpickles a stored ``(key, value)`` row before it compares the key;
nothing authenticates a row, so whoever can write that file runs code in
the reader. It also creates its folder with the process's umask and has
no size bound. The guarantees below need a check *before* unpickling, so
entries stay files of our own format. :mod:`platformdirs` (which pytools
uses too) gives the default folder.

**Layout** (``<folder>`` is :func:`cache_base_dir`)::

    <folder>/                       a directory the user owns, no group/other write
        pytato_like-secret.key      32 random bytes, mode 0600: the HMAC key
        pytato_like-<versions>/     one per installation (release, source, libraries)
            plans/ kernels/ units/  <64 hex digits>.pkl entries, mode 0600
            binaries/ workgroups/   (<64 hex digits>.claim while one is made)
        pytato_like-code-<python>/  one per interpreter bytecode
            classes/                the compiled functions of dataclasses
                                    (:mod:`~pytato_like.dataclass_code`)
        pocl/                       PoCL's binary cache (pocl_cache.py)

Folders the package creates are mode 0700.

**An entry** is ``MAGIC + HMAC-SHA256(secret, kind, key, versions,
payload) + payload`` where *payload* is the pickled value. Reading one:

1. ``os.lstat`` the path: anything but a regular file (FIFO, device,
   directory, symbolic link) is skipped without being opened;
2. open it with ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO swapped in after the
   check cannot block, a link cannot redirect) and ``fstat`` it again;
3. check the magic and the HMAC (constant time): the key, kind and
   versions requested are inside what is signed, so an entry of another
   program renamed or rewritten with this key fails, and without the
   secret nobody can sign;
4. only then unpickle.

A failing entry is a miss (the caller recompiles and overwrites it).

**Refused folders.** The folder, the secret and every package folder
inside must be owned by the user and not writable by group or others
(``stat`` of the folder itself, ``lstat`` of those inside: no symbolic
links). The default folder is the package's own, so a loose mode there
(an older release created it with the umask) is tightened to 0700; a
folder the user named (``PYTATO_LIKE_CACHE_DIR``) and anything not owned
by the user raise
:class:`~pytato_like.diagnostic.UnsafeCacheFolderError`. A secret that
is not a private regular file of the user is replaced by a new one (the
entries signed with the old one become misses).

**Deleting.** :func:`evict` and :func:`clear` touch only names the
package writes (:data:`VERSION_DIR_RE`, the three kinds,
:data:`ENTRY_NAME_RE`, :data:`TEMP_NAME_RE`, :data:`CLAIM_NAME_RE`), only regular files, and
remove a folder only once it is empty: a user's files in the folder stay.

.. autofunction:: cache_base_dir
.. autofunction:: load
.. autofunction:: store
.. autofunction:: entry_path
.. autofunction:: claim
.. autofunction:: claimed_elsewhere
.. autofunction:: holds_claims
.. autofunction:: release
.. autofunction:: entries
.. autofunction:: evict
.. autofunction:: clear
.. autodata:: VERSION_DIR_RE
.. autodata:: ENTRY_NAME_RE
.. autodata:: TEMP_NAME_RE
.. autodata:: CLAIM_NAME_RE
.. autodata:: CLAIM_STALE_S
.. autodata:: CLAIM_REFRESH_S
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import socket
import stat
import threading
import time
from pytato_like.diagnostic import UnsafeCacheFolderError

logger = logging.getLogger("pytato_like.cache")

MAGIC = b"pytato_like-ce2\n"  # 16 bytes: "cache entry, format 2"
_MAC_SIZE = 32
SECRET_NAME = "pytato_like-secret.key"
_SECRET_SIZE = 32
KINDS = ("plans", "kernels", "units", "binaries", "workgroups", "classes")

#: names of the package's version folders inside the cache folder
VERSION_DIR_RE = re.compile(r"pytato_like-[A-Za-z0-9._+-]+\Z")
#: names of entries inside ``<version folder>/<kind>/``
ENTRY_NAME_RE = re.compile(r"[0-9a-f]{64}\.pkl\Z")
#: names of the claims a process holds on an entry while it makes it
CLAIM_NAME_RE = re.compile(r"[0-9a-f]{64}\.claim\Z")
#: seconds after which a claim not refreshed is stale (its process ended,
#: or hangs); on this host, a claim is stale at once when its process has
#: ended
CLAIM_STALE_S = 60.0
#: seconds between two refreshes of the claims a process holds (a
#: background thread touches them while they are held)
CLAIM_REFRESH_S = 5.0
#: names of temporary files the package writes (and a crash may leave);
#: ``tmp*.tmp`` are those of format 1
TEMP_NAME_RE = re.compile(r"(\.pytato_like-[0-9a-f]{16}|tmp[A-Za-z0-9_]{1,16})"
                          r"\.tmp\Z")

_O_READ = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
           | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
_O_CREATE = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0))

# folders found private in this process (checked once each)
_PRIVATE: set[str] = set()
# cache folder -> its secret
_SECRETS: dict[str, bytes] = {}


def cache_base_dir() -> str:
    """The cache folder: ``$PYTATO_LIKE_CACHE_DIR`` if set, else the user's
    cache folder for ``pytato_like`` (:func:`platformdirs.user_cache_dir`,
    ``$XDG_CACHE_HOME/pytato_like`` or ``~/.cache/pytato_like`` on Linux)."""
    base = os.environ.get("PYTATO_LIKE_CACHE_DIR")
    if base:
        return base
    import platformdirs
    return platformdirs.user_cache_dir("pytato_like", appauthor=False)


def _user_named_folder() -> bool:
    return bool(os.environ.get("PYTATO_LIKE_CACHE_DIR"))


def _describe(st: os.stat_result) -> str:
    return f"owner uid {st.st_uid}, mode {stat.filemode(st.st_mode)}"


def _refuse(path: str, why: str) -> None:
    raise UnsafeCacheFolderError(
        f"compile cache folder {path!r} {why}: entries read from it could "
        "have been planted by another user, so the disk cache refuses it. "
        f"Make it private ('chmod go-w {path}'), set PYTATO_LIKE_CACHE_DIR "
        "to a private folder, or turn the disk cache off with "
        "PYTATO_LIKE_CACHE=0")


def _check_private(path: str, st: os.stat_result, may_tighten: bool) -> None:
    if not stat.S_ISDIR(st.st_mode):
        _refuse(path, f"is not a directory ({_describe(st)})")
    if st.st_uid != os.geteuid():
        _refuse(path, f"belongs to another user ({_describe(st)}; this "
                      f"process runs as uid {os.geteuid()})")
    if st.st_mode & 0o022:
        if not may_tighten:
            writers = " and ".join(w for w, bit in (("group", 0o020),
                                                     ("others", 0o002))
                                   if st.st_mode & bit)
            _refuse(path, f"is writable by {writers} ({_describe(st)})")
        logger.info("cache: %s had mode %s; made private (0700)", path,
                    stat.filemode(st.st_mode))
        os.chmod(path, 0o700)


def _private_dir(path: str, *, top: bool = False) -> str:
    """*path* as a private folder of the user, created (0700) if missing.

    :raises ~pytato_like.diagnostic.UnsafeCacheFolderError: for a folder
        others can write or do not own (see the module docstring).
    :raises OSError: when it cannot be created (read-only disk, ...).
    """
    if path in _PRIVATE:
        return path
    try:
        os.mkdir(path, 0o700)
        created = True
    except FileExistsError:
        created = False
    except FileNotFoundError:
        if not top:
            raise
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        os.mkdir(path, 0o700)
        created = True
    if created:
        os.chmod(path, 0o700)  # mkdir's mode is reduced by the umask only
    # the folder itself may be a link the user made (~/.cache on another
    # disk); folders inside it are the package's and may not be links
    st = os.stat(path) if top else os.lstat(path)
    _check_private(path, st, may_tighten=top and not _user_named_folder())
    _PRIVATE.add(path)
    return path


def private_base_dir() -> str:
    """:func:`cache_base_dir`, checked (or made) private; see
    :func:`_private_dir`."""
    return _private_dir(cache_base_dir(), top=True)


# {{{ secret

def _read_secret(path: str) -> bytes | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not (stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()
            and not st.st_mode & 0o077 and st.st_size == _SECRET_SIZE):
        logger.warning("cache: secret %s is not a private file of this user "
                       "(%s); replacing it", path, _describe(st))
        os.unlink(path)
        return None
    fd = os.open(path, _O_READ)
    try:
        fst = os.fstat(fd)
        if (fst.st_ino, fst.st_dev) != (st.st_ino, st.st_dev):
            return None  # swapped since the check: make a new one
        data = os.read(fd, _SECRET_SIZE + 1)
    finally:
        os.close(fd)
    return data if len(data) == _SECRET_SIZE else None


def _secret(base: str) -> bytes:
    """The per-user HMAC key kept in the cache folder *base* (made on
    first use; concurrent processes agree on one through ``os.link``)."""
    key = _SECRETS.get(base)
    if key is not None:
        return key
    path = os.path.join(base, SECRET_NAME)
    for _ in range(3):
        key = _read_secret(path)
        if key is not None:
            break
        tmp = os.path.join(base, f".pytato_like-{secrets.token_hex(8)}.tmp")
        fd = os.open(tmp, _O_CREATE, 0o600)
        try:
            os.write(fd, secrets.token_bytes(_SECRET_SIZE))
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # fails if another process made one first
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            os.replace(tmp, path)
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
    if key is None:
        raise OSError(f"cannot establish the cache secret {path}")
    _SECRETS[base] = key
    return key

# }}}


# {{{ entries

def _file_name(key: str) -> str:
    # every key the package uses is a SHA-256 hex digest; others are
    # hashed so that entry names always match ENTRY_NAME_RE
    if not re.fullmatch(r"[0-9a-f]{64}", key):
        key = hashlib.sha256(key.encode()).hexdigest()
    return key + ".pkl"


def entry_path(versions: str, kind: str, key: str) -> str:
    """Where the entry *key* of *kind* for installation *versions* (the
    name of its folder, matching :data:`VERSION_DIR_RE`) lies."""
    assert VERSION_DIR_RE.match(versions) and kind in KINDS, (versions, kind)
    return os.path.join(cache_base_dir(), versions, kind, _file_name(key))


def _mac(secret: bytes, versions: str, kind: str, key: str,
         payload: bytes) -> bytes:
    h = hmac.new(secret, digestmod=hashlib.sha256)
    for field in (MAGIC, kind.encode(), key.encode(), versions.encode()):
        h.update(len(field).to_bytes(8, "little"))
        h.update(field)
    h.update(payload)
    return h.digest()


def _read_regular_file(path: str) -> bytes | None:
    """The bytes of *path* if it is a regular file; None (without opening
    it) for anything else."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        logger.warning("cache: skipping %s: not a regular file (%s)", path,
                       stat.filemode(st.st_mode))
        return None
    fd = os.open(path, _O_READ)
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode) or fst.st_ino != st.st_ino:
            return None  # replaced between lstat and open
        chunks = []
        remaining = fst.st_size
        while remaining > 0:
            chunk = os.read(fd, remaining)
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def load(versions: str, kind: str, key: str) -> bytes | None:
    """The pickled payload stored under (*versions*, *kind*, *key*) if the
    entry is a regular file signed with this user's secret for exactly
    that request; else None. The caller unpickles only what this returns.

    :raises ~pytato_like.diagnostic.UnsafeCacheFolderError: see
        :func:`_private_dir`.
    """
    path = entry_path(versions, kind, key)
    base = cache_base_dir()
    try:
        if not os.path.isdir(base):
            return None
        _private_dir(base, top=True)
        version_dir = os.path.dirname(os.path.dirname(path))
        for folder in (version_dir, os.path.dirname(path)):
            if folder not in _PRIVATE:
                _check_private(folder, os.lstat(folder), may_tighten=False)
                _PRIVATE.add(folder)
        data = _read_regular_file(path)
        if data is None:
            return None
        secret = _secret(base)
    except FileNotFoundError:
        return None
    except OSError as e:
        logger.info("cache: cannot read %s (%s)", path, e)
        return None
    header = len(MAGIC) + _MAC_SIZE
    if len(data) < header or not data.startswith(MAGIC):
        discard(path, "not an entry of this format")
        return None
    payload = data[header:]
    if not hmac.compare_digest(data[len(MAGIC):header],
                               _mac(secret, versions, kind, key, payload)):
        discard(path, "signature does not match this key and secret")
        return None
    try:
        os.utime(path)  # least recently used eviction goes by this time
    except OSError:
        pass
    return payload


def _write_beside(path: str, data: bytes) -> str:
    """A new private temporary file holding *data* in the folder of the
    entry or claim *path* (the package's folders on the way checked or
    made private, see :func:`_private_dir`); its path. Removed if the
    write fails."""
    private_base_dir()
    _private_dir(os.path.dirname(os.path.dirname(path)))
    folder = _private_dir(os.path.dirname(path))
    tmp = os.path.join(folder, f".pytato_like-{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, _O_CREATE, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    return tmp


def _claim_path(versions: str, kind: str, key: str) -> str:
    return entry_path(versions, kind, key)[:-len(".pkl")] + ".claim"


def _owner() -> str:
    # (read at each claim: a forked process is another owner)
    return f"{socket.gethostname()} {os.getpid()}\n"


def _claim_state(path: str) -> str:
    """``"live"`` (another process holds the claim at *path*), ``"ours"``,
    ``"stale"`` (not refreshed for :data:`CLAIM_STALE_S` seconds, or its
    process on this host ended), ``"absent"``, or ``"foreign"`` (not a claim
    file the package wrote: never waited for, never removed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    except OSError:
        return "foreign"
    if not stat.S_ISREG(st.st_mode) or st.st_size > 300:
        return "foreign"
    try:
        fd = os.open(path, _O_READ)
        with os.fdopen(fd, "rb") as f:
            text = f.read(300).decode("utf-8", "replace")
    except FileNotFoundError:
        return "absent"
    except OSError:
        return "foreign"
    if text == _owner():
        return "ours"
    host, _, pid = text.strip().rpartition(" ")
    if not pid.isdigit():
        return "foreign"
    if time.time() - st.st_mtime > CLAIM_STALE_S:
        return "stale"      # not refreshed: ended on another host, or hangs
    if host == socket.gethostname():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return "stale"
        except OSError:
            pass  # alive, someone else's
    return "live"


# claim paths this process holds -> None; refreshed by _refresh_claims
_HELD: dict[str, None] = {}
_HELD_LOCK = threading.Lock()
_REFRESHER: threading.Thread | None = None


def _refresh_claims() -> None:
    """Touch the claims this process holds every :data:`CLAIM_REFRESH_S`
    seconds (a daemon thread, started with the first claim): a claim that
    is not refreshed goes stale."""
    while True:
        time.sleep(CLAIM_REFRESH_S)
        with _HELD_LOCK:
            held = list(_HELD)
        for path in held:
            try:
                os.utime(path)
            except OSError:
                pass


def _hold(path: str) -> None:
    global _REFRESHER
    with _HELD_LOCK:
        _HELD[path] = None
        if _REFRESHER is None or not _REFRESHER.is_alive():
            _REFRESHER = threading.Thread(target=_refresh_claims, daemon=True,
                                          name="pytato_like-claims")
            _REFRESHER.start()


def claim(versions: str, kind: str, key: str) -> bool:
    """Claim the entry *key* of *kind* before making it: a file
    ``<key>.claim`` (made exclusively, holding this host and process)
    tells other processes that it is being made here, so they wait for
    it instead of making it too (see
    :func:`~pytato_like.target.loopy.cache.claim_plan`); it is refreshed
    while held and goes stale :data:`CLAIM_STALE_S` seconds after its
    process stopped refreshing it. True when this
    process holds the claim now, or when claims cannot be used here
    (the disk refuses; a file that is not a claim lies there); False while
    another live process holds it. A stale claim is replaced."""
    path = _claim_path(versions, kind, key)
    try:
        # written whole, then linked to the claim's name (which fails if
        # it exists): nobody reads a claim without its owner
        tmp = _write_beside(path, _owner().encode())
    except OSError:
        return True
    try:
        for _ in range(2):
            try:
                os.link(tmp, path)
                _hold(path)
                return True
            except FileExistsError:
                state = _claim_state(path)
                if state != "stale":
                    return state != "live"
                discard(path, "stale claim")
            except OSError:
                return True
        return True
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def holds_claims(kind: str | None = None) -> bool:
    """Whether this process holds a claim (it is making an entry), of
    *kind* if given."""
    with _HELD_LOCK:
        if kind is None:
            return bool(_HELD)
        folder = os.sep + kind + os.sep
        return any(folder in path for path in _HELD)


def claimed_elsewhere(versions: str, kind: str, key: str) -> bool:
    """Whether another live process holds the claim on entry *key*."""
    return _claim_state(_claim_path(versions, kind, key)) == "live"


def release(versions: str, kind: str, key: str) -> None:
    """Give up this process's claim on entry *key* (see :func:`claim`)."""
    path = _claim_path(versions, kind, key)
    with _HELD_LOCK:
        _HELD.pop(path, None)
    if _claim_state(path) == "ours":
        try:
            os.unlink(path)
        except OSError:
            pass


def discard(path: str, why: str) -> None:
    logger.info("cache: discarding %s (%s)", path, why)
    try:
        if stat.S_ISREG(os.lstat(path).st_mode):
            os.unlink(path)
    except OSError:
        pass


def store(versions: str, kind: str, key: str, payload: bytes) -> bool:
    """Write the entry (atomically: a private temporary file, then a
    rename); False when the disk refuses (read-only, full).

    :raises ~pytato_like.diagnostic.UnsafeCacheFolderError: see
        :func:`_private_dir`.
    """
    path = entry_path(versions, kind, key)
    try:
        secret = _secret(private_base_dir())
        tmp = _write_beside(path, MAGIC + _mac(secret, versions, kind, key,
                                               payload) + payload)
        try:
            os.replace(tmp, path)
        except BaseException:
            if os.path.lexists(tmp):
                os.unlink(tmp)
            raise
    except OSError as e:
        logger.info("cache: %s %s... not stored (%s)", kind, key[:16], e)
        return False
    return True

# }}}


# {{{ eviction and clearing

def _package_dirs(base: str) -> list[str]:
    """The package's ``<version>/<kind>`` folders in *base* (real folders
    with the package's names only)."""
    result: list[str] = []
    try:
        names = os.listdir(base)
    except OSError:
        return result
    for name in names:
        if not VERSION_DIR_RE.match(name):
            continue
        version_dir = os.path.join(base, name)
        try:
            if not stat.S_ISDIR(os.lstat(version_dir).st_mode):
                continue
        except OSError:
            continue
        for kind in KINDS:
            folder = os.path.join(version_dir, kind)
            try:
                if stat.S_ISDIR(os.lstat(folder).st_mode):
                    result.append(folder)
            except OSError:
                continue
    return result


def entries(base: str | None = None) -> list[tuple[float, int, str]]:
    """``(last use, bytes, path)`` of every file the package wrote in the
    cache folder: entries, claims and left-over temporary files, regular files
    only."""
    base = cache_base_dir() if base is None else base
    result: list[tuple[float, int, str]] = []
    for folder in _package_dirs(base):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if not (ENTRY_NAME_RE.match(name) or TEMP_NAME_RE.match(name)
                    or CLAIM_NAME_RE.match(name)):
                continue
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                result.append((st.st_mtime, st.st_size, path))
    return result


def evict(limit: int) -> int:
    """Remove the least recently used entries (of every installation)
    until they take at most *limit* bytes; returns the bytes removed."""
    found = entries()
    total = sum(size for _, size, _ in found)
    removed = 0
    for _, size, path in sorted(found):
        if total - removed <= limit:
            break
        try:
            os.unlink(path)
            removed += size
        except OSError:
            pass
    return removed


def clear() -> int:
    """Delete every file the package wrote in the cache folder (all
    installations) and the package's folders left empty; returns the
    number of files deleted. Other files and their folders stay."""
    base = cache_base_dir()
    n = 0
    for _, _, path in entries(base):
        try:
            os.unlink(path)
            n += 1
        except OSError:
            pass
    for folder in _package_dirs(base):
        for path in (folder, os.path.dirname(folder)):
            try:
                os.rmdir(path)  # only if empty
            except OSError:
                pass
    _PRIVATE.clear()
    return n

# }}}
