"""The same answer when nothing changed (issue #53): repeat sessions with one store against one unchanged standby.

    sudo python benchmarks/stability.py [--sessions 5] [--scale 10] [--device PROFILE]
                                        [--json benchmarks/measured/stability/local.json]

Starts one sandbox (a primary and its hot standby, on a loop device of its own) and keeps it; then runs
``--sessions`` sessions of the read path (readahead and concurrency) against its standby, one after another, each
through the same flow as ``tuner recommend`` (:func:`tuner.session.stored.run_stored`: the store's accepted set
reaches the plateau rule, the report is saved). Nothing is applied between sessions (the journal puts the device back
at the end of each), so the standby is the same one every time: what changes is noise.

Reported per session: each knob's current and recommended value, decision, near-optimal range and interval, the
probes and wall time, and what is in force (the store's accepted set) after it; in total, how often the accepted
value of each knob changed (target: at most once — the first acceptance — for effective_io_concurrency), with the
machine's 1-minute load around every session.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.devices_run import load, run_session  # noqa: E402
from tuner.settings.config_load import load_config  # noqa: E402
from tuner.core.progress import NullProgress  # noqa: E402
from tuner.settings.policy import load_policy  # noqa: E402
from tuner.report.validate import check  # noqa: E402
from tuner.store import open_store, target_id  # noqa: E402
from tuner.session.stored import run_stored  # noqa: E402
from tuner.target.server import servers  # noqa: E402

FAMILIES = ("readahead", "concurrency")


def summary(report: Any) -> dict[str, Any]:
    """What this benchmark compares of one report."""
    recs = {}
    for r in report.recommendations:
        key = r.knob + (f" ({r.object})" if r.object else "")
        recs[key] = {"current": r.current, "recommended": r.recommended, "decision": r.decision,
                     "near_optimal": None if r.near_optimal is None else list(r.near_optimal),
                     "improvement": None if r.effect is None else r.effect.improvement,
                     "ci95": None if r.effect is None else list(r.effect.ci95), "reason": r.reason}
    return {"id": report.session.id, "probes": report.session.probes, "duration_s": report.session.duration_s,
            "recommendations": recs}


async def sessions(n: int, *, scale: int, device: str | None, state: str) -> dict[str, Any]:
    env = {"TUNER_TUNER__STATE_DIR": state, "TUNER_SANDBOX__SCALE": str(scale)}
    if device:
        env["TUNER_SANDBOX__DEVICE"] = device
    cfg = load_config(None, environ=env)
    policy = load_policy("default")
    out: list[dict[str, Any]] = []
    async with servers(cfg, use_sandbox=True, progress=NullProgress(), writable=False) as where:
        for i in range(n):
            before, t0 = load(), time.monotonic()
            stored = await run_stored(cfg, policy, use_sandbox=True, families=FAMILIES, where=where)
            report = stored.report
            async with open_store(cfg, check=check) as db:
                assert db is not None
                fp = report.target.fingerprint or {}
                tid = target_id(report.target.system_identifier, fp.get("data_directory"), fp.get("label", ""))
                accepted = {r.knob + (f" ({r.object})" if r.object else ""): r.recommended
                            for _, r in await db.accepted.find(tid)}
            row = {**summary(report), "accepted_after": accepted, "wall_s": round(time.monotonic() - t0, 1),
                   "load": [before, load()], "stored": stored.stored}
            print(json.dumps({"session": i + 1, **{k: row[k] for k in ("probes", "wall_s", "accepted_after")}}),
                  file=sys.stderr, flush=True)
            out.append(row)
    changes: dict[str, int] = {}
    last: dict[str, Any] = {}
    for row in out:
        for knob, value in row["accepted_after"].items():
            if knob.startswith("read_ahead_kb"):
                knob = "read_ahead_kb"  # one sandbox device per run: the same disk under its loop name
            if last.get(knob) != value:
                changes[knob] = changes.get(knob, 0) + 1
            last[knob] = value
        for knob in [k for k in last if not any(a.startswith(k) for a in row["accepted_after"])]:
            changes[knob] = changes.get(knob, 0) + 1  # withdrawn
            last.pop(knob)
    return {"params": {"sessions": n, "scale": scale, "device": device or "local", "families": list(FAMILIES)},
            "sessions": out, "accepted_changes": changes,
            "target": "the accepted effective_io_concurrency changes at most once"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=5)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--device", default=None, help="an emulated device profile (docs/devices.md); default: local")
    ap.add_argument("--json", type=Path, default=None, help="write the result here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tuner-stability-") as state:
        os.chmod(state, 0o700)
        result = run_session(sessions(args.sessions, scale=args.scale, device=args.device, state=state))
    text = json.dumps(result, indent=1, default=str)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    print(json.dumps({"accepted_changes": result["accepted_changes"],
                      "accepted": [s["accepted_after"] for s in result["sessions"]]}, indent=1))


if __name__ == "__main__":
    main()
