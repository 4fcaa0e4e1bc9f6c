"""coc — one MPI-style parallel program across several clusters joined only by gateways."""

from coc.errors import CocError  # noqa: F401

__version__ = "0.1.0"
