"""The tests' password hasher: Django's PBKDF2 at one round instead of a million (0.2 s a hash here, and the
suite makes thousands of users and logins). Its hashes carry their own round count, so the console's processes
that the tests start with the product's settings (gunicorn, workers) check them as they check their own; the
product's default is shown in force by tests/console/test_settings.py."""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class OneRoundPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1
