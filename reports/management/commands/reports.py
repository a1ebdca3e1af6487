"""manage.py reports preview --org ORG [--week 2026-W47] [--out FILE.html]
manage.py reports send --org ORG [--week 2026-W47] [--to ADDRESS]

`preview` renders the weekly report (the mail's HTML, charts inline as data: URIs) without sending it;
`send` sends it as beat would (claiming the week: a second run sends nothing), or with --to, as a test to
one address (recorded as a test; the week stays unclaimed)."""

from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from inventory.models import Organization
from reports.mail import weekly_preview_html
from reports.selectors import report_week
from reports.services import report_send_test, report_send_weekly
from reports.unsubscribe import unsubscribe_url
from reports.weekly import weekly_report
from reports.weeks import ReportWeek, WeekError


class Command(BaseCommand):
    help = "Preview or send an organization's weekly report."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        for name, text in (
            ("preview", "render the report without sending it"),
            ("send", "send the report (once per week), or a test with --to"),
        ):
            p = sub.add_parser(name, help=text)
            p.add_argument("--org", required=True, help="the organization's name (or id)")
            p.add_argument("--week", help="an ISO week, e.g. 2026-W47 (default: the last complete week)")
        sub.choices["preview"].add_argument("--out", type=Path, help="write the HTML here (default: standard output)")
        sub.choices["send"].add_argument("--to", help="send a test to this address only (the week stays unclaimed)")

    def handle(self, *args, action, org, week, **opts):
        organization = self._organization(org)
        try:
            w = report_week(organization_id=organization.pk, label=week, now=timezone.now())
        except WeekError as exc:
            raise CommandError(f"--week: {exc}") from exc
        getattr(self, f"_{action}")(organization, w, **opts)

    def _organization(self, text: str) -> Organization:
        found = Organization.objects.filter(name=text).first()
        if found is None and text.isdigit():
            found = Organization.objects.filter(pk=int(text)).first()
        if found is None:
            names = ", ".join(Organization.objects.order_by("name").values_list("name", flat=True)[:20]) or "none yet"
            raise CommandError(f"--org: no organization {text!r} (organizations: {names})")
        return found

    def _preview(self, organization: Organization, week: ReportWeek, *, out: Path | None, **_):
        report = weekly_report(organization_id=organization.pk, week=week)
        link = unsubscribe_url(organization_id=organization.pk, address="preview@example.com")
        html = weekly_preview_html(report, unsubscribe_url=link)
        if out is None:
            self.stdout.write(html)
            return
        try:
            out.write_text(html, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"--out: cannot write {out}: {exc.strerror}") from exc
        self.stderr.write(
            f"wrote {out} ({len(html) // 1024} KB): {organization.name}, week {week.label}, "
            f"{len(report.servers)} servers, {len(report.images)} charts"
        )

    def _send(self, organization: Organization, week: ReportWeek, *, to: str | None, **_):
        if to is not None:
            try:
                result = report_send_test(organization_id=organization.pk, week=week, address=to)
            except ValidationError as exc:
                raise CommandError(f"--to: {' '.join(exc.messages)}") from exc
            what = f"test of {week.label} to {to}"
        else:
            result = report_send_weekly(organization_id=organization.pk, week=week)
            what = f"weekly report {week.label} of {organization.name}"
            if not result.claimed and result.pending == 0:
                self.stdout.write(f"{what}: already sent ({result.status}); nothing sent again")
                return
        self.stdout.write(
            f"{what}: {result.status}, {result.sent} sent, {result.failed} failed"
            + (f", {result.pending} to try again" if result.pending else "")
        )
        if result.pending:
            self._queue_retry(organization, week, result.send_id)
        for address, error in result.errors.items():
            self.stdout.write(f"  {address}: {error}")
        if result.failed and not result.sent:
            raise CommandError(f"{what}: every delivery failed")

    def _queue_retry(self, organization: Organization, week: ReportWeek, send_id: int) -> None:
        from reports.tasks import retry_delay_s, send_weekly_report

        kwargs = {"organization_id": organization.pk, "week": week.label, "send_id": send_id}
        try:
            send_weekly_report.apply_async(kwargs=kwargs, countdown=retry_delay_s(0))
        except Exception as exc:  # noqa: BLE001 - the broker is down: say what to do instead
            raise CommandError(f"could not queue the retry ({exc}); run this command again later to retry") from exc
        self.stdout.write(f"the worker tries the rest again in {retry_delay_s(0)} s, then with growing waits")
