"""Output collation in-process: whole lines, tags, files."""

import io

from coc.launcher.output import LineTagger, OutputSink


def _tagged(tagger, pieces):
    out = []
    for piece in pieces:
        tagger.feed(piece, out.append)
    tagger.flush(out.append)
    return b"".join(out)


def test_a_tagger_never_splits_or_prefixes_inside_a_line():
    tagger = LineTagger(b"[p] ")
    pieces = [b"ab", b"c\nde", b"", b"f\n\ng", b"h"]
    assert _tagged(tagger, pieces) == b"[p] abc\n[p] def\n[p] \n[p] gh\n"
    assert _tagged(tagger, []) == b""


def test_a_line_longer_than_the_hold_moves_to_a_file_and_comes_out_whole():
    tagger = LineTagger(b"[p] ", hold=10)
    pieces = [b"0123456", b"789abcdef", b"ghij\nshort\nlong-again-", b"and-longer", b"\n"]
    out = _tagged(tagger, pieces)
    assert out == (b"[p] 0123456789abcdefghij\n[p] short\n"
                   b"[p] long-again-and-longer\n")
    assert tagger.spill is None and tagger.held_size == 0


def test_sink_keeps_lines_of_two_sources_whole_with_or_without_tags():
    for tag, prefix0, prefix1 in ((False, b"", b""), (True, b"[a/a1/0] ", b"[b/b1/1] ")):
        out, err = io.BytesIO(), io.BytesIO()
        sources = {("rank", 0): ("a/a1/0", "rank.0"), ("rank", 1): ("b/b1/1", "rank.1")}
        sink = OutputSink(sources, tag=tag, stdout=out, stderr=err)
        sink.write(("rank", 0), "stdout", b"zero-")
        sink.write(("rank", 1), "stdout", b"one-")
        sink.write(("rank", 1), "stderr", b"oops\n")
        sink.write(("rank", 0), "stdout", b"done\n")
        sink.end(("rank", 1))
        sink.close()
        assert out.getvalue() == prefix0 + b"zero-done\n" + prefix1 + b"one-\n"
        assert err.getvalue() == prefix1 + b"oops\n"


def test_output_dir_gets_raw_bytes_per_source_and_stream(tmp_path):
    sink = OutputSink({("rank", 3): ("a/a1/3", "rank.3")}, tag=True, output_dir=tmp_path / "o")
    sink.write(("rank", 3), "stdout", b"no newline")
    sink.close()
    assert (tmp_path / "o" / "rank.3.stdout").read_bytes() == b"no newline"
    assert (tmp_path / "o" / "rank.3.stderr").read_bytes() == b""


_PEAK_RSS = """
import resource, subprocess, sys
with open(sys.argv[1], "wb") as out:
    code = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.PIPE, timeout=600).returncode
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def test_a_200_mb_line_without_newline_passes_tagged_byte_exact_in_bounded_memory(tmp_path):
    """coc-run holds a long partial line in a file, not in memory (it once reached 612 MB)."""
    import hashlib
    import subprocess
    import sys

    from launcher_helpers import COC_RUN, program

    mib, bound_kib = 200, 150 << 10      # every process of the job stays under 150 MiB
    out_path = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, str(out_path), *COC_RUN, "-n", "1", "--tag-output",
         program("long_line.py"), "--mib", str(mib)],
        capture_output=True, text=True, timeout=900)
    code, peak_kib = map(int, done.stdout.split())
    assert code == 0, done.stderr
    piece = (bytes(range(256)) * 4096).replace(b"\n", b"n")
    expected, got = hashlib.sha256(), hashlib.sha256()
    with open(out_path, "rb") as out:
        head = out.read(64)
        prefix = head[:head.index(b"] ") + 2]
        assert prefix.startswith(b"[") and prefix.endswith(b"/0] ")
        expected.update(prefix)
        for _ in range(mib):
            expected.update(piece)
        expected.update(b"\n")
        out.seek(0)
        while chunk := out.read(1 << 20):
            got.update(chunk)
    assert out_path.stat().st_size == len(prefix) + mib * len(piece) + 1
    assert got.hexdigest() == expected.hexdigest()
    assert peak_kib < bound_kib, f"a process of the job reached {peak_kib >> 10} MiB"
