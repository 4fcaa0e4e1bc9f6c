"""The ``coc topo`` command, through coc.cli.main and once as a real subprocess."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coc.cli import main
from hang_bounds import scaled

DATA = Path(__file__).resolve().parents[1] / "data"
SMALL = str(DATA / "topology-good" / "two-sites-small.yaml")
BAD = str(DATA / "topology-bad" / "unknown-network.yaml")


def test_check_prints_ok_summary_and_warnings(capsys):
    assert main(["topo", "check", SMALL]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"{SMALL}: OK: two-sites-small: 2 sites, 6 hosts (9 slots for ranks), "
                      f"3 networks, 2 gateways")
    assert out[1:] == [
        "  warning: site a and site b are joined only through gateway 'a-gw' "
        "(single point of failure)",
        "  warning: site a and site b are joined only through gateway 'b-gw' "
        "(single point of failure)"]


def test_check_fails_on_any_bad_file_with_its_message(capsys):
    assert main(["topo", "check", SMALL, BAD]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith(f"{SMALL}: OK")
    assert captured.err == f"{BAD}:6: error: host 'a1': unknown network 'lan-x'\n"


def test_check_library_name(capsys):
    assert main(["topo", "check", "two-sites"]) == 0
    assert capsys.readouterr().out.startswith("two-sites: OK: two-sites: 2 sites, 10 hosts")


def test_show(capsys):
    assert main(["topo", "show", SMALL]) == 0
    out = capsys.readouterr().out
    assert "two-sites-small: 2 sites, 6 hosts" in out
    assert "    a[1-2]  compute  2 slots  a-lan" in out
    assert "    b-gw    gateway (dedicated)  1 slot   b-lan, wan" in out
    assert "  wan    wan         1ms   1Gbit/s   public   198.51.100.0/24  shared  2 hosts" \
        in out
    assert "gateways: a-gw,b-gw" in out
    assert "  a -> b  a-gw 100%  /  a-gw 100%" in out
    assert "levels: wan 1, site 2, network 2, host 6 colors" in out


def test_route_prints_hops_networks_and_times(capsys):
    assert main(["topo", "route", SMALL, "a1", "b2", "--size", "1MiB"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "route a1 -> b2 for 1MiB (1048576 bytes):"
    assert [line.split()[:5] for line in out[1:4]] == [
        ["a1", "->", "a-gw", "over", "a-lan"], ["a-gw", "->", "b-gw", "over", "wan"],
        ["b-gw", "->", "b2", "over", "b-lan"]]
    # pipelined: the first 256 KiB fragment over the three hops (0.230 + 3.097 + 0.039 ms),
    # 20 us of forwarding, then the other 768 KiB at the WAN's 1 Gbit/s (6.291 ms)
    assert out[4] == "  total 9.68ms through a-gw, b-gw"
    assert "cut-through in 256KiB fragments" in out[5]


def test_route_chemnitz_large_messages_take_the_myrinet_gateway(capsys):
    assert main(["topo", "route", "chemnitz-2003", "athlon1", "xeon3", "--size", "4MiB"]) == 0
    out = capsys.readouterr().out
    assert " myrinet " in out and "total 22.1ms through xeon8\n" in out


def test_route_unknown_host_is_an_error(capsys):
    assert main(["topo", "route", SMALL, "a1", "zz"]) == 2
    assert "unknown host 'zz'" in capsys.readouterr().err


def test_draw_writes_svg(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "small.svg"
    assert main(["topo", "draw", SMALL, "-o", str(out), "--route", "a1", "b2"]) == 0
    assert capsys.readouterr().out == f"wrote {out}\n"
    assert out.read_text().lstrip().startswith(("<?xml", "<svg"))


def test_draw_without_matplotlib_says_how_to_get_it(tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None; from coc.cli import main; "
            f"sys.exit(main(['topo', 'draw', {SMALL!r}, '-o', {str(tmp_path / 'x.png')!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=scaled(60))
    assert done.returncode == 1
    assert "drawing a topology needs matplotlib: pip install 'coc[draw]'" in done.stderr
    assert not (tmp_path / "x.png").exists()


def test_coc_topo_check_as_a_command():
    command = shutil.which("coc")
    command = [command] if command else [sys.executable, "-m", "coc.cli"]
    done = subprocess.run(command + ["topo", "check", SMALL, BAD],
                          capture_output=True, text=True, timeout=scaled(60))
    assert done.returncode == 1
    assert "OK: two-sites-small" in done.stdout
    assert "unknown network 'lan-x'" in done.stderr
