"""A stand-in ``pytato`` for processes started by ``python -m
pytato_like.run`` (which puts this folder first on ``PYTHONPATH``, so
that child processes -- test workers, ``mpiexec`` ranks -- get the alias
too): importing it installs :func:`pytato_like.compat.install_pytato_alias`
and replaces itself by :mod:`pytato_like`."""

from pytato_like.compat import install_pytato_alias

install_pytato_alias(replace_stand_in=True)
