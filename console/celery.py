"""The Celery application; the beat schedule lives in console/schedule.py."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["collectors", "advisor", "reports"])


@app.on_after_finalize.connect
def _install_schedule(sender: Celery, **_: object) -> None:
    from console.schedule import beat_schedule

    sender.conf.beat_schedule = beat_schedule()
