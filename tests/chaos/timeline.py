"""An HTML page with an inline SVG timeline of a chaos run (no plotting dependency).

Top: acknowledged writes per second (green) and failed writes plus client errors per
second (red), over the run; every fault window shaded (injection to heal darker, heal to
recovery lighter) and labelled with its nemesis. Below: the verdict, the per-nemesis table
and the anomaly counts.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

from tests.chaos.checker import Report
from tests.chaos.history import History

WIDTH = 1100
PLOT_HEIGHT = 260
LEFT = 60
RIGHT = 20
TOP = 40
LANE = 16


def _polyline(values: list[float], scale_x: float, scale_y: float, colour: str) -> str:
    """Square-root vertical scale: the bursts after a heal do not flatten the steady rate."""
    points = " ".join(
        f"{LEFT + (i + 0.5) * scale_x:.1f},{TOP + PLOT_HEIGHT - math.sqrt(v) * scale_y:.1f}"
        for i, v in enumerate(values)
    )
    return f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}"/>'


def render_svg(history: History, report: Report) -> str:
    acked = report.timeline.get("acked", [])
    failed = report.timeline.get("failed", [])
    errors = report.timeline.get("errors", [])
    bucket_s = (report.timeline.get("bucket_s") or [1.0])[0]
    buckets = max(1, len(acked))
    troubles = [f + e for f, e in zip(failed, errors, strict=False)]
    peak = max([1.0, *acked, *troubles])
    plot_width = WIDTH - LEFT - RIGHT
    scale_x = plot_width / buckets
    scale_y = PLOT_HEIGHT / math.sqrt(peak)
    seconds_x = plot_width / max(history.duration, bucket_s)
    faults = sorted(history.faults, key=lambda f: f.start)
    height = TOP + PLOT_HEIGHT + 40 + LANE * max(1, len(faults))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_width}" height="{PLOT_HEIGHT}" '
        'fill="#fafafa" stroke="#999"/>',
    ]
    for index, fault in enumerate(faults):
        x0 = LEFT + fault.start * seconds_x
        heal = fault.heal if fault.heal is not None else history.duration
        end = fault.end if fault.end is not None else heal
        x1 = LEFT + heal * seconds_x
        x2 = LEFT + max(end, heal) * seconds_x
        title = html.escape(f"{fault.nemesis}: {fault.detail}")
        parts.append(
            f'<rect x="{x0:.1f}" y="{TOP}" width="{max(1.0, x1 - x0):.1f}" '
            f'height="{PLOT_HEIGHT}" fill="#f4a261" fill-opacity="0.35"><title>{title}'
            "</title></rect>"
        )
        if x2 > x1:
            parts.append(
                f'<rect x="{x1:.1f}" y="{TOP}" width="{x2 - x1:.1f}" height="{PLOT_HEIGHT}" '
                'fill="#e9c46a" fill-opacity="0.25"/>'
            )
        lane_y = TOP + PLOT_HEIGHT + 30 + index * LANE
        parts.append(
            f'<rect x="{x0:.1f}" y="{lane_y - 10}" width="{max(2.0, x2 - x0):.1f}" '
            f'height="12" fill="#f4a261"/>'
            + (
                f'<text x="{x0 + 3:.1f}" y="{lane_y}">{title}</text>'
                if x0 < LEFT + plot_width * 0.55
                else f'<text x="{x2 - 3:.1f}" y="{lane_y}" text-anchor="end">{title}</text>'
            )
        )
    parts.append(_polyline(acked, scale_x, scale_y, "#2a9d8f"))
    parts.append(_polyline(troubles, scale_x, scale_y, "#e63946"))
    step = max(5, int(history.duration / 20 / 5 + 1) * 5)
    for second in range(0, int(history.duration) + 1, step):
        x = LEFT + second * seconds_x
        parts.append(
            f'<line x1="{x:.1f}" y1="{TOP + PLOT_HEIGHT}" x2="{x:.1f}" '
            f'y2="{TOP + PLOT_HEIGHT + 4}" stroke="#333"/>'
            f'<text x="{x:.1f}" y="{TOP + PLOT_HEIGHT + 16}" text-anchor="middle">{second}s</text>'
        )
    parts.append(
        f'<text x="{LEFT}" y="{TOP - 8}">per {bucket_s:g} s: '
        f'<tspan fill="#2a9d8f">acknowledged writes</tspan> (peak {max([0.0, *acked]):g}), '
        f'<tspan fill="#e63946">failed writes + client errors</tspan> (square-root scale); '
        "shaded: fault injected to healed (dark), healed to recovered (light)</text>"
    )
    parts.append(f'<text x="4" y="{TOP + 10}">{peak:g}</text>')
    parts.append(f'<text x="4" y="{TOP + PLOT_HEIGHT - PLOT_HEIGHT / 2}">{peak / 4:g}</text>')
    parts.append(f'<text x="4" y="{TOP + PLOT_HEIGHT}">0</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def render_html(history: History, report: Report) -> str:
    rows = []
    for name, row in sorted(report.per_nemesis.items()):
        anomalies = sum(row["anomalies"].values())
        rows.append(
            f"<tr><td>{html.escape(name)}</td><td>{row['faults']}</td><td>{row['acked']}</td>"
            f"<td>{anomalies}</td><td>{row['worst_after_fault_s']}</td>"
            f"<td>{row['worst_after_heal_s']}</td><td>{row.get('worst_stall_s')}</td>"
            f"<td>{row['unrecovered']}</td></tr>"
        )
    skipped = "".join(
        f"<li>{html.escape(k)}: {html.escape(v)}</li>" for k, v in sorted(report.skipped.items())
    )
    counts = ", ".join(f"{k}: {v}" for k, v in report.anomaly_counts().items())
    colour = "#2a9d8f" if report.valid else "#e63946"
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>chaos run</title>"
        "<style>body{font-family:sans-serif;margin:20px}td,th{border:1px solid #ccc;"
        "padding:2px 8px}table{border-collapse:collapse}</style></head><body>"
        f"<h2 style='color:{colour}'>{html.escape(report.verdict)}</h2>"
        f"<p>seed {report.seed}; duration {history.duration:.0f} s; topic "
        f"{html.escape(history.topic)} ({history.partitions} partitions)</p>"
        f"{render_svg(history, report)}"
        "<h3>Per nemesis</h3><table><tr><th>nemesis</th><th>faults</th><th>acked during</th>"
        "<th>anomalies</th><th>worst unavailability after fault (s)</th>"
        "<th>after heal (s)</th><th>longest stall (s)</th><th>unrecovered</th></tr>"
        + "".join(rows)
        + "</table>"
        + f"<h3>Anomalies</h3><p>{html.escape(counts)}</p>"
        + (f"<h3>Skipped nemeses</h3><ul>{skipped}</ul>" if skipped else "")
        + "</body></html>"
    )


def write_html(path: Path, history: History, report: Report) -> None:
    path.write_text(render_html(history, report))


def markdown_table(report: Report) -> str:
    """The per-nemesis results as a Markdown table (docs/reliability.md's layout)."""
    lines = [
        "| nemesis | faults | writes acked during | lost | duplicates (idempotent) | "
        "inconsistent offsets | non-monotonic polls | skips | other anomalies | "
        "worst unavailability after fault (s) | after heal (s) | longest stall (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    named = ("lost", "duplicates_idempotent", "inconsistent_offsets", "nonmonotonic_polls",
             "skips")  # fmt: skip
    for name, row in sorted(report.per_nemesis.items()):
        anomalies = row["anomalies"]
        other = sum(v for k, v in anomalies.items() if k not in named)
        cells = [name, row["faults"], row["acked"], *(anomalies.get(k, 0) for k in named), other,
                 row["worst_after_fault_s"], row["worst_after_heal_s"],
                 row.get("worst_stall_s")]  # fmt: skip
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"
