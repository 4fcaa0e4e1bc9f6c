"""Output collation in-process: whole lines, tags, files."""

import io

from coc.launcher.output import LineTagger, OutputSink


def test_a_tagger_never_splits_or_prefixes_inside_a_line():
    tagger = LineTagger(b"[p] ")
    pieces = [b"ab", b"c\nde", b"", b"f\n\ng", b"h"]
    out = b"".join(tagger.feed(p) for p in pieces) + tagger.flush()
    assert out == b"[p] abc\n[p] def\n[p] \n[p] gh\n"
    assert tagger.flush() == b""


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
