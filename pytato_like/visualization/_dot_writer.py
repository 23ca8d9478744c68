"""What the dot drawings share: escaping, a dot source writer, and the
readings of partitions and traces both the full partition drawing
(:mod:`pytato_like.visualization.dot`) and the per-part summary
(:mod:`pytato_like.visualization.partition_summary`) make. Apart so that
neither of the two imports the other at module level.
"""

from __future__ import annotations

import html
from collections.abc import Hashable, Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytato_like.distributed.nodes import DistributedSend
    from pytato_like.partition import GraphPart, GraphPartition
    from pytato_like.runtime.trace import PartitionProfile

#: fill of communication nodes (sends and receives), shared with the
#: partition summary
COMM_COLOR = "#ffd8a8"


# {{{ escaping

_CONTROL_CHARS = {c: f"\\x{c:02x}" for c in range(32)}


@lru_cache(maxsize=4096)  # row names, shapes and dtypes repeat a lot
def escape_html(text: str) -> str:
    """*text* safe inside a graphviz HTML-like label."""
    return html.escape(str(text).translate(_CONTROL_CHARS), quote=True)


def quote(text: str) -> str:
    """*text* as a double-quoted dot string, shown literally."""
    text = str(text).translate(_CONTROL_CHARS)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def html_table_label(title: str, rows: Iterable[tuple[str, str]],
                     color: str) -> str:
    """An HTML-like label: a coloured title row above ``name | text`` rows."""
    parts = ['<<table border="0" cellborder="1" cellspacing="0" '
             f'cellpadding="2"><tr><td colspan="2" bgcolor="{color}"><b>'
             f"{escape_html(title)}</b></td></tr>"]
    for name, text in rows:
        parts.append(f'<tr><td align="left">{escape_html(name)}</td>'
                     f'<td align="left">{escape_html(text)}</td></tr>')
    parts.append("</table>>")
    return "".join(parts)

# }}}


class DotWriter:
    """Collects dot statements; :meth:`source` joins them once."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def node(self, node_id: str, label: str, indent: str = "  ",
             **attrs: str) -> None:
        extra = "".join(f", {k}={v}" for k, v in attrs.items())
        self.lines.append(f"{indent}{node_id} [label={label}{extra}];")

    def edge(self, src: str, dst: str, label: str = "", indent: str = "  ",
             **attrs: str) -> None:
        items = ([f"label={quote(label)}"] if label else []) + [
            f"{k}={v}" for k, v in attrs.items()]
        suffix = f" [{', '.join(items)}]" if items else ""
        self.lines.append(f"{indent}{src} -> {dst}{suffix};")

    def source(self, name: str = "computation") -> str:
        header = [f"digraph {name} {{",
                  '  graph [fontname="Helvetica"];',
                  '  node [shape=plaintext, margin=0, fontname="Helvetica", '
                  "fontsize=10];",
                  '  edge [fontname="Helvetica", fontsize=9];']
        return "\n".join([*header, *self.lines, "}"]) + "\n"


# {{{ partitions and traces

def sends_of(part: GraphPart) -> list[tuple[str | None, DistributedSend]]:
    """``(output name or None, send)`` for each send of a distributed part."""
    sends: list[tuple[str | None, DistributedSend]] = []
    seen: set[int] = set()
    for name, send in sorted(getattr(part, "output_name_to_send_node", {}).items(),
                             key=lambda item: str(item[0])):
        if id(send) not in seen:
            seen.add(id(send))
            sends.append((name, send))
    for send in getattr(part, "distributed_sends", ()) or ():
        if id(send) not in seen:
            seen.add(id(send))
            sends.append((None, send))
    return sends


def message_tag(partition: GraphPartition, src: int | None, dest: int | None,
                 comm_tag: Hashable) -> Hashable:
    """The MPI tag of the packed message carrying *comm_tag* from *src* to
    *dest* (the tag itself without packed messages)."""
    for m in getattr(partition, "messages", None) or ():
        if m.src_rank == src and m.dest_rank == dest and comm_tag in m.comm_tags:
            return m.tag
    return comm_tag


def partition_rank(partition: GraphPartition, profile: PartitionProfile) -> int:
    """The rank *partition* belongs to: the one rank in all its messages."""
    candidates: set[int] | None = None
    for m in getattr(partition, "messages", None) or ():
        pair = {m.src_rank, m.dest_rank}
        candidates = pair if candidates is None else candidates & pair
    if candidates and len(candidates) == 1:
        return next(iter(candidates))
    ranks = sorted({rank for rank, _ in profile.parts})
    return ranks[0] if ranks else 0


def format_ms(seconds: float | None) -> str:
    """*seconds* in milliseconds for a label; ``?`` when unknown."""
    return "?" if seconds is None else f"{seconds * 1e3:.3f} ms"


def share_color(share: float) -> str:
    """White for 0, a strong red for the whole execution."""
    share = min(max(share, 0.0), 1.0)
    fade = round(255 - share * (255 - 96))
    return f"#ff{fade:02x}{fade:02x}"

# }}}
