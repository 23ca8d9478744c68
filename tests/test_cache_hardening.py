"""The compile cache cannot be turned against its user (issue 37).

Each test plays one attack on the disk cache or PoCL's cache and checks
that the program still computes NumPy's answer (or raises a typed
error): never a planted value, never planted code run, never a user's
file deleted, never a hang."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import pickle
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.diagnostic import UnsafeCacheFolderError

pytest.importorskip("pyopencl")

XV = np.linspace(-1.0, 1.0, 24)


def _fresh(folder, monkeypatch):
    """The cache module, with *folder* as the cache folder and nothing in
    memory (as a new process)."""
    from pytato_like import cache_files
    from pytato_like.target.loopy import cache
    monkeypatch.setenv("PYTATO_LIKE_CACHE_DIR", str(folder))
    monkeypatch.delenv("PYTATO_LIKE_CACHE", raising=False)
    cache.clear_memory_cache()
    cache_files._SECRETS.clear()
    cache_files._PRIVATE.clear()
    return cache


def _plus_one():
    x = pt.make_placeholder("x", XV.shape, np.float64)
    return x + 1


def _times_two():
    x = pt.make_placeholder("x", XV.shape, np.float64)
    return x * 2


def _run(queue, prg):
    _, (out,) = prg(queue, x=XV)
    return out


def _private_tmp(tmp_path, name="cache"):
    folder = tmp_path / name
    folder.mkdir(mode=0o700)
    return folder


# {{{ forged and planted entries

def test_entry_of_another_program_resigned_for_this_key_is_not_run(
        queue, tmp_path, monkeypatch):
    from pytato_like import cache_files
    cache = _fresh(_private_tmp(tmp_path), monkeypatch)
    prg_a = pt.generate_loopy(_plus_one())
    prg_b = pt.generate_loopy(_times_two())
    path_a = cache._path("plans", prg_a.key)
    with open(cache._path("plans", prg_b.key), "rb") as f:
        b_payload = f.read()[len(cache_files.MAGIC) + 32:]
    # what an attacker without the secret can write at a's path: b's
    # payload under a's key with every checksum it can compute
    forgeries = [
        hashlib.sha256(prg_a.key.encode() + b_payload).digest(),
        hashlib.sha256(b_payload).digest(),
        bytes(32),
    ]
    for forged in forgeries:
        with open(path_a, "wb") as f:
            f.write(cache_files.MAGIC + forged + b_payload)
        cache.clear_memory_cache()
        again = pt.generate_loopy(_plus_one())
        assert again.stats.cache == "miss"
        np.testing.assert_array_equal(_run(queue, again), XV + 1)
    # b's whole entry (signed for b's key) copied to a's name
    cache.clear_memory_cache()
    with open(cache._path("plans", prg_b.key), "rb") as src, \
            open(path_a, "wb") as dst:
        dst.write(src.read())
    again = pt.generate_loopy(_plus_one())
    assert again.stats.cache == "miss"
    np.testing.assert_array_equal(_run(queue, again), XV + 1)


class _Planted:
    """Unpickling it creates the file *marker* (code run by the loader)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_planted_pickle_is_never_unpickled(queue, tmp_path, monkeypatch):
    from pytato_like import cache_files
    cache = _fresh(_private_tmp(tmp_path), monkeypatch)
    key = pt.generate_loopy(_plus_one()).key
    path = cache._path("plans", key)
    marker = tmp_path / "code-was-run"
    planted = pickle.dumps(_Planted(str(marker)))
    for content in (planted,  # format 1's way: a bare pickle
                    cache_files.MAGIC + bytes(32) + planted,
                    cache_files.MAGIC + hashlib.sha256(planted).digest()
                    + planted):
        with open(path, "wb") as f:
            f.write(content)
        cache.clear_memory_cache()
        again = pt.generate_loopy(_plus_one())
        assert not marker.exists()
        assert again.stats.cache == "miss"
        np.testing.assert_array_equal(_run(queue, again), XV + 1)
    # the units and kernels caches read through the same check
    for kind in ("units", "kernels"):
        unit_path = cache._path(kind, key)
        os.makedirs(os.path.dirname(unit_path), mode=0o700, exist_ok=True)
        with open(unit_path, "wb") as f:
            f.write(planted)
        assert cache._load(kind, key) is None
        assert not marker.exists()


_FIFO_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import numpy as np, pyopencl as cl, pytato_like as pt
    from pytato_like.target.loopy import cache
    x = pt.make_placeholder("x", (24,), np.float64)
    y = x + 1
    key = pt.generate_loopy(y).key
    cache.clear_memory_cache()
    path = cache._path("plans", key)
    os.unlink(path)
    kind = sys.argv[1]
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        os.symlink("/dev/zero", path)   # reading it would never end
    else:
        os.symlink(sys.argv[2], path)   # a user's file elsewhere
    prg = pt.generate_loopy(y)
    q = cl.CommandQueue(cl.create_some_context(interactive=False))
    xv = np.linspace(-1.0, 1.0, 24)
    _, (out,) = prg(q, x=xv)
    print(json.dumps({"cache": prg.stats.cache, "out": out.tolist(),
                      "is_link_or_fifo": not os.path.isfile(path)
                                         or os.path.islink(path)}))
""")


@pytest.mark.parametrize("kind", ["fifo", "device", "link"])
def test_non_regular_entry_is_skipped_without_blocking(tmp_path, kind):
    folder = _private_tmp(tmp_path)
    users_file = tmp_path / "users-notes.pkl"
    users_file.write_bytes(b"the user's own data")
    env = dict(os.environ, PYTATO_LIKE_CACHE_DIR=str(folder))
    # a blocked open() would hang: the timeout turns that into a failure
    proc = subprocess.run([sys.executable, "-c", _FIFO_SCRIPT, kind,
                           str(users_file)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["cache"] == "miss"
    np.testing.assert_array_equal(np.array(result["out"]), XV + 1)
    # the user's file behind the link is untouched
    assert users_file.read_bytes() == b"the user's own data"

# }}}


# {{{ the folder: foreign files, loose modes, the secret

def _plant_users_files(folder, versions_dir):
    files = {
        folder / "notes.txt": b"mine",
        folder / "results.pkl": b"my pickle",
        folder / "data" / "run1.pkl": b"experiment",
        folder / "data" / ("ab" * 32 + ".pkl"): b"named like an entry",
        folder / "pytato_like-mine" / "plans" / "keep.pkl": b"not an entry name",
        folder / versions_dir / "plans" / "mine.txt": b"in the package folder",
        folder / versions_dir / "README": b"mine too",
    }
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_bytes(data)
    return files


def test_eviction_and_clear_delete_only_the_packages_files(queue, tmp_path,
                                                           monkeypatch):
    folder = _private_tmp(tmp_path)
    cache = _fresh(folder, monkeypatch)
    versions_dir = os.path.basename(cache.cache_dir())
    users = _plant_users_files(folder, versions_dir)
    # a bound so small that eviction removes every entry after each write
    monkeypatch.setenv("PYTATO_LIKE_CACHE_SIZE", "1")
    prg = pt.generate_loopy(_plus_one())
    np.testing.assert_array_equal(_run(queue, prg), XV + 1)
    assert not glob.glob(str(folder / versions_dir / "*" / "*.pkl"))
    monkeypatch.setenv("PYTATO_LIKE_CACHE_SIZE", "1G")
    cache.clear_memory_cache()
    prg = pt.generate_loopy(_times_two())
    assert glob.glob(str(folder / versions_dir / "plans" / "*.pkl"))
    # a stale temporary file of the package is cleared too
    (folder / versions_dir / "plans" / ".pytato_like-0123456789abcdef.tmp"
     ).write_bytes(b"half-written")
    proc = subprocess.run([sys.executable, "-m", "pytato_like.cache", "clear"],
                          env=dict(os.environ), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert not glob.glob(str(folder / versions_dir / "*" / "*.pkl"))
    assert not glob.glob(str(folder / versions_dir / "*" / "*.tmp"))
    for path, data in users.items():
        assert path.read_bytes() == data, path
    # the package's folders that held only entries are gone
    assert not (folder / versions_dir / "kernels").exists()


@pytest.mark.parametrize("mode", [0o770, 0o777, 0o1777])
def test_folder_others_can_write_is_refused(tmp_path, monkeypatch, mode):
    folder = tmp_path / "shared"
    folder.mkdir()
    os.chmod(folder, mode)
    _fresh(folder, monkeypatch)
    with pytest.raises(UnsafeCacheFolderError) as info:
        pt.generate_loopy(_plus_one())
    message = str(info.value)
    assert str(folder) in message and stat.filemode(mode | stat.S_IFDIR) \
        in message
    assert "writable by" in message and "PYTATO_LIKE_CACHE=0" in message
    assert os.listdir(folder) == []  # nothing written there
    assert stat.S_IMODE(os.stat(folder).st_mode) == mode  # left as it was


def test_disk_cache_off_ignores_an_unsafe_folder(queue, tmp_path, monkeypatch):
    folder = tmp_path / "shared"
    folder.mkdir()
    os.chmod(folder, 0o777)
    _fresh(folder, monkeypatch)
    monkeypatch.setenv("PYTATO_LIKE_CACHE", "0")
    prg = pt.generate_loopy(_plus_one())
    np.testing.assert_array_equal(_run(queue, prg), XV + 1)


def test_package_folder_inside_that_others_can_write_is_refused(
        tmp_path, monkeypatch):
    folder = _private_tmp(tmp_path)
    cache = _fresh(folder, monkeypatch)
    plans = os.path.dirname(cache._path("plans", "0" * 64))
    os.makedirs(plans, mode=0o700)
    os.chmod(plans, 0o777)
    with pytest.raises(UnsafeCacheFolderError, match="plans"):
        pt.generate_loopy(_plus_one())


def test_default_folder_with_a_loose_mode_is_made_private(queue, tmp_path,
                                                         monkeypatch):
    # the package's own default folder (an older release made it with
    # the umask): tightened, not refused
    xdg = _private_tmp(tmp_path, "xdg")
    (xdg / "pytato_like").mkdir()
    os.chmod(xdg / "pytato_like", 0o777)
    cache = _fresh(xdg, monkeypatch)
    monkeypatch.delenv("PYTATO_LIKE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    assert cache.cache_base_dir() == str(xdg / "pytato_like")
    prg = pt.generate_loopy(_plus_one())
    np.testing.assert_array_equal(_run(queue, prg), XV + 1)
    assert stat.S_IMODE(os.stat(xdg / "pytato_like").st_mode) == 0o700
    assert glob.glob(str(xdg / "pytato_like" / "*" / "plans" / "*.pkl"))


def test_files_and_folders_the_package_makes_are_private(tmp_path,
                                                         monkeypatch):
    from pytato_like import cache_files
    folder = tmp_path / "new" / "cache"  # made by the package
    cache = _fresh(folder, monkeypatch)
    old = os.umask(0o002)  # a permissive umask does not loosen them
    try:
        prg = pt.generate_loopy(_plus_one())
    finally:
        os.umask(old)
    entry = cache._path("plans", prg.key)
    for path, mode in ((folder, 0o700),
                       (os.path.dirname(os.path.dirname(entry)), 0o700),
                       (os.path.dirname(entry), 0o700),
                       (entry, 0o600),
                       (folder / cache_files.SECRET_NAME, 0o600)):
        assert stat.S_IMODE(os.stat(path).st_mode) == mode, path


def test_secret_readable_by_others_is_replaced(queue, tmp_path, monkeypatch):
    from pytato_like import cache_files
    folder = _private_tmp(tmp_path)
    cache = _fresh(folder, monkeypatch)
    pt.generate_loopy(_plus_one())
    secret = folder / cache_files.SECRET_NAME
    old = secret.read_bytes()
    os.chmod(secret, 0o644)
    cache = _fresh(folder, monkeypatch)  # as a new process
    again = pt.generate_loopy(_plus_one())
    # entries signed with a secret others could read are not trusted
    assert again.stats.cache == "miss"
    np.testing.assert_array_equal(_run(queue, again), XV + 1)
    assert secret.read_bytes() != old
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    cache.clear_memory_cache()
    assert pt.generate_loopy(_plus_one()).stats.cache == "disk"

# }}}


# {{{ PoCL's cache

_POCL_SCRIPT = textwrap.dedent("""
    import json, os
    import numpy as np, pyopencl as cl, pytato_like as pt
    x = pt.make_placeholder("x", (24,), np.float64)
    y = pt.sin(x) * 3 - x
    q = cl.CommandQueue(cl.create_some_context(interactive=False))
    _, (out,) = pt.generate_loopy(y)(q, x=np.linspace(-1.0, 1.0, 24))
    print(json.dumps({"out": out.tolist(),
                      "pocl": os.environ.get("POCL_CACHE_DIR")}))
""")


def _script_result(script, folder, *args, **env_extra):
    """The JSON the last line of *script* printed, run in a fresh process
    with the cache folder *folder* and PoCL's folder in it."""
    env = {k: v for k, v in os.environ.items() if k != "POCL_CACHE_DIR"}
    env.update(PYTATO_LIKE_CACHE_DIR=str(folder), **env_extra)
    proc = subprocess.run([sys.executable, "-c", script, *args], env=env,
                          capture_output=True, text=True, timeout=300)
    # SIGABRT in PoCL would show as returncode -6
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _pocl_run(folder, **env_extra):
    result = _script_result(_POCL_SCRIPT, folder, **env_extra)
    np.testing.assert_allclose(np.array(result["out"]),
                               np.sin(XV) * 3 - XV, rtol=1e-13)
    return result


def _truncate(path, size):
    with open(path, "r+b") as f:
        f.truncate(size)


def test_pocl_gets_a_folder_of_ours_unless_the_user_set_one(tmp_path):
    folder = _private_tmp(tmp_path)
    result = _pocl_run(folder)
    assert result["pocl"] == str(folder / "pocl")
    assert glob.glob(str(folder / "pocl" / "*" / "*" / "program.bc"))
    mine = tmp_path / "my-pocl"
    result = _pocl_run(folder, POCL_CACHE_DIR=str(mine))
    assert result["pocl"] == str(mine)


@pytest.mark.parametrize("damage", ["bitcode", "library", "both"])
def test_truncated_pocl_cache_is_rebuilt_not_aborted(tmp_path, damage):
    folder = _private_tmp(tmp_path)
    _pocl_run(folder)
    bitcodes = glob.glob(str(folder / "pocl" / "*" / "*" / "program.bc"))
    libraries = glob.glob(str(folder / "pocl" / "*" / "*" / "*" / "*" / "*.so"))
    assert bitcodes and libraries
    # the plans stay: the second run goes straight to PoCL's cache
    if damage in ("bitcode", "both"):
        for path in bitcodes:
            _truncate(path, 100)
    if damage in ("library", "both"):
        for path in libraries:
            _truncate(path, 100)
    _pocl_run(folder)
    # and PoCL's cache is whole again
    from pytato_like._pocl_cache import is_valid_bitcode
    bitcodes = glob.glob(str(folder / "pocl" / "*" / "*" / "program.bc"))
    assert bitcodes and all(is_valid_bitcode(open(p, "rb").read())
                            for p in bitcodes)


def test_emptied_pocl_entry_older_than_the_check_is_retried(tmp_path):
    # a file the check does not look at again (older than its stamp): the
    # build "succeeds" without the kernel, and is retried past PoCL's cache
    folder = _private_tmp(tmp_path)
    _pocl_run(folder)
    for path in glob.glob(str(folder / "pocl" / "*" / "*" / "program.bc")):
        _truncate(path, 0)
        os.utime(path, (0, 0))
    _pocl_run(folder)


def test_bitcode_and_elf_checks_against_files_pocl_wrote(tmp_path):
    from pytato_like._pocl_cache import is_valid_bitcode, is_valid_elf
    folder = _private_tmp(tmp_path)
    _pocl_run(folder)
    bitcode = open(glob.glob(str(folder / "pocl" / "*" / "*" / "program.bc"))[0],
                   "rb").read()
    library = open(glob.glob(str(folder / "pocl" / "*" / "*" / "*" / "*" / "*.so"))[0],
                   "rb").read()
    assert is_valid_bitcode(bitcode) and is_valid_elf(library)
    for n in (0, 3, 4, 40, len(bitcode) // 2, len(bitcode) - 4):
        assert not is_valid_bitcode(bitcode[:n]), n
    for n in (0, 16, 63, 64, len(library) // 2, len(library) - 1):
        assert not is_valid_elf(library[:n]), n
    assert not is_valid_bitcode(library) and not is_valid_elf(bitcode)


def _pocl_folder_of_copies(tmp_path, n_entries):
    """A PoCL folder of *n_entries* copies of an entry PoCL wrote, and the
    copies' paths."""
    import shutil
    source = _private_tmp(tmp_path, "source")
    _pocl_run(source)
    entry = glob.glob(str(source / "pocl" / "*" / "*" / "program.bc"))[0]
    folder = tmp_path / "pocl"
    entries = []
    for i in range(n_entries):
        copy = folder / f"{i % 7:02d}" / f"ENTRY{i:05d}"
        shutil.copytree(os.path.dirname(entry), copy)
        entries.append(copy)
    return folder, entries


@pytest.mark.parametrize("damage", ["bitcode", "library"])
def test_background_pocl_check_removes_damaged_entries_before_the_build(
        tmp_path, monkeypatch, damage):
    from pytato_like import _pocl_cache
    folder, entries = _pocl_folder_of_copies(tmp_path, 40)
    assert all(_pocl_cache._entry_is_valid(str(e), 0.0) for e in entries)
    bad = entries[:3]
    for entry in bad:
        path = (entry / "program.bc" if damage == "bitcode"
                else next(entry.rglob("*.so")))
        _truncate(path, 3)
    monkeypatch.setattr(_pocl_cache, "_OURS", str(folder))
    monkeypatch.setattr(_pocl_cache, "_CHECKED", False)
    monkeypatch.setattr(_pocl_cache, "_BACKGROUND", None)
    _pocl_cache.start_background_check()
    thread = _pocl_cache._BACKGROUND
    assert thread is not None and thread.daemon
    # what build_program calls: it waits for the thread, and reports its count
    assert _pocl_cache.check_pocl_cache() == len(bad)
    assert not thread.is_alive()
    assert sorted(p.name for p in folder.glob("*/*")) == sorted(
        e.name for e in entries[len(bad):])
    # once per process: neither a second start nor a second check walks again
    _pocl_cache.start_background_check()
    assert _pocl_cache._BACKGROUND is thread
    _truncate(entries[-1] / "program.bc", 3)
    assert _pocl_cache.check_pocl_cache() == len(bad)
    assert _pocl_cache.check_pocl_cache(force=True) == 1


_CHECK_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np, pyopencl as cl, pytato_like as pt
    from pytato_like import _pocl_cache, opencl_build
    x = pt.make_placeholder("x", (24,), np.float64)
    y = pt.cos(x) * float(sys.argv[1]) - x
    prg = pt.generate_loopy(y)
    thread = _pocl_cache._BACKGROUND
    started = thread is not None
    q = cl.CommandQueue(cl.create_some_context(interactive=False))
    _, (out,) = prg(q, x=np.linspace(-1.0, 1.0, 24))
    print(json.dumps({"out": out.tolist(), "cache": prg.stats.cache,
                      "started": started,
                      "alive": thread is not None and thread.is_alive(),
                      "checked": _pocl_cache._CHECKED,
                      "binaries": opencl_build.BINARIES_LOADED}))
""")


def _check_run(folder, factor):
    result = _script_result(_CHECK_SCRIPT, folder, str(factor))
    np.testing.assert_allclose(np.array(result.pop("out")),
                               np.cos(XV) * factor - XV, rtol=1e-13)
    return result


def test_pocl_check_runs_beside_codegen_and_not_on_a_warm_start(tmp_path):
    # a plan cache miss starts the walk of PoCL's folder beside code
    # generation, and the first build finds it finished; a warm start that
    # loads the saved binary builds nothing from source and walks nothing
    # (the walk's cost grows with the folder: ~0.5 s for 68 000 files)
    folder = _private_tmp(tmp_path)
    _pocl_run(folder)   # a folder with an entry in it
    assert _check_run(folder, 3.0) == {"cache": "miss", "started": True,
                                       "alive": False, "checked": True,
                                       "binaries": 0}
    assert _check_run(folder, 3.0) == {"cache": "disk", "started": False,
                                       "alive": False, "checked": False,
                                       "binaries": 1}
    # without a saved binary (another program's plan on disk, its binary
    # gone), the source build walks the folder first
    _check_run(folder, 5.0)
    for path in glob.glob(str(folder / "*" / "binaries" / "*.pkl")):
        os.remove(path)
    assert _check_run(folder, 5.0) == {"cache": "disk", "started": False,
                                       "alive": False, "checked": True,
                                       "binaries": 0}

# }}}


@pytest.mark.parametrize("xdg", [None, "/some/where", "relative/ignored"])
def test_pocl_folder_is_in_the_cache_folder_platformdirs_gives(monkeypatch,
                                                               xdg):
    # pocl_cache computes the folder without importing platformdirs (it
    # runs at import pytato_like); it must agree with cache_files
    from pytato_like._pocl_cache import pocl_cache_dir
    from pytato_like.cache_files import cache_base_dir
    monkeypatch.delenv("PYTATO_LIKE_CACHE_DIR", raising=False)
    if xdg is None:
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    assert pocl_cache_dir() == os.path.join(cache_base_dir(), "pocl")
