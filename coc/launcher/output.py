"""Collate the output of every rank and gateway daemon: passed through, tagged, or to files.

Output reaches coc-run's stdout and stderr one whole line at a time: a partial line is held
until its newline arrives (or its process exits), so lines of different ranks never mix even
when ranks write pieces of lines at the same time. With ``--tag-output`` every line also gets
a ``[site/host/rank]`` prefix. With ``--output-dir`` each process's streams go to their own
files instead, unchanged.
"""

import sys
from pathlib import Path

__all__ = ["LineTagger", "OutputSink"]


class LineTagger:
    """Prefix every complete line of one stream, holding back a partial last line.

    Examples
    --------
    >>> t = LineTagger(b"[a/a1/0] ")
    >>> t.feed(b"one\\ntw"), t.feed(b"o\\nthr"), t.flush()
    (b'[a/a1/0] one\\n', b'[a/a1/0] two\\n', b'[a/a1/0] thr\\n')
    """

    def __init__(self, prefix):
        self.prefix = prefix
        self.partial = b""

    def feed(self, data):
        """Return the complete lines ``data`` finishes, prefixed; keep the rest."""
        *lines, self.partial = (self.partial + data).split(b"\n")
        return b"".join(self.prefix + line + b"\n" for line in lines)

    def flush(self):
        """Return the held partial line, prefixed and ended with a newline (or b"")."""
        rest, self.partial = self.partial, b""
        return self.prefix + rest + b"\n" if rest else b""


class OutputSink:
    """Route output of the job's processes to coc-run's stdout/stderr or to per-process files.

    Parameters
    ----------
    sources : dict
        ``{source: (prefix, file stem)}``, where ``source`` is ``("rank", 3)`` or
        ``("gateway", 16)``, ``prefix`` the tag (``"a/a1/3"``) and ``file stem`` the start
        of the file names under ``output_dir`` (``"rank.3"``).
    tag : bool
        Prefix every line with ``[prefix]`` (lines are kept whole either way).
    output_dir : path, optional
        Write ``<stem>.stdout`` and ``<stem>.stderr`` there instead of to the terminal.
    files_only : iterable
        Sources whose output only goes to files (gateway daemons' logs and statistics);
        without ``output_dir`` it is dropped.
    """

    def __init__(self, sources, *, tag=False, output_dir=None, files_only=(), stdout=None,
                 stderr=None):
        self.targets = {"stdout": stdout or sys.stdout.buffer,
                        "stderr": stderr or sys.stderr.buffer}
        self.taggers = {}
        self.files = {}
        self.dropped = set(files_only) if output_dir is None else set()
        if output_dir is not None:
            Path(output_dir).mkdir(parents=True, exist_ok=True)
            for source, (_, stem) in sources.items():
                for stream in ("stdout", "stderr"):
                    self.files[source, stream] = open(Path(output_dir, f"{stem}.{stream}"), "wb")
        else:
            for source, (prefix, _) in sources.items():
                for stream in ("stdout", "stderr"):
                    self.taggers[source, stream] = LineTagger(f"[{prefix}] ".encode() if tag
                                                              else b"")

    def _emit(self, source, stream, data):
        target = self.files.get((source, stream)) or self.targets[stream]
        if not data or target is None:
            return
        try:
            target.write(data)
            target.flush()
        except BrokenPipeError:          # `coc-run ... | head`: the rest has no reader
            self.targets[stream] = None

    def write(self, source, stream, data):
        """Deliver ``data`` that ``source`` wrote on ``stream`` (``"stdout"``/``"stderr"``)."""
        if source in self.dropped:
            return
        tagger = self.taggers.get((source, stream))
        self._emit(source, stream, tagger.feed(data) if tagger else data)

    def end(self, source):
        """Flush what ``source`` left without a final newline (call when it has exited)."""
        for stream in ("stdout", "stderr"):
            tagger = self.taggers.get((source, stream))
            if tagger:
                self._emit(source, stream, tagger.flush())

    def close(self):
        """Flush every held line and close the per-process files."""
        for source, _ in list(self.taggers):
            self.end(source)
        for file in self.files.values():
            file.close()
