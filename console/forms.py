"""The console's forms: a server to monitor (its password write-only) and an organization's members."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from psycopg.conninfo import make_conninfo

from inventory.models import Membership, Organization, Server

CONNECTION_FIELDS = ("host", "port", "database", "user")


class ServerForm(forms.Form):
    """Add or edit a server. The password is never rendered back: empty keeps the stored one (unless the
    connection moves elsewhere, see inventory.services.server_update)."""

    organization = forms.ModelChoiceField(queryset=Organization.objects.none(), empty_label=None)
    name = forms.CharField(max_length=200)
    host = forms.CharField(max_length=255, help_text="Host name or IP address the collectors connect to.")
    port = forms.IntegerField(min_value=1, max_value=65535, initial=5432)
    database = forms.CharField(max_length=255, initial="postgres",
                               help_text="The database where the pg_stat_statements extension is created.")  # fmt: skip
    user = forms.CharField(max_length=255, label="Role", initial="pgconsole_monitor")
    password = forms.CharField(required=False, strip=False, widget=forms.PasswordInput(render_value=False))
    forget_password = forms.BooleanField(required=False, label="Forget the stored password")
    sslmode = forms.ChoiceField(choices=[(m, m) for m in Server.SslMode.values], initial=Server.SslMode.PREFER,
                                label="sslmode")  # fmt: skip
    interval_s = forms.IntegerField(min_value=5, initial=60, label="Collection interval (s)")
    cpu_count = forms.IntegerField(min_value=1, required=False, label="CPUs",
                                   help_text="Optional: the server's CPU count, to put database time per second "
                                             "in proportion.")  # fmt: skip
    tags = forms.CharField(required=False, help_text="Comma-separated, e.g. prod, eu-west.")
    enabled = forms.BooleanField(required=False, initial=True, label="Collect (enabled)")

    def __init__(self, *args, organizations: QuerySet[Organization], server: Server | None = None, **kwargs):
        self.server = server
        if server is not None:
            kwargs.setdefault("initial", {}).update(
                {
                    name: getattr(server, name)
                    for name in ("name", *CONNECTION_FIELDS, "sslmode", "interval_s", "cpu_count", "enabled")
                },
                organization=server.organization_id,
                tags=", ".join(server.tags),
            )
        super().__init__(*args, **kwargs)
        self.fields["organization"].queryset = organizations
        if server is None:
            del self.fields["forget_password"]
            self.fields["password"].help_text = "Write-only: it is stored encrypted and never shown again."
        else:
            self.fields["password"].help_text = (
                "Write-only. Empty keeps the stored password"
                + (" (one is stored)" if server.password_encrypted else " (none is stored)")
                + ", unless host, port, database or role change: then it is cleared, never sent elsewhere."
            )

    def clean_tags(self) -> list[str]:
        tags = [t.strip() for t in self.cleaned_data["tags"].split(",") if t.strip()]
        return list(dict.fromkeys(tags))

    def clean_name(self) -> str:
        return self.cleaned_data["name"].strip()

    def dsn(self) -> str:
        """The connection as inventory.services.server_create takes it (a libpq conninfo string)."""
        cd = self.cleaned_data
        return make_conninfo("", host=cd["host"], port=cd["port"], dbname=cd["database"], user=cd["user"],
                             password=cd["password"] or None, sslmode=cd["sslmode"])  # fmt: skip

    def moves(self) -> bool:
        """The connection fields differ from the stored server's (a stored password must not follow)."""
        if self.server is None:
            return True
        return any(self.cleaned_data.get(name) != getattr(self.server, name) for name in CONNECTION_FIELDS)

    def add_service_error(self, error: ValidationError) -> None:
        """A service's ValidationError on the fields it names, the rest on the form."""
        if hasattr(error, "error_dict"):
            for name, errors in error.error_dict.items():
                self.add_error(name if name in self.fields else None, errors)
        else:
            self.add_error(None, error)


# The roles as the console names them everywhere (viewer, dba, admin), not the model's title-cased labels.
ROLE_CHOICES = [(role, role) for role in Membership.Role.values]


class MemberAddForm(forms.Form):
    username = forms.CharField(max_length=150, label="User name")
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial=Membership.Role.VIEWER)


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=ROLE_CHOICES)
