"""Collate the output of every rank and gateway daemon: passed through, tagged, or to files.

Output reaches coc-run's stdout and stderr one whole line at a time: a partial line is held
until its newline arrives (or its process exits), so lines of different ranks never mix even
when ranks write pieces of lines at the same time. A held line past 1 MiB waits in a
temporary file, so coc-run's memory stays bounded whatever the length of a line. With
``--tag-output`` every line also gets a ``[site/host/rank]`` prefix. With ``--output-dir``
each process's streams go to their own files instead, unchanged.
"""

import sys
import tempfile
from pathlib import Path

__all__ = ["LineTagger", "OutputSink"]


class LineTagger:
    """Prefix every complete line of one stream, holding back a partial last line.

    The partial line is kept as a list of chunks (never re-joined per chunk, so a long line
    costs linear time) and, past ``hold`` bytes, in an anonymous temporary file, so a line
    of any length passes in bounded memory and still comes out whole and byte-exact.
    Output goes to a ``write`` callable in pieces of bounded size.

    Examples
    --------
    >>> t, out = LineTagger(b"[a/a1/0] "), []
    >>> t.feed(b"one\\ntw", out.append); t.feed(b"o\\nthr", out.append); t.flush(out.append)
    >>> b"".join(out)
    b'[a/a1/0] one\\n[a/a1/0] two\\n[a/a1/0] thr\\n'
    """

    #: Bytes of a partial line held in memory before it moves to a temporary file.
    HOLD = 1 << 20
    _COPY = 1 << 20          # bytes per piece when a spilled line is written out

    def __init__(self, prefix, hold=HOLD):
        self.prefix, self.hold = prefix, hold
        self.held, self.held_size = [], 0
        self.spill = None

    def feed(self, data, write):
        """Pass the complete lines ``data`` finishes to ``write``, prefixed; keep the rest."""
        last = data.rfind(b"\n")
        if last < 0:
            self._keep(data)
            return
        first = data.find(b"\n")
        self._release(data[:first + 1], write)
        if first < last:
            lines = data[first + 1:last].split(b"\n")
            write(b"".join(self.prefix + line + b"\n" for line in lines))
        if last + 1 < len(data):
            self._keep(data[last + 1:])

    def flush(self, write):
        """Pass the held partial line to ``write``, prefixed and ended with a newline."""
        if self.held_size:
            self._release(b"\n", write)

    def _keep(self, data):
        self.held_size += len(data)
        if self.spill is not None:
            self.spill.write(data)
            return
        self.held.append(data)
        if self.held_size > self.hold:
            self.spill = tempfile.TemporaryFile()
            self.spill.writelines(self.held)
            self.held = []

    def _release(self, tail, write):
        """Write prefix, held bytes and ``tail`` (the end of the line); hold nothing after."""
        if self.spill is None:
            write(b"".join([self.prefix, *self.held, tail]))
        else:
            write(self.prefix)
            self.spill.seek(0)
            while piece := self.spill.read(self._COPY):
                write(piece)
            write(tail)
            self.spill.close()
            self.spill = None
        self.held, self.held_size = [], 0


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

    def _target(self, source, stream):
        return self.files.get((source, stream)) or self.targets[stream]

    def _emit(self, source, stream, produce):
        """Run ``produce(write)`` against the source's target, then flush it once."""
        target = self._target(source, stream)
        if target is None:
            return
        try:
            produce(target.write)
            target.flush()
        except BrokenPipeError:          # `coc-run ... | head`: the rest has no reader
            self.targets[stream] = None

    def write(self, source, stream, data):
        """Deliver ``data`` that ``source`` wrote on ``stream`` (``"stdout"``/``"stderr"``)."""
        if source in self.dropped or not data:
            return
        tagger = self.taggers.get((source, stream))
        if tagger is None:
            self._emit(source, stream, lambda write: write(data))
        else:
            self._emit(source, stream, lambda write: tagger.feed(data, write))

    def end(self, source):
        """Flush what ``source`` left without a final newline (call when it has exited)."""
        for stream in ("stdout", "stderr"):
            tagger = self.taggers.get((source, stream))
            if tagger and tagger.held_size:
                self._emit(source, stream, tagger.flush)

    def close(self):
        """Flush every held line and close the per-process files."""
        for source, _ in list(self.taggers):
            self.end(source)
        for file in self.files.values():
            file.close()
