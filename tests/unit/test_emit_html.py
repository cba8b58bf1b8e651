"""The HTML report (issue #36): self-contained, every measurement drawn, outside text escaped, and it renders
for a full sandbox session, a keep-only one, an empty one and one with stored history."""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import ClassVar

import pytest

from tuner import emit
from tuner.emit import evidence, svg
from tuner.emit import html as h
from tuner.emit.json import parse
from tuner.families import REGISTRY
from tuner.families.base import Family, FamilyContext, FamilyResult, Needs, objective_unit
from tuner.families.readahead_sections import DeviceOut
from tuner.families.wal_sections import WalContentionOut, WalScalingOut
from tuner.families.wal_sections import Report as WalSection
from tuner.report.model import (
    CacheEvidence,
    EffectOut,
    FamilyOutcome,
    Recommendation,
    Report,
    SessionOut,
    TargetOut,
    Trial,
)
from tuner.store import SessionSummary

FIXTURE = Path(__file__).parent.parent / "fixtures" / "reports" / "sandbox-all-families.json"
T0 = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)
HOSTILE = '<script>alert("x")</script>\'\n"><img src=x onerror=alert(1)>\u202e'
VOID = {"meta", "br", "hr", "img", "input", "link", "area", "base", "col", "embed", "source", "track", "wbr"}


class Checked(HTMLParser):
    """Parses the page and insists on what a browser would forgive: every element closed, in order; collects the
    tags, attributes and text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.doctype = False

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl.lower() == "doctype html"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def checked(page: str) -> Checked:
    p = Checked()
    p.feed(page)
    p.close()
    assert p.doctype and not p.stack, f"unclosed: {p.stack}"
    ids = [a["id"] for _, a in p.tags if a.get("id")]
    assert len(ids) == len(set(ids)), "duplicate ids"
    return p


def svgs(page: str, kind: str | None = None) -> list[str]:
    found = re.findall(r"<svg\b.*?</svg>", page, flags=re.S)
    return [s for s in found if kind is None or f'data-figure="{kind}"' in s]


def section(page: str, ident: str) -> str:
    m = re.search(rf'<section id="{ident}">(.*?)</section>', page, flags=re.S)
    assert m, f"no section {ident}"
    return m.group(1)


@pytest.fixture(scope="module")
def sandbox() -> Report:
    return parse(FIXTURE.read_text())


@pytest.fixture(scope="module")
def page(sandbox: Report) -> str:
    return h.to_html(sandbox)


# ---- the format is wired in ----------------------------------------------------------------------------------

def test_html_is_a_format_for_stdout_and_a_file(sandbox: Report, tmp_path: Path) -> None:
    assert "html" in emit.FORMATS and emit.EMITTERS["html"].stdout
    assert getattr(type(emit.EMITTERS["html"]), "wants_history", False)
    assert emit.text(sandbox, "html").startswith("<!DOCTYPE html>")
    written = emit.write_outputs(sandbox, tmp_path)
    assert tmp_path / "report.html" in written
    assert (tmp_path / "report.html").read_text(encoding="utf-8") == h.to_html(sandbox)


def test_the_fixture_is_a_whole_session_of_every_family(sandbox: Report) -> None:
    assert {f.family for f in sandbox.families} == {"readahead", "concurrency", "wal"}
    wal = WalSection.of(sandbox, "wal")
    assert sandbox.section("readahead") and wal.wal_scaling and wal.wal_contention
    assert {t.phase for t in sandbox.trials} == {"search", "confirm"}


# ---- self-contained and well-formed ---------------------------------------------------------------------------

def test_the_page_is_self_contained(page: str) -> None:
    p = checked(page)
    low = page.lower()
    assert "<script" not in low and "@import" not in low and "<link" not in low and "<iframe" not in low
    assert not re.search(r"url\((?!\s*['\"]?data:)", low)
    for tag, attrs in p.tags:
        assert "src" not in attrs, tag
        for key in ("href", "xlink:href", "action", "data", "poster"):
            value = attrs.get(key)
            assert value is None or value.startswith("#"), f"<{tag} {key}={value}>"
    assert not re.search(r"https?://", page), "nothing may point outside the page"


def test_rendering_is_deterministic(sandbox: Report, page: str) -> None:
    assert h.to_html(sandbox) == page


def test_every_section_has_its_figures(page: str) -> None:
    for ident in ("search", "confirmation", "devices", "wal"):
        assert "<svg" in section(page, ident), ident
    for s in svgs(page):
        assert re.search(r'role="img" aria-labelledby="fig\d+-t', s) and "<title id=" in s
        assert "<path d=\"M0" not in s  # text is text: no glyph outlines
    assert "<text" in page and "viewBox" in page


def test_every_trial_is_a_point(sandbox: Report, page: str) -> None:
    # The fixture predates the scaling phase: its 10 WAL scaling runs are stored as search trials and are read
    # as scaling runs (tuner/families/wal_legacy.py), drawn in the WAL section, not among the search probes.
    search = [t for t in sandbox.trials if t.phase == "search"][:-10]
    assert {(t.family, t.metrics["clients"]) for t in sandbox.trials[-10:]} == {("wal", c) for c in (1, 2, 4, 8, 16)}
    confirm = [t for t in sandbox.trials if t.phase == "confirm"]
    # the search figures: one point per search probe
    drawn = sum(s.count('class="pt search"') for s in svgs(page, "search"))
    assert drawn == len(search) == 51
    # the confirmation figures: one point per confirmation trial, and one ratio per pair
    figures = svgs(page, "confirmation")
    assert len(figures) == 5
    assert sum(s.count('class="pt confirm"') for s in figures) == len(confirm) == 140
    assert sum(s.count('class="pair"') for s in figures) == sum(len(c.pairs) for c in evidence.confirmations(sandbox.trials))
    # the confirmation trials of a one-knob search are drawn there too (concurrency: 12)
    one_knob = [s for s in svgs(page, "search") if "effective_io_concurrency: every probe" in s]
    assert len(one_knob) == 1 and one_knob[0].count('class="pt confirm"') == 12
    assert one_knob[0].count('class="pt search"') == 11
    # one interval per recommendation with an effect
    (effects,) = svgs(page, "effects")
    assert effects.count('class="effect"') == sum(1 for r in sandbox.recommendations if r.effect)


def test_pairs_are_rebuilt_as_the_test_formed_them(sandbox: Report) -> None:
    confs = evidence.confirmations(sandbox.trials)
    evidence.attach(sandbox.recommendations, confs)
    for r in sandbox.recommendations:
        assert r.effect is not None
        (c,) = [c for c in confs if r in c.recs]
        assert len(c.pairs) == r.effect.n_pairs
        assert c.improvement == pytest.approx(r.effect.improvement, rel=1e-3)
        for b, k in c.pairs:
            assert (b.arm, k.arm) == ("baseline", "candidate")


def test_the_figures_mark_today_the_recommendation_and_the_minimum_effect(page: str) -> None:
    (eic,) = [s for s in svgs(page, "search") if "effective_io_concurrency: every probe" in s]
    assert "today 1" in eic and "recommended 128" in eic and 'class="near-optimal"' in eic
    assert "log scale, 0 set apart" in eic
    joint = [s for s in svgs(page, "search") if "read_ahead_kb × effective_io_concurrency" in s]
    assert joint and "today (2560, 1)" in joint[0] and "candidate (512, 1)" in joint[0]
    for s in svgs(page, "confirmation") + svgs(page, "effects"):
        assert 'class="min-effect"' in s and "minimum effect 1.05×" in s
    assert "measurements" in section(page, "search")  # the caption says what the points are
    assert "Change 1 setting: effective_io_concurrency 1 → 128; keep 5." in page
    assert "2.94× faster (95 % CI 1.96–4.40× over 6 pairs)" in page


def test_the_wal_figures_stack_every_share(sandbox: Report, page: str) -> None:
    (contention,) = svgs(page, "wal-contention")
    wal = WalSection.of(sandbox, "wal")
    shares = sum(1 for c in wal.wal_contention for v in (c.wal_insert_wait_share, c.wal_write_wait_share,
                 c.wal_sync_wait_share, c.wal_buf_mapping_wait_share) if v)
    rest = sum(1 for c in wal.wal_contention
               if sum(v or 0 for v in (c.wal_insert_wait_share, c.wal_write_wait_share, c.wal_sync_wait_share,
                                       c.wal_buf_mapping_wait_share)) < 1)
    assert contention.count('class="seg"') == shares + rest
    (scaling,) = svgs(page, "wal-scaling")
    assert scaling.count('class="pt wal"') == sum(1 for s in wal.wal_scaling for v in
                                                  (s.tps_current, s.tps_recommended) if v is not None)
    (devices,) = svgs(page, "devices")
    assert devices.count('class="bar"') == 3 and "3755 MB/s" in devices


# ---- synthetic reports -----------------------------------------------------------------------------------------

def _effect(improvement: float, lo: float, hi: float, n: int = 6) -> EffectOut:
    return EffectOut(metric="execution_time_ms", improvement=improvement, ci95=(lo, hi), decision_ci=(lo, hi),
                     n_pairs=n, p_value=0.01, looks=1, method="t")


def _trial(cfg: dict[str, int | str], value: float | None, *, phase: str = "search", arm: str | None = None,
           status: str = "ok", family: str = "concurrency", obj: str | None = None, reason: str | None = None,
           i: int = 0) -> Trial:
    return Trial(config=cfg, value=value if status == "ok" else None, status=status, phase=phase,  # type: ignore[arg-type]
                 arm=arm, family=family, object=obj, reason=reason,  # type: ignore[arg-type]
                 started_at=T0 + timedelta(seconds=i), duration_s=1.0,
                 cache=CacheEvidence(shared_read=1, shared_hit=0, heap_read=1, heap_hit=0, io_read_time_ms=None,
                                     method="drop_caches"))


def _abba(base: dict[str, int | str], cand: dict[str, int | str], times: list[tuple[float, float]], **kw: object) -> list[Trial]:
    """Confirmation trials in ABBA / BAAB order for pairs of (baseline, candidate) times."""
    out: list[Trial] = []
    for n, (b, c) in enumerate(times):
        order = [("baseline", b), ("candidate", c)] if (n // 2 + n) % 2 == 0 else [("candidate", c), ("baseline", b)]
        for arm, v in order:
            out.append(_trial(base if arm == "baseline" else cand, v, phase="confirm", arm=arm, **kw))  # type: ignore[arg-type]
    return out


def _report(recs: list[Recommendation], trials: list[Trial], **kw: object) -> Report:
    fields: dict[str, object] = dict(
        target=TargetOut(server_version_num=150018, server_version="15.18", in_recovery=True, system_identifier="7",
                         mode="hot_standby", dsn="sandbox (removed)", sandbox=True),
        session=SessionOut(id="abc123def456", started_at=T0, duration_s=42.0, probes=len(trials), policy="default",
                           seed=1, cache="cold", host="staging1", kernel="6.18"),
        families=[FamilyOutcome(family="concurrency", status="done", reason="ok")],
        recommendations=recs, trials=trials,
    )
    return Report.model_validate(fields | kw)


def _keep_report() -> Report:
    search = [_trial({"effective_io_concurrency": v}, t, i=i) for i, (v, t) in enumerate(
        [(0, 120.0), (4, 100.0), (16, 98.0), (64, 97.0), (256, 99.0)])]
    search.append(_trial({"effective_io_concurrency": 1000}, None, status="failed", reason="statement timeout"))
    search.append(_trial({"effective_io_concurrency": 32}, None, status="rejected", reason="cache not cold"))
    confirm = _abba({"effective_io_concurrency": 1}, {"effective_io_concurrency": 64},
                    [(100.0, 99.0), (101.0, 100.0), (99.0, 98.5), (100.0, 99.5), (98.0, 98.0), (100.0, 99.0)])
    rec = Recommendation(knob="effective_io_concurrency", scope="system", object=None, current=1, recommended=64,
                         near_optimal=(16, 256), decision="keep", requires="reload", effect=_effect(1.007, 0.99, 1.02),
                         reason="the whole confidence interval lies below the minimum effect 1.1x")
    return _report([rec], search + confirm)


def test_a_keep_only_report_says_keep_what_you_have() -> None:
    page = h.to_html(_keep_report())
    checked(page)
    assert 'class="verdict keep">Keep what you have' in page
    assert "CHANGE" not in section(page, "recommendations")
    # the policy's own minimum effect, as the reason states it
    (eff,) = svgs(page, "effects")
    assert "minimum effect 1.1×" in eff and "minimum effect 1.05" not in eff


def test_failed_and_rejected_probes_are_marked() -> None:
    page = h.to_html(_keep_report())
    (fig,) = svgs(page, "search")
    assert fig.count('class="pt search"') == 7
    assert fig.count('data-status="failed"') == 1 and fig.count('data-status="rejected"') == 1
    assert "failed (no value)" in fig and "rejected (cache not cold)" in fig and "no value" in fig
    assert "statement timeout" in fig  # the reason is in the point's tooltip


def test_an_empty_report_renders() -> None:
    report = _report([], [], families=[FamilyOutcome(family="concurrency", status="failed", reason="no server")])
    page = h.to_html(report)
    p = checked(page)
    assert "No recommendation: nothing could be measured" in page and "no server" in page
    assert not svgs(page)
    assert "No search probe ran" in "".join(p.text)
    h.to_html(report, history=[])  # and with an empty history


def test_a_joint_search_is_a_scatter_with_values_as_colour_and_text() -> None:
    grid = [(ra, eic) for ra in (0, 128, 512, 2048) for eic in (0, 32, 256)]
    search = [_trial({"read_ahead_kb": ra, "effective_io_concurrency": eic}, 50.0 + ra / 100 + eic / 10,
                     family="readahead", obj="data directory", i=i) for i, (ra, eic) in enumerate(grid)]
    search.append(search[4].model_copy())  # a configuration measured twice
    confirm = _abba({"read_ahead_kb": 2048, "effective_io_concurrency": 1},
                    {"read_ahead_kb": 512, "effective_io_concurrency": 1},
                    [(60.0, 50.0)] * 3 + [(61.0, 50.0)] * 3, family="readahead", obj="data directory")
    rec = Recommendation(knob="read_ahead_kb", scope="device", object="/dev/sdb", current=2048, recommended=512,
                         near_optimal=(256, 1024), decision="change", requires="reopen", run_on="host",
                         effect=_effect(1.2, 1.15, 1.25), reason="the whole confidence interval lies above the minimum effect 1.05x")
    dev = DeviceOut(device="/dev/sdb", description="disk", roles=["data directory"], read_ahead_kb=2048,
                    status="probed", reason="ok", raw_read_mb_s=900.0, seq_scan_mb_s_current=600.0,
                    seq_scan_mb_s_recommended=800.0, efficiency_current=0.67, efficiency_recommended=0.89)
    page = h.to_html(_report([rec], search + confirm, devices=[dev]))
    checked(page)
    (fig,) = svgs(page, "search")
    assert fig.count('class="pt search"') == len(search)
    assert "(median of 2)" in fig and "fastest" in fig and "recommended (512, 1)" in fig and "today (2048, 1)" in fig
    assert "both axes log scale" in fig
    (conf,) = svgs(page, "confirmation")
    assert conf.count('class="pt confirm"') == 12 and conf.count('class="pair"') == 6
    assert "seq scan, recommended (512 kB)" in svgs(page, "devices")[0]


def test_outside_text_is_escaped_everywhere() -> None:
    s = HOSTILE
    search = [_trial({"effective_io_concurrency": v}, 10.0 + v, obj=s, family=s, reason=s, i=v) for v in (0, 1, 8)]
    confirm = _abba({"effective_io_concurrency": 1}, {"effective_io_concurrency": 8}, [(11.0, 5.0)] * 6, obj=s, family=s)
    rec = Recommendation(knob="effective_io_concurrency", scope="tablespace", object=s, current=1, recommended=8,
                         near_optimal=(4, 16), decision="change", requires="reload", run_on="primary",
                         effect=_effect(2.2, 2.0, 2.4), reason=s + " the minimum effect 1.05x")
    report = _report(
        [rec], search + confirm,
        families=[FamilyOutcome(family=s, status="skipped", reason=s, workload=[s], stop_reason=s, warm_start=s)],
        devices=[DeviceOut(device=s, description=s, roles=[s], read_ahead_kb=128, status="probed", reason=s,
                           raw_read_mb_s=100.0, seq_scan_mb_s_current=50.0)],
        wal_contention=[WalContentionOut(clients=1, rows_per_tx=10, tps=1.0, wal_insert_wait_share=0.5,
                                         wal_write_wait_share=None, wal_sync_wait_share=None)],
        wal_scaling=[WalScalingOut(clients=1, rows_per_tx=10, tps_current=1.0, tps_recommended=None)],
        wal_summary=s, restored=[s],
    ).model_copy(update={"session": _report([], []).session.model_copy(update={"host": s, "kernel": s, "policy": s}),
                         "target": _report([], []).target.model_copy(update={"server_version": s, "mode": s})})
    history = [SessionSummary("0123456789ab", "t", s, "2026-12-01T00:00:00+00:00", 1.0, "recommend", s, s, 3,
                              decisions=[{"knob": "effective_io_concurrency", "object": s, "current": 1,
                                          "recommended": s, "decision": "keep", "improvement": 1.0,
                                          "ci95": [0.9, 1.1], "near_optimal": None}])]
    page = h.to_html(report, history=history)
    p = checked(page)
    assert not [t for t, _ in p.tags if t in ("script", "img")]
    assert "<script" not in page.lower() and "onerror=alert" not in page.replace("onerror=alert(1)&gt;", "")
    assert "&lt;script&gt;" in page and "\\u202e" in page and "\\n" in page
    for _, attrs in p.tags:
        for value in attrs.values():
            assert value is None or ("<script" not in value and "\n" not in value)
    # no raw control or format characters, and the newline of the name is nowhere inside a text node
    assert not [ch for ch in page if ch != "\n" and unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Zl", "Zp"}]
    assert not any(HOSTILE in text for text in p.text)


@pytest.mark.parametrize("s", ["\x00nul", "\udcff", "\u2028sep", "\x1b[31mred", "a\"b'c", "]]>", "--><!--", ""])
def test_odd_names_keep_the_page_well_formed(s: str) -> None:
    search = [_trial({"effective_io_concurrency": 0}, 1.0, obj=s, family="readahead")]
    rec = Recommendation(knob="effective_io_concurrency", scope="tablespace", object=s, current=s, recommended=s,
                         near_optimal=None, decision="keep", requires="reload", effect=None, reason=s)
    page = h.to_html(_report([rec], search))
    checked(page)
    page.encode("utf-8")


# ---- history ---------------------------------------------------------------------------------------------------

def _summary(sid: str, day: int, decisions: list[dict[str, object]]) -> SessionSummary:
    return SessionSummary(sid, "t1", "sandbox", f"2026-11-{day:02d}T10:00:00+00:00", 300.0, "recommend", "15.18",
                          "default", 100, decisions=decisions)


def test_history_draws_each_knob_over_sessions(sandbox: Report) -> None:
    def d(knob: str, rec: int, decision: str, imp: float | None, ci: list[float] | None) -> dict[str, object]:
        return {"knob": knob, "object": None, "current": 1, "recommended": rec, "decision": decision,
                "improvement": imp, "ci95": ci, "near_optimal": [rec // 2, rec * 2]}
    history = [  # newest first, as the store lists them; the session itself may be among them
        _summary(sandbox.session.id, 30, []),
        _summary("bbbbbbbbbbbb", 20, [d("effective_io_concurrency", 256, "change", 3.1, [2.5, 3.8])]),
        _summary("aaaaaaaaaaaa", 10, [d("effective_io_concurrency", 1000, "change", 5.3, [4.3, 6.5]),
                                      d("commit_delay", 0, "keep", None, None)]),
    ]
    page = h.to_html(sandbox, history=history)
    checked(page)
    figs = svgs(page, "history")
    (eic,) = [f for f in figs if "effective_io_concurrency over sessions" in f]
    # two stored sessions and this one (its stored summary, listed too, does not hide the report's own figures)
    assert eic.count('class="effect"') == 3
    assert eic.count('class="pt history"') == 3 * 2  # today's value and the recommendation, per session
    assert "2026-11-10" in eic and "2026-11-20" in eic and "2026-12-06" in eic and "minimum effect 1.05×" in eic
    assert eic.index("2026-11-10") < eic.index("2026-11-20") < eic.index("2026-12-06")  # oldest first
    # commit_delay: stored once, and this session has it too
    (cd,) = [f for f in figs if "commit_delay over sessions" in f]
    assert cd.count('class="effect"') == 1  # the stored keep had no interval
    # read_ahead_kb (/dev/loop0) is in this session only
    assert "Recommended in one stored session only" in section(page, "history")
    assert 'href="#history"' in page


def test_without_history_there_is_no_history_section(page: str) -> None:
    assert 'id="history"' not in page


def test_history_of_one_session_says_it_starts_here(sandbox: Report) -> None:
    page = h.to_html(sandbox, history=[])
    assert "the history starts here" in section(page, "history") and not svgs(page, "history")


# ---- scales ------------------------------------------------------------------------------------------------------

def test_log2p1_sets_zero_apart_and_breaks_the_axis() -> None:
    x = svg.Log2p1([0, 1, 1000], 0, 100)
    unit = x(3) - x(1)  # one unit of log2(1 + v)
    assert x(1) - x(0) == pytest.approx(2 * unit)
    assert x.breaks and x(0) < x.breaks[0] < x(1)
    assert [t for _, t in x.ticks()][:2] == ["0", "1"]


def test_knob_axes() -> None:
    assert isinstance(svg.knob_scale([0, 4, 16, 1000], 0, 1), svg.Log2p1)
    assert isinstance(svg.knob_scale([0, 128], 0, 1), svg.Log2p1)  # commit_delay: 0 is another mechanism
    assert isinstance(svg.knob_scale([1, 2, 3, 4], 0, 1), svg.Linear)
    assert isinstance(svg.knob_scale(["off", "lz4"], 0, 1), svg.Categories)


def test_ratio_ticks_keep_one_and_do_not_crowd() -> None:
    y = svg.LogRatio([0.9, 1.05, 1.1, 1.2], 200, 50)
    pos = sorted(p for p, _ in y.ticks())
    assert "1×" in [t for _, t in y.ticks()]
    assert all(b - a >= 16 for a, b in zip(pos, pos[1:]))


def test_a_plateau_and_an_edge_are_said_in_the_recommendations() -> None:
    from tuner.report.near import NearRange

    search = [_trial({"effective_io_concurrency": v}, t) for v, t in [(0, 120.0), (16, 98.0), (256, 99.0), (1000, 97.0)]]
    rec = Recommendation(knob="effective_io_concurrency", scope="system", object=None, current=1, recommended=1000,
                         near_optimal=NearRange(16, 1000, searched=(0, 1000), limits=(True, True), plateau=True),
                         decision="keep", requires="reload", effect=_effect(1.007, 0.99, 1.02), reason="r")
    page = h.to_html(_report([rec], search))
    checked(page)
    part = section(page, "recommendations")
    assert "<td>1000 (edge)</td><td>plateau 16..1000</td>" in part
    assert "plateau from 16 to 1000, up to the top of the searched range 0..1000" in part
    assert "at the edge: 1000 is the highest value searched (0..1000), its maximum on this server" in part
    assert "a plateau." in page  # the search figure's caption


# ---- a family's own parts of the page ----------------------------------------------------------------------------

class _Toy(Family):
    """A family from outside tuner with both report hooks: its unit and a section of its own."""

    name: ClassVar[str] = "toy"
    needs: ClassVar[Needs] = Needs()
    after: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = "a toy"
    objective_unit: ClassVar[str] = "toy-seconds (on the toy clock)"

    def applicable(self, ctx: FamilyContext) -> str | None:
        return None

    async def run(self, ctx: FamilyContext) -> FamilyResult:
        raise NotImplementedError  # never run: only the report hooks are under test

    def html_sections(self, report: Report, figures: svg.Figures) -> list[tuple[str, str, str]]:
        n = figures.next_no()
        return [("toy", "Toy", f"<p>toy section, figure {n}, {len(report.trials)} trials</p>")]


def test_the_page_asks_each_family_for_its_unit_and_its_own_section() -> None:
    trials = [_trial({"toy_knob": v}, t, family="toy") for v, t in [(1, 5.0), (2, 4.0), (4, 6.0)]]
    REGISTRY.register(_Toy)
    try:
        page = h.to_html(_report([], trials))
    finally:
        REGISTRY.unregister("toy")
    checked(page)
    assert "toy-seconds (on the toy clock)" in section(page, "search")  # the caption's unit
    (fig,) = svgs(page, "search")
    assert ">toy-seconds<" in fig  # the axis: the unit without its explanation
    assert section(page, "toy") == "<h2>Toy</h2><p>toy section, figure 2, 3 trials</p>"  # numbered after the search
    assert '<a href="#toy">Toy</a>' in page


def test_a_family_without_hooks_gets_the_workload_time_and_no_section() -> None:
    trials = [_trial({"toy_knob": v}, t, family="plain") for v, t in [(1, 5.0), (2, 4.0)]]
    page = h.to_html(_report([], trials))
    assert objective_unit(None) == "ms (the workload's execution time)"
    assert "ms (the workload&#x27;s execution time)" in section(page, "search")
    assert 'id="plain"' not in page


def test_each_confirmation_is_folded_with_its_result_on_its_line(sandbox: Report) -> None:
    """Issue #47: every pair of every confirmation drawn made the page ~8,000 px long. Each confirmation is a
    closed <details> of its own whose line carries the result; the effects figure above shows them all."""
    rep = sandbox
    page = h.to_html(rep)
    confs = evidence.confirmations(rep.trials)
    evidence.attach(rep.recommendations, confs)
    folds = re.findall(r"<details( open)?><summary><h3>.*?</summary>", section(page, "confirmation"), flags=re.S)
    assert len(folds) == len(confs) == len(svgs(page, "confirmation")) > 0
    assert set(folds) == {""}
    lines = re.findall(r"<details><summary>(.*?)</summary>", section(page, "confirmation"), flags=re.S)
    for line, c in zip(lines, confs, strict=True):
        e = c.recs[0].effect if c.recs else None
        assert e is None or f"[{e.ci95[0]:.2f}, {e.ci95[1]:.2f}]" in line
        assert e is None or ("CHANGE" in line) == (c.recs[0].decision == "change")
    assert svgs(section(page, "confirmation"), "effects")  # every result at a glance stays open


def test_a_search_is_open_only_where_it_found_a_change(sandbox: Report) -> None:
    page = h.to_html(sandbox)
    folds = re.findall(r"<details( open)?><summary><h3>(.*?)</h3> · (\d+) probes", section(page, "search"))
    assert len(folds) == len(svgs(section(page, "search"), "search")) == 3  # one fold per search
    confs = evidence.confirmations(sandbox.trials)
    evidence.attach(sandbox.recommendations, confs)
    decided = [any(r.decision == "change" for r in g.recs) for g in evidence.searches(sandbox, confs)]
    assert [bool(o) for o, _, _ in folds] == decided == [False, True, False]
    assert [n for _, _, n in folds] == ["20", "11", "20"]  # the WAL search without its 10 scaling runs


# -- the minimum effect: carried by the report, parsed from prose only for old reports (issue #45 item 5) -------

def test_a_carried_min_effect_is_read_not_parsed_from_the_reasons(sandbox: Report,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def prose(report: Report) -> tuple[float, bool]:
        raise AssertionError("the reasons were parsed although the report carries min_effect")

    monkeypatch.setattr(evidence, "_stated_in_reasons", prose)
    rep = sandbox.model_copy(update={"min_effect": 1.2, "alpha": 0.05})
    assert evidence.min_effect(rep) == (1.2, True)
    page = h.to_html(rep)
    assert "minimum effect 1.2×" in page and "minimum effect 1.05×" not in page
    assert "does not state" not in page


def test_an_old_report_without_the_field_renders_as_before(sandbox: Report) -> None:
    """The fixture predates the field: its minimum effect still comes from its reasons, and the page is the same,
    byte for byte, as the one drawn from the field with that value."""
    assert sandbox.min_effect is None and sandbox.alpha is None
    assert evidence.min_effect(sandbox) == (1.05, True)
    assert h.to_html(sandbox) == h.to_html(sandbox.model_copy(update={"min_effect": 1.05, "alpha": 0.05}))
