"""mpi4py's interface on coc: unmodified mpi4py programs run across sites.

``coc-run --mpi4py -n 8 python prog.py`` makes ``import mpi4py`` in every rank import this
package (see :mod:`coc.mpi4py.hook`), so ``from mpi4py import MPI`` gives
:mod:`coc.mpi4py.MPI`: mpi4py's names and semantics over coc's communicators. Under a plain
``mpiexec`` the real mpi4py is used. ``docs/api.md`` lists what is supported.
"""

__version__ = "4.0.0"        # the mpi4py interface this follows

__all__ = ["MPI", "rc", "coc_communicator", "__version__"]


class _Rc:
    """mpi4py's ``rc``: initialisation options. coc joins the job on first use, so the
    options that choose *how* MPI starts have no effect and are accepted as given."""

    def __init__(self):
        self.initialize = self.finalize = True
        self.threads, self.thread_level = True, "multiple"
        self.fast_reduce = self.recv_mprobe = True
        self.irecv_bufsz, self.errors = 32768, "exception"

    def __call__(self, **options):
        for name, value in options.items():
            if not hasattr(self, name):
                raise TypeError(f"mpi4py.rc: unknown option {name!r}")
            setattr(self, name, value)

    def __repr__(self):
        return f"<coc.mpi4py.rc {vars(self)}>"


rc = _Rc()


def coc_communicator(comm):
    """Return coc's own :class:`~coc.comm.Communicator` behind an ``MPI.Comm``.

    For what coc adds to MPI (``site``, ``Split_level``, asyncio) in a program that
    otherwise speaks mpi4py.
    """
    comm.Get_size()                    # COMM_WORLD/COMM_SELF join the job on first use
    return comm._c


def __getattr__(name):
    if name == "MPI":
        import importlib
        return importlib.import_module("coc.mpi4py.MPI")
    from coc.mpi4py._known import unsupported
    raise unsupported("mpi4py", name)
