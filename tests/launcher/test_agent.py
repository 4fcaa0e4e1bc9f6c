"""The site agent driven directly over its control channel, as a spawner would connect it."""

import asyncio
import json
import struct
import sys

from coc import protocol
from coc.pycommand import python_argv
from launcher_helpers import assert_all_gone, program, recorded_pids, wait_for_files


async def _agent():
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "coc.launcher.agent", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, start_new_session=True)
    hello = await asyncio.wait_for(protocol.read_message(proc.stdout), 20)
    assert hello["type"] == "hello" and hello["pid"] == proc.pid
    return proc


def _job(pid_dir):
    argv = [sys.executable, program("rank.py"), "--pid-dir", str(pid_dir), "--grandchild"]
    return {"type": "job", "job_id": "t", "site": "a", "grace": 0.5, "gateways": [],
            "ranks": [{"rank": r, "host": "a1", "argv": argv, "env": {"COC_RANK": str(r)},
                       "welcome": {"rank": r, "size": 2, "self_id": r, "job_id": "t",
                                   "keys": {str(1 - r): {"key": "00" * 32, "gateway": False}}}}
                      for r in range(2)]}


async def _until_done(proc):
    """Return every message up to ``done``, and the agent's exit status."""
    messages = []
    while (message := await asyncio.wait_for(protocol.read_message(proc.stdout), 20)):
        messages.append(message)
        if message["type"] == "done":
            break
    return messages, await asyncio.wait_for(proc.wait(), 20)


def test_unknown_messages_are_reported_and_stop_ends_every_rank(tmp_path):
    async def scenario():
        proc = await _agent()
        proc.stdin.write(protocol.encode(_job(tmp_path)))
        proc.stdin.write(protocol.encode({"type": "reboot"}))
        await asyncio.to_thread(wait_for_files, tmp_path, 2)
        proc.stdin.write(protocol.encode({"type": "stop"}))
        return (proc.pid,) + await _until_done(proc)

    agent, messages, status = asyncio.run(scenario())
    kinds = [m["type"] for m in messages]
    assert {"type": "error", "message": "agent: unknown message 'reboot'"} in messages
    assert sorted(m["rank"] for m in messages if m["type"] == "exit") == [0, 1]
    assert all(m["signal"] == 15 for m in messages if m["type"] == "exit")
    assert b"".join(protocol.unpack_bytes(m["data"]) for m in messages
                    if m["type"] == "output" and m["rank"] == 0) == b"rank 0 ready\n"
    assert kinds[-1] == "done" and status == 0
    assert_all_gone(recorded_pids(tmp_path) | {agent})


def test_a_garbled_channel_ends_the_site_cleanly(tmp_path):
    async def scenario():
        proc = await _agent()
        proc.stdin.write(protocol.encode(_job(tmp_path)))
        await asyncio.to_thread(wait_for_files, tmp_path, 2)
        proc.stdin.write(struct.pack(">I", 5) + b"{oops")
        return await _until_done(proc)

    messages, status = asyncio.run(scenario())
    errors = [m["message"] for m in messages if m["type"] == "error"]
    assert errors and "control message is not JSON" in errors[0]
    assert sorted(m["rank"] for m in messages if m["type"] == "exit") == [0, 1]
    assert messages[-1]["type"] == "done" and status == 0
    assert_all_gone(recorded_pids(tmp_path))


def test_the_rank_finds_its_welcome_and_its_address_is_relayed(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text("from coc import rendezvous\n"
                      "me = rendezvous.credentials()\n"
                      "print(me['self_id'], me['keys'][1 - me['rank']][0].hex()[:4], flush=True)\n"
                      "rendezvous.rendezvous(f\"tcp://h:{me['rank']}\")\n"
                      "print('answered', flush=True)\n")

    async def scenario():
        proc = await _agent()
        job = _job(tmp_path)
        for rank in job["ranks"]:
            rank["argv"] = [sys.executable, str(script)]
        proc.stdin.write(protocol.encode(job))
        addresses, exits, output = {}, set(), {0: b"", 1: b""}
        answer = {"peers": {}, "routes": {}, "placement": [["a", "a1"]] * 2}
        while len(exits) < 2:
            message = await asyncio.wait_for(protocol.read_message(proc.stdout), 20)
            if message["type"] == "output":       # per rank: two ranks' chunks interleave
                output[message["rank"]] += protocol.unpack_bytes(message["data"])
            elif message["type"] == "exit":
                exits.add(message["rank"])
            elif message["type"] == "address":
                addresses[message["rank"]] = message["address"]
                if len(addresses) == 2:
                    proc.stdin.write(protocol.encode({"type": "rendezvous",
                                                      "answers": {0: answer, 1: answer}}))
        proc.stdin.close()                     # coc-run gone: the agent ends
        await asyncio.wait_for(proc.wait(), 20)
        return addresses, output

    addresses, output = asyncio.run(scenario())
    assert addresses == {0: "tcp://h:0", 1: "tcp://h:1"}
    assert {rank: text.decode().splitlines() for rank, text in output.items()} == {
        0: ["0 0000", "answered"], 1: ["1 0000", "answered"]}


def _gateway_job(argv):
    return {"type": "job", "job_id": "t", "site": "a", "grace": 5.0, "ranks": [],
            "gateways": [{"endpoint": 10, "host": "a1", "argv": argv,
                          "config": {"self_id": 10, "secret": "00" * 32}}]}


def test_the_agent_drives_a_gateway_daemon_through_the_control_protocol():
    """Address, update → ready, status → stats (two requests at once too), stop → the final
    stats as one output line."""
    async def scenario():
        proc = await _agent()
        proc.stdin.write(protocol.encode(_gateway_job(python_argv("coc.gateway"))))
        seen = []

        async def until(kind):
            while (message := await asyncio.wait_for(protocol.read_message(proc.stdout), 20)):
                seen.append(message)
                if message["type"] == kind:
                    return message

        address = await until("address")
        proc.stdin.write(protocol.encode({"type": "gateways", "updates": {
            "10": {"peers": {"1": "tcp://127.0.0.1:1"}, "connect": []}}}))
        ready = await until("ready")
        for ident in (3, 4):            # the second before the first is answered
            proc.stdin.write(protocol.encode({"type": "status", "id": ident, "timeout": 10}))
        status = await until("status")
        second = await until("status")
        proc.stdin.write(protocol.encode({"type": "stop"}))
        return address, ready, [status, second], seen + (await _until_done(proc))[0]

    address, ready, statuses, messages = asyncio.run(scenario())
    assert address["gateway"] == 10 and address["address"].startswith("tcp://127.0.0.1:")
    assert ready == {"type": "ready", "gateway": 10}
    assert sorted(s["id"] for s in statuses) == [3, 4]
    assert all(s["gateways"]["10"]["connections_open"] == 0 for s in statuses)
    stdout = b"".join(protocol.unpack_bytes(m["data"]) for m in messages
                      if m["type"] == "output" and m["stream"] == "stdout")
    final = json.loads(stdout)
    assert final["exit"] == "SIGTERM" and "frames_forwarded" in final["stats"]
    assert [m["signal"] for m in messages if m["type"] == "exit"] == [15]
    assert not [m for m in messages if m["type"] == "error"]


def test_a_gateway_daemon_that_garbles_its_channel_is_a_fatal_error_naming_it():
    """A daemon that prints text instead of messages: its first bytes are an absurd length."""
    argv = [sys.executable, "-c", "import sys; print('hello world', flush=True); "
                                  "sys.stdin.read()"]

    async def scenario():
        proc = await _agent()
        proc.stdin.write(protocol.encode(_gateway_job(argv)))
        while (message := await asyncio.wait_for(protocol.read_message(proc.stdout), 20)):
            if message["type"] == "error":
                break
        proc.stdin.write(protocol.encode({"type": "stop"}))
        await _until_done(proc)
        return message

    error = asyncio.run(scenario())
    assert error["gateway"] == 10 and error["fatal"]
    assert error["message"].startswith("gateway daemon 10: control message announces "
                                       f"{int.from_bytes(b'hell', 'big')} bytes")
