"""reports.forms: the weekly report's settings form takes a day, an hour, an IANA time zone and extra addresses
(one per line or comma-separated), gives them back typed and cleaned, and names what is wrong otherwise."""

import pytest

from reports.forms import WEEKDAYS, ReportScheduleForm
from reports.models import ReportSchedule
from reports.services import MAX_EXTRA_RECIPIENTS

GOOD = {"enabled": "on", "weekday": "4", "hour": "17", "time_zone": "Europe/Paris", "extra_recipients": ""}


def _errors(**changes) -> dict[str, list[str]]:
    form = ReportScheduleForm({**GOOD, **changes})
    assert not form.is_valid()
    return form.errors


def test_good_input_comes_back_typed():
    form = ReportScheduleForm(GOOD)
    assert form.is_valid(), form.errors
    assert form.cleaned_data == {
        "enabled": True,
        "weekday": 4,
        "hour": 17,
        "time_zone": "Europe/Paris",
        "extra_recipients": [],
    }


def test_an_unticked_box_is_disabled_not_an_error():
    form = ReportScheduleForm({k: v for k, v in GOOD.items() if k != "enabled"})
    assert form.is_valid() and form.cleaned_data["enabled"] is False


def test_addresses_by_line_or_comma_lower_cased_once_each():
    form = ReportScheduleForm(
        {**GOOD, "extra_recipients": " CTO@Client.example, ops@client.example\n\ncto@client.example\n"}
    )
    assert form.is_valid(), form.errors
    assert form.cleaned_data["extra_recipients"] == ["cto@client.example", "ops@client.example"]


def test_every_address_that_is_not_one_is_named():
    errors = _errors(extra_recipients="ok@client.example\nnot an address, also@bad")
    assert errors == {"extra_recipients": ["not an email address: not an address, also@bad"]}


def test_too_many_addresses_says_how_many():
    many = "\n".join(f"r{i}@client.example" for i in range(MAX_EXTRA_RECIPIENTS + 1))
    errors = _errors(extra_recipients=many)
    expected = f"at most {MAX_EXTRA_RECIPIENTS} extra recipients ({MAX_EXTRA_RECIPIENTS + 1} given)"
    assert errors == {"extra_recipients": [expected]}


def test_a_zone_that_is_not_in_the_iana_database_is_refused():
    errors = _errors(time_zone="Mars/Olympus")
    assert errors == {"time_zone": ["'Mars/Olympus' is not a time zone of the IANA database (e.g. Europe/Paris, UTC)"]}
    assert "required" in _errors(time_zone="")["time_zone"][0]
    too_long = _errors(time_zone="Europe/" + "x" * 60)["time_zone"]
    assert any("at most 64 characters (it has 67)" in m for m in too_long), too_long


@pytest.mark.parametrize("field, value", [("weekday", "7"), ("weekday", "-1"), ("hour", "24"), ("hour", "noon")])
def test_a_day_or_hour_out_of_its_choices_is_refused(field, value):
    assert _errors(**{field: value}) == {
        field: [f"Select a valid choice. {value} is not one of the available choices."]
    }


def test_the_choices_are_the_seven_days_from_monday_and_24_hours():
    form = ReportScheduleForm()
    assert form.fields["weekday"].choices == list(enumerate(WEEKDAYS)) and WEEKDAYS[0] == "Monday"
    assert [h for h, _ in form.fields["hour"].choices] == list(range(24))
    assert form.fields["hour"].choices[7] == (7, "07:00")


def test_a_schedule_fills_the_initial_values_one_address_a_line():
    schedule = ReportSchedule(
        enabled=False, weekday=6, hour=23, time_zone="Asia/Tokyo", extra_recipients=["a@x.example", "b@y.example"]
    )
    form = ReportScheduleForm(schedule=schedule)
    assert form.initial == {
        "enabled": False,
        "weekday": 6,
        "hour": 23,
        "time_zone": "Asia/Tokyo",
        "extra_recipients": "a@x.example\nb@y.example",
    }
