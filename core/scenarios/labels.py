"""Node labels that never overlap: where each label of a plotly scatter figure lands on screen (its box in pixels,
from the point's position, the axis ranges, the figure's size, the font size and the text's length), and a pass
that places every label beside its node where it collides with no label placed before it (most important first)
or else hides it (its node's hover text still names it). Works on plain plotly figures; pure Python."""
from __future__ import annotations

import re
from dataclasses import dataclass

#: The width of a figure's plot on the pages at a 1440x900 screen with the sidebar open (wide layout).
VIEW_WIDTH = 940
CHAR_WIDTH = 0.58  # average glyph width of the figure font (Open Sans / Arial), in font sizes
BOLD_WIDTH = 0.64
LINE_HEIGHT = 1.25  # in font sizes
GAP = 2.0  # px between a label and its marker
POSITIONS = ("top center", "bottom center", "middle right", "middle left")
_TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class Box:
    left: float
    top: float
    right: float
    bottom: float

    def overlaps(self, other: Box) -> bool:
        return (self.left < other.right and other.left < self.right
                and self.top < other.bottom and other.top < self.bottom)


def text_size(text: str, size: float) -> tuple[float, float]:
    """Width and height (px) of a label: plotly's HTML tags stripped, ``<b>`` wider, ``<br>`` a new line."""
    lines = str(text).split("<br>")
    width = max(len(_TAG.sub("", line)) * (BOLD_WIDTH if "<b>" in line else CHAR_WIDTH) * size for line in lines)
    return width, len(lines) * LINE_HEIGHT * size


def _plot_size(fig, width: float) -> tuple[float, float]:
    m = fig.layout.margin
    return (width - (m.l if m.l is not None else 80) - (m.r if m.r is not None else 80),
            (fig.layout.height or 450) - (m.t if m.t is not None else 100) - (m.b if m.b is not None else 80))


def _offset(position: str, w: float, h: float, marker: float) -> tuple[float, float]:
    """The box's left-top corner relative to the point (px, y down) for a plotly ``textposition``."""
    vertical, _, horizontal = position.partition(" ")
    r = marker / 2 + GAP
    dx = {"left": -r - w, "center": -w / 2, "right": r}[horizontal]
    dy = {"top": -r - h, "middle": -h / 2, "bottom": r}[vertical]
    return dx, dy


def _each(values, n: int) -> list:
    """A per-point list of a trace attribute given as one value or as a list."""
    if values is None or isinstance(values, (str, int, float)):
        return [values] * n
    values = list(values)
    return values + [values[-1] if values else None] * (n - len(values))


@dataclass
class Label:
    trace: int
    point: int
    x: float
    y: float
    text: str
    size: float
    marker: float
    position: str

    def box(self, to_px, position: str | None = None) -> Box:
        w, h = text_size(self.text, self.size)
        px, py = to_px(self.x, self.y)
        dx, dy = _offset(position or self.position, w, h, self.marker)
        return Box(px + dx, py + dy, px + dx + w, py + dy + h)


def _markers(fig) -> dict[tuple[float, float], float]:
    """The biggest visible marker (px) drawn at each point of the figure: a node's own, a ring or a star over it
    (not the arrowheads on edges)."""
    size: dict[tuple[float, float], float] = {}
    for t in fig.data:
        if ("markers" not in (t.mode or "") or t.x is None or t.y is None or t.marker.opacity == 0
                or t.marker.symbol == "arrow"):
            continue
        line = t.marker.line.width if isinstance(t.marker.line.width, (int, float)) else 0
        for x, y, s in zip(t.x, t.y, _each(t.marker.size if t.marker.size is not None else 6, len(t.x))):
            if x is not None and y is not None:
                key = (float(x), float(y))
                size[key] = max(size.get(key, 0.0), float(s) + 2 * line)
    return size


def labels(fig) -> list[Label]:
    """Every non-empty label of the figure's scatter traces with text shown; each clears the biggest marker drawn
    at its point."""
    found = []
    marks = _markers(fig)
    for i, t in enumerate(fig.data):
        if t.type != "scatter" or "text" not in (t.mode or "") or t.text is None or t.x is None:
            continue
        n = len(t.x)
        texts, positions = _each(t.text, n), _each(t.textposition or "middle center", n)
        sizes = _each(t.textfont.size or fig.layout.font.size or 12, n)
        markers = _each(t.marker.size if "markers" in t.mode else 0, n) if "markers" in t.mode else [0] * n
        for j in range(n):
            if texts[j] and t.x[j] is not None and t.y[j] is not None:
                x, y = float(t.x[j]), float(t.y[j])
                marker = max(float(markers[j] or 0), marks.get((x, y), 0.0))
                found.append(Label(i, j, x, y, str(texts[j]), float(sizes[j] or 12), marker,
                                   positions[j] or "middle center"))
    return found


def _points(fig) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for t in fig.data if t.x is not None and t.y is not None and "marker" in dir(t)
            for x, y in zip(t.x, t.y) if x is not None and y is not None]


def transform(fig, width: float = VIEW_WIDTH):
    """Data -> screen px (origin at the plot area's top left, y down) for the figure's axis ranges (which must be
    set), and the plot area's size."""
    (x0, x1), (y0, y1) = fig.layout.xaxis.range, fig.layout.yaxis.range
    pw, ph = _plot_size(fig, width)

    def to_px(x, y):
        return (x - x0) / ((x1 - x0) or 1) * pw, (y1 - y) / ((y1 - y0) or 1) * ph
    return to_px, (pw, ph)


def fit_ranges(fig, width: float = VIEW_WIDTH, room: float = 10.0) -> None:
    """Set axis ranges that show every point with its label inside the plot (where not set already), keeping
    equal scales where the y axis is anchored to x."""
    points, found = _points(fig), labels(fig)
    if not points:
        return
    pw, ph = _plot_size(fig, width)
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    reach = {"l": room, "r": room, "t": room, "b": room}  # px beyond the extreme points
    for label in found:
        w, h = text_size(label.text, label.size)
        dx, dy = _offset(label.position, w, h, label.marker)
        reach["l"], reach["r"] = max(reach["l"], -dx), max(reach["r"], dx + w)
        reach["t"], reach["b"] = max(reach["t"], -dy), max(reach["b"], dy + h)
    reach["l"], reach["r"] = min(reach["l"], pw / 3), min(reach["r"], pw / 3)
    reach["t"], reach["b"] = min(reach["t"], ph / 3), min(reach["b"], ph / 3)

    def span(low, high, before, after, size):
        spread = (high - low) or 1.0
        scale = max(1e-9, size - before - after) / spread
        return [low - before / scale, high + after / scale]

    xr = span(min(xs), max(xs), reach["l"], reach["r"], pw)
    yr = span(min(ys), max(ys), reach["b"], reach["t"], ph)
    if fig.layout.yaxis.scaleanchor == "x":  # one unit the same length both ways: widen the roomier axis
        sx, sy = pw / (xr[1] - xr[0]), ph / (yr[1] - yr[0])
        if sx > sy:
            mid, half = sum(xr) / 2, pw / sy / 2
            xr = [mid - half, mid + half]
        else:
            mid, half = sum(yr) / 2, ph / sx / 2
            yr = [mid - half, mid + half]
        fig.layout.yaxis.scaleanchor = None
    if fig.layout.xaxis.range is None:
        fig.layout.xaxis.range = xr
    if fig.layout.yaxis.range is None:
        fig.layout.yaxis.range = yr


def visible(fig, width: float = VIEW_WIDTH) -> list[Label]:
    """The labels drawn inside the plot area at ``width``."""
    to_px, (pw, ph) = transform(fig, width)
    return [label for label in labels(fig) if 0 <= to_px(label.x, label.y)[0] <= pw
            and 0 <= to_px(label.x, label.y)[1] <= ph]


def overlapping(fig, width: float = VIEW_WIDTH) -> list[tuple[str, str]]:
    """Pairs of visible labels whose boxes overlap at ``width``."""
    to_px, _ = transform(fig, width)
    shown = [(label.text, label.box(to_px)) for label in visible(fig, width)]
    return [(a, c) for i, (a, b) in enumerate(shown) for c, d in shown[i + 1:] if b.overlaps(d)]


def declutter(fig, first=(), width: float = VIEW_WIDTH):
    """Place the labels of ``fig`` so that none overlaps another at ``width`` (those of the nodes in ``first`` first,
    then the biggest markers): each keeps its position if clear, else takes the first clear one of POSITIONS, else
    is hidden (its hover text remains). Sets the axis ranges when not set; returns the figure."""
    fit_ranges(fig, width)
    to_px, (pw, ph) = transform(fig, width)
    found = visible(fig, width)
    first = set(first)

    def rank(label):
        ids = fig.data[label.trace].customdata
        named = ids is not None and label.point < len(ids) and ids[label.point] in first
        return (not named, -label.marker)

    marks = []
    for (x, y), size in _markers(fig).items():
        px, py = to_px(x, y)
        if -size <= px <= pw + size and -size <= py <= ph + size:
            marks.append(Box(px - size / 2, py - size / 2, px + size / 2, py + size / 2))
    placed: list[Box] = []
    positions: dict[int, list] = {}
    texts: dict[int, list] = {}
    for label in sorted(found, key=rank):
        t = fig.data[label.trace]
        positions.setdefault(label.trace, _each(t.textposition or "middle center", len(t.x)))
        texts.setdefault(label.trace, _each(t.text, len(t.x)))
        tries = [(label.box(to_px, p), p) for p in dict.fromkeys((label.position, *POSITIONS))]
        clear = [(box, p) for box, p in tries if not any(box.overlaps(other) for other in placed)]
        best = next(((box, p) for box, p in clear if not any(box.overlaps(m) for m in marks)), None)
        if best or clear:
            box, position = best or clear[0]
            placed.append(box)
            positions[label.trace][label.point] = position
        else:
            texts[label.trace][label.point] = ""
    for i, p in positions.items():
        fig.data[i].textposition = p
        fig.data[i].text = texts[i]
    return fig
