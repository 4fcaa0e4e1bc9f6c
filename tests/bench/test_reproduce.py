"""coc bench reproduce: the papers' experiments on testbeds, and the parts they are made of.

The testbed tests need root (network namespaces; CI runs as root) and check what a user
would see: the paths ran over the networks the topology names (bytes on the veths), an
emulated latency is in force on every path (a lower bound on the round trip, never a
speed check), and the outputs are written. The C relay's delay is checked without root;
the back-to-back ping-pong (coc.bench.pingpong) runs inside the experiments.
"""

import json
import os
import subprocess
import sys

import pytest
from hang_bounds import read_line, scaled

from coc.bench import netns_mpi, paths, reproduce
from coc.bench.engine import native_tools

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the experiments run "
                                "in network namespaces (CI runs these as root)")


class FakeBed:
    """The parts of a Testbed that the placement helpers read."""

    def __init__(self, hosts):
        self.state = {"hosts": hosts}
        self.hosts = list(hosts)


def test_interleave_puts_the_first_pair_in_different_groups():
    nets = {"a": ["sw-ab", "sw-ac"], "b": ["sw-ab", "sw-bc"], "c": ["sw-ac", "sw-bc"]}
    hosts = {f"{g}{i}": {"role": "compute", "interfaces": [{"network": n} for n in nets[g]]}
             for g in "abc" for i in (1, 2)}
    hosts["gw"] = {"role": "gateway", "interfaces": [{"network": "sw-ab"}]}
    assert reproduce.interleave(FakeBed(hosts)) == ["a1", "b1", "c1", "a2", "b2", "c2"]


def test_netns_mpi_refuses_to_run_outside_mpiexec(monkeypatch, capsys):
    monkeypatch.delenv("PMI_RANK", raising=False)
    assert netns_mpi.main(["coc:t:h1,eth0,s,h1", "--", "true"]) == 2
    assert "PMI_RANK" in capsys.readouterr().err
    assert netns_mpi.main(["spec-without-program"]) == 2


def test_rows_summarise_samples_and_drop_empty_sizes():
    out = paths.rows({8: [1.0, 2.0, 3.0, 4.0, 100.0], 64: []})
    assert list(out) == [8]
    assert out[8]["median"] == 3.0 and out[8]["n"] == 5 and out[8]["p99"] > out[8]["p90"]


def _started(procs, argv):
    """Start a tool that prints 'port N' once it listens, add it to ``procs``; return N."""
    proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, text=True)
    procs.append(proc)
    line = read_line(proc, 30).split()
    assert line and line[0] == "port", f"{argv[0]} printed {line}"
    return line[1]


def test_relay_delay_holds_both_directions():
    """coc_relay -d/-D: a round trip through one relay gains both delays (a lower bound)."""
    tools = native_tools()
    procs = []
    try:
        port = _started(procs, [tools["coc_pingpong"], "server", "127.0.0.1", 0])
        rport = _started(procs, [tools["coc_relay"], "-d", 3000, "-D", 2000, "127.0.0.1", 0,
                                 "127.0.0.1", port])
        out = subprocess.run([str(tools["coc_pingpong"]), "client", "127.0.0.1", rport,
                              "128:5", "65536:3"], capture_output=True, text=True, check=True,
                             timeout=scaled(60)).stdout
    finally:
        for p in procs:
            p.kill()
            p.wait()
    rows = [list(map(int, line.split())) for line in out.splitlines()]
    assert [r[0] for r in rows] == [128, 65536]
    # half a round trip is at least half of the 5 ms the two directions hold each message
    assert all(r[2] >= 2.5e6 for r in rows), rows


@pytest.mark.root
@needs_root
def test_mpich_runs_in_the_hosts_namespaces_over_their_veths(two_sites_testbed, tmp_path):
    """Plain MPICH with each rank in its host's namespace: the bytes cross a1's a-lan veth."""
    bed = two_sites_testbed

    def rx_bytes():
        text = bed.exec("a2", ["cat", "/sys/class/net/eth0/statistics/rx_bytes"],
                        capture_output=True, text=True, timeout=scaled(10), check=True).stdout
        return int(text)

    before = rx_bytes()
    program = paths.pingpong_run([1 << 20], tmp_path / "mpich.json", iterations=5)
    result = paths.mpich_job(bed, [("a", "a1", ["a-lan"]), ("a", "a2", ["a-lan"])], program,
                             timeout=scaled(120))
    assert result[1 << 20]["n"] == 5
    # 15 round trips (warm-up included) of 1 MiB each way reached a2 through its interface
    assert rx_bytes() - before >= 15 << 20


@pytest.mark.root
@needs_root
@pytest.mark.timeout(360)         # 36 s loaded; bounded by the run's own 300 s
def test_reproduce_seed004_quick(tmp_path):
    """The WAN sweep at quick size: both paths ran at each delay and each delay is in force."""
    out = tmp_path / "seed004"
    res = subprocess.run([sys.executable, "-m", "coc.cli", "bench", "reproduce", "seed004",
                          "--quick", "--out", str(out)], capture_output=True, text=True,
                         timeout=scaled(300))
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads((out / "results.json").read_text())
    assert result["meta"]["experiment"] == "seed004" and result["meta"]["quick"]
    for path in ("coc", "2 relays"):
        by_delay = result["series"][path]
        assert sorted(by_delay, key=int) == ["0", "10"]
        # with 10 ms injected each way, half a round trip cannot be shorter than 10 ms
        assert by_delay["10"]["8"]["median"] >= 10e3
        # every timed round trip was kept: 300 at 0 ms (quick), 20 once the delay is 5 ms+
        assert (by_delay["0"]["8"]["n"], by_delay["10"]["8"]["n"]) == (300, 20)
    report = (out / "report.md").read_text()
    assert "coc bench reproduce seed004 --quick" in report and "| 10 ms | 8 B |" in report
    assert (out / "repro-seed004-sweep.png").stat().st_size > 0
    # the experiment's testbed is gone
    assert not [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                          text=True).stdout.split()
                if n.startswith(f"coc:{result['meta']['testbeds'][0]}:")]


def test_missing_applications_are_reported_pending(tmp_path):
    ctx = reproduce.Context(tmp_path, tmp_path, True, None, "cmd", examples=tmp_path)
    rows = reproduce.run_applications(ctx, bed=None, name="seed000")
    assert [r["app"] for r in rows] == ["hpl.py", "render.py"]
    assert all(r["status"].startswith("pending") for r in rows)
