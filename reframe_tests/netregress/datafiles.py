"""Files others write and netregress reads (run reports, reference files, host baselines, snapshot manifests):
what every reader of them checks, in one place.

* :func:`checked_name`: a name taken from such a file (a system, partition, environment, interconnect, test, figure
  kind) before it becomes part of a path or a key: ``[A-Za-z0-9_][A-Za-z0-9_.+-]*``, at most
  :data:`NAME_MAX` characters, no ``..``. ReFrame's own names (``^[a-zA-Z_][a-zA-Z0-9_-]*$``) and our test names
  (``mpitest.stream.blocking``) pass; ``../../tmp/x`` does not.
* :func:`load_yaml`: YAML through the safe loader, refusing aliases (a 3 KB file of aliases of aliases is a tree of
  millions of entries to whoever walks it) and nesting deeper than :data:`MAX_DEPTH`.
* :func:`load_json`: JSON nested at most :data:`MAX_DEPTH` levels (Python's parser recurses: 100,000 ``[`` are a
  RecursionError).

Standard library only, PyYAML when YAML is read: the Spack helpers import it before the venv exists.
"""
from __future__ import annotations

import functools
import json
import re
from typing import Iterable

#: The pattern of a name from data that may become part of a path.
NAME_RE = re.compile(r'[A-Za-z0-9_][A-Za-z0-9_.+-]*')
NAME_MAX = 100
#: How deep a data file may nest (a reference file needs 9 levels, a ReFrame run report about 8).
MAX_DEPTH = 32


class UnsafeName(ValueError):
    """A name from data that may not become part of a path; the message is one line naming it."""


def checked_name(name: object, what: str) -> str:
    """``name`` when it may become one path component (:data:`NAME_RE`, no ``..``, at most :data:`NAME_MAX`
    characters); :class:`UnsafeName` naming ``what`` and the value otherwise."""
    if not isinstance(name, str):
        raise UnsafeName(f'{what} {name!r}: expected a name (text), got {type(name).__name__}')
    if len(name) > NAME_MAX or not NAME_RE.fullmatch(name) or '..' in name:
        shown = name if len(name) <= 60 else f'{name[:57]}...'
        raise UnsafeName(f'{what} {shown!r}: not a name (letters, digits, "_", ".", "+", "-", at most {NAME_MAX} '
                         f'characters, no "..")')
    return name


def too_deep(doc: object, limit: int = MAX_DEPTH) -> bool:
    """Whether ``doc`` (lists and mappings) nests deeper than ``limit`` levels; walked without recursion."""
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        children: Iterable = node.values() if isinstance(node, dict) else node
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def load_json(text: str):
    """``json.loads`` of ``text``; ``ValueError`` (one line) when it nests deeper than :data:`MAX_DEPTH`
    (``json.JSONDecodeError``, a ValueError too, for malformed JSON). The walk costs about what the parse does
    (a run report of a million node names: a little more)."""
    try:
        doc = json.loads(text)
    except RecursionError:
        raise ValueError(f'nested deeper than {MAX_DEPTH} levels') from None
    if too_deep(doc):
        raise ValueError(f'nested deeper than {MAX_DEPTH} levels')
    return doc


def load_yaml(text: str):
    """The YAML document in ``text`` by the safe loader (libyaml's where PyYAML has it); a ``yaml.YAMLError``
    (one line) for malformed YAML, an alias, or nesting deeper than :data:`MAX_DEPTH`."""
    import yaml
    # no anchor, no alias: the fast loader; with one, the Python composer, which refuses aliases as it meets them
    loader = _no_alias_loader() if '&' in text else getattr(yaml, 'CSafeLoader', yaml.SafeLoader)
    try:
        doc = yaml.load(text, Loader=loader)
    except RecursionError:
        raise yaml.YAMLError(f'nested deeper than {MAX_DEPTH} levels') from None
    if too_deep(doc):
        raise yaml.YAMLError(f'nested deeper than {MAX_DEPTH} levels')
    return doc


@functools.lru_cache(maxsize=1)
def _no_alias_loader():
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        """The safe loader, refusing every alias (``*name``, ``<<: *name``)."""

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.YAMLError(f'an alias (*{event.anchor}) at line {event.start_mark.line + 1}: aliases '
                                     f'are not allowed here (write the value out)')
            return super().compose_node(parent, index)

    return NoAliasLoader
