"""Reading ``perf stat -x,`` output, for the benchmarks that count system calls with it.

``waits.py`` and ``per_message.py`` import it (they run as scripts, so this directory is
first on ``sys.path``).
"""

__all__ = ["syscall_counts"]

PREFIX = "syscalls:sys_enter_"


def syscall_counts(text):
    """Return ``{syscall: calls}`` from ``perf stat -x,`` output of ``syscalls:sys_enter_*``
    events (lines perf could not count, ``<not counted>``, are left out).

    Examples
    --------
    >>> syscall_counts("12,,syscalls:sys_enter_read,100,100.00,,\\n<not counted>,,x,0,0,,")
    {'read': 12}
    """
    calls = {}
    for line in text.splitlines():
        fields = line.strip().split(",")
        if len(fields) > 2 and fields[2].startswith(PREFIX) and fields[0].isdigit():
            calls[fields[2][len(PREFIX):]] = int(fields[0])
    return calls
