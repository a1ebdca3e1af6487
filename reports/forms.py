"""The weekly report's settings form in the console: when it goes out (in the organization's time zone) and
to which extra addresses, one per line."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from accounts.models import validate_time_zone
from reports.models import ReportSchedule
from reports.services import clean_addresses

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


class ReportScheduleForm(forms.Form):
    enabled = forms.BooleanField(required=False, label="Send the weekly report")
    weekday = forms.TypedChoiceField(choices=list(enumerate(WEEKDAYS)), coerce=int, label="Day")
    hour = forms.TypedChoiceField(choices=[(h, f"{h:02d}:00") for h in range(24)], coerce=int, label="Hour")
    time_zone = forms.CharField(
        max_length=64,
        validators=[validate_time_zone],
        widget=forms.TextInput(attrs={"list": "zones"}),
        help_text="The day and hour are in this time zone, and so are the times in the mail.",
    )
    extra_recipients = forms.CharField(
        required=False,
        label="Extra recipients",
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        help_text="Addresses without an account (client stakeholders), one per line. Members opt in themselves.",
    )

    def __init__(self, *args, schedule: ReportSchedule | None = None, **kwargs):
        if schedule is not None:
            kwargs.setdefault("initial", {}).update(
                enabled=schedule.enabled,
                weekday=schedule.weekday,
                hour=schedule.hour,
                time_zone=schedule.time_zone,
                extra_recipients="\n".join(schedule.extra_recipients or []),
            )
        super().__init__(*args, **kwargs)

    def clean_extra_recipients(self) -> list[str]:
        lines = self.cleaned_data["extra_recipients"].replace(",", "\n").splitlines()
        try:
            return clean_addresses(lines)
        except ValidationError as exc:
            raise ValidationError(exc.messages) from None
