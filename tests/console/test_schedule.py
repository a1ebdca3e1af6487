"""The one Celery beat schedule: every entry names a task the workers know and expires before the next run
of itself, so a backlog (a worker down for an hour) never runs an entry twice."""

from console.celery import app
from console.schedule import beat_schedule


def test_every_entry_is_a_known_task_that_expires_before_its_next_run():
    app.loader.import_default_modules()
    app.finalize()
    schedule = beat_schedule()
    assert app.conf.beat_schedule.keys() == schedule.keys()
    for name, entry in schedule.items():
        assert entry["task"] in app.tasks, name
        assert 0 < entry["options"]["expires"] <= entry["schedule"], name
    assert {"reports.tasks.send_due_reports", "exports.tidy_audit_exports"} <= {e["task"] for e in schedule.values()}
