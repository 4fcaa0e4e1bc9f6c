"""Send a generated pattern of messages and check MPI's non-overtaking order on receipt.

argv[1] is a JSON file: {"messages": [[src, dst, tag, size, form], ...], "receive": {rank:
mode}}. Each rank sends its messages in list order (non-blocking, all at once); each
destination receives all its messages by mode: "any" (ANY_SOURCE, ANY_TAG), "by_tag"
(ANY_SOURCE, one tag after another), "by_source" (one source after another, ANY_TAG) or
"posted" (non-blocking ANY_SOURCE/ANY_TAG receives, all posted first, then waited for in
reverse order: posted receives match in posting order).
Messages of one source and tag must arrive in sending order, and with the same content.
"""

import json
import sys

import numpy as np
from checks import Checks

import coc

comm = coc.init()
rank = comm.rank
ok = Checks(comm)
pattern = json.load(open(sys.argv[1]))
messages = [m for m in pattern["messages"] if m[0] < comm.size and m[1] < comm.size]
mode = pattern["receive"][str(rank)]


def body(index, size):
    return {"i": index, "a": np.full(size, index, dtype=np.int32)}


sends, buffers = [], []
for index, (src, dst, tag, size, form) in enumerate(messages):
    if src != rank:
        continue
    if form == "obj":
        sends.append(comm.isend(body(index, size), dst, tag))
    else:
        data = np.full(size + 1, index, dtype=np.int32)
        buffers.append(data)
        sends.append(comm.Isend(data, dst, tag))

incoming = [(i, m) for i, m in enumerate(messages) if m[1] == rank]
got = []                                   # (source, tag, index) in receipt order


def receive(form, source, tag, size_limit):
    st = coc.Status()
    if form == "obj":
        obj = comm.recv(source=source, tag=tag, status=st)
        ok.equal("object body", obj["a"], np.full(len(obj["a"]), obj["i"], dtype=np.int32))
        index = obj["i"]
    else:
        buf = np.empty(size_limit + 1, np.int32)
        comm.Recv(buf, source, tag, st)
        index = int(buf[0])
        ok.equal("buffer body", buf[:st.Get_count(np.int32)],
                 np.full(st.Get_count(np.int32), index, np.int32))
    got.append((st.source, st.tag, index))


def posted(form, count, size_limit):
    """Post ``count`` ANY_SOURCE receives at once, wait in reverse, record in posting order."""
    bufs = [np.empty(size_limit + 1, np.int32) for _ in range(count)]
    reqs = [comm.irecv(source=coc.ANY_SOURCE) if form == "obj" else
            comm.Irecv(b, coc.ANY_SOURCE) for b in bufs]
    statuses = [coc.Status() for _ in reqs]
    values = [None] * count
    for i in reversed(range(count)):
        values[i] = reqs[i].wait(statuses[i])
    for value, buf, st in zip(values, bufs, statuses):
        index = value["i"] if form == "obj" else int(buf[0])
        got.append((st.source, st.tag, index))


limit = max([m[3] for _, m in incoming], default=0)
for form in ("obj", "buf"):
    mine = [(i, m) for i, m in incoming if m[4] == form]
    if mode == "posted":
        posted(form, len(mine), limit)
        continue
    if mode == "any":
        groups = [(coc.ANY_SOURCE, coc.ANY_TAG, len(mine))]
    elif mode == "by_tag":
        tags = sorted({m[2] for _, m in mine})
        groups = [(coc.ANY_SOURCE, t, sum(m[2] == t for _, m in mine)) for t in tags]
    else:
        sources = sorted({m[0] for _, m in mine})
        groups = [(s, coc.ANY_TAG, sum(m[0] == s for _, m in mine)) for s in sources]
    for source, tag, count in groups:
        for _ in range(count):
            receive(form, source, tag, limit)

coc.waitall(sends)
expected = {}
for i, m in incoming:
    expected.setdefault((m[0], m[2], m[4]), []).append(i)
received = {}
for source, tag, index in got:
    received.setdefault((source, tag, messages[index][4]), []).append(index)
ok.equal("every message once, per (source, tag) in sending order",
         sorted(received.items()), sorted(expected.items()))
ok.true("ran", True)
comm.barrier()
ok.report()
