"""Figures -> targets, pass/fail, the console summary and docs/benchmarks.md."""

from __future__ import annotations

from pathlib import Path

from bench import env

MB = 1_000_000  # decimal megabytes (stricter than MiB) for the footprint target
DOC = env.REPO / "docs" / "benchmarks.md"


def checks(r: dict) -> list[tuple[str, str, str, bool | None]]:
    """(what, target, measured, passed) rows."""
    out = []
    col = r.get("collection")
    if col:
        top = max(col["levels"])
        lv = col["levels"][top]
        out.append(
            (
                f"collection per snapshot at {top:,} entries, median",
                "≤ 60 ms",
                f"{lv['collect_ms']['median']:.1f} ms",
                lv["collect_ms"]["median"] <= 60,
            )
        )
        out.append(
            (
                f"collection / bare `SELECT * FROM pg_stat_statements(false)`, {top:,} entries "
                "(median of paired ratios)",
                "≤ 3×",
                f"{lv['ratio_paired_median']:.2f}× ({lv['collect_ms']['median']:.1f} / "
                f"{lv['bare_ms']['median']:.1f} ms)",
                lv["ratio_paired_median"] <= 3,
            )
        )
        out.append(
            (
                f"p99 / median over {lv['collect_ms']['n']} snapshots at {top:,} entries "
                f"({lv['maintenance_runs']} maintenance runs alongside)",
                "≤ 2×",
                f"{lv['p99_over_median']:.2f}× (p99 {lv['collect_ms']['p99']:.1f} ms)",
                lv["p99_over_median"] <= 2,
            )
        )
    fp = r.get("footprint")
    if fp:
        out.append(
            (
                "history per server-day (raw + read tier + wait rollups, with indexes and TOAST), 5,000 entries, "
                "10% changing per minute",
                "≤ 30 MB",
                f"{fp['per_day_bytes'] / MB:.1f} MB",
                fp["per_day_bytes"] <= 30 * MB,
            )
        )
    ing = r.get("ingest")
    if ing:
        s = ing["steady"]
        out.append(
            (
                "delta writer throughput, 5,000 entries, one core (wall time): entries processed "
                "(stored, changed rows beside)",
                "≥ 100,000 rows/s",
                f"{s['rows_per_s']:,.0f} entries/s ({s['stored_rows_per_s']:,.0f} stored rows/s)",
                s["rows_per_s"] >= 100_000,
            )
        )
    if r.get("readtier"):
        from bench import readtier_report

        out += readtier_report.checks(r["readtier"])
    if r.get("plans"):
        from bench import plans_report

        out += plans_report.checks(r["plans"])
    if r.get("schema"):
        from bench import schema_report

        out += schema_report.checks(r["schema"])
    if r.get("metrics"):
        from bench import metrics_report

        out += metrics_report.checks(r["metrics"])
    return out


def all_passed(r: dict) -> bool:
    return all(c[3] for c in checks(r))


def _ms(s: dict, key: str = "median") -> str:
    return f"{s[key]:.1f}" if s and s.get("n") else "–"


def text(r: dict) -> str:
    lines = ["RESULTS"]
    for what, target, got, ok in checks(r):
        lines.append(f"  [{'PASS' if ok else 'FAIL'}] {what}: {got} (target {target})")
    col = r.get("collection")
    if col:
        lines.append("  collection per level (median / p99 ms; bare SELECT median ms; paired ratio):")
        for n, lv in col["levels"].items():
            lines.append(
                f"    {n:>5}: {_ms(lv['collect_ms'])} / {_ms(lv['collect_ms'], 'p99')}; "
                f"bare {_ms(lv['bare_ms'])}; {lv['ratio_paired_median']:.2f}x; "
                f"baseline snapshot {lv['baseline_snapshot_ms']:.0f} ms"
            )
        if col.get("all_changed"):
            a = col["all_changed"]
            lines.append(f"    every entry changed: median {_ms(a['collect_ms'])} ms (bare {_ms(a['bare_ms'])} ms)")
        if col.get("sampled"):
            lines.append(f"    with 10 pg_stat_activity samples: median {_ms(col['sampled']['collect_ms'])} ms")
        for key in ("breakdown", "breakdown_small"):
            if col.get(key):
                level = col[key].get("level", max(col["levels"]))
                lines.append(f"  where a {level:,}-entry snapshot's time goes (ms, share):")
                lines += [f"    {lab:<58} {ms:7.1f} {share:4.0%}" for lab, ms, share in col[key]["rows"]]
    fp = r.get("footprint")
    if fp:
        lines.append(
            f"  footprint: raw {sum(fp['raw'].values()) / MB:.2f} MB/day, read tier + wait rollups "
            f"{sum(fp['rollups'].values()) / MB:.2f} MB/day, fixed per server "
            f"{sum(fp['fixed'].values()) / MB:.2f} MB; naive layout "
            f"{fp['naive_bytes_day'] / MB:.0f} MB/day"
        )
        lines.append(
            "    read tier + wait rollups, MB per day: "
            + ", ".join(f"{k} {v / MB:.2f}" for k, v in fp["rollups"].items())
        )
        if r.get("footprint_uniform"):
            fu = r["footprint_uniform"]
            lines.append(f"  footprint, uniform 10% per minute: {fu['per_day_bytes'] / MB:.2f} MB/day")
    ing = r.get("ingest")
    if ing and ing.get("breakdown"):
        lines.append("  where the writer's time goes at 5,000 entries, 10% changed (ms, share):")
        lines += [f"    {lab:<58} {ms:7.1f} {share:4.0%}" for lab, ms, share in ing["breakdown"]["rows"]]
    if r.get("readtier"):
        from bench import readtier

        lines += readtier.summary_lines(r["readtier"])
    if r.get("plans"):
        from bench import plans_report

        lines += plans_report.summary_lines(r["plans"])
    if r.get("schema"):
        from bench import schema_report

        lines += schema_report.summary_lines(r["schema"])
    if r.get("metrics"):
        from bench import metrics_report

        lines += metrics_report.summary_lines(r["metrics"])
    lines.append(f"  elapsed {r.get('elapsed_s', 0):.0f}s")
    return "\n".join(lines)


def _table(rows: list[list[str]], header: list[str]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def markdown(r: dict) -> str:
    m = r["machine"]
    L: list[str] = []
    L += [
        "# Benchmarks",
        "",
        f"Date: {r['date']} (run started {r['started_at']:%Y-%m-%d %H:%M} UTC). Command: `make bench` "
        f"(= `.venv/bin/python -m bench`), whole run {r['elapsed_s'] / 60:.1f} min. This file is written by "
        f"that command. Code measured: {r['code']}.",
        "",
        f"Machine: {m.nproc} cores (`nproc` = {m.nproc}; {m.cpu_model}), {m.mem_gib:.0f} GiB, {m.os}; "
        f"Python {m.python}. Shared and noisy (other jobs ran on it), so each figure is compared "
        "with a baseline measured in the same run, next to it.",
        "",
        f"- monitored server: {m.postgres_monitored.split(',')[0]} (private cluster `{env.BENCH_CLUSTER}`, "
        f"port {env.BENCH_PORT}, `pg_stat_statements.max = 10000`, defaults otherwise: `track = top`, "
        "`track_planning = off`), monitoring role with `pg_monitor` over SCRAM, connection kept between "
        "snapshots (the default `COLLECTOR_CONNECTION_IDLE_S`);",
        f"- history store: {m.postgres_history.split(',')[0]} (private cluster `{env.HISTORY_CLUSTER}`, port "
        f"{env.HISTORY_PORT}, {m.history_durability}: production durability, unlike the development "
        f"store), database `{env.BENCH_DB}` created fresh and migrated by the run. The collector commits "
        "its snapshot transaction with `synchronous_commit = off` (docs/architecture.md, How it works).",
        "",
        "## Results",
        "",
    ]
    L += _table(
        [[w, t, g, "**pass**" if ok else "**FAIL**"] for w, t, g, ok in checks(r)], ["figure", "target", "measured", ""]
    )
    col = r.get("collection")
    if col:
        top = max(col["levels"])
        lv = col["levels"][top]
        L += [
            "",
            "### 1. Collection time per snapshot (real PostgreSQL 17, steady state)",
            "",
            "`collectors.services.server_collect` end to end, `COLLECTOR_ACTIVITY_SAMPLES=0` (the 1-second "
            "`pg_stat_activity` sampling excluded; its cost is shown below). Bare = `SELECT * FROM "
            "pg_stat_statements(false)` fetched fully (`fetchall()`) with psycopg on a kept connection of the "
            "same role, measured right before or after each snapshot (alternating).",
            "",
        ]
        rows = []
        for n, v in col["levels"].items():
            rows.append(
                [
                    f"{n:,}",
                    f"{v['entries']:,}",
                    f"{v['changed']:,}",
                    str(v["collect_ms"]["n"]),
                    _ms(v["collect_ms"]),
                    _ms(v["collect_ms"], "p99"),
                    _ms(v["collect_ms"], "max"),
                    _ms(v["bare_ms"]),
                    f"{v['ratio_paired_median']:.2f}×",
                    f"{v['baseline_snapshot_ms']:.0f}",
                ]
            )
        L += _table(
            rows,
            [
                "level",
                "entries read",
                "changed / snapshot",
                "snapshots",
                "median ms",
                "p99 ms",
                "max ms",
                "bare SELECT median ms",
                "collect / bare",
                "first (baseline) snapshot ms",
            ],
        )
        wm, wo = lv["with_maintenance_ms"], lv["without_maintenance_ms"]
        steps = ", ".join(f"{k} {v:.0f} ms" for k, v in lv["maintenance_steps_ms"].items() if k != "dropped")
        L += [
            "",
            f"At {top:,} entries, {lv['maintenance_runs']} maintenance runs (every 10th snapshot, background "
            f"thread) overlapped {wm.get('n', 0)} of the {lv['collect_ms']['n']} snapshots: those took median "
            f"{_ms(wm)} ms (max {_ms(wm, 'max')}), the others median {_ms(wo)} ms (max {_ms(wo, 'max')}). "
            f"A maintenance run took median {_ms(lv['maintenance_ms'])} ms ({steps})."
            + (f" Errors: {'; '.join(lv['maintenance_errors'])}." if lv["maintenance_errors"] else ""),
        ]
        if col.get("all_changed"):
            a = col["all_changed"]
            L += [
                "",
                f"Worst case for reading only what changed: with all {top:,} statements run before each of "
                f"{a['collect_ms']['n']} more snapshots ({a['changed']:,} entries changed per snapshot), a "
                f"snapshot took median {_ms(a['collect_ms'])} ms (max {_ms(a['collect_ms'], 'max')}), "
                f"{a['collect_ms']['median'] / a['bare_ms']['median']:.2f}× the bare SELECT "
                f"({_ms(a['bare_ms'])} ms).",
            ]
        if col.get("sampled"):
            s = col["sampled"]
            L += [
                "",
                f"With the default wait sampling (`COLLECTOR_ACTIVITY_SAMPLES=10` over "
                f"`COLLECTOR_ACTIVITY_SPAN_S={s['span_s']:g}`), {s['collect_ms']['n']} snapshots at {top:,} "
                f"entries took median {_ms(s['collect_ms'])} ms wall (max {_ms(s['collect_ms'], 'max')}): "
                f"the sampling adds about {s['collect_ms']['median'] - lv['collect_ms']['median']:.0f} ms of "
                "waiting (sleeps between samples; the collector's CPU is idle then, and a thread pool serves "
                "other servers meanwhile).",
            ]
        if col.get("breakdown"):
            small = col.get("breakdown_small")
            L += [
                "",
                f"Where a snapshot's time goes (mean per snapshot over {col['breakdown']['snapshots']} snapshots "
                "with server_collect's callees wrapped; a separate pass after the timed ones):",
                "",
            ]
            big = col["breakdown"]["rows"]
            if small:
                rows = [
                    [lab, f"{ms:.1f}", f"{share:.0%}", f"{sms:.1f}", f"{sshare:.0%}"]
                    for (lab, ms, share), (_, sms, sshare) in zip(big, small["rows"], strict=True)
                ]
                L += _table(rows, ["step", f"{top:,} entries: ms", "share", f"{small['level']:,} entries: ms", "share"])
            else:
                L += _table(
                    [[lab, f"{ms:.1f}", f"{share:.0%}"] for lab, ms, share in big], ["step", "ms / snapshot", "share"]
                )
    fp = r.get("footprint")
    if fp:
        raw, roll, fixed = sum(fp["raw"].values()), sum(fp["rollups"].values()), sum(fp["fixed"].values())
        L += [
            "",
            "### 2. History footprint per server-day (5,000 entries, 1-minute snapshots)",
            "",
            f"{fp['snapshots']:,} synthetic snapshots over {fp['day']} (UTC) through the real writer path, "
            f"{fp['changed_per_snapshot']['mean']:.0f} changed entries per snapshot on average "
            f"({fp['stored_rows']:,} statement-intervals stored), the read tier built as each hour ended and "
            "the day after midnight (`rollups.roll_up`); sizes by `pg_total_relation_size` (heap, TOAST, "
            "indexes, FSM/VM) after VACUUM.",
            "",
        ]
        ro = fp["rollups"]
        rows = [
            [
                "raw: snapshots (one row per snapshot, deltas encoded, server totals as columns)",
                f"{fp['raw']['snapshots'] / MB:.2f}",
                "per day",
            ],
            [f"raw: wait events ({fp['wait_rows']:,} rows)", f"{fp['raw']['waits'] / MB:.2f}", "per day"],
            [
                f"read tier: server totals per hour ({fp['hourly_buckets']} rows) and per day ({fp['daily_buckets']})",
                f"{(ro['server hourly'] + ro['server daily']) / MB:.2f}",
                "per day",
            ],
            [
                f"read tier: statement prefix sums at {fp['statement_hourly_boundaries']} hour boundaries "
                f"({fp['statement_hourly_rows']:,} rows)",
                f"{ro['statement hourly'] / MB:.2f}",
                "per day",
            ],
            [
                f"read tier: statement prefix sums at the day boundary ({fp['statement_daily_rows']:,} rows)",
                f"{ro['statement daily'] / MB:.2f}",
                "per day",
            ],
            [
                f"wait-event rollups ({fp['hourly_wait_rows']:,} hourly rows, {fp['daily_wait_rows']:,} daily)",
                f"{(ro['hourly waits'] + ro['daily waits']) / MB:.2f}",
                "per day",
            ],
            ["**total per server-day**", f"**{(raw + roll) / MB:.2f}**", "per day"],
            [
                f"statement dimension ({fp['statements']:,} texts, {fp['text_bytes'] / MB:.1f} MB of text)",
                f"{fp['fixed']['statement dimension'] / MB:.2f}",
                "fixed per server",
            ],
            [
                "statement state (cumulative counters, 5,000 rows, with update churn)",
                f"{fp['fixed']['statement state'] / MB:.2f}",
                "fixed per server",
            ],
            ["server state", f"{fp['fixed']['server state'] / MB:.2f}", "fixed per server"],
            ["first day in total (per day + fixed)", f"{(raw + roll + fixed) / MB:.2f}", ""],
            [
                "baseline in the same run: one row per changed statement per minute, all columns, primary key",
                f"{fp['naive_bytes_day'] / MB:.1f}",
                f"per day ({fp['naive_bytes_day'] / (raw + roll):.0f}× ours)",
            ],
        ]
        L += _table(rows, ["what", "MB", ""])
        hourly = ro["server hourly"] + ro["statement hourly"] + ro["hourly waits"]
        daily = ro["server daily"] + ro["statement daily"] + ro["daily waits"]
        retained = 3 * raw + 60 * hourly + 730 * daily + fixed
        L += [
            "",
            f"Encoded payload: {fp['payload_per_row']:.1f} bytes per stored statement-interval "
            f"({fp['payload_bytes'] / MB:.2f} MB of bytea in the day's raw rows). At the default retention (raw 3 "
            f"days, hourly 60, daily 730) one such server would hold about {retained / MB:,.0f} MB: 3 raw days, 60 "
            f"days of the hourly tier and 730 of the daily tier as measured here ({daily / MB:.2f} MB a day, most "
            "of it the statements' prefix sums at the day boundary, one row per statement seen so far in the "
            "month), and the fixed tables.",
        ]
        fu = r.get("footprint_uniform")
        if fu:
            L += [
                "",
                f"Worst case for rollups, measured the same way (a uniform random 10% of the entries every "
                f"minute, so that nearly every entry has a row at every hour boundary): "
                f"{fu['per_day_bytes'] / MB:.2f} MB per server-day (raw {sum(fu['raw'].values()) / MB:.2f}, "
                f"read tier and wait rollups {sum(fu['rollups'].values()) / MB:.2f}), "
                f"{'within' if fu['per_day_bytes'] <= 30 * MB else 'over'} the 30 MB target.",
            ]
    ing = r.get("ingest")
    if ing:
        s, a = ing["steady"], ing.get("all_changed")
        L += [
            "",
            "### 3. Ingest throughput of the delta writer (5,000 entries, one core)",
            "",
            f"{s['snapshots']} synthetic snapshots, {s['changed']} of {s['entries']:,} entries changed each "
            f"(uniformly chosen), collector thread pinned to CPU {ing['pinned_cpu']}.",
            "",
        ]
        rows = [
            [
                "10% changed (target)",
                f"{s['wall_ms']['median']:.1f}",
                f"{s['wall_ms']['p99']:.1f}",
                f"{s['rows_per_s']:,.0f}",
                f"{s['stored_rows_per_s']:,.0f}",
                f"{s['rows_per_cpu_s']:,.0f}",
            ],
        ]
        if a:
            rows.append(
                [
                    "100% changed (worst case, informative)",
                    f"{a['wall_ms']['median']:.1f}",
                    f"{a['wall_ms']['p99']:.1f}",
                    f"{a['rows_per_s']:,.0f}",
                    f"{a['stored_rows_per_s']:,.0f}",
                    f"{a['rows_per_cpu_s']:,.0f}",
                ]
            )
        L += _table(
            rows,
            [
                "pass",
                "median ms / snapshot",
                "p99 ms",
                "entries processed/s (wall)",
                "stored (changed) rows/s (wall)",
                "entries per CPU-second",
            ],
        )
        if a:
            L += [
                "",
                f"Entries processed count every entry read, changed or not; stored rows are the changed "
                f"entries, each one row of the snapshot's block and one state row. With every entry changing "
                f"each minute, a snapshot stores {a['entries']:,} rows instead of {s['changed']:,} and takes "
                f"{a['wall_ms']['median'] / s['wall_ms']['median']:.1f}× as long: "
                f"{a['stored_rows_per_s']:,.0f} stored rows/s against {s['stored_rows_per_s']:,.0f}.",
            ]
        L += [
            "",
            f"Baseline in the same run, interleaved: a bare binary COPY of the same 5,000 state rows into an "
            f"unindexed table took median {s['copy_floor_ms']['median']:.1f} ms "
            f"({s['copy_floor_rows_per_s']:,.0f} rows/s); the whole writer path costs "
            f"{s['ratio_to_copy_floor']:.2f}× that.",
            "",
        ]
        if fp:
            L += [
                f"Cross-check: the footprint run's 1,440 snapshots (heavy-tailed changes, not pinned) took median "
                f"{fp['write_ms']['median']:.1f} ms each ({5000 / fp['write_ms']['median'] * 1000:,.0f} rows/s); "
                f"each hourly rollup median {fp['rollup_ms']['median']:.0f} ms."
            ]
        if ing.get("breakdown"):
            L += [
                "",
                f"Where the writer's time goes (mean of {ing['breakdown']['snapshots']} snapshots, wrapped; "
                "the synthetic read's key matching, which the real read's merge also does, shows as "
                '"read: new and changed entries"):',
                "",
            ]
            L += _table(
                [
                    [lab, f"{ms:.2f}", f"{share:.0%}"]
                    for lab, ms, share in ing["breakdown"]["rows"]
                    if ms > 0.005 or lab in ("total",) or lab.startswith("rest")
                ],
                ["step", "ms / snapshot", "share"],
            )
    if r.get("readtier"):
        from bench import readtier_report

        L += readtier_report.markdown(r["readtier"], _table)
    if r.get("plans"):
        from bench import plans_report

        L += plans_report.markdown(r["plans"], _table)
    if r.get("schema"):
        from bench import schema_report

        L += schema_report.markdown(r["schema"], _table)
    if r.get("metrics"):
        from bench import metrics_report

        L += metrics_report.markdown(r["metrics"], _table)
    method = METHOD.strip()
    if r.get("readtier"):
        from bench import readtier_report

        stats = method.index("- **Statistics.**")
        method = method[:stats] + readtier_report.METHOD + "\n" + method[stats:]
    if r.get("plans"):
        from bench import plans_report

        stats = method.index("- **Statistics.**")
        method = method[:stats] + plans_report.METHOD + "\n" + method[stats:]
    if r.get("schema"):
        from bench import schema_report

        stats = method.index("- **Statistics.**")
        method = method[:stats] + schema_report.METHOD + "\n" + method[stats:]
    if r.get("metrics"):
        from bench import metrics_report

        stats = method.index("- **Statistics.**")
        method = method[:stats] + metrics_report.METHOD + "\n" + method[stats:]
    L += ["", method, ""]
    return "\n".join(L)


METHOD = """
## Methodology

- **Isolation.** `make bench` starts its own history store `bench-history` (PostgreSQL 17, port
  57100, initialized fresh, `fsync`, `synchronous_commit` and `full_page_writes` on as in production,
  whereas the development store on 54320 turns them off), creates `pgconsole_bench` there and runs
  `migrate` programmatically; it starts its own monitored cluster `bench-pg17` on port 57017 (bench
  clusters use 57000+, a range devenv's port map leaves free) and stops both at the end. Nothing of
  the tests' or the demo's databases or clusters is used.
- **One machine.** The collector (this process), the monitored PostgreSQL and the history
  PostgreSQL share the same two cores, along with whatever else runs there. Django runs with
  `DEBUG=false` (as in production); `COLLECTOR_ACTIVITY_SAMPLES=0` except where said.
- **Collection (1).** Levels of 100, 1,000 and 5,000 entries: `pg_stat_statements_reset()`, then N
  distinct statements (N/5 tables × five query shapes: reads by key, an aggregate, an UPDATE and an
  upsert, run with bind parameters, pipelined) each executed once; a new server is registered and
  its baseline taken (all texts fetched once), 3 warm-up snapshots, then 30 timed snapshots
  (100 at 5,000 entries). Before each, ~10% of the statements run again (random), so about 10% of
  the entries change. pg_stat_statements also holds a handful of the collector's and the driver's
  own statements, hence "entries read" slightly above N. Timed: `server_collect` (history advisory
  lock, status rows, the read over a kept connection, texts only for new keys, deltas, encoding,
  the write transaction). At 5,000 entries, a background thread starts history maintenance on every
  10th snapshot: `rollups.build_bucket("hourly", ...)` of the current hour for this server (up to
  ~100 snapshots merged), `rollups.roll_up()`, `partitions.ensure_ahead()` after clearing the
  process's partition cache (all partitions checked again, as by a fresh worker), and
  `partitions.drop_expired()` after creating one expired daily partition of each raw table, so
  that the DDL (and its locks on the partitioned parents) really happens while snapshots are being
  written. Snapshots overlapping a maintenance run are counted in the median and p99 like the others.
  The read sends the previous state (keys, calls, plans, execution time, and on 17 stats_since and
  minmax_stats_since) as array parameters and gets back only new, changed and gone entries
  (`collectors/statements/pgss.py`); the bare SELECT baseline sends every entry. A last pass at 5,000 entries
  runs all statements before each of 10 snapshots, so that every entry changed: the worst case for
  that read (informative, no target).
- **Footprint (2).** Synthetic, through the real writer: `services._read` (and the monitored
  connection) are replaced at runtime in the benchmark process by a generator (`bench/synthetic.py`);
  everything after the read is the project's code (`server_collect` -> `deltas.compute`,
  `codec.encode`, `history.insert_statements` / `insert_snapshot` / `insert_waits` /
  `write_statement_state`, state and status rows) and the hourly/daily rollups run through
  `rollups.roll_up(now=...)` at each hour boundary. **Synthetic**: counter values, query texts,
  wait samples, and the clock (`taken_at` one minute apart over a past UTC day). Model per entry:
  probability of running in a minute heavy-tailed (lognormal σ=1.5, scaled to a mean of 10% of
  entries per minute; ~70 entries run every minute); calls when running 1 + Poisson(lognormal mean,
  median 4); rows, shared blocks hit (median 8 per call), blocks read for a fifth of the entries,
  execution time in µs (median 150 µs per call, ±30% noise); a quarter of the entries write (WAL
  records 1–3 per call, 60–250 bytes each, 2% FPI, dirtied and occasionally written blocks); 1%
  use temp files; min/max times move rarely (3% / 1% of changes); every other counter zero
  (no planning tracked, no I/O timing, no JIT). Texts: lognormal length, median 250 bytes, SQL-like
  words. Waits: Poisson(6) distinct (event, query) rows per minute, as `pg_stat_activity` sampling
  produces. Sizes are measured after VACUUM of every history table (as autovacuum would leave
  them); the statement state includes its churn (each minute deletes and re-inserts the changed
  entries' rows). The same-run baseline stores the first hour's deltas one row per changed
  statement per minute (all counters int8, 4 gauges, primary key) and multiplies by 24.
- **Ingest (3).** Same synthetic path, exactly 10% of 5,000 entries changing per snapshot (uniform),
  20 warm-up then 200 timed snapshots; entries processed/s = 5,000 × snapshots / wall time of
  `server_collect` (the generator runs outside the timed section), stored rows/s = the changed entries
  (500 a snapshot) × snapshots / the same time. The collector thread is pinned to one CPU; the
  history PostgreSQL backend may use the other. Same-run baseline: a bare binary COPY of the
  5,000 state rows, interleaved.
- **Statistics.** Medians; p99 by linear interpolation (`numpy.percentile`); with 100 samples p99
  lies between the two slowest snapshots. Ratios are medians of per-snapshot paired ratios.
- **Context (from the issue, not measured here):** PoWA's aggregating snapshot takes 9.2 s at 5,000
  entries on a comparable machine, its ordinary remote cycle about 300 ms, and its history about
  330 MB per server-day.
"""


# The soak run (bench/soak.py) writes its own section of the same file, between these markers; each
# run replaces only its part, so a `make bench` keeps the last 2-hour soak and a soak keeps the rest.
SOAK_START = "<!-- soak:start -->"
SOAK_END = "<!-- soak:end -->"
ALERTS_START = "<!-- alerts:start -->"
ALERTS_END = "<!-- alerts:end -->"
# The test suite's times (`make test` prints them; written in by hand from two runs on a clean clone).
TESTS_START = "<!-- tests:start -->"
TESTS_END = "<!-- tests:end -->"
# Measurements run and written in by hand (a benchmark against the commit before a change, in one session).
BY_HAND_START = "<!-- by-hand:start -->"
BY_HAND_END = "<!-- by-hand:end -->"
# Sections that a benchmark run on its own writes (the soak, the alerts) or a person does (the test suite, the
# measurements by hand), kept when the main report is written.
KEPT_SECTIONS = (
    (SOAK_START, SOAK_END),
    (ALERTS_START, ALERTS_END),
    (BY_HAND_START, BY_HAND_END),
    (TESTS_START, TESTS_END),
)


def marked_section(text: str, start: str, end: str) -> str:
    """The section of a benchmarks file between its markers, markers included; '' when it has none."""
    i = text.find(start)
    j = text.find(end, i)
    return text[i : j + len(end)] if i >= 0 and j >= 0 else ""


def with_marked_section(text: str, start: str, end: str, section: str) -> str:
    """``text`` with the section between the markers replaced by ``section`` (appended when it has none)."""
    old = marked_section(text, start, end)
    if old:
        return text.replace(old, section.strip(), 1)
    return text.rstrip("\n") + "\n\n" + section.strip() + "\n"


def soak_section(text: str) -> str:
    """The soak section of a benchmarks file, markers included; '' when it has none."""
    return marked_section(text, SOAK_START, SOAK_END)


def write_marked_section(section: str, start: str, end: str, path: str | Path = DOC) -> Path:
    """Replace only one marked section of ``path`` (appended when it has none; a new file holds only it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    path.write_text(with_marked_section(old, start, end, section))
    return path


def write_markdown(r: dict, path: str | Path = DOC) -> Path:
    """Write the report to ``path``, keeping the sections other runs wrote (KEPT_SECTIONS)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = markdown(r)
    before = path.read_text() if path.exists() else ""
    for start, end in KEPT_SECTIONS:
        kept = marked_section(before, start, end)
        if kept:
            text = with_marked_section(text, start, end, kept)
    path.write_text(text)
    return path
