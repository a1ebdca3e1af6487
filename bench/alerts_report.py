"""The alert evaluation benchmark's figures (bench/alerts.py): console lines, and its own section of
docs/benchmarks.md between report.ALERTS_START and report.ALERTS_END."""

from __future__ import annotations

from pathlib import Path

from bench import report
from bench.alerts import TARGET_SHARE, AlertsRun
from bench.stats import median, pct


def checks(run: AlertsRun) -> list[tuple[str, str, str, bool | None]]:
    """(figure, target, measured, passed) rows."""
    s, before, now = run.steady, run.baselines_before, run.baselines_now
    ratio = before.median_s / now.median_s if now.median_s else float("nan")
    return [
        (
            f"every rule over {run.servers:,} servers, one worker thread ({run.groups} groups of "
            f"{run.group_size}), p95 of {len(s.seconds)} evaluations",
            f"≤ {run.target_s:.0f} s ({TARGET_SHARE:.0%} of ALERTS_EVALUATE_S = {run.evaluate_s} s)",
            f"{s.p95_s:.1f} s (median {s.median_s:.1f}; {s.queries / run.servers:.1f} queries a server)",
            run.passed,
        ),
        (
            "one group, p95 over every group of every evaluation",
            "n/a",
            f"{pct(run.group_s, 95):.2f} s (median {median(run.group_s):.2f})",
            None,
        ),
        (
            f"regression baselines of {run.servers:,} servers ({run.baseline_days} days back): hourly_sums / "
            "statements_in per day (same run)",
            "faster",
            f"{now.median_s:.2f} s / {before.median_s:.2f} s ({ratio:.1f}× faster; {now.queries:,} / "
            f"{before.queries:,} queries); {'the same baselines' if run.agree else '**baselines differ**'}",
            ratio > 1 and run.agree,
        ),
    ]


def _mark(ok: bool | None) -> str:
    return "n/a" if ok is None else ("pass" if ok else "FAIL")


def text(run: AlertsRun) -> str:
    lines = ["alert evaluation at fleet scale"]
    lines += [f"  {figure}: {got} [{target}] {_mark(ok)}" for figure, target, got, ok in checks(run)]
    lines += [f"  rule {r.label}: median {r.median_s:.2f} s, {r.queries:,} queries" for r in run.rules]
    return "\n".join(lines)


def markdown_section(run: AlertsRun, *, machine, code: str, command: str, date: str) -> str:
    m, z, table = machine, run.size, report._table
    L = [
        report.ALERTS_START,
        "## Alert evaluation at fleet scale",
        "",
        f"Date: {date}. Command: `{command}`, {run.seconds_total / 60:.0f} min ({run.history_s / 60:.0f} min of "
        f"it writing the history). This section is written by that command (and by a whole `make bench`). "
        f"Code measured: {code}.",
        "",
        f"Machine: {m.nproc} cores ({m.cpu_model}), {m.mem_gib:.0f} GiB, {m.os}; Python {m.python}. History "
        f"store: {m.postgres_history or 'the benchmark cluster'} ({m.history_durability or 'production durability'}).",
        "",
        f"Fleet: one organization of {run.servers:,} servers, each with {z.statements} synthetic statements and "
        f"{z.days} days of history ({run.snapshots:,} snapshots, one every {z.step_s // 60} minutes: baselines "
        "through `server_collect`, deltas by the bulk writer, one `rollups.roll_up` with the raw retention set to "
        "the history's length), so each server has the hours "
        "the regression rule compares on each previous day. 5% of the servers are failing (their outage alerts "
        f"open on the first evaluation: {run.alerts_open} open, {run.deliveries} deliveries made to an email "
        "channel; nothing is sent here, a worker's part is tested by tests/alerts/test_tasks.py). The organization "
        "has the four default rules (server down, critical advice, deallocation storm, statement regression over "
        "7 days with a 5% floor).",
        "",
        "Timed in this process, `DEBUG=false`: `alerts.lifecycle.evaluate_organization` for each group that "
        "`evaluation_groups` makes (beat's `alerts-evaluate` sends each to a worker as its own task), one after "
        "the other, which is what one worker thread would take for the whole fleet; then each rule alone over "
        "every server (`alerts.evidence.conditions_now`); then the regression rule's baselines both ways, each "
        "server's candidate statements read once beforehand. Queries: the ORM's and the selectors' own "
        f"(`readtier.db`), of one run. {z.runs} runs each after the first evaluation.",
        "",
    ]
    L += table([[f, t, g, f"**{_mark(ok)}**"] for f, t, g, ok in checks(run)], ["figure", "target", "measured", ""])
    L += ["", "### Per rule, alone over the fleet", ""]
    rows = [[r.label, f"{r.median_s:.2f}", f"{r.p95_s:.2f}", f"{r.queries:,}"] for r in run.rules]
    rows.append(
        ["first evaluation (rules made, alerts opened)", f"{run.first.seconds[0]:.2f}", "", f"{run.first.queries:,}"]
    )
    L += table(rows, ["rule", "median s", "p95 s", "queries"])
    L.append(report.ALERTS_END)
    return "\n".join(L)


def write_section(section: str, path: str | Path = report.DOC) -> Path:
    return report.write_marked_section(section, report.ALERTS_START, report.ALERTS_END, path)
