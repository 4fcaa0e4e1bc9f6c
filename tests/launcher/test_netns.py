"""coc-run on the testbed: every host in its network namespace, sites joined only by gateways.

The testbed (``coc.testbed.up``) gives each host of ``two-sites`` its own namespace with no IP
forwarding, so a message from a1 to b1 can only arrive if the gateway daemons on a-gw and
b-gw carry it. Needs root (CI runs as root); skipped elsewhere with the reason.
"""

import json
import os
import subprocess
import textwrap

import pytest


from launcher_helpers import COC_RUN
from hang_bounds import scaled

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the netns spawner runs "
                                 "ranks in network namespaces (CI runs these as root)")]

#: Each rank opens its engine on COC_LISTEN_HOST; rank 0 sends to the last rank, which answers.
PAIR = textwrap.dedent("""
    import json, os
    scaled = lambda s: s * float(os.environ.get("COC_TEST_TIMEOUT_SCALE") or 1)  # noqa: E731
    from coc._native import engine
    from coc.rendezvous import credentials, rendezvous
    from coc.routes import apply_routes
    me = credentials()
    with engine.Engine(me["self_id"], keys=me["keys"],
                       listen_host=os.environ["COC_LISTEN_HOST"]) as eng:
        info = rendezvous(eng.address)
        for peer, address in info["peers"].items():
            eng.add_peer(peer, address)
        apply_routes(eng, info["routes"])
        rank, last, buf = me["rank"], me["size"] - 1, bytearray(64)
        if rank == 0:
            eng.isend(b"a1 to b1", last, tag=1).wait(timeout=scaled(10))
            got = eng.irecv(buf, source=last, tag=2).wait(timeout=scaled(10))
        elif rank == last:
            got = eng.irecv(buf, source=0, tag=1).wait(timeout=scaled(10))
            eng.isend(b"b1 to a1", 0, tag=2).wait(timeout=scaled(10))
        print(json.dumps({"rank": rank, "host": os.environ["COC_HOST"],
                          "listen": os.environ["COC_LISTEN_HOST"], "peers": info["peers"],
                          "got": bytes(buf[:got.count]).decode() if rank in (0, last) else None}),
              flush=True)
""")


def _coc_run(tmp_path, *args, timeout=scaled(25)):
    return subprocess.run([*COC_RUN, *map(str, args)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_a1_to_b1_crosses_only_through_the_gateway_daemons(two_sites_testbed, tmp_path):
    bed = two_sites_testbed
    (tmp_path / "pair.py").write_text(PAIR)
    out = tmp_path / "out"
    result = _coc_run(tmp_path, "--testbed", bed.name, "--site", "a=1", "--site", "b=1",
                      "--output-dir", out, "pair.py")
    assert result.returncode == 0, result.stderr
    ranks = [json.loads((out / f"rank.{r}.stdout").read_text()) for r in range(2)]
    assert [(r["host"], r["listen"]) for r in ranks] == [("a1", "10.1.0.1"), ("b1", "10.2.0.1")]
    assert [r["got"] for r in ranks] == ["b1 to a1", "a1 to b1"]
    # each rank was told to dial its own site's gateway on its LAN address, never b1 or a1
    assert ranks[0]["peers"]["2"].startswith("tcp://10.1.0.5:")           # a-gw on a-lan
    assert ranks[1]["peers"]["3"].startswith("tcp://10.2.0.5:")           # b-gw on b-lan
    assert ranks[0]["peers"]["1"].startswith("tcp://10.2.0.1:")           # unreachable anyway
    for gateway in ("a-gw", "b-gw"):
        final = json.loads((out / f"gateway.{gateway}.stdout").read_text())
        assert final["stats"]["frames_forwarded"] >= 2, final          # there and back
        assert "forwarding at tcp://0.0.0.0:" in (out / f"gateway.{gateway}.stderr").read_text()


def test_a_direct_route_from_a1_to_b1_fails(two_sites_testbed):
    """What the gateways make possible is impossible without them: a1 cannot reach b1."""
    bed = two_sites_testbed
    probe = ("import socket, sys\n"
             "s = socket.socket(); s.settimeout(2)\n"
             "try: s.connect(('10.2.0.1', 9))\n"
             "except OSError as e: print(type(e).__name__, e.errno); sys.exit(0)\n"
             "sys.exit(1)\n")
    result = bed.exec("a1", ["python3", "-c", probe], capture_output=True, text=True,
                      timeout=scaled(10))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("OSError 101"), result.stdout        # ENETUNREACH


def test_ranks_run_in_their_hosts_namespaces(two_sites_testbed, tmp_path):
    bed = two_sites_testbed
    result = _coc_run(tmp_path, "--testbed", bed.name, "-n", 4, "--tag-output", "sh", "-c",
                      "ip -o -4 addr show scope global | awk '{print $4}'")
    assert result.returncode == 0, result.stderr
    lines = sorted(result.stdout.splitlines())
    assert lines == ["[a/a1/0] 10.1.0.1/24", "[a/a1/1] 10.1.0.1/24",
                     "[b/b1/2] 10.2.0.1/24", "[b/b1/3] 10.2.0.1/24"]


def test_a_testbed_that_is_not_up_is_a_clear_error(tmp_path):
    result = _coc_run(tmp_path, "--testbed", "no-such-bed", "-n", 2, "true")
    assert result.returncode == 2
    assert "no testbed named 'no-such-bed' is up" in result.stderr
    assert "coc testbed up" in result.stderr
