"""The report of ``coc bench report``: ratios and tables from known figures."""

from coc.bench import compare


def _run(rows):
    """A run's results with only the statistics the report reads (times in µs)."""
    return {"meta": {"quick": True, "library": "lib 1.0", "size": 4, "seconds": 1.0,
                     "clock": {"accuracy_ns": 5000.0}},
            "groups": [],
            "stats": [{"pattern": p, "class": c, "size": s, "what": w, "n": 10,
                       "median": m * 1e3, "p99": q * 1e3} for p, c, s, w, m, q in rows]}


def _inputs():
    coc = _run([("PingPong", "host", 8, "half-rtt", 5, 10),
                ("PingPong", "wan", 8, "half-rtt", 30, 90),
                ("PingPong", "wan", 262144, "half-rtt", 600, 800),
                ("Barrier", "wan", 0, "completion", 100, 400)])
    shm = _run([("PingPong", "host", 8, "half-rtt", 10, 30),
                ("PingPong", "host", 262144, "half-rtt", 100, 200),
                ("Barrier", "host", 0, "completion", 50, 100)])
    tcp = _run([("PingPong", "host", 8, "half-rtt", 20, 60)])
    refs = {"tcp": [(8, 6.0, 6.0, 12.0), (262144, 100.0, 100.0, 400.0)],
            "relay2": [(8, 20.0, 20.0, 45.0), (262144, 300.0, 300.0, 900.0)]}
    return {"coc": coc, "mpich-shm": shm, "mpich-tcp": tcp}, refs


def test_ratios_are_coc_across_sites_over_each_path():
    results, refs = _inputs()
    table = dict(compare.ratios(results, refs))
    assert list(table) == ["coc within host", "mpi4py + MPICH, shared memory",
                           "mpi4py + MPICH over TCP (loopback)", "C ping-pong, direct TCP",
                           "C ping-pong, 2 relays"]
    relay = dict(table["C ping-pong, 2 relays"])
    assert relay == {"8 B median": 1.5, "8 B p99": 2.0, "256 KiB median": 2.0,
                     "256 KiB p99": 800 / 900}
    shm = dict(table["mpi4py + MPICH, shared memory"])
    assert shm["8 B median"] == 3.0 and shm["256 KiB median"] == 6.0
    assert dict(table["mpi4py + MPICH over TCP (loopback)"])["256 KiB median"] is None


def test_report_tables():
    results, refs = _inputs()
    text = compare.format_report(results, refs, "coc bench report --quick")
    assert "| C ping-pong, 2 relays | 1.50 | 2.00 | 2.00 | 0.89 |" in text
    assert "| 8 B | 5.0 / 10 | 30.0 / 90 | 10.0 / 30 | 20.0 / 60 | 6.0 / 12 | 20.0 / 45 |" in text
    assert "| 4 KiB | – / – |" in text                    # a size nobody measured
    assert "| Barrier 0 B | 100.0 / 400 | 50.0 / 100 | – / – | 2.00 | – |" in text
    assert "±5.0 µs" in text
