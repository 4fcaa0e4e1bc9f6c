"""The driver's side of a gateway daemon's control channel, against stand-in daemons.

The real daemon is driven in tests/engine/test_gateway_daemon.py; here small programs that
speak the protocol badly show what the driver says about them.
"""

import subprocess
import sys

import pytest

from coc.errors import ControlError, LaunchError
from coc.gatewayclient import GatewayProcess

TIMEOUT = 30.0


def _daemon(tmp_path, name, source):
    """Return GatewayProcess keywords that run ``source`` as module ``name``."""
    (tmp_path / f"{name}.py").write_text(source)
    return {"module": name, "prefix": ["env", f"PYTHONPATH={tmp_path}"],
            "stderr": subprocess.DEVNULL}


def test_a_daemon_that_never_answers_is_named_when_the_wait_ends(tmp_path):
    silent = _daemon(tmp_path, "silent", "import sys\nsys.stdin.buffer.read()\n")
    with pytest.raises(ControlError, match=r"^silent \(pid \d+\) sent no message within 0.5 s"):
        GatewayProcess({"self_id": 1, "secret": b"\0" * 32}, timeout=0.5, **silent)


def test_a_daemon_that_exits_without_answering_says_its_exit_code(tmp_path):
    quitter = _daemon(tmp_path, "quitter", "raise SystemExit(3)\n")
    with pytest.raises(LaunchError, match=r"^quitter \(pid \d+\) exited with code 3 without "
                                          "answering"):
        GatewayProcess({"self_id": 1, "secret": b"\0" * 32}, timeout=TIMEOUT, **quitter)


def test_any_program_speaking_the_protocol_can_be_driven(tmp_path):
    """The first message arrives as ``config`` with the secret in hex and string ids."""
    echo = _daemon(tmp_path, "echo", (
        "from coc import protocol\n"
        "driver = protocol.MessageReader(0, 'driver')\n"
        "while (m := driver.read()) is not None:\n"
        "    protocol.write_message(1, {**m, 'type': 'address' if m['type'] == 'config'\n"
        "                               else 'ok', 'asked': m['type'], 'address': 'x'})\n"
        "protocol.write_message(1, {'type': 'exit', 'reason': 'eof', 'stats': {}})\n"))
    gw = GatewayProcess({"self_id": 1, "secret": b"\1\2", "peers": {5: "tcp://h:1"}},
                        timeout=TIMEOUT, **echo)
    with gw:
        assert gw.hello == {"type": "address", "asked": "config", "self_id": 1,
                            "secret": "0102", "peers": {"5": "tcp://h:1"}, "address": "x"}
        assert gw.request({"type": "update", "dial": [5]})["asked"] == "update"
        assert gw.stop() == {"type": "exit", "reason": "eof", "stats": {}}
        assert gw.proc.returncode == 0


def test_the_client_loads_neither_the_engine_nor_the_launcher():
    """coc-run's agents import it: they must not need the compiled engine."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, coc.gatewayclient\n"
         "print(sorted(m for m in sys.modules if m.startswith(('coc._', 'coc.launcher'))))"],
        capture_output=True, text=True, timeout=TIMEOUT, check=True).stdout
    assert loaded.strip() == "[]"
