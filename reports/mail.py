"""Every mail the reports send goes through here: three templates per mail (subject, text, HTML) under
templates/reports/, and the charts inline (multipart/related, shown by `cid:`), so they show where remote
images are blocked. The structure is multipart/alternative[text/plain, multipart/related[text/html, PNG...]]."""

from __future__ import annotations

import base64
from email.mime.image import MIMEImage
from email.mime.multipart import MIMEMultipart

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.core.mail.message import SafeMIMEText
from django.template.loader import render_to_string

from presentation.mail import render_mail
from reports.weekly import InlineImage, WeeklyReport


class RelatedEmail(EmailMultiAlternatives):
    """An EmailMultiAlternatives whose HTML alternative carries its own images (multipart/related)."""

    def _create_mime_attachment(self, content, mimetype):
        # An alternative built here already (the HTML with its images) goes in as it is.
        if isinstance(content, MIMEMultipart):
            return content
        return super()._create_mime_attachment(content, mimetype)


def _related(html: str, images: list[InlineImage]) -> MIMEMultipart:
    related = MIMEMultipart("related")
    related.attach(SafeMIMEText(html, "html", settings.DEFAULT_CHARSET))
    for image in images:
        part = MIMEImage(image.png, "png")
        part.add_header("Content-ID", f"<{image.cid}>")
        # inline, with a name: clients that list parts show a chart, not "noname".
        part.add_header("Content-Disposition", "inline", filename=image.cid.split("@")[0] + ".png")
        related.attach(part)
    return related


def render(name: str, context: dict) -> tuple[str, str, str]:
    """(subject, text, HTML) of templates/reports/<name>_subject.txt, <name>.txt and <name>.html."""
    return render_mail(f"reports/{name}", context)


def build(
    name: str, context: dict, *, to: str, images: list[InlineImage] = (), headers: dict[str, str] | None = None
) -> EmailMultiAlternatives:
    subject, text, html = render(name, context)
    message = RelatedEmail(subject, text, settings.DEFAULT_FROM_EMAIL, [to], headers=headers or {})
    if images:
        message.attach_alternative(_related(html, list(images)), "multipart/related")
    else:
        message.attach_alternative(html, "text/html")
    return message


def weekly_context(report: WeeklyReport, *, unsubscribe_url: str, test: bool = False) -> dict:
    return {"report": report, "unsubscribe_url": unsubscribe_url, "test": test}


def weekly_message(
    report: WeeklyReport, *, to: str, unsubscribe_url: str, test: bool = False
) -> EmailMultiAlternatives:
    """The weekly report for one recipient, with its own unsubscribe link (RFC 8058 one-click too)."""
    headers = {
        "List-Unsubscribe": f"<{unsubscribe_url}>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        # Bulk mail: auto-responders stay quiet.
        "Auto-Submitted": "auto-generated",
        "Precedence": "bulk",
    }
    context = weekly_context(report, unsubscribe_url=unsubscribe_url, test=test)
    return build("weekly", context, to=to, images=report.images, headers=headers)


def weekly_preview_html(report: WeeklyReport, *, unsubscribe_url: str) -> str:
    """The mail's HTML for a browser: the same render, each `cid:` image as a data: URI."""
    html = render_to_string("reports/weekly.html", weekly_context(report, unsubscribe_url=unsubscribe_url))
    for image in report.images:
        html = html.replace(f"cid:{image.cid}", "data:image/png;base64," + base64.b64encode(image.png).decode())
    return html
