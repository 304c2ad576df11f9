"""Section 9 (with --detections): the detector beside the players. The calls into
analysis.detect live here, as thin as the report had them."""

from __future__ import annotations

from analysis.sections import Context, Section


def run(ctx: Context) -> Section:
    if not ctx.settings.detections:
        return Section(summary={"detector": None})
    from analysis import detect

    detection = detect.compare(ctx.filtered, detect.read_detections(ctx.settings.detections))
    return Section(
        markdown=detect.markdown(detection),
        tables={
            "detector_vs_players": detection["table"],
            "detector_metrics": detection["metrics"],
        },
        figures=[detect.figure(ctx.out, detection["table"], detection["summary"])],
        summary={"detector": detection["summary"]},
    )
