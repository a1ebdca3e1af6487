"""What the audit export tests share on top of the known history: members of each role, recommendations
inside and outside the window, hostile query texts in the statement dimension, a monitoring password,
and readers of every file of a bundle (PDF text, workbook, CSV files, JSON)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import zipfile
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import connection
from openpyxl import load_workbook

from advisor.models import Recommendation, RecommendationEvent
from inventory.models import Membership, Organization
from readtier import Page, top_statements

SECRET = "hunter2-in-a-query"  # a password inside a statement's text
MONITOR_PASSWORD = "monitor-pw-never-exported"
SCRIPT = "<script>alert('pwned')</script>"
CHANGE = "ALTER SYSTEM SET pg_stat_statements.max = 10000;"


def members(history, suffix: str = "") -> dict:
    """role -> user of the history's organization; "outsider": an admin of another organization."""
    users = {}
    for role in ("viewer", "dba", "admin"):
        users[role] = get_user_model().objects.create_user(f"exp-{role}{suffix}", password="x")
        Membership.objects.create(organization=history.organization, user=users[role], role=role)
    other, _ = Organization.objects.get_or_create(name="rep-other")
    users["outsider"] = get_user_model().objects.create_user(f"exp-outsider{suffix}", password="x")
    Membership.objects.create(organization=other, user=users["outsider"], role="admin")
    return users


def _rec(
    server,
    *,
    rule: str,
    subject: str,
    severity: str,
    title: str,
    events: list[tuple[datetime, str]],
    evidence: list | None = None,
    change: str = "",
) -> Recommendation:
    first = events[0][0]
    resolved = events[-1][0] if events[-1][1] in ("resolved", "cleared") else None
    rec = Recommendation.objects.create(
        server=server,
        rule=rule,
        subject=subject,
        subject_key=subject[:64],
        severity=severity,
        title=title,
        explanation=f"{title}: 42.5 deallocations/s over the last day.",
        change_text=change,
        change_apply="restart" if change else "",
        effect="No more evictions.",
        cost="about 10 MB of shared memory",
        evidence=evidence or [],
        references=["https://example.org/dalibo-audit"],
        first_seen_at=first,
        opened_at=first,
        last_seen_at=events[-1][0],
        status="resolved" if resolved else "open",
        resolved_at=resolved,
    )
    for at, kind in events:
        RecommendationEvent.objects.create(recommendation=rec, at=at, kind=kind, severity=severity)
    return rec


def add_findings(history) -> dict[str, Recommendation]:
    """One raised inside the window (with evidence and a change), one open since before it and resolved in it,
    one resolved before it and one raised after it (neither is a finding of the window)."""
    w = history.week.window
    server = history.server
    points = [[(w.start + timedelta(hours=h)).isoformat(), None if h == 5 else 40.0 + h] for h in range(24)]
    return {
        "inside": _rec(
            server,
            rule="pgss_max",
            subject="server",
            severity="critical",
            title="Raise pg_stat_statements.max",
            events=[(w.start + timedelta(days=1), "opened")],
            change=CHANGE,
            evidence=[{"label": "dealloc/s", "unit": "/s", "points": points}],
        ),
        "across": _rec(
            server,
            rule="stats_resets",
            subject="server-resets",
            severity="warning",
            title="Stop resetting the statistics",
            events=[(w.start - timedelta(days=2), "opened"), (w.start + timedelta(days=3), "cleared")],
        ),
        "before": _rec(
            server,
            rule="scope",
            subject="save",
            severity="info",
            title="Turn save on",
            events=[(w.start - timedelta(days=5), "opened"), (w.start - timedelta(days=4), "resolved")],
        ),
        "after": _rec(
            server,
            rule="track_planning",
            subject="tp",
            severity="info",
            title="Turn track_planning on",
            events=[(w.end + timedelta(hours=1), "opened")],
        ),
    }


def hostile_texts(history) -> tuple[int, int]:
    """The heaviest statement's text holds a password, the second's a script tag (as a text stored before
    redaction existed would): (their statement ids)."""
    rows = top_statements(server_id=history.server.pk, window=history.week.window, page=Page(1, 2)).rows
    first, second = rows[0].statement_id, rows[1].statement_id
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE collectors_statement SET query = %s WHERE id = %s",
            [f"ALTER ROLE app PASSWORD '{SECRET}' /* {rows[0].query} */", first],
        )
        cur.execute(
            "UPDATE collectors_statement SET query = %s WHERE id = %s",
            [f"SELECT '{SCRIPT}' FROM accounts WHERE id = $1", second],
        )
    server = history.server
    server.set_password(MONITOR_PASSWORD)
    server.save(update_fields=["password_encrypted"])
    return first, second


@dataclass
class Bundle:
    files: dict[str, bytes]

    @property
    def doc(self) -> dict:
        return json.loads(self.files["audit.json"])

    def pdf_text(self, tmp_path) -> str:
        path = tmp_path / "audit.pdf"
        path.write_bytes(self.files["audit.pdf"])
        return subprocess.run(
            ["pdftotext", "-layout", str(path), "-"], check=True, capture_output=True, text=True
        ).stdout

    def sheets(self) -> dict[str, list[list]]:
        wb = load_workbook(io.BytesIO(self.files["audit.xlsx"]))
        return {ws.title: [list(r) for r in ws.iter_rows(values_only=True)] for ws in wb.worksheets}

    def csvs(self) -> dict[str, list[list[str]]]:
        return {
            name.removeprefix("csv/").removesuffix(".csv"): list(csv.reader(io.StringIO(data.decode())))
            for name, data in self.files.items()
            if name.startswith("csv/")
        }

    def texts(self, tmp_path) -> dict[str, str]:
        """Every file as text a reader would see (the PDF's extracted text, the workbook's cells)."""
        out = {name: data.decode() for name, data in self.files.items() if not name.endswith((".pdf", ".xlsx"))}
        out["audit.pdf"] = self.pdf_text(tmp_path)
        out["audit.xlsx"] = "\n".join(str(v) for rows in self.sheets().values() for r in rows for v in r)
        return out


def unzip(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {n: z.read(n) for n in z.namelist()}
