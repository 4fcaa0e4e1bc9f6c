"""The error every testbed operation raises, with the command and its output when one failed."""

from coc.errors import CocError

__all__ = ["TestbedError"]


class TestbedError(CocError):
    """A testbed could not be built, inspected or removed (not root, a failing ``ip``, ...)."""

    __test__ = False  # not a pytest test class, despite the name
