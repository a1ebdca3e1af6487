"""Authentication and the read-only rule for API tokens: `Authorization: Bearer pgc_…`."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions

from accounts.models import ApiToken
from accounts.tokens import token_check, token_used


class TokenAuthentication(authentication.BaseAuthentication):
    keywords = ("Bearer", "Token")

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0] not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("the Authorization header must be 'Bearer <token>'")
        row = token_check(header[1])
        if row is None:
            raise exceptions.AuthenticationFailed("invalid, revoked or expired token")
        if row.organization_id is not None:
            raise exceptions.AuthenticationFailed(
                "this is a metrics token (one organization's /metrics only): the API needs a personal token"
            )
        token_used(row)
        return row.user, row

    def authenticate_header(self, request):
        return 'Bearer realm="api"'


class ReadOnlyToken(permissions.BasePermission):
    """A read-only token may only read (a session is not limited here: the role decides)."""

    message = "this token is read-only"
    code = "read_only_token"

    def has_permission(self, request, view) -> bool:
        token = request.auth
        if isinstance(token, ApiToken) and token.read_only:
            return request.method in permissions.SAFE_METHODS
        return True


class TokenScheme(OpenApiAuthenticationExtension):
    """The token in the OpenAPI schema (drf-spectacular finds it by subclassing)."""

    target_class = "console.api.auth.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "a personal API token: pgc_<prefix>_<secret>"}
