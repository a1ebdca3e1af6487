"""How a mail is written: three templates, `<name>_subject.txt`, `<name>.txt` and `<name>.html`, for the weekly
report and the alerts alike."""

from django.template.loader import render_to_string


def render_mail(name: str, context: dict) -> tuple[str, str, str]:
    """(subject on one line, text, HTML) of templates/<name>_subject.txt, <name>.txt and <name>.html."""
    subject = " ".join(render_to_string(f"{name}_subject.txt", context).split())
    return subject, render_to_string(f"{name}.txt", context), render_to_string(f"{name}.html", context)
