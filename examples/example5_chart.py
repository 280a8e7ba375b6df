"""Example 5's chart: each priority's request latency CDF, one panel per run (the baseline and
each Phase 2 level), side by side on one shared logarithmic latency axis so that the panels
compare at a glance. Plain SVG, written by hand: the example needs nothing beyond the package."""

import math
from xml.sax.saxutils import escape

COLORS = {"high": "#c0392b", "normal": "#e67e22", "low": "#2471a3"}
PANEL_W, PANEL_H, MARGIN_L, MARGIN_T, MARGIN_B, GAP = 300, 220, 52, 56, 64, 24


def _ticks(lo, hi):
    """1-2-5 ticks between lo and hi (ms)."""
    out = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10 ** e
            if lo <= v <= hi:
                out.append(v)
    return out


def _label(v):
    return f"{v:g}" if v >= 1 else f"{v:.2g}"


def write_svg(path, panels, names, title):
    """`panels`: (title, run) pairs, each run with `latencies_ms` per name in `names`."""
    every = [x for _, run in panels for n in names for x in run["latencies_ms"].get(n, []) if x > 0]
    lo = 10 ** math.floor(math.log10(min(every))) if every else 0.1
    hi = 10 ** math.ceil(math.log10(max(every))) if every else 10.0
    if hi <= lo:
        hi = lo * 10

    def x_of(v):
        return MARGIN_L + PANEL_W * (math.log10(max(v, lo)) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    width = MARGIN_L + len(panels) * (PANEL_W + GAP) + 20
    height = MARGIN_T + PANEL_H + MARGIN_B
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{MARGIN_L}" y="20" font-size="13">{escape(title)}</text>']
    for i, (name, run) in enumerate(panels):
        dx = i * (PANEL_W + GAP)
        out.append(f'<g transform="translate({dx},0)">')
        out.append(f'<text x="{MARGIN_L}" y="{MARGIN_T - 8}">{escape(name)}</text>')
        out.append(f'<rect x="{MARGIN_L}" y="{MARGIN_T}" width="{PANEL_W}" height="{PANEL_H}" '
                   f'fill="none" stroke="#444"/>')
        for q in (0.5, 0.99):
            y = MARGIN_T + PANEL_H * (1 - q)
            out.append(f'<line x1="{MARGIN_L}" x2="{MARGIN_L + PANEL_W}" y1="{y:.1f}" y2="{y:.1f}" '
                       f'stroke="#ccc" stroke-dasharray="3,3"/>')
            if i == 0:
                out.append(f'<text x="{MARGIN_L - 6}" y="{y + 4:.1f}" text-anchor="end">P{q * 100:g}</text>')
        for t in _ticks(lo, hi):
            x = x_of(t)
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{MARGIN_T + PANEL_H}" y2="{MARGIN_T + PANEL_H + 4}" '
                       f'stroke="#444"/>')
            out.append(f'<text x="{x:.1f}" y="{MARGIN_T + PANEL_H + 16}" text-anchor="middle">{_label(t)}</text>')
        out.append(f'<text x="{MARGIN_L + PANEL_W / 2}" y="{MARGIN_T + PANEL_H + 32}" text-anchor="middle">'
                   f'request latency (ms, log scale)</text>')
        for n in names:
            xs = sorted(run["latencies_ms"].get(n, []))
            if not xs:
                continue
            pts = [(x_of(xs[0]), MARGIN_T + PANEL_H)]
            for k, v in enumerate(xs):
                y = MARGIN_T + PANEL_H * (1 - (k + 1) / len(xs))
                pts.append((x_of(v), pts[-1][1]))
                pts.append((x_of(v), y))
            d = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
            out.append(f'<polyline points="{d}" fill="none" stroke="{COLORS.get(n, "#000")}" stroke-width="1.6"/>')
        out.append("</g>")
    for k, n in enumerate(names):
        x = MARGIN_L + k * 90
        y = height - 14
        out.append(f'<line x1="{x}" x2="{x + 18}" y1="{y - 4}" y2="{y - 4}" stroke="{COLORS.get(n, "#000")}" '
                   f'stroke-width="2"/>')
        out.append(f'<text x="{x + 22}" y="{y}">{escape(n)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
