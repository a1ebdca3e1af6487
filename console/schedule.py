"""The whole Celery beat schedule, in one place. Every entry expires so a backlog never runs it twice."""

from django.conf import settings


def beat_schedule() -> dict:
    tick = settings.DISPATCH_TICK_S
    return {
        "dispatch-collections": {
            "task": "collectors.tasks.dispatch_due_collections",
            "schedule": tick,
            "options": {"expires": tick},
        },
        # Plans of each server's top statements without a recent one, within each server's budget.
        "plans": {
            "task": "collectors.tasks.plan_fleet",
            "schedule": float(settings.PLANS["TICK_S"]),
            "options": {"expires": settings.PLANS["TICK_S"] * 0.9},
        },
        "history-rollups": {
            "task": "history.tasks.roll_up_history",
            "schedule": 300.0,
            "options": {"expires": 290},
        },
        # The advisor reads what the collections stored: every enabled server, one task each.
        "advisor": {
            "task": "advisor.tasks.advise_fleet",
            "schedule": float(settings.ADVISOR_INTERVAL_S),
            "options": {"expires": settings.ADVISOR_INTERVAL_S * 0.9},
        },
        # Weekly reports: organizations whose day and hour have come (in their time zone) and whose last
        # complete week is not claimed yet; running it again finds nothing more to do.
        "weekly-reports": {
            "task": "reports.tasks.send_due_reports",
            "schedule": 300.0,
            "options": {"expires": 290},
        },
        # Audit exports: bundles past EXPORT_RETENTION_DAYS deleted, lost or abandoned builds sent again.
        "audit-exports-tidy": {
            "task": "exports.tidy_audit_exports",
            "schedule": 600.0,
            "options": {"expires": 590},
        },
        # Alert deliveries whose message was lost (a flushed broker, a worker that died holding it): sent again.
        "alerts-resend-lost": {
            "task": "alerts.tasks.resend_lost_deliveries",
            "schedule": float(settings.ALERTS_TIDY_S),
            "options": {"expires": settings.ALERTS_TIDY_S * 0.9},
        },
        # Alert rules over every organization's servers: conditions opened, resolved, reminded (each claimed once).
        "alerts-evaluate": {
            "task": "alerts.tasks.evaluate_alerts",
            "schedule": float(settings.ALERTS_EVALUATE_S),
            "options": {"expires": settings.ALERTS_EVALUATE_S * 0.9},
        },
        # Stored texts redacted by an older version of the redaction: redacted again, in batches.
        "redact-texts-again": {
            "task": "collectors.tasks.redact_texts_again",
            "schedule": 600.0,
            "options": {"expires": 590},
        },
        "history-partitions": {
            "task": "history.tasks.maintain_partitions",
            "schedule": 3600.0,
            "options": {"expires": 3500},
        },
    }
