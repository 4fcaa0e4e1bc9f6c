"""Lowercase point-to-point checks on every rank: objects with and without large arrays."""

import numpy as np
from checks import Checks

import coc

comm = coc.init()
rank, size = comm.rank, comm.size
right, left = (rank + 1) % size, (rank - 1) % size
ok = Checks(comm)


def payload(who, n):
    return {"who": who, "list": [who, "x" * (n % 7)], "arr": np.arange(n, dtype=np.float64) + who,
            "ints": np.arange(n // 3, dtype=np.int32), "t": (who, None)}


# Ring of objects of several sizes, small (inline) to large (out-of-band buffers).
for n in (0, 10, 1000, 100_000, 1_000_000):
    got = comm.sendrecv(payload(rank, n), dest=right, source=left, sendtag=n % 100,
                        recvtag=n % 100)
    ok.equal(f"ring n={n}", got, payload(left, n))

# Blocking send/recv in a pairing that cannot deadlock (even ranks send first).
if size > 1:
    partner = rank ^ 1 if (rank ^ 1) < size else rank
    if partner != rank:
        big = np.random.default_rng(rank).random(50_000)
        if rank % 2 == 0:
            comm.send(big, partner, tag=3)
            ok.equal("recv pair", comm.recv(source=partner, tag=3),
                     np.random.default_rng(partner).random(50_000))
        else:
            ok.equal("recv pair", comm.recv(source=partner, tag=3),
                     np.random.default_rng(partner).random(50_000))
            comm.send(big, partner, tag=3)

# Tags received in reverse order of sending.
sends = [comm.isend(("tag", t, rank, np.full(t * 3000, t)), right, tag=t) for t in range(1, 6)]
for t in reversed(range(1, 6)):
    st = coc.Status()
    ok.equal(f"tag {t}", comm.recv(source=left, tag=t, status=st)[:3], ("tag", t, left))
    ok.equal(f"status tag {t}", (st.Get_source(), st.Get_tag()), (left, t))
coc.waitall(sends)

# ANY_SOURCE / ANY_TAG at rank 0: every rank sends 3 objects (small, large, small) in order.
comm.barrier()
if rank == 0:
    seen = {}
    for _ in range(3 * (size - 1)):
        st = coc.Status()
        src, seq, body = comm.recv(source=coc.ANY_SOURCE, tag=coc.ANY_TAG, status=st)
        ok.equal("any-source status", (st.source, st.tag), (src, 10 + seq))
        seen.setdefault(src, []).append(seq)
        ok.equal("any-source body", body, np.full(seq * 20000, src) if seq == 1 else src)
    ok.equal("any-source order", seen, {r: [0, 1, 2] for r in range(1, size)})
else:
    reqs = [comm.isend((rank, seq, np.full(seq * 20000, rank) if seq == 1 else rank), 0,
                       tag=10 + seq) for seq in range(3)]
    coc.Request.waitall(reqs)
comm.barrier()

# irecv posted before the message, test until done; waitany; testall.
req = comm.irecv(source=left, tag=20)
flag, _ = req.test()
comm.send({"k": rank}, right, tag=20)
ok.equal("irecv wait", req.wait(), {"k": left})
reqs = [comm.irecv(source=left, tag=21 + i) for i in range(3)]
for i in (2, 0, 1):
    comm.isend(i, right, tag=21 + i).wait()
got = set()
while len(got) < 3:
    index, value = coc.waitany(reqs)
    ok.equal("waitany value", value, index)
    got.add(index)
    reqs[index] = None
ok.equal("waitany all", got, {0, 1, 2})
flag, values = coc.testall([comm.isend(1, rank, tag=30)])
comm.recv(source=rank, tag=30)

# probe / iprobe, then recv of the probed message.
comm.send(["probe", rank], right, tag=40)
st = coc.Status()
ok.true("probe", comm.probe(source=left, tag=40, status=st))
ok.equal("probe status", (st.source, st.tag), (left, 40))
ok.true("iprobe", comm.iprobe(source=coc.ANY_SOURCE, tag=40))
ok.equal("recv probed", comm.recv(source=left, tag=40), ["probe", left])
ok.true("iprobe empty", not comm.iprobe(source=left, tag=41))

# cancel an irecv that never matches; send to self.
lonely = comm.irecv(source=left, tag=999)
ok.true("cancel", lonely.cancel())
ok.equal("self", comm.sendrecv({"me": rank}, rank, source=rank), {"me": rank})
# A large array inside an object is received without a copy into a writable array.
arr = comm.sendrecv(np.ones(500_000), rank, source=rank)
ok.true("oob writable", arr.flags.writeable and arr.sum() == 500_000)

comm.barrier()
# A send never waited for still arrives: finalize (at exit) waits for every rank first.
if size > 1 and rank == 0:
    comm.isend(np.arange(300_000), size - 1, tag=99)
elif size > 1 and rank == size - 1:
    import time
    time.sleep(0.5)
    ok.equal("unwaited send at exit", comm.recv(source=0, tag=99), np.arange(300_000))
ok.report()
