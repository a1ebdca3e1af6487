"""Encryption at rest for monitoring passwords (Fernet, keyed by settings.CREDENTIALS_KEY)."""

from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.views.decorators.debug import sensitive_variables


class CredentialsError(Exception):
    """A stored password cannot be decrypted (the CREDENTIALS_KEY changed?)."""


@lru_cache(maxsize=4)
def _fernet(key: str) -> Fernet:
    return Fernet(key.encode())


def encrypt_secret(plain: str) -> str:
    return _fernet(settings.CREDENTIALS_KEY).encrypt(plain.encode()).decode()


@sensitive_variables()
def decrypt_secret(token: str) -> str:
    try:
        return _fernet(settings.CREDENTIALS_KEY).decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise CredentialsError("the stored password cannot be decrypted with CREDENTIALS_KEY") from exc
