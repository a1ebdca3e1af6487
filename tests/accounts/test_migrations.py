"""Upgrading a database where user preferences and API tokens were the console's: the move to accounts/ is
in Django's state only, so their rows stay, readable through the new models, with their content types."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from accounts.models import ApiToken, UserPreference

BEFORE = [("console", "0004_api_token"), ("accounts", None)]


@pytest.mark.django_db(transaction=True)
def test_preferences_and_tokens_written_before_the_move_are_read_after_it():
    user = User.objects.create_user("ada", password="pw-ada-long-1")
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state([("console", "0004_api_token")]).apps
    apps.get_model("console", "UserPreference").objects.create(user_id=user.pk, time_zone="Europe/Paris")
    apps.get_model("console", "ApiToken").objects.create(
        user_id=user.pk, name="ci", prefix="abc123", secret_hash="0" * 64
    )
    ContentType.objects.get_or_create(app_label="console", model="apitoken")
    ContentType.objects.filter(app_label="accounts").delete()

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert UserPreference.objects.get(user=user).time_zone == "Europe/Paris"
    assert ApiToken.objects.get(prefix="abc123").name == "ci"
    assert ContentType.objects.filter(app_label="accounts", model="apitoken").exists()
    assert not ContentType.objects.filter(app_label="console", model="apitoken").exists()
