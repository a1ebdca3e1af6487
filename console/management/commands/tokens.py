"""manage.py tokens create USER [--name NAME] [--read-only] [--expires DAYS] [--metrics ORGANIZATION] | list [USER] |
revoke USER PREFIX"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.models import ApiToken
from accounts.tokens import TokenError, token_create, token_revoke
from inventory.models import Organization


class Command(BaseCommand):
    help = "Create, list or revoke personal API tokens. A new token's secret is printed once and never stored."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create a token for USER and print it once")
        create.add_argument("user")
        create.add_argument("--name", default="cli", help="what the token is for (default: cli)")
        create.add_argument("--read-only", action="store_true", help="the token may only read")
        create.add_argument("--expires", type=int, metavar="DAYS", help="expire after DAYS days (default: never)")
        create.add_argument(
            "--metrics",
            metavar="ORGANIZATION",
            help="a metrics token: /metrics of this organization's servers only (read-only; for Prometheus)",
        )
        listing = sub.add_parser("list", help="list tokens (prefix, owner, name, access, expiry, last use)")
        listing.add_argument("user", nargs="?")
        revoke = sub.add_parser("revoke", help="revoke USER's token PREFIX (effective at once)")
        revoke.add_argument("user")
        revoke.add_argument("prefix")

    def handle(self, *args, action, **opts):
        getattr(self, f"_{action}")(**opts)

    def _user(self, username: str):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        return user

    def _create(self, *, user, name, read_only, expires, metrics=None, **_):
        organization = None
        if metrics is not None:
            organization = Organization.objects.filter(name=metrics).first()
            if organization is None:
                raise CommandError(f"no organization {metrics!r}")
        try:
            row, secret = token_create(
                user=self._user(user), name=name, read_only=read_only, expires_days=expires, organization=organization
            )
        except TokenError as exc:
            raise CommandError(str(exc)) from exc
        access = _access(row)
        until = f"expires {row.expires_at:%Y-%m-%d %H:%M} UTC" if row.expires_at else "no expiry"
        self.stderr.write(f"token {row.prefix} for {user} ({row.name}, {access}, {until}); shown once:")
        self.stdout.write(secret)

    def _list(self, *, user=None, **_):
        rows = ApiToken.objects.select_related("user", "organization").order_by("user__username", "created_at")
        if user:
            rows = rows.filter(user=self._user(user))
        for t in rows:
            access = _access(t)
            state = "revoked" if t.revoked_at else "active"
            until = f"expires {t.expires_at:%Y-%m-%d}" if t.expires_at else "no expiry"
            self.stdout.write(f"{t.prefix}  {t.user.get_username():<16} {t.name:<20} {access:<10} {state:<8} {until}")

    def _revoke(self, *, user, prefix, **_):
        try:
            row = token_revoke(user=self._user(user), prefix=prefix)
        except TokenError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"revoked {row.prefix} ({row.name})")


def _access(row: ApiToken) -> str:
    if row.organization_id is not None:
        return f"/metrics of {row.organization.name}"
    return "read-only" if row.read_only else "read-write"
