"""Run ``ip`` and ``tc`` in network namespaces and write their sysctls, failing with clear errors.

Commands go to the tools in batches (``ip -n NS -batch -``), one process per namespace, so a
testbed of a hundred hosts is built in about a second. A failed batch names the namespace, the
command that failed and the tool's own message.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence

from coc.errors import TestbedError

__all__ = [
    "require_root",
    "run",
    "batch",
    "namespaces",
    "add_namespaces",
    "delete_namespaces",
    "pids",
    "write_sysctls",
    "read_sysctl",
    "read",
    "exec_argv",
]

TIMEOUT = 120  # seconds for any one ip/tc process; a hundred-host batch takes about one
_CLONE_NEWNET = 0x40000000
_FAILED_LINE = re.compile(r"Command failed -:(\d+)")


def require_root(action: str) -> None:
    """Raise :class:`TestbedError` unless this process may create namespaces (runs as root)."""
    if os.geteuid() != 0:
        raise TestbedError(
            f"`coc testbed {action}` needs root: network namespaces, veths, bridges and qdiscs "
            f"need CAP_NET_ADMIN (you are uid {os.geteuid()}); run it as root, e.g. "
            f"`sudo coc testbed {action} ...`")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise TestbedError(f"`coc testbed {action}` needs `{tool}` (Debian/Ubuntu package "
                               "iproute2) on PATH")


def run(argv: Sequence[str], *, input: str | None = None, what: str | None = None,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``argv``, returning its ``CompletedProcess``; raise :class:`TestbedError` on failure.

    ``what`` says what the command was for; it starts the error message.
    """
    try:
        done = subprocess.run(argv, input=input, capture_output=True, text=True,
                              timeout=TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TestbedError(f"{what or argv[0]}: `{shlex.join(argv)}` could not run: {exc}") \
            from exc
    if check and done.returncode != 0:
        raise TestbedError(_failure(argv, input, done, what))
    return done


def _failure(argv: Sequence[str], input: str | None, done: subprocess.CompletedProcess[str],
             what: str | None) -> str:
    message = done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}"
    command = shlex.join(argv)
    found = _FAILED_LINE.search(done.stderr)
    if input and found:  # a batch: name the line that failed instead of the whole batch
        lines = input.splitlines()
        number = int(found.group(1))
        if 0 < number <= len(lines):
            command = f"{shlex.join(argv[:-2])} {lines[number - 1]}"
    return f"{what or argv[0]}: `{command}` failed: {message}"


def batch(tool: str, namespace: str | None, commands: Sequence[str], *,
          what: str | None = None, force: bool = False
          ) -> subprocess.CompletedProcess[str] | None:
    """Run ``commands`` (lines for ``ip`` or ``tc``) in ``namespace`` (None: this one).

    ``force`` carries on past a failing line (used when removing what may already be gone).
    """
    if not commands:
        return None
    argv = [tool]
    if namespace is not None:
        argv += ["-n", namespace]
    if force:
        argv.append("-force")
    argv += ["-batch", "-"]
    where = "" if namespace is None else f" in namespace {namespace}"
    return run(argv, input="\n".join(commands) + "\n", what=f"{what or tool}{where}",
               check=not force)


def namespaces() -> list[str]:
    """Return the names of every named network namespace (``ip netns list``)."""
    out = run(["ip", "netns", "list"], what="listing namespaces").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def add_namespaces(names: Iterable[str]) -> None:
    """Create the namespaces ``names`` (all in one ``ip`` process)."""
    batch("ip", None, [f"netns add {n}" for n in names], what="creating namespaces")


def delete_namespaces(names: Iterable[str]) -> None:
    """Delete the namespaces ``names``, ignoring any that are already gone."""
    batch("ip", None, [f"netns del {n}" for n in names], force=True)


def pids(names: Iterable[str]) -> set[int]:
    """Return the ids of the processes running in any of the namespaces ``names``."""
    inodes = set()
    for name in names:
        with contextlib.suppress(OSError):
            st = os.stat(f"/run/netns/{name}")
            inodes.add((st.st_dev, st.st_ino))
    found = set()
    for entry in os.listdir("/proc") if inodes else ():
        if entry.isdigit():
            with contextlib.suppress(OSError):  # gone, or a zombie
                st = os.stat(f"/proc/{entry}/ns/net")
                if (st.st_dev, st.st_ino) in inodes:
                    found.add(int(entry))
    return found


def _setns(fd: int, namespace: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, _CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise TestbedError(f"cannot enter namespace {namespace}: {os.strerror(errno)}")


@contextlib.contextmanager
def _inside(namespace: str) -> Iterator[None]:
    """Move this thread into ``namespace`` for the ``with`` block, then back."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(f"/run/netns/{namespace}", os.O_RDONLY)
    except OSError as exc:
        os.close(own)
        raise TestbedError(f"namespace {namespace} does not exist: {exc}") from exc
    try:
        _setns(target, namespace)
        try:
            yield
        finally:
            _setns(own, "of this process")
    finally:
        os.close(target)
        os.close(own)


def _sysctl_path(key: str) -> str:
    return "/proc/sys/" + key.replace(".", "/")


def write_sysctls(namespace: str, values: Mapping[str, str]) -> None:
    """Set the sysctls ``values`` ({"net.ipv4.ip_forward": "0", ...}) inside ``namespace``."""
    with _inside(namespace):
        for key, value in values.items():
            try:
                with open(_sysctl_path(key), "w") as f:
                    f.write(str(value))
            except OSError as exc:
                raise TestbedError(f"cannot set {key}={value} in namespace {namespace}: "
                                   f"{exc}") from exc


def read_sysctl(namespace: str, key: str) -> str:
    """Return the value of sysctl ``key`` inside ``namespace``, as text."""
    return read(namespace, _sysctl_path(key)).strip()


def read(namespace: str, path: str) -> str:
    """Return the text of ``path`` read inside ``namespace`` (for /proc files per namespace)."""
    with _inside(namespace):
        with open(path) as f:
            return f.read()


def exec_argv(namespace: str, argv: Sequence[str]) -> list[str]:
    """Return the command line that runs ``argv`` inside ``namespace``."""
    return ["ip", "netns", "exec", namespace, *argv]
