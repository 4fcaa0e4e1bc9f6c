"""Drawing topologies: PNG/SVG files, Jupyter display, grouping of large sites, route highlight."""

import json
import math
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")
pytestmark = pytest.mark.filterwarnings("ignore::coc.errors.TopologyWarning")

from coc.errors import TopologyError  # noqa: E402
from coc.topology import draw as drawing  # noqa: E402
from coc.topology import library_names, load, route  # noqa: E402
from hang_bounds import scaled

NOTEBOOK = Path(__file__).parents[2] / "examples" / "topology_tour.ipynb"
ARROW = " \u2192 "


def svg_texts(svg):
    """Return the text elements of an SVG drawing (names are kept as text, not glyph paths)."""
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg)


@pytest.mark.parametrize("name", library_names())
def test_png_and_svg_files_show_every_site(tmp_path, name):
    G = load(name)
    png, svg = tmp_path / f"{name}.png", tmp_path / f"{name}.svg"
    drawing.draw(G, path=png)
    drawing.draw(G, path=svg)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000
    texts = svg_texts(svg.read_text())
    for site in {a["site"] for _, a in G.nodes(data=True) if a["kind"] == "host"}:
        assert any(t.startswith(f"site {site} ") for t in texts), site
    for network in (n for n, a in G.nodes(data=True) if a["kind"] == "network"):
        assert any(t.split(" ")[0] == network for t in texts), network


def test_to_svg_highlights_route_and_names_its_gateways():
    G = load("two-sites")
    svg = drawing.to_svg(G, route=["a1", "a-gw", "b-gw", "b1"])
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
    texts = svg_texts(svg)
    assert "a-gw" in texts and "b-gw" in texts
    assert "route " + ARROW.join(["a1", "a-gw", "b-gw", "b1"]) in texts
    assert drawing._ROUTE_COLOR in svg


def test_route_of_host_names_follows_networks_between_them():
    G = load("two-sites")
    hosts, edges = drawing._route_path(G, ["a1", "a-gw", "b-gw", "b1"])
    assert hosts == ["a1", "a-gw", "b-gw", "b1"]
    assert edges == {frozenset(e) for e in [("a1", "a-lan"), ("a-lan", "a-gw"), ("a-gw", "wan"),
                                             ("wan", "b-gw"), ("b-gw", "b-lan"),
                                             ("b-lan", "b1")]}


def test_route_of_host_names_through_a_link_uses_it():
    G = load("perseus")
    _, edges = drawing._route_path(G, ["p001", "p116"])
    assert edges == {frozenset(e) for e in [("p001", "sw1"), ("sw1", "backplane"),
                                             ("backplane", "sw5"), ("sw5", "p116")]}


def test_route_object_is_drawn_along_its_hops():
    G = load("chemnitz-2003")
    r = route(G, "athlon1", "xeon3", size=4 << 20)
    hosts, edges = drawing._route_path(G, r)
    assert hosts == list(r.hosts)
    assert edges == {frozenset(e) for e in [("athlon1", "myrinet"), ("myrinet", "xeon8"),
                                             ("xeon8", "xeon-sci"), ("xeon-sci", "xeon3")]}
    assert f"route {ARROW.join(r.hosts)}" in " ".join(svg_texts(drawing.to_svg(G, r)))


def test_route_naming_an_unknown_host_is_an_error():
    with pytest.raises(TopologyError, match="'a9'"):
        drawing.to_svg(load("two-sites"), route=["a1", "a9"])


def test_route_between_hosts_with_no_network_in_common_is_an_error():
    with pytest.raises(TopologyError, match="a1 -> b1"):
        drawing.to_svg(load("two-sites"), route=["a1", "b1"])


@pytest.mark.parametrize("name, groups", [
    ("bunyip", {"a[01-24] x24", "b[01-24] x24", "c[01-24] x24", "d[01-24] x24"}),
    ("perseus", {"p[001-024] x24", "p[025-048] x24", "p[049-072] x24", "p[073-096] x24",
                 "p[097-116] x20"}),
])
def test_large_sites_are_drawn_as_groups_sharing_networks(name, groups):
    G = load(name)
    D = drawing.display_graph(G)
    drawn_hosts = {n for n, a in D.nodes(data=True) if a["kind"] == "host"}
    assert drawn_hosts == groups
    assert sum(len(D.nodes[n]["members"]) for n in drawn_hosts) == len(
        [n for n, a in G.nodes(data=True) if a["kind"] == "host"])
    group = sorted(groups)[0]
    first_member = D.nodes[group]["members"][0]
    assert set(D[group]) == set(G[first_member])


def test_small_sites_and_route_hosts_are_drawn_one_by_one():
    D = drawing.display_graph(load("two-sites"))
    assert {"a1", "a4", "a-gw", "b1"} <= set(D)
    D = drawing.display_graph(load("perseus"), keep=["p001", "p116"])
    assert {"p001", "p116", "p[002-024] x23", "p[097-115] x19"} <= set(D)


@pytest.mark.parametrize("name", library_names())
def test_layout_is_deterministic_and_nodes_do_not_overlap(name):
    D = drawing.display_graph(load(name))
    pos = drawing.layout(D)
    assert pos == drawing.layout(drawing.display_graph(load(name)))
    assert set(pos) == set(D)
    points = sorted(pos.values())
    assert all(math.dist(p, q) > 0.9 for i, p in enumerate(points) for q in points[i + 1:])


def test_draw_onto_given_axes_returns_them():
    from matplotlib.figure import Figure

    ax = Figure().add_subplot()
    assert drawing.draw(load("private-pair"), ax=ax) is ax
    assert ax.get_title() == "private-pair"


def test_draw_without_axes_or_path_uses_the_current_pyplot_figure():
    import matplotlib.pyplot as plt

    ax = drawing.draw(load("bunyip"))
    try:
        assert plt.gcf() is ax.figure and ax.get_title() == "bunyip"
    finally:
        plt.close(ax.figure)


def test_topology_displays_as_svg_in_jupyter():
    svg = load("two-sites")._repr_svg_()
    assert isinstance(svg, str) and "<svg" in svg
    assert "a-gw" in svg_texts(svg)


def test_missing_matplotlib_says_how_to_install_it(monkeypatch):
    for module in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=re.escape("pip install 'coc[draw]'")):
        drawing.to_svg(load("two-sites"))


def test_tour_notebook_has_cleared_outputs():
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert code and all(not c["outputs"] and c["execution_count"] is None for c in code)


def test_tour_notebook_runs():
    nbformat = pytest.importorskip("nbformat", reason="executing the notebook needs nbformat")
    nbclient = pytest.importorskip("nbclient", reason="executing the notebook needs nbclient")
    pytest.importorskip("ipykernel", reason="executing the notebook needs ipykernel")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=scaled(120), kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/svg+xml" in o.get("data", {}) for o in outputs)
