"""Read YAML text keeping the line of every mapping and key, so errors can name them.

The document is built in one pass over the events of PyYAML's C parser, not by PyYAML's own
composer and constructor (five times slower on a 26 MB file, most of it in Python code run
for every node); that loader still reads the rare text the pass leaves to it. The text is
checked against the limits of :mod:`coc.topology.limits` on the way: its size first, then on
every event how deep mappings and lists nest (PyYAML's loader recurses once per level and
dies of a stack overflow at some ten thousand) and how many nodes aliases add (a few lines of
nested aliases can stand for billions of nodes), before the full loader would see the text.
"""

from __future__ import annotations

import codecs
from os import PathLike
from typing import Any, Union

import yaml

from coc.errors import TopologyError
from coc.topology.limits import exceeded, excerpt, limits, shorten

__all__ = ["Mapping", "decode", "read_yaml", "line_of"]

#: The file a text was read from, named in errors (None: text from elsewhere).
File = Union[str, "PathLike[str]", None]

_Base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Mapping(dict[Any, Any]):
    """A dict read from YAML that knows its ``line`` and the line of each key (``lines``)."""

    line: int | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lines: dict[Any, int | None] = {}


class _LineLoader(_Base):  # type: ignore[valid-type,misc]  # libyaml's loader when built
    """A safe loader whose mappings are :class:`Mapping` and whose duplicate keys are errors."""

    coc_file: File = None  # named in errors

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Mapping:
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


def decode(data: bytes, file: File = None) -> str:
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


_TAG = "tag:yaml.org,2002:"
#: The tags of plain scalars the one-pass reader builds itself; others go to the full loader.
_BUILT = {_TAG + name for name in ("int", "float", "bool", "null", "timestamp")}
_KEY_TYPES = (str, int, float, bool, type(None))
_RESOLVER = yaml.resolver.Resolver()
_SCALARS = yaml.constructor.SafeConstructor()
_MERGE = object()       # the plain key ``<<``
_UNBUILT = object()     # a plain scalar of a tag the one-pass reader does not build
_NO_KEY = object()      # a mapping waiting for its next key
_FULL = object()        # what the one-pass reader returns for text the full loader must read


def _plain_value(text: str) -> Any:
    """Return the value of the plain (unquoted) scalar ``text``, as the safe loader builds it."""
    tag = _RESOLVER.resolve(yaml.ScalarNode, text, (True, False))
    if tag == _TAG + "str":
        return text
    if tag == _TAG + "merge":
        return _MERGE
    if tag not in _BUILT:
        return _UNBUILT
    return _SCALARS.yaml_constructors[tag](_SCALARS, yaml.ScalarNode(tag, text))


class _Open:
    """A mapping or list being read: what it holds so far and how many nodes it stands for."""

    __slots__ = ("value", "anchor", "nodes", "key", "key_line", "merges")

    def __init__(self, value: Mapping | list[Any], anchor: str | None) -> None:
        self.value, self.anchor, self.nodes = value, anchor, 1
        self.key: object = _NO_KEY
        self.key_line: int | None = None
        self.merges: list[Mapping] = []

    def add(self, value: Any, event: Any, file: File) -> bool:
        """Put ``value`` (read from ``event``) in; return False where the full loader must."""
        if value is _UNBUILT:
            return False
        mapping = self.value
        if not isinstance(mapping, Mapping):
            mapping.append(value)
            return value is not _MERGE
        if self.key is _NO_KEY:     # a key: a plain value, or ``<<``, written here
            kind = type(event)      # (not narrowing ``event``: PyYAML's marks may be None)
            if kind is not yaml.ScalarEvent or not (
                    value is _MERGE or isinstance(value, _KEY_TYPES)):
                return False
            self.key, self.key_line = value, event.start_mark.line + 1
            return True
        key, self.key = self.key, _NO_KEY
        if value is _MERGE:
            return False
        if key is _MERGE:           # ``<<: *anchor`` or ``<<: [*a, *b]`` (the first one wins)
            sources = value if isinstance(value, list) else [value]
            if not sources or not all(isinstance(source, Mapping) for source in sources):
                return False
            self.merges.extend(sources)
            return True
        if key in mapping:
            raise TopologyError(f"duplicate key {excerpt(key)} (first given on line "
                                f"{mapping.lines[key]})", file=file, line=self.key_line)
        mapping[key] = value
        mapping.lines[key] = self.key_line
        return True

    def finish(self) -> Mapping | list[Any]:
        """Return the mapping or list read, the keys merged in by ``<<`` first."""
        if not self.merges:
            return self.value
        assert isinstance(self.value, Mapping)  # only mappings take ``<<`` merges
        merged = Mapping()
        merged.line = self.value.line
        for source in self.merges:  # in order, keys where they first appear, as PyYAML 6.0.4
            for key, value in source.items():
                if key not in merged:
                    merged[key] = value
                    merged.lines[key] = source.lines[key]
        merged.update(self.value)   # the mapping's own keys win
        merged.lines.update(self.value.lines)
        return merged


def _read_events(text: str, file: File) -> Any:
    """Build the document of ``text`` in one pass over the parser's events, checking limits.

    The depth and alias checks run on every event, with nothing built recursively, so they
    hold before any deep or aliased structure could hurt. Builds what topology files hold
    (mappings with lines, lists, plain and quoted scalars, anchors, aliases, ``<<`` merges)
    as the full loader would, several times faster; text using anything else (explicit
    tags, a second document, an undefined or repeated anchor, a non-scalar key, ...) makes it
    return ``_FULL`` once the limits are checked, and the full loader reads it (and names
    its error).
    """
    bound = limits()
    # anchor -> (object, nodes it stands for); None while its node is open
    anchors: dict[str, tuple[Any, int] | None] = {}
    plain: dict[str, Any] = {}  # plain scalar text -> its value (topology files repeat words)
    stack: list[_Open] = []     # the mappings and lists being read
    added = 0       # nodes added by aliases
    documents = 0
    document: Any = None
    anchor: str | None
    nodes: int
    value: Any
    event: Any      # a PyYAML event: its fields are read after its type is known
    full = False    # the full loader must read this text: from here on only check limits
    for event in yaml.parse(text, Loader=_Base):
        kind = type(event)
        if kind is yaml.ScalarEvent:
            anchor, nodes, value = event.anchor, 1, None
            if full:
                pass
            elif event.tag is not None:
                full = True
            elif event.implicit[0]:
                try:
                    value = plain[event.value]
                except KeyError:
                    value = plain[event.value] = _plain_value(event.value)
            else:
                value = event.value
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            if event.anchor is not None:
                full = full or event.anchor in anchors
                anchors[event.anchor] = None
            full = full or event.tag is not None
            container: Mapping | list[Any] = []
            if kind is yaml.MappingStartEvent:
                container = Mapping()
                container.line = event.start_mark.line + 1
            stack.append(_Open(container, event.anchor))
            if len(stack) > bound.depth:
                raise TopologyError(exceeded("the YAML nests", "depth"),
                                    file=file, line=event.start_mark.line + 1)
            continue
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            done = stack.pop()
            anchor, nodes, value = done.anchor, done.nodes, None if full else done.finish()
        elif kind is yaml.AliasEvent:
            known = anchors.get(event.anchor)
            anchor, (value, nodes) = None, known or (None, 1)
            full = full or known is None
            added += nodes
            if added > bound.alias_nodes:
                raise TopologyError(exceeded("aliases add", "alias_nodes"),
                                    file=file, line=event.start_mark.line + 1)
        elif kind is yaml.DocumentStartEvent:
            documents += 1
            full = full or documents > 1
            continue
        else:
            continue
        if anchor is not None:
            full = full or (kind is yaml.ScalarEvent and anchor in anchors)
            anchors[anchor] = (value, nodes)
        if stack:
            stack[-1].nodes += nodes
            full = full or not stack[-1].add(value, event, file)
        elif not full:
            full = value is _UNBUILT or value is _MERGE
            document = value
    return _FULL if full else document


def read_yaml(text: str, file: File = None) -> Any:
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
    try:
        document = _read_events(text, file)
        if document is _FULL:
            document = _full_load(text, file)
        return document
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = None if mark is None else mark.line + 1
        if "maximum nesting depth" in str(exc.problem):  # the parser's own limit (PyYAML 6.0.4)
            raise TopologyError(exceeded("the YAML nests", "depth"), file=file,
                                line=line) from None
        context = f" ({exc.context})" if exc.context else ""
        raise TopologyError(shorten(f"YAML syntax error: {exc.problem}{context}"), file=file,
                            line=line) from None
    except yaml.YAMLError as exc:
        raise TopologyError(shorten(f"YAML error: {exc}"), file=file) from None
    except TopologyError:
        raise
    except ValueError as exc:   # a value YAML cannot build, e.g. an integer of 5 000 digits
        raise TopologyError(shorten(f"YAML value error: {exc}"), file=file) from None


def _full_load(text: str, file: File) -> Any:
    """Return the document of ``text`` read by PyYAML's whole safe loader (with lines)."""
    loader = _LineLoader(text)
    loader.coc_file = file
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def line_of(mapping: object, key: object = None) -> int | None:
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
