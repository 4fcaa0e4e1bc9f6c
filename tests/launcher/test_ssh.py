"""coc-run reaching a site over ssh: a real OpenSSH server, keys made for the test.

The test builds two-sites as network namespaces (``coc.testbed``) and runs Debian's ``sshd``
in b-gw's namespace (site b's login host, on the WAN) and in a-gw's (a jump host), each with
its own ``sshd_config``, host key and authorized key in a temporary directory. ``coc-run``
itself runs inside a testbed namespace, like a user on a machine of site a: site a is
started by the ``netns`` spawner, site b by the ``ssh`` spawner — ssh to b-gw, whose agent
starts b1's rank through a host agent it starts on b1 with ssh (a third sshd runs there),
or through the profile's ``host_exec`` (``ip netns exec``). Needs root (the
namespaces, and ``apt-get install openssh-server`` when sshd is missing); skipped elsewhere.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest


from launcher_helpers import COC_RUN
from hang_bounds import scaled

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root: sshd and the ranks "
                                 "run in network namespaces (CI runs these as root)")]

SSHD = "/usr/sbin/sshd"
HELLO = textwrap.dedent("""
    import glob, json, os
    import coc
    from coc.rendezvous import credentials
    comm = coc.init()
    keys = [key.hex().encode() for key, _ in credentials()["keys"].values()]

    def shown(path):                  # processes whose command line or environment has one
        try:
            text = open(path, "rb").read()
        except OSError:
            return False
        return any(key in text for key in keys)

    leaks = [p for p in glob.glob("/proc/[0-9]*/cmdline") + glob.glob("/proc/[0-9]*/environ")
             if shown(p)]
    if comm.rank == 0:
        comm.send("over ssh and two gateways", dest=comm.size - 1, tag=3)
        print(json.dumps({"rank": 0, "answer": comm.recv(source=comm.size - 1, tag=4)}))
    elif comm.rank == comm.size - 1:
        got = comm.recv(source=0, tag=3)
        comm.send(got.upper(), dest=0, tag=4)
        print(json.dumps({"rank": comm.rank, "got": got, "host": os.environ["COC_HOST"],
                          "cwd": os.getcwd(), "leaks": leaks}))
""")


def _need_sshd():
    """Return the sshd binary, installing openssh-server with apt-get if it is missing."""
    if not Path(SSHD).exists() and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-qq", "-o", "DPkg::Lock::Timeout=60",
                        "openssh-server"], env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
                       capture_output=True, timeout=scaled(300))
    if not Path(SSHD).exists():
        pytest.skip("needs Debian's openssh-server (sshd): apt-get install openssh-server")
    return SSHD


def _keygen(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True, timeout=scaled(10))
    return Path(f"{path}.pub").read_text().split()[:2]


@pytest.fixture(scope="module")
def site(tmp_path_factory, two_sites_testbed):
    """Two-sites as namespaces with sshd on b-gw (login) and a-gw (jump); all torn down."""
    sshd = _need_sshd()
    keys = tmp_path_factory.mktemp("ssh")
    host_type, host_key = _keygen(keys / "host_ed25519")
    user_type, user_key = _keygen(keys / "user_ed25519")
    (keys / "authorized_keys").write_text(f"{user_type} {user_key} coc-test\n")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)    # sshd's privilege separation dir
    bed = two_sites_testbed
    login, jump = bed.address("b-gw", "wan"), bed.address("a-gw", "a-lan")
    compute = bed.address("b1")
    (keys / "known_hosts").write_text("".join(f"{address} {host_type} {host_key}\n"
                                              for address in (login, jump, compute)))
    (keys / "ssh_config").write_text(textwrap.dedent(f"""\
        Host *
          User root
          IdentityFile {keys}/user_ed25519
          IdentitiesOnly yes
          UserKnownHostsFile {keys}/known_hosts
          StrictHostKeyChecking yes
        Host b1
          HostName {compute}
        """))
    daemons = {}
    for host in ("b-gw", "a-gw", "b1"):
        config = keys / f"sshd_config.{host}"
        config.write_text(textwrap.dedent(f"""\
            Port 22
            HostKey {keys}/host_ed25519
            AuthorizedKeysFile {keys}/authorized_keys
            PidFile {keys}/sshd.{host}.pid
            PasswordAuthentication no
            KbdInteractiveAuthentication no
            PubkeyAuthentication yes
            PermitRootLogin prohibit-password
            StrictModes no
            UsePAM no
            AllowTcpForwarding yes
            """))
        daemons[host] = bed.popen(host, [sshd, "-D", "-e", "-f", str(config)],
                                  stderr=subprocess.PIPE, text=True)
    try:
        for host in daemons:
            _wait_listening(bed, host, daemons[host])
        yield {"bed": bed, "keys": keys, "login": login, "jump": jump, "sshd": daemons}
    finally:
        for daemon in daemons.values():      # by PID: only the daemons this test started
            daemon.terminate()
            try:
                daemon.wait(timeout=scaled(5))
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait(timeout=scaled(5))
            daemon.stderr.close()


def _wait_listening(bed, host, daemon, timeout=scaled(10.0)):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            pytest.fail(f"sshd on {host} ended: {daemon.stderr.read()}")
        out = bed.exec(host, ["ss", "-Htln", "sport = :22"], capture_output=True, text=True,
                       timeout=scaled(5)).stdout
        if out.strip():
            return
        time.sleep(0.05)
    pytest.fail(f"sshd on {host} is not listening after {timeout} s")


def _profile(site, tmp_path, **extra):
    """Write a profile for site b (ssh to b-gw, ranks on b1 via ip netns exec); return it.

    The site's Python is named (this test's interpreter, which has coc), never left to
    whichever ``python3`` the remote ``PATH`` finds first.
    """
    bed = site["bed"]
    settings = {"spawner": "ssh", "login": "b-gw", "ssh_host": site["login"],
                "python": sys.executable,
                "ssh_config": str(site["keys"] / "ssh_config"), "workdir": str(tmp_path),
                "host_exec": f"ip netns exec coc:{bed.name}:{{host}}", **extra}
    path = tmp_path / "profile.yaml"
    path.write_text(json.dumps({"sites": {"b": settings}}))      # JSON is YAML
    return path


def _coc_run_in(site, host, tmp_path, *args, timeout=scaled(25)):
    """Run coc-run inside ``host``'s namespace (a user on that machine)."""
    return site["bed"].exec(host, [*COC_RUN, *map(str, args)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=timeout,
                            stdin=subprocess.DEVNULL)


def _check_hello(result):
    assert result.returncode == 0, result.stderr
    lines = {d["rank"]: d for d in map(json.loads, result.stdout.splitlines())}
    last = max(lines)
    assert lines[0]["answer"] == "OVER SSH AND TWO GATEWAYS"
    assert lines[last]["got"] == "over ssh and two gateways"
    assert lines[last]["host"] == "b1"
    assert lines[last]["leaks"] == []   # ssh, sshd, agents, ranks: no command line shows it
    return lines


def test_site_b_over_ssh(site, tmp_path):
    (tmp_path / "hello.py").write_text(HELLO)
    result = _coc_run_in(site, "a-gw", tmp_path, "--testbed", site["bed"].name, "--profile",
                         _profile(site, tmp_path), "--site", "a=1", "--site", "b=1",
                         "--output-dir", tmp_path / "out", "--", "python3", "hello.py")
    # a bare python3 in the command is the site's python setting
    result = subprocess.CompletedProcess(result.args, result.returncode,
                                         "".join(p.read_text() for p in
                                                 sorted((tmp_path / "out").glob("rank.*.stdout"))),
                                         result.stderr)
    lines = _check_hello(result)
    assert lines[1]["cwd"] == str(tmp_path)                      # the profile's workdir
    final = json.loads((tmp_path / "out" / "gateway.b-gw.stdout").read_text())
    assert final["stats"]["frames_forwarded"] >= 2


def test_the_login_host_starts_compute_hosts_over_ssh(site, tmp_path):
    """No host_exec: b-gw's agent reaches b1 with ssh (host agent), as on a real cluster."""
    (tmp_path / "hello.py").write_text(HELLO)
    profile = _profile(site, tmp_path)
    settings = json.loads(profile.read_text())
    del settings["sites"]["b"]["host_exec"]
    profile.write_text(json.dumps(settings))
    before = _children(site["sshd"]["b1"].pid)
    result = _coc_run_in(site, "a-gw", tmp_path, "--testbed", site["bed"].name, "--profile",
                         profile, "--site", "a=1", "--site", "b=2", "hello.py")
    lines = _check_hello(result)
    assert lines[2]["host"] == "b1"
    assert _children(site["sshd"]["b1"].pid) == before       # its session has ended


def test_site_b_over_ssh_through_a_jump_host(site, tmp_path):
    """From a1 (no route to the WAN) through a-gw's sshd to b-gw's (ProxyJump)."""
    (tmp_path / "hello.py").write_text(HELLO)
    result = _coc_run_in(site, "a1", tmp_path, "--testbed", site["bed"].name, "--profile",
                         _profile(site, tmp_path, jump=site["jump"]),
                         "--site", "a=1", "--site", "b=1", "hello.py")
    _check_hello(result)


def test_a_remote_python_without_coc_is_named_before_any_rank_starts(site, tmp_path):
    python = tmp_path / "python-without-coc"
    python.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")   # no site-packages
    python.chmod(0o755)
    result = _coc_run_in(site, "a-gw", tmp_path, "--testbed", site["bed"].name, "--profile",
                         _profile(site, tmp_path, python=str(python)),
                         "--site", "a=1", "--site", "b=1", "touch", "ran")
    assert result.returncode != 0
    assert not (tmp_path / "ran").exists()
    lines = [line for line in result.stderr.splitlines() if "cannot import coc" in line
             and "coc-run: site b (ssh" not in line]             # the agent's own line, relayed
    assert len(lines) == 1, result.stderr
    assert f"site b, host {site['login']}: Python {python} cannot import coc" in lines[0]
    assert "'python' setting" in lines[0]


def test_an_unreachable_login_host_names_site_and_host(site, tmp_path):
    result = _coc_run_in(site, "a1", tmp_path, "--testbed", site["bed"].name, "--profile",
                         _profile(site, tmp_path), "--site", "a=1", "--site", "b=1", "true")
    assert result.returncode == 2
    assert f"site b (ssh {site['login']}): ssh: connect to host {site['login']}" \
           in result.stderr
    assert "site b: site unreachable" in result.stderr


def test_a_lost_ssh_connection_ends_the_job_naming_site_and_host(site, tmp_path):
    listener = site["sshd"]["b-gw"].pid
    before = _children(listener)
    start = time.monotonic()
    proc = site["bed"].popen("a-gw", [*COC_RUN, "--testbed", site["bed"].name, "--profile",
                                      str(_profile(site, tmp_path)), "--site", "a=1",
                                      "--site", "b=1", "sh", "-c",
                                      'touch "$0.$COC_RANK"; exec sleep 30',
                                      str(tmp_path / "started")],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, stdin=subprocess.DEVNULL)
    try:
        while not (tmp_path / "started.0").exists() or not (tmp_path / "started.1").exists():
            assert time.monotonic() - start < scaled(60), "the job did not start"
            time.sleep(0.05)                             # the job is running on both sites
        sessions = _children(listener) - before
        for pid in sessions:
            os.kill(pid, signal.SIGKILL)                 # the connection dies with its server
        out, err = proc.communicate(timeout=scaled(20))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=scaled(5))
    assert proc.returncode == 1, err
    assert f"site b (ssh {site['login']}): connection failed or lost" in err
    assert "site b: its agent died" in err
    assert time.monotonic() - start < scaled(120)
    sshd_b1 = site["sshd"]["b1"].pid
    leftover = {int(p) for p in site["bed"].exec(
        "b1", ["ip", "netns", "pids", f"coc:{site['bed'].name}:b1"], capture_output=True,
        text=True, timeout=scaled(5)).stdout.split()} - {sshd_b1} - _children(sshd_b1)
    assert not leftover or _wait_gone(leftover), leftover    # the rank on b1 is gone


def _children(pid):
    """Return the pids whose parent is ``pid``."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _wait_gone(pids, within=10.0):
    deadline = time.monotonic() + scaled(within)
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{p}").exists() for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_the_watchdog_hears_ranks_behind_a_host_agent(site, tmp_path):
    """Status requests reach b1's rank through b-gw's agent and the host agent on b1."""
    from launcher_helpers import program

    profile = _profile(site, tmp_path)
    settings = json.loads(profile.read_text())
    del settings["sites"]["b"]["host_exec"]
    profile.write_text(json.dumps(settings))
    result = _coc_run_in(site, "a-gw", tmp_path, "--testbed", site["bed"].name, "--profile",
                         profile, "--site", "a=1", "--site", "b=1", "--watchdog", "1",
                         "--watchdog-abort", program("waits.py"), "--mode", "hang",
                         timeout=60)
    assert result.returncode == 125, result.stderr
    assert "[a/a1/0] rank 0: waits in receive from rank 1, tag 7" in result.stderr
    assert "[b/b1/1] rank 1: waits in receive from rank 0, tag 7" in result.stderr
    assert "[b/b-gw/gateway] gateway daemon: 0 bytes buffered" in result.stderr


def test_site_mpi_runs_on_the_remote_site(site, tmp_path):
    """Spawner mpiexec with a login: the agent and the site's mpiexec run on b-gw over ssh."""
    from importlib.util import find_spec

    from coc.launcher.spawners.mpiexec import find_mpiexec
    if find_spec("mpi4py") is None or find_mpiexec() is None:
        pytest.skip("needs MPICH's mpiexec and mpi4py (pip install mpich mpi4py)")
    profile = _profile(site, tmp_path, spawner="mpiexec")
    result = _coc_run_in(site, "a-gw", tmp_path, "--testbed", site["bed"].name, "--profile",
                         profile, "--site", "a=1", "--site", "b=2",
                         str(Path(__file__).parent / "programs" / "site_mpi.py"),
                         timeout=scaled(60))
    assert result.returncode == 0, result.stderr
    reports = {r["rank"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert reports[0]["mpi"] == [None, None]                  # site a: local processes
    assert [reports[r]["mpi"] for r in (1, 2)] == [[0, 2], [1, 2]]   # b: its own MPI job
    assert reports[2]["stats"]["site_mpi_messages"] == 0      # 2 -> 0 crosses the gateways
    assert reports[1]["stats"]["site_mpi_messages"] == 1      # 1 -> 2 inside site b's MPI
    assert {r["got"]["from"] for r in reports.values()} == {0, 1, 2}
