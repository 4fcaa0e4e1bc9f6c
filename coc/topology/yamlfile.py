"""Read YAML text keeping the line of every mapping and key, so errors can name them."""

import yaml

from coc.errors import TopologyError

__all__ = ["Mapping", "read_yaml", "line_of"]

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Mapping(dict):
    """A dict read from YAML that knows its ``line`` and the line of each key (``lines``)."""

    line = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lines = {}


class _LineLoader(_Base):
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
                    raise TopologyError(f"duplicate key {key!r} (first given on line "
                                        f"{mapping.lines[key]})", file=self.coc_file,
                                        line=line)
                written.add(key)
            mapping[key] = self.construct_object(value_node, deep=deep)
            mapping.lines[key] = line
        return mapping


_LineLoader.add_constructor("tag:yaml.org,2002:map", _LineLoader.construct_mapping)


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
        On a YAML syntax error or a duplicate key, with the file and line.

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
    loader = _LineLoader(text)
    loader.coc_file = file
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        context = f" ({exc.context})" if exc.context else ""
        raise TopologyError(f"YAML syntax error: {exc.problem}{context}", file=file,
                            line=None if mark is None else mark.line + 1) from None
    except yaml.YAMLError as exc:
        raise TopologyError(f"YAML error: {exc}", file=file) from None
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
