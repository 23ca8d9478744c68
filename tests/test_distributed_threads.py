"""Device threads per rank (pytato_like.distributed.threads): the default
``cores // ranks_on_node``, the user's setting, and PoCL variables the user
set, computed on private environment dicts (the process environment is not
touched)."""

from __future__ import annotations

import pytest

from pytato_like.diagnostic import ConfigurationError
from pytato_like.distributed.threads import (
    POCL_VARIABLES,
    configure_device_threads,
    default_device_threads,
    ranks_on_node,
)


def test_ranks_on_node_from_mpich_and_open_mpi():
    assert ranks_on_node({"MPI_LOCALNRANKS": "3"}) == 3
    assert ranks_on_node({"OMPI_COMM_WORLD_LOCAL_SIZE": "4"}) == 4
    assert ranks_on_node({}) is None


@pytest.mark.parametrize(("ranks", "cores", "expected"), [
    ("2", 2, 1), ("2", 8, 4), ("3", 8, 2), ("4", 2, 1), ("1", 8, None)])
def test_default_is_cores_over_ranks_on_node(ranks, cores, expected):
    assert default_device_threads({"MPI_LOCALNRANKS": ranks}, cores) == expected


def test_setting_overrides_the_default():
    env = {"MPI_LOCALNRANKS": "2", "PYTATO_LIKE_DEVICE_THREADS": "3"}
    assert default_device_threads(env, cores=2) == 3
    env["PYTATO_LIKE_DEVICE_THREADS"] = "all"
    assert default_device_threads(env, cores=2) is None
    env["PYTATO_LIKE_DEVICE_THREADS"] = "zero"
    with pytest.raises(ConfigurationError, match="PYTATO_LIKE_DEVICE_THREADS"):
        default_device_threads(env, cores=2)


def test_configure_sets_both_pocl_variables_unless_the_user_did():
    env = {"MPI_LOCALNRANKS": "2"}
    expected = default_device_threads(env)
    assert configure_device_threads(environ=env) == expected
    assert all(env[v] == str(expected) for v in POCL_VARIABLES)

    mine = {"MPI_LOCALNRANKS": "2", "POCL_MAX_PTHREAD_COUNT": "7"}
    assert configure_device_threads(environ=mine) == 7
    assert "POCL_CPU_MAX_CU_COUNT" not in mine

    alone = {}
    assert configure_device_threads(environ=alone) is None
    assert alone == {}

    explicit = {"POCL_MAX_PTHREAD_COUNT": "7"}
    assert configure_device_threads(2, environ=explicit) == 2
    assert explicit["POCL_MAX_PTHREAD_COUNT"] == "2"
    with pytest.raises(ConfigurationError):
        configure_device_threads(0, environ={})


def test_one_thread_runs_the_device_in_the_ranks_own_thread():
    # 2 ranks on 2 cores: one thread each, so PoCL's basic driver (which
    # runs each command in the enqueuing thread) instead of a worker
    env = {"MPI_LOCALNRANKS": "2"}
    assert configure_device_threads(environ=env, cores=2) == 1
    assert env["POCL_DEVICES"] == "basic"

    # more threads than one: the pthread driver stays (nothing set)
    wide = {"MPI_LOCALNRANKS": "2"}
    assert configure_device_threads(environ=wide, cores=8) == 4
    assert "POCL_DEVICES" not in wide

    # the user's driver list wins, and the switch turns it off
    chosen = {"MPI_LOCALNRANKS": "2", "POCL_DEVICES": "pthread"}
    assert configure_device_threads(environ=chosen, cores=2) == 1
    assert chosen["POCL_DEVICES"] == "pthread"
    off = {"MPI_LOCALNRANKS": "2", "PYTATO_LIKE_INLINE_DEVICE": "0"}
    assert configure_device_threads(environ=off, cores=2) == 1
    assert "POCL_DEVICES" not in off
    bad = {"MPI_LOCALNRANKS": "2", "PYTATO_LIKE_INLINE_DEVICE": "maybe"}
    with pytest.raises(ConfigurationError, match="PYTATO_LIKE_INLINE_DEVICE"):
        configure_device_threads(environ=bad, cores=2)

    # an explicit single thread is a one-thread configuration too
    explicit = {}
    assert configure_device_threads(1, environ=explicit) == 1
    assert explicit["POCL_DEVICES"] == "basic"
