"""What part of a directed network a figure shows, and where: the neighbourhood of a few nodes (their upstream
nodes within some hops, and the paths from chosen nodes to them), and a layered left-to-right layout (a node's
column is the longest path from it to an end node; rows ordered by the barycentre heuristic). Pure functions of
node names and edges, fast enough for networks of thousands of nodes, in plain Python: a graph library's import
(networkx: 0.3-0.5 s) held a fresh server's first figure back longer than all of this takes."""
from __future__ import annotations

from collections import deque
from functools import lru_cache
from statistics import fmean

BARYCENTRE_SWEEPS = 8


def order_columns(columns: list[list], neighbours, sweeps: int = BARYCENTRE_SWEEPS, spread: bool = False) -> dict:
    """Row of each node: columns centred, each sorted by the mean row of its nodes' neighbours, sweeping back
    and forth (the barycentre heuristic, which keeps edges short and uncrossed). ``spread`` spaces a short
    column's nodes out over the tallest column's height."""
    row: dict = {}
    tallest = max((len(c) for c in columns), default=1)

    def place(column):
        gap = max(1.0, tallest / max(1, len(column))) if spread else 1.0
        for i, n in enumerate(column):
            row[n] = (i - (len(column) - 1) / 2) * gap

    for column in columns:
        place(column)
    for sweep in range(sweeps):
        for column in (columns if sweep % 2 == 0 else columns[::-1]):
            column.sort(key=lambda n: fmean([row[m] for m in neighbours(n) if m in row] or [row[n]]))
            place(column)
    return row


@lru_cache(maxsize=16)
def depths(nodes: tuple[str, ...], edges: tuple[tuple[str, str], ...]) -> dict[str, int]:
    """Longest path (in edges) from each node to an end node (one without dests). The nodes of a cycle (no valid
    trade network has one) share a depth: the cycle counts as one node."""
    dests: dict[str, list[str]] = {n: [] for n in nodes}
    for s, d in edges:
        dests.setdefault(s, []).append(d)
        dests.setdefault(d, [])
    component: dict[str, int] = {}
    deep: list[int] = []
    for i, members in enumerate(strong_components(dests)):  # each after every component it reaches
        component.update(dict.fromkeys(members, i))
        deep.append(max((deep[component[d]] + 1 for n in members for d in dests[n] if component[d] != i),
                        default=0))
    return {n: deep[component[n]] for n in dests}


def strong_components(dests: dict) -> list[list]:
    """The strongly connected components of the directed graph ``dests`` (node -> the nodes its edges go to, every
    node a key), each listed after every component it reaches: Tarjan's algorithm, with a stack of its own instead
    of recursion (a path may be thousands of nodes long)."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    found: list[list] = []
    for root in dests:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(dests[root]))]
        while work:
            node, ahead = work[-1]
            for child in ahead:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(dests[child])))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    members = []
                    while not members or members[-1] != node:
                        members.append(stack.pop())
                        on_stack.discard(members[-1])
                    found.append(members)
    return found


def neighbours(nodes, edges) -> dict:
    """Each of ``nodes``' neighbours along ``edges`` (tuples starting with their two ends, either way; each
    neighbour once; ends outside ``nodes`` left out)."""
    adjacent: dict = {n: {} for n in nodes}
    for s, d, *_ in edges:
        if s in adjacent and d in adjacent:
            adjacent[s][d] = adjacent[d][s] = None
    return {n: list(around) for n, around in adjacent.items()}


def layered_layout(nodes: list[str], edges: list[tuple[str, str]], depth: dict[str, int]) -> dict:
    """(x, y) of each of ``nodes``: x the rank of its depth among the shown nodes' (deepest on the left, empty
    columns dropped), y its row in the column, ordered by the barycentre heuristic over ``edges``."""
    levels = sorted({depth[n] for n in nodes}, reverse=True)
    x_of = {d: i for i, d in enumerate(levels)}
    columns: list[list[str]] = [[] for _ in levels]
    for n in nodes:
        columns[x_of[depth[n]]].append(n)
    row = order_columns(columns, neighbours(nodes, edges).__getitem__)
    return {n: (float(x), row[n]) for x, column in enumerate(columns) for n in column}


def upstream(sources: dict[str, list[str]], start: str, hops: int, limit: int) -> list[str]:
    """``start`` and the nodes flowing into it within ``hops`` edges, nearest first, at most ``limit``."""
    seen, queue = {start: 0}, deque([start])
    while queue and len(seen) < limit:
        n = queue.popleft()
        if seen[n] >= hops:
            continue
        for m in sources.get(n, ()):
            if m not in seen and len(seen) < limit:
                seen[m] = seen[n] + 1
                queue.append(m)
    return list(seen)


def path_to(dests: dict[str, list[str]], start: str, goal: set[str], limit: int = 12) -> list[str]:
    """The nodes of a shortest downstream path from ``start`` to any node of ``goal`` (both ends included), or
    ``[start]`` when none is within ``limit`` edges."""
    back, queue = {start: None}, deque([(start, 0)])
    while queue:
        n, k = queue.popleft()
        if n in goal and n != start:
            path = []
            while n is not None:
                path.append(n)
                n = back[n]
            return path[::-1]
        if k < limit:
            for m in dests.get(n, ()):
                if m not in back:
                    back[m] = n
                    queue.append((m, k + 1))
    return [start]


def neighbourhood(edges: list[tuple[str, str]], centres: list[str], also: list[str], hops: int,
                  limit: int) -> list[str]:
    """The nodes to show around ``centres``: each centre with its upstream nodes within ``hops`` (nearest first),
    its direct dests, and each of ``also`` with its shortest path down to what is shown (so the view stays one
    connected picture); about ``limit`` nodes at most (``centres`` and ``also`` always)."""
    sources: dict[str, list[str]] = {}
    dests: dict[str, list[str]] = {}
    for s, d in edges:
        sources.setdefault(d, []).append(s)
        dests.setdefault(s, []).append(d)
    shown: dict[str, None] = dict.fromkeys(centres)
    room = max(len(centres), limit - len(also))
    for c in centres:
        shown.update(dict.fromkeys(upstream(sources, c, hops, max(2, room // max(1, len(centres))))))
        shown.update(dict.fromkeys(dests.get(c, ())[:3]))
    for n in also:
        if n not in shown:
            path = path_to(dests, n, set(shown))
            shown.update(dict.fromkeys(path if len(shown) + len(path) <= limit + len(also) else [n]))
    return list(shown)
