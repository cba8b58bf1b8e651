"""One tuner session on a fresh sandbox with an emulated device, running a benchmark-only family (the truth
sweeps of benchmarks/devices.py and devices_2d.py) through the same runner as the shipped families: its journal,
its sandbox, its device stack and their teardown."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tuner.settings.config_load import load_config
from tuner.families import REGISTRY
from tuner.families.base import Family, FamilyResult, skipped
from tuner.families.concurrency import cold_probe  # the family's own probe, not a copy
from tuner.probes import workload
from tuner.probes.cache import CacheControl, choose_os_method
from tuner.report.model import Report
from tuner.settings.policy import Policy, load_policy

STATE_ROOT = "/var/lib/tuner-bench"
ROOT = Path(__file__).resolve().parent.parent


def load() -> float:
    """The machine's 1-minute load average (other engineers' tests share it): recorded with every result."""
    return round(os.getloadavg()[0], 2)


def state_dir(profile: str, part: str) -> str:
    """A journal of each profile's own, so profiles can be measured side by side: a journal admits one tuner at a
    time, and each of these sessions changes only its own sandbox (its loop device, its servers)."""
    path = Path(STATE_ROOT) / f"{profile.replace('=', '-').replace(',', '+')}.{part}"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return str(path)


def run_session(coro: Any) -> Report:
    """Run a session coroutine (``recommend(...)``) the way ``tuner recommend`` does: SIGTERM, Ctrl-C and SIGHUP
    cancel it, so its sandbox (servers, loop device, device profile) and its journaled changes are put back before
    the benchmark exits — a ``timeout`` or a ``kill`` of the benchmark must not leave a sandbox behind."""
    from tuner.session.stop import STOP

    async def guarded() -> Report:
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        assert task is not None

        def stop(signum: int) -> None:
            if not STOP.requested:  # only the first signal cancels: a second must not interrupt the clean-up
                task.cancel()
            STOP.request(signum)

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, stop, sig)
        return await coro

    STOP.reset()
    try:
        return asyncio.run(guarded())
    except asyncio.CancelledError:
        raise SystemExit(f"stopped by {signal.Signals(STOP.signal or signal.SIGTERM).name}; the sandbox was removed "
                         "and what the session changed was put back") from None


def in_sandbox(family: type[Family], profile: str, scale: int, part: str, *, pg_version: int | None = None,
               policy: Policy | None = None, seed: int | None = None) -> tuple[Report, dict[str, Any]]:
    """Run ``family`` (a class, registered for this call only) on a sandbox with ``profile``; the report and the
    run's wall time and load average before and after. ``policy``: the default one unless given; ``seed``: the
    session's (tuner.seed) unless None."""
    from tuner.session.runner import recommend  # heavy: the whole session machinery

    env = {"TUNER_SANDBOX__DEVICE": profile, "TUNER_SANDBOX__SCALE": str(scale),
           "TUNER_TUNER__STATE_DIR": state_dir(profile, part)}
    if pg_version is not None:
        env["TUNER_SANDBOX__PG_VERSION"] = str(pg_version)
    if seed is not None:
        env["TUNER_TUNER__SEED"] = str(seed)
    cfg = load_config(None, environ=env)
    policy = policy or load_policy("default")
    t0, load0 = time.monotonic(), load()
    REGISTRY.register(family)
    try:
        report = run_session(recommend(cfg, policy, use_sandbox=True, families=(family.name,), store=None,
                                       warm_start=False))
    finally:
        REGISTRY.unregister(family.name)
    return report, {"wall_s": round(time.monotonic() - t0, 1), "load": [load0, load()],
                    "server_version_num": report.target.server_version_num, "min_effect": policy.decision.min_effect}


def resume(path: Path, profile: str, params: dict[str, Any], what: str, sweep: Callable[[], dict[str, Any]],
           session: Callable[[int], dict[str, Any]], sessions: int, *, force: bool = False,
           parallel: int = 1, score_only: bool = False) -> dict[str, Any]:
    """One profile's measurements in ``path``, resumed: the sweep unless ``path`` holds one with ``params``, then
    each cold session missing (seeds 4600, 4601, …), ``parallel`` at a time (each on its own sandbox and journal),
    each written as soon as it finishes. ``params["scale"]`` is the profile's data scale."""
    measured = json.loads(path.read_text()) if path.exists() and not force else {}
    if score_only:  # what is there, measured as far as it got
        if "truth_sweep" not in measured:
            raise SystemExit(f"{profile}: nothing measured in {path}")
        return {**measured, "sessions": [s for s in measured["sessions"] if "error" not in s]}
    if measured.get("params") != params:
        print(f"{profile}: {what}", file=sys.stderr, flush=True)
        measured = {"profile": profile, "params": params, "truth_sweep": sweep(), "sessions": []}
        path.write_text(json.dumps(measured, indent=1) + "\n")
    done = {s["seed"] for s in measured["sessions"] if "error" not in s}
    measured["sessions"] = [s for s in measured["sessions"] if s["seed"] in done]  # a failed one runs again
    missing = [4600 + i for i in range(sessions) if 4600 + i not in done]
    print(f"{profile}: sessions {missing}", file=sys.stderr, flush=True)
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        for result in pool.map(session, missing):
            measured["sessions"].append(result)
            path.write_text(json.dumps(measured, indent=1) + "\n")
    return measured


def scored_profile(measured: dict[str, Any], scale: int,
                   score: Callable[[dict[str, list[float]], float, list[dict[str, Any]]], dict[str, Any]]) -> dict[str, Any]:
    """A profile's result for the tables: its scale, the sweep's load and wall time, and ``score``'s verdicts."""
    ts = measured["truth_sweep"]
    return {"scale": scale, "load": ts["load"], "wall_s": ts["wall_s"],
            **score(ts["samples"], ts["min_effect"], measured["sessions"])}


Row = tuple[str, Callable[[dict[str, Any]], str]]


def scored(r: dict[str, Any]) -> list[dict[str, Any]]:
    """A profile's sessions that ran and were scored."""
    return [s for s in r["sessions"] if "regret" in s]


def md_table(corner: str, results: dict[str, dict[str, Any]], rows: list[Row]) -> str:
    """Markdown: a column per profile, a row per figure; then every fixed rule's regret (hit), and every searching
    peer's mean regret (hit share) where the results carry them."""
    lines = [f"| {corner} | " + " | ".join(f"{p} (scale {r['scale']})" for p, r in results.items()) + " |",
             "|---|" + "---|" * len(results)]
    rules = [(n, lambda r, n=n: f"{r['rules'][n]['regret']:.1%} ({'hit' if r['rules'][n]['hit'] else 'miss'})")
             for n in next(iter(results.values()))["rules"]]
    peers = [(f"{n} ({r0['probes']} probes, {r0['runs']} replays)", lambda r, n=n: f"{r['peers'][n]['regret']:.1%} ({r['peers'][n]['hit']:.0%})")
             for n, r0 in (next(iter(results.values())).get("peers") or {}).items()]
    for name, f in [*rows,
                    ("tuner hits", lambda r: f"{sum(s['hit'] for s in scored(r))}/{len(scored(r))}"),
                    ("keep/change agrees", lambda r: f"{sum(s['decision_agrees'] for s in scored(r))}/{len(scored(r))}"),
                    ("tuner probes, wall", lambda r: "; ".join(f"{s['probes']} in {s['wall_s']:.0f} s"
                                                               for s in scored(r)) or "—"),
                    ("sweep: probes, wall", lambda r: f"{sum(c['n'] for c in r['truth']['cells'].values())} in "
                                                      f"{r['wall_s']:.0f} s"), *rules, *peers]:
        lines.append(f"| {name} | " + " | ".join(f(r) for r in results.values()) + " |")
    return "\n".join(lines) + "\n"


def recommend_json(args: list[str], seed: int, state: str | None = None, *,
                   store: bool = False) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """``tuner recommend --sandbox ARGS --seed SEED --format json --no-store`` in a subprocess with a clean
    environment (and its own journal in ``state``): the report (None when it failed) and the run's seed, wall time
    and load average before and after, or its error. ``store``: keep the session in ``state``'s store (and
    warm-start from what it holds) instead of ``--no-store``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "TUNER_"))}
    if state is not None:
        env["TUNER_TUNER__STATE_DIR"] = state
    t0, load0 = time.monotonic(), load()
    proc = subprocess.run([sys.executable, "-m", "tuner", "recommend", "--sandbox", *args, "--seed", str(seed),
                           "--format", "json", *(() if store else ("--no-store",))],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=7200)
    if proc.returncode != 0:
        return None, {"seed": seed, "error": f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"}
    return json.loads(proc.stdout), {"seed": seed, "wall_s": round(time.monotonic() - t0, 1), "load": [load0, load()]}


async def eic_sweep_probe(ctx: Any, name: str) -> tuple[Any, list[Any], Any] | FamilyResult:
    """The concurrency family's own cold probe on its own workload, as the eic truths sweep it (PostgreSQL < 17):
    ``(probe, queries, cache)``, or the skipped result on 17+ (its path adds a sequential scan)."""
    facts = ctx.facts
    if facts.server_version_num >= 170000:
        return skipped(name, "the sweep follows the concurrency family's path for PostgreSQL < 17 only")
    local = facts.local_data_directory()
    async with ctx.connection() as conn:
        queries = await workload.plan(conn, custom=ctx.cfg.workload.queries, relations=ctx.cfg.workload.relations,
                                      pages_fraction=ctx.cfg.workload.pages_fraction)
        files = [f for q in queries if q.relation and local
                 for f in await workload.relation_files(conn, local, q.relation)]
    cache = await CacheControl.plan(facts, [q.relation for q in queries], connector=ctx.target.connect,
                                    restart=ctx.target.restart, os_method=choose_os_method(local, files), files=files)
    return cold_probe(ctx, queries, cache), queries, cache
