"""accounts.models: a user's preferences (a time zone of the IANA database, UTC by default, one row per user) and
their API tokens (a unique prefix, only a hash of the secret, nothing used, expired or revoked at creation). The
file shows the time zone validator's verdicts and message, and the models' defaults, names and constraints."""

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from accounts.models import ApiToken, UserPreference, validate_time_zone


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata"])
def test_a_zone_of_the_iana_database_is_accepted(zone):
    assert validate_time_zone(zone) is None


@pytest.mark.parametrize("zone", ["Mars/Olympus", "", "europe/paris", "Europe/Paris ", "+02:00", "CEST-ish"])
def test_anything_else_is_refused_with_its_name_and_an_example(zone):
    with pytest.raises(ValidationError) as refused:
        validate_time_zone(zone)
    assert refused.value.messages == [f"{zone!r} is not a time zone of the IANA database (e.g. Europe/Paris, UTC)"]


@pytest.fixture
def alice(db):
    return get_user_model().objects.create_user("alice")


def test_a_preference_shows_times_in_utc_until_the_user_picks_a_zone(alice):
    preference = UserPreference.objects.create(user=alice)
    assert preference.time_zone == "UTC" and alice.preference == preference
    assert str(preference) == "alice: UTC"
    preference.time_zone = "Europe/Paris"
    preference.full_clean()
    preference.save()
    assert str(UserPreference.objects.get(user=alice)) == "alice: Europe/Paris"


def test_a_preference_with_an_unknown_zone_does_not_validate(alice):
    with pytest.raises(ValidationError) as refused:
        UserPreference(user=alice, time_zone="Mars/Olympus").full_clean()
    assert refused.value.message_dict == {
        "time_zone": ["'Mars/Olympus' is not a time zone of the IANA database (e.g. Europe/Paris, UTC)"]
    }


def test_a_user_has_one_preference(alice):
    UserPreference.objects.create(user=alice, time_zone="Asia/Tokyo")
    with pytest.raises(IntegrityError), transaction.atomic():
        UserPreference.objects.create(user=alice, time_zone="UTC")
    assert UserPreference.objects.get(user=alice).time_zone == "Asia/Tokyo"


def test_a_new_token_is_writable_unused_unexpired_and_unrevoked(alice):
    token = ApiToken.objects.create(user=alice, name="ci-checks", prefix="a1b2c3d4", secret_hash="0" * 64)
    token.refresh_from_db()
    assert token.read_only is False and token.created_at is not None
    assert (token.expires_at, token.last_used_at, token.revoked_at) == (None, None, None)
    assert str(token) == "a1b2c3d4… (alice, ci-checks)"
    assert list(alice.api_tokens.all()) == [token]


def test_two_tokens_never_share_a_prefix_even_for_two_users(alice):
    bob = get_user_model().objects.create_user("bob")
    ApiToken.objects.create(user=alice, name="one", prefix="samepfx1", secret_hash="1" * 64)
    with pytest.raises(IntegrityError), transaction.atomic():
        ApiToken.objects.create(user=bob, name="two", prefix="samepfx1", secret_hash="2" * 64)
    assert ApiToken.objects.filter(prefix="samepfx1").get().user == alice


def test_deleting_a_user_deletes_their_preference_and_tokens(alice):
    UserPreference.objects.create(user=alice)
    ApiToken.objects.create(user=alice, name="one", prefix="gone0001", secret_hash="3" * 64)
    pk = alice.pk
    alice.delete()
    assert not UserPreference.objects.filter(user_id=pk).exists() and not ApiToken.objects.filter(user_id=pk).exists()
