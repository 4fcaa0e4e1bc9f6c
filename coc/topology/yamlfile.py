"""Read YAML text keeping the line of every mapping and key, so errors can name them.

The text is checked against the limits of :mod:`coc.topology.limits` before it is built into
objects: its size, how deep mappings and lists nest (the YAML library recurses once per level
and dies of a stack overflow at some ten thousand) and how many nodes aliases add (a few lines
of nested aliases can stand for billions of nodes).
"""

import codecs

import yaml

from coc.errors import TopologyError
from coc.topology.limits import exceeded, excerpt, limits, shorten

__all__ = ["Mapping", "decode", "read_yaml", "line_of"]

_Base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Mapping(dict):
    """A dict read from YAML that knows its ``line`` and the line of each key (``lines``)."""

    line = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lines = {}


class _LineLoader(_Base):  # type: ignore[valid-type,misc]  # libyaml's loader when built
    """A safe loader whose mappings are :class:`Mapping` and whose duplicate keys are errors."""

    def construct_mapping(self, node, deep=False):
        mapping = Mapping()
        mapping.line = node.start_mark.line + 1
        own = sum(1 for key_node, _ in node.value if key_node.tag != "tag:yaml.org,2002:merge")
        self.flatten_mapping(node)  # puts the keys merged in by `<<: *anchor` first
        merged = len(node.value) - own
        written = set()  # keys written in this mapping itself: only these may not repeat
        for i, (key_node, value_node) in enumerate(node.value):
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise TopologyError(f"a key must be a plain value, not {type(key).__name__}",
                                    file=self.coc_file, line=line)
            if i >= merged:
                if key in written:
                    raise TopologyError(f"duplicate key {excerpt(key)} (first given on line "
                                        f"{mapping.lines[key]})", file=self.coc_file,
                                        line=line)
                written.add(key)
            mapping[key] = self.construct_object(value_node, deep=deep)
            mapping.lines[key] = line
        return mapping


_LineLoader.add_constructor("tag:yaml.org,2002:map", _LineLoader.construct_mapping)


_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
         (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))


def decode(data, file=None):
    """Return the bytes ``data`` of a topology file as text; it must be UTF-8.

    Raises
    ------
    TopologyError
        For UTF-16 or UTF-32 text, a binary file (NUL bytes) or bytes that are not UTF-8,
        naming the line.

    Examples
    --------
    >>> decode("name: x\\n".encode("utf-16"), file="t.yaml")
    Traceback (most recent call last):
    ...
    coc.errors.TopologyError: t.yaml:1: the file is UTF-16 text; save it as UTF-8
    >>> decode(b"a: 1\\nb: \\xe9\\n", file="t.yaml")
    Traceback (most recent call last):
    ...
    coc.errors.TopologyError: t.yaml:2: byte 0xe9 at column 4 is not UTF-8; save the file as UTF-8
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            raise TopologyError(f"the file is {encoding} text; save it as UTF-8", file=file,
                                line=1)
    nul = data.find(b"\0")
    if nul >= 0:
        raise TopologyError("the file is binary (it holds a NUL byte), not YAML text",
                            file=file, line=data.count(b"\n", 0, nul) + 1)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = data.rfind(b"\n", 0, exc.start) + 1
        raise TopologyError(f"byte 0x{data[exc.start]:02x} at column {exc.start - start + 1} "
                            f"is not UTF-8; save the file as UTF-8", file=file,
                            line=data.count(b"\n", 0, exc.start) + 1) from None


def _check_shape(text, file):
    """Raise if ``text`` nests deeper than the limit or its aliases add too many nodes.

    Walks the parser's events (no recursion, nothing built) keeping, for each anchor, how
    many nodes it stands for; an alias adds that many.
    """
    bound = limits()
    sizes = {}      # anchor -> nodes it stands for
    open_ = []      # [anchor, nodes so far] of each mapping or list being read
    added = 0       # nodes added by aliases
    for event in yaml.parse(text, Loader=_Base):
        if isinstance(event, yaml.CollectionStartEvent):
            open_.append([event.anchor, 1])
            if len(open_) > bound.depth:
                raise TopologyError(exceeded("the YAML nests", "depth"),
                                    file=file, line=event.start_mark.line + 1)
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, nodes = open_.pop()
        elif isinstance(event, yaml.AliasEvent):
            anchor, nodes = None, sizes.get(event.anchor, 1)
            added += nodes
            if added > bound.alias_nodes:
                raise TopologyError(exceeded("aliases add", "alias_nodes"),
                                    file=file, line=event.start_mark.line + 1)
        elif isinstance(event, yaml.ScalarEvent):
            anchor, nodes = event.anchor, 1
        else:
            continue
        if anchor is not None:
            sizes[anchor] = nodes
        if open_:
            open_[-1][1] += nodes


def read_yaml(text, file=None):
    """Parse YAML ``text``, returning :class:`Mapping` objects that carry line numbers.

    Parameters
    ----------
    text : str
        The YAML document.
    file : str, optional
        Named in errors.

    Returns
    -------
    object
        The document; every mapping in it is a :class:`Mapping`.

    Raises
    ------
    TopologyError
        On a YAML syntax error, a duplicate key or a limit exceeded (size, nesting depth,
        nodes added by aliases), with the file and line.

    Examples
    --------
    >>> doc = read_yaml("a: 1\\nb:\\n  c: 2\\n")
    >>> doc["b"].line, doc.lines["b"]
    (3, 2)
    >>> read_yaml("a: [1, 2\\n", file="x.yaml")
    Traceback (most recent call last):
    ...
    coc.errors.TopologyError: x.yaml:2: YAML syntax error: did not find expected ',' or ']' ...
    """
    if len(text) > limits().document_bytes:
        raise TopologyError(exceeded("the document has", "document_bytes", len(text)),
                            file=file)
    loader = _LineLoader(text)
    loader.coc_file = file
    try:
        _check_shape(text, file)
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        context = f" ({exc.context})" if exc.context else ""
        raise TopologyError(shorten(f"YAML syntax error: {exc.problem}{context}"), file=file,
                            line=None if mark is None else mark.line + 1) from None
    except yaml.YAMLError as exc:
        raise TopologyError(shorten(f"YAML error: {exc}"), file=file) from None
    except TopologyError:
        raise
    except ValueError as exc:   # a value YAML cannot build, e.g. an integer of 5 000 digits
        raise TopologyError(shorten(f"YAML value error: {exc}"), file=file) from None
    finally:
        loader.dispose()


def line_of(mapping, key=None):
    """Return the line of ``key`` in ``mapping`` (or of the mapping itself), or None.

    Examples
    --------
    >>> doc = read_yaml("a: 1\\nb: 2\\n")
    >>> line_of(doc, "b"), line_of({"b": 2}, "b")
    (2, None)
    """
    if key is not None:
        line = getattr(mapping, "lines", {}).get(key)
        if line is not None:
            return line
    return getattr(mapping, "line", None)
