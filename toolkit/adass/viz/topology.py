"""The exchange's topology, a ring or a star around Parameter Server shards, with bytes on every link
and what each shard took in (pushes) and gave out (pulls); colocated shards sit on their replicas."""

from __future__ import annotations

import holoviews as hv
import numpy as np
import pandas as pd

from .style import HEIGHT, NO_EXCHANGE, WIDTH, human_bytes, last_steps_text, named

__all__ = ["held_shards", "link_totals", "node_layout", "server_bytes", "server_ranks", "topology"]

#: shards listed in the corner; more would reach the links
_LISTED_SHARDS = 4
_SERVER_COLUMNS = ("shard", "rank", "push_bytes", "pull_bytes", "push_messages", "pull_messages")


def _is(traffic: pd.DataFrame, phase: str) -> pd.Series:
    """Rows of ``phase`` in any round (a low-rank codec pushes and pulls once per round: ``p.push``)."""
    return traffic["phase"].str.rsplit(".", n=1).str[-1] == phase


def server_ranks(traffic: pd.DataFrame) -> list[int]:
    """Ranks that received pushes and push nothing themselves (dedicated Parameter Server shards);
    empty for a ring and for shards that replicas serve (``colocated=true``)."""
    if not len(traffic):
        return []
    pushes = traffic[_is(traffic, "push")]
    return sorted(int(r) for r in set(pushes["dst"].unique()) - set(pushes["src"].unique()))


def server_bytes(traffic: pd.DataFrame) -> pd.DataFrame:
    """Wire bytes and messages of every PS shard: ``shard, rank, push_bytes, pull_bytes, push_messages,
    pull_messages``, one row per shard in shard order.

    A push to shard s and its pull carry chunk s; the rank is where the shard runs (a dedicated
    server rank, or the replica that serves it). A replica's push to a shard it serves itself stays
    in its process and is not counted: it never reaches the wire. Empty for a ring.
    """
    parts = []
    for phase, rank in (("push", "dst"), ("pull", "src")):
        rows = traffic[_is(traffic, phase)] if len(traffic) else traffic
        grouped = rows.groupby(["chunk", rank])["wire_bytes"].agg(["sum", "count"]) if len(rows) else None
        if grouped is not None:
            grouped.index.names = ["shard", "rank"]
            parts.append(grouped.rename(columns={"sum": f"{phase}_bytes", "count": f"{phase}_messages"}))
    if not parts:
        return pd.DataFrame({k: pd.Series(dtype="int64") for k in _SERVER_COLUMNS})
    joined = pd.concat(parts, axis=1).fillna(0).reset_index()
    for column in _SERVER_COLUMNS:
        if column not in joined:
            joined[column] = 0
    return joined[list(_SERVER_COLUMNS)].astype("int64").sort_values("shard", ignore_index=True)


def held_shards(traffic: pd.DataFrame, per_server: pd.DataFrame | None = None) -> dict[int, int]:
    """``{rank: shard}`` of replicas that serve a PS shard beside their model (``colocated=true``):
    ranks that receive pushes and push themselves. ``per_server``: ``server_bytes(traffic)``, where
    the caller has it already."""
    per_server = server_bytes(traffic) if per_server is None else per_server
    if not len(per_server):
        return {}
    pushers = set(traffic.loc[_is(traffic, "push"), "src"].unique())
    return {
        int(r): int(s) for s, r in zip(per_server["shard"], per_server["rank"], strict=True) if r in pushers
    }


def link_totals(traffic: pd.DataFrame) -> pd.DataFrame:
    """Bytes per directed link: ``src, dst, raw_bytes, wire_bytes`` (every phase counted)."""
    if not len(traffic):
        return pd.DataFrame({k: pd.Series(dtype="int64") for k in ("src", "dst", "raw_bytes", "wire_bytes")})
    totals = traffic.groupby(["src", "dst"], as_index=False)[["raw_bytes", "wire_bytes"]].sum()
    return totals[totals["src"] != totals["dst"]].astype("int64")


def node_layout(ranks: list[int], servers: list[int], held: dict[int, int] | None = None) -> pd.DataFrame:
    """Positions and colours: replicas on the unit circle (rank 0 on top, clockwise), servers near
    the centre; a replica that serves shard s (``held``) is named ``r<rank>+ps<s>`` on a larger node
    (``size``, screen pixels), so that its name fits inside."""
    replicas = [r for r in ranks if r not in servers]
    held = held or {}
    rows = []
    for i, rank in enumerate(replicas):
        angle = np.pi / 2 - 2 * np.pi * i / max(len(replicas), 1)
        x, y = np.cos(angle), np.sin(angle)
        if rank in held:
            rows.append((x, y, rank, f"r{rank}+ps{held[rank]}", "replica+server", "#c44e52", 42))
        else:
            rows.append((x, y, rank, f"r{rank}", "replica", "#55a868", 24))
    for i, rank in enumerate(servers):
        angle = np.pi / 2 - 2 * np.pi * i / len(servers)
        radius = 0.0 if len(servers) == 1 else 0.3
        rows.append(
            (radius * np.cos(angle), radius * np.sin(angle), rank, f"ps{rank}", "server", "#dd8452", 24)
        )
    frame = pd.DataFrame(rows, columns=["x", "y", "rank", "name", "role", "color", "size"])
    return frame.astype(
        {
            "x": float,
            "y": float,
            "rank": "int64",
            "name": object,
            "role": object,
            "color": object,
            "size": float,
        }
    )


def _edges(totals: pd.DataFrame, where: dict[int, tuple[float, float]]) -> pd.DataFrame:
    """Segment ends, arrowhead place and angle, label place and width for every directed link."""
    peak = max(float(totals["wire_bytes"].max()) if len(totals) else 0.0, 1.0)
    rows = []
    for src, dst, wire in zip(totals["src"], totals["dst"], totals["wire_bytes"], strict=True):
        (x0, y0), (x1, y1) = where[int(src)], where[int(dst)]
        dx, dy = x1 - x0, y1 - y0
        norm = max(float(np.hypot(dx, dy)), 1e-9)
        # shift each direction to its right, so a->b and b->a (push and pull) stay apart
        ox, oy = 0.035 * dy / norm, -0.035 * dx / norm
        rows.append({
            "x0": x0 + ox, "y0": y0 + oy, "x1": x1 + ox, "y1": y1 + oy,
            "ax": x0 + 0.7 * dx + ox, "ay": y0 + 0.7 * dy + oy, "angle": float(np.arctan2(dy, dx) - np.pi / 2),
            "lx": (x0 + x1) / 2 + 6 * ox, "ly": (y0 + y1) / 2 + 6 * oy,
            "width": 1.0 + 5.0 * float(wire) / peak, "wire_bytes": int(wire), "link": f"{int(src)}→{int(dst)}",
            "text": human_bytes(wire),
        })  # fmt: skip
    frame = pd.DataFrame(rows, columns=["x0", "y0", "x1", "y1", "ax", "ay", "angle", "lx", "ly", "width",
                                        "wire_bytes", "link", "text"])  # fmt: skip
    return frame.astype(
        {c: float for c in ["x0", "y0", "x1", "y1", "ax", "ay", "angle", "lx", "ly", "width"]}
    )


def topology(
    traffic: pd.DataFrame,
    world: int | None = None,
    servers: int | None = None,
    held: dict[int, int] | None = None,
) -> hv.Overlay:
    """Ring (replicas in rank order) or star (replicas around PS shards) with wire bytes per link.

    Parameters
    ----------
    traffic : DataFrame
        TrafficRecord rows; totals are over all rows given (the title says over how many steps).
    world : int, optional
        Ranks to draw before any traffic has arrived (replicas and servers).
    servers : int, optional
        Parameter Server shards among them, from the run's configuration: the last ``servers``
        ranks of ``world`` (0: a ring). Without it the servers are told from the traffic.
    held : dict, optional
        ``{replica rank: shard}`` of shards that replicas serve (``colocated=true``), from the run's
        configuration, so such a run is drawn as a star before its first traffic. Without it they
        are told from the traffic (:func:`held_shards`).

    Returns
    -------
    Overlay
        Links as arrows whose widths follow the wire bytes, each labelled with its bytes (beside its
        direction of travel, so both directions of a link can be read), the ranks as nodes, and under
        every PS shard the bytes it took in and gave out (:func:`server_bytes`). Shards that replicas
        serve (``colocated=true``) are drawn on those replicas.
    """
    totals = link_totals(traffic)
    if servers is not None and world:
        shards = list(range(world - servers, world))
    else:
        shards = server_ranks(traffic)
    per_server = server_bytes(traffic)
    held = {**held_shards(traffic, per_server), **(held or {})}
    ranks = sorted(set(totals["src"]) | set(totals["dst"]) | set(range(world or 0)))
    nodes = node_layout([int(r) for r in ranks], shards, held)
    where = {int(r): (x, y) for x, y, r in zip(nodes["x"], nodes["y"], nodes["rank"], strict=True)}
    totals = totals[totals["src"].isin(where) & totals["dst"].isin(where)]
    edges = _edges(totals, where)
    kind = "PS star, colocated" if held else "PS star" if shards else "ring"
    total = human_bytes(totals["wire_bytes"].sum()) if len(totals) else "0 B"
    steps = int(traffic["step"].nunique()) if len(traffic) else 0
    text = {"text_font_size": "8pt", "text_color": "#333333"}
    return (
        hv.Segments(edges, ["x0", "y0", "x1", "y1"], ["width", "wire_bytes", "link"])
        .opts(line_width="width", color="#4c72b0", line_alpha=0.8, tools=["hover"])
        * hv.Points(edges, ["ax", "ay"], ["angle"]).opts(marker="triangle", angle="angle", size=11, color="#4c72b0")
        * hv.Points(nodes, ["x", "y"], ["name", "role", "color", "size"]).opts(size="size", color="color",
                                                                                tools=["hover"])
        * hv.Labels(edges, ["lx", "ly"], "text").opts(**text)
        * hv.Labels(nodes, ["x", "y"], "name").opts(text_font_size="8pt", text_color="white")
        * hv.Labels(_server_labels(per_server, where), ["x", "y"], "text").opts(text_align="left", **text)
    ).opts(width=WIDTH, height=HEIGHT, xaxis=None, yaxis=None, xlim=(-1.45, 1.45), ylim=(-1.3, 1.35),
           title=f"{kind}: {total} on the wire, {last_steps_text(steps)}" if len(nodes) else NO_EXCHANGE,
           hooks=[named("adass-topology")])  # fmt: skip


def _server_labels(per_server: pd.DataFrame, where: dict[int, tuple[float, float]]) -> pd.DataFrame:
    """A line per shard, stacked in the top-left corner: the wire bytes pushed to it and pulled from
    it. The corner stays clear of every node and link, where labels beside the nodes would cross the
    links of a colocated star (its shards sit on the circle) or of a star with several servers."""
    shown = [(s, r, push, pull) for s, r, push, pull in zip(per_server["shard"], per_server["rank"],
             per_server["push_bytes"], per_server["pull_bytes"], strict=True) if int(r) in where]  # fmt: skip
    rows = [{"x": -1.42, "y": 1.27 - 0.13 * i,
             "text": f"ps{int(s)}: push {human_bytes(push)}, pull {human_bytes(pull)}"}
            for i, (s, r, push, pull) in enumerate(shown[:_LISTED_SHARDS])]  # fmt: skip
    if len(shown) > _LISTED_SHARDS:
        rows.append({"x": -1.42, "y": 1.27 - 0.13 * _LISTED_SHARDS,
                     "text": f"... {len(shown) - _LISTED_SHARDS} more shards (hover a node)"})  # fmt: skip
    return pd.DataFrame(rows, columns=["x", "y", "text"]).astype({"x": float, "y": float})
