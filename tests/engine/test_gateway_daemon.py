"""The gateway daemon's stdin/stdout protocol, signals and exit."""

import signal
import socket
import subprocess
import sys
import time

import pytest

import engine_peers
from coc.errors import LaunchError
from coc.gateway import GatewayProcess
from hang_bounds import scaled

TIMEOUT = scaled(30.0)


def test_secret_stays_off_the_command_line(gateway):
    gw = gateway(10)
    with open(f"/proc/{gw.pid}/cmdline", "rb") as f:
        cmdline = f.read()
    assert engine_peers.SECRET.hex().encode() not in cmdline
    assert gw.hello["self_id"] == 10 and gw.hello["pid"] == gw.pid
    assert gw.address.startswith("tcp://127.0.0.1:")


def test_eof_stops_with_final_stats(gateway):
    gw = gateway(10)
    final = gw.stop()
    assert final["exit"] == "eof"
    assert set(final["stats"]) >= {"frames_forwarded", "forward_bytes_buffered_max"}
    assert gw.proc.returncode == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_with_final_stats(gateway, sig):
    gw = gateway(10)
    gw.proc.send_signal(sig)
    final = gw.read(TIMEOUT)
    assert final["exit"] == sig.name and "stats" in final
    assert gw.proc.wait(TIMEOUT) == -sig      # ended by the signal, not "exited with code 0"


def test_signal_while_waiting_for_the_configuration_ends_the_daemon():
    proc = subprocess.Popen([sys.executable, "-m", "coc.gateway"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)              # let it reach the wait for its first line
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(TIMEOUT) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.communicate()


def test_bad_update_is_answered_and_daemon_keeps_running(gateway):
    gw = gateway(10)
    with pytest.raises(LaunchError, match="route to 5"):
        gw.request({"routes": {"5": "nowhere"}})
    with pytest.raises(LaunchError, match="update"):
        gw.request({"stop": True})
    assert gw.stats()["connections_open"] == 0


@pytest.mark.parametrize("config,message", [
    ({"secret": "00" * 32}, "'self_id' is missing"),
    ({"self_id": 1, "secret": "not hex"}, "'secret' must be a hex string"),
    ({"self_id": 1, "secret": "00" * 4}, "secret"),  # too short: the engine refuses it
    ({"self_id": 1, "secret": "00" * 32, "colour": "red"}, "unknown keys"),
])
def test_bad_config_fails_with_a_clear_error(config, message):
    with pytest.raises(LaunchError, match=message):
        GatewayProcess(config, timeout=TIMEOUT, stderr=subprocess.DEVNULL)


def test_empty_stdin_exits_with_code_2():
    result = subprocess.run([sys.executable, "-m", "coc.gateway"], input=b"",
                            capture_output=True, timeout=TIMEOUT)
    assert result.returncode == 2
    assert b"no configuration" in result.stdout


def test_listening_port_comes_from_the_port_range(gateway):
    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gw = gateway(10, port_range=[port, port])
    assert f"tcp://127.0.0.1:{port}" in gw.address.split()


def test_connect_opens_connections_to_next_hops_at_once(gateway):
    g1 = gateway(10)
    g2 = gateway(11, peers={10: g1.address}, routes={10: [[10, 1]]})
    g2.update(connect=[10])
    deadline = time.monotonic() + TIMEOUT
    while g1.stats()["connections_open"] < 1:
        assert time.monotonic() < deadline, "no connection from the connect update"
        time.sleep(0.01)
    with pytest.raises(LaunchError, match="connect to 12"):
        g2.update(connect=[12])
