"""The console's forms: a server to monitor (its password write-only), an organization's members and its
advisor thresholds."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from advisor.thresholds import OVERRIDE_PAIRS, OVERRIDES
from inventory import tls
from inventory.catalog_names import clean_names
from inventory.connection import Connection
from inventory.models import Membership, Organization, Server
from inventory.services import PLANS_TRUST_FIELDS, connection_moves

PLANS_TRUST_HELP = (
    "Planning a statement can run functions it calls. The console plans a statement only when every function, "
    "operator, cast or check its planning could call is PostgreSQL's, an extension's or a superuser's, or belongs to "
    "a role (or lies in a schema) named here. Name only roles whose code may safely run as the monitoring role."
)
# A name the comma-separated field cannot carry: the API and manage.py servers can.
PLANS_TRUST_UNTYPABLE = (
    " Comma-separated, as the catalog spells them (case matters, no quotes); a name holding a comma, or beginning or "
    "ending with a blank, is set through the API or manage.py servers."
)


class ServerForm(forms.Form):
    """Add or edit a server. The password is never rendered back: empty keeps the stored one (unless the
    connection moves elsewhere, see inventory.services.server_update)."""

    organization = forms.ModelChoiceField(queryset=Organization.objects.none(), empty_label=None)
    name = forms.CharField(max_length=200)
    host = forms.CharField(max_length=255, help_text="Host name or IP address the collectors connect to.")
    port = forms.IntegerField(min_value=1, max_value=65535, initial=5432)
    database = forms.CharField(
        max_length=255, initial="postgres", help_text="The database where the pg_stat_statements extension is created."
    )
    user = forms.CharField(max_length=255, label="Role", initial="pgconsole_monitor")
    password = forms.CharField(required=False, strip=False, widget=forms.PasswordInput(render_value=False))
    forget_password = forms.BooleanField(required=False, label="Forget the stored password")
    sslmode = forms.ChoiceField(
        choices=[(m, m) for m in Server.SslMode.values],
        initial=Server.SslMode.REQUIRE,
        label="sslmode",
        help_text="require: always TLS. verify-full: TLS to a server whose certificate the CA below vouches for, "
        "under this host name (the only mode an impostor cannot answer).",
    )
    ssl_root_cert = forms.CharField(
        required=False,
        strip=False,
        label="CA certificate",
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "-----BEGIN CERTIFICATE-----  (or: system)"}),
        help_text="For verify-full and verify-ca: the CA that signed the server's certificate (PEM), or system "
        "for the machine's trusted roots (a cloud provider's CA bundle is PEM too).",
    )
    require_scram = forms.BooleanField(
        required=False,
        initial=True,
        label="Require SCRAM",
        help_text="The password is sent only through SCRAM-SHA-256, never in clear nor as an MD5 hash.",
    )
    interval_s = forms.IntegerField(min_value=5, initial=60, label="Collection interval (s)")
    cpu_count = forms.IntegerField(
        min_value=1,
        required=False,
        label="CPUs",
        help_text="Optional: the server's CPU count, to put database time per second in proportion.",
    )
    tags = forms.CharField(required=False, help_text="Comma-separated, e.g. prod, eu-west.")
    plans_trusted_roles = forms.CharField(
        required=False, label="Trusted roles (plans)", help_text=PLANS_TRUST_HELP + PLANS_TRUST_UNTYPABLE
    )
    plans_trusted_schemas = forms.CharField(
        required=False,
        label="Trusted schemas (plans)",
        help_text="A schema named here is trusted whole, whoever owns what it holds." + PLANS_TRUST_UNTYPABLE,
    )
    enabled = forms.BooleanField(required=False, initial=True, label="Collect (enabled)")

    def __init__(self, *args, organizations: QuerySet[Organization], server: Server | None = None, **kwargs):
        self.server = server
        if server is not None:
            kwargs.setdefault("initial", {}).update(
                {
                    name: getattr(server, name)
                    for name in (
                        "name",
                        "host",
                        "port",
                        "database",
                        "user",
                        "sslmode",
                        "ssl_root_cert",
                        "require_scram",
                        "interval_s",
                        "cpu_count",
                        "enabled",
                    )
                },
                organization=server.organization_id,
                tags=", ".join(server.tags),
                **{name: ", ".join(getattr(server, name)) for name in PLANS_TRUST_FIELDS},
            )
        super().__init__(*args, **kwargs)
        self.fields["organization"].queryset = organizations
        for name in PLANS_TRUST_FIELDS:
            if server is not None and not all(_typable(n) for n in getattr(server, name)):
                # Shown joined, a stored name with a comma would come back as two names: it stays as stored.
                self.fields[name].disabled = True
                self.fields[name].help_text += " It holds such a name: change it there."
        if server is None:
            del self.fields["forget_password"]
            self.fields["password"].help_text = "Write-only: it is stored encrypted and never shown again."
        else:
            self.fields["password"].help_text = (
                "Write-only. Empty keeps the stored password"
                + (" (one is stored)" if server.password_encrypted else " (none is stored)")
                + ", unless organization, host, port, database, role, TLS or SCRAM settings change: then it is "
                "cleared, never sent elsewhere."
            )

    def clean_tags(self) -> list[str]:
        tags = [t.strip() for t in self.cleaned_data["tags"].split(",") if t.strip()]
        return list(dict.fromkeys(tags))

    def clean_plans_trusted_roles(self) -> list[str]:
        return self._trusted_names("plans_trusted_roles", kind="role")

    def clean_plans_trusted_schemas(self) -> list[str]:
        return self._trusted_names("plans_trusted_schemas", kind="schema")

    def _trusted_names(self, name: str, *, kind: str) -> list[str]:
        if self.fields[name].disabled:
            return list(getattr(self.server, name))
        return clean_names([n.strip() for n in self.cleaned_data[name].split(",") if n.strip()], kind=kind)

    def clean_name(self) -> str:
        return self.cleaned_data["name"].strip()

    def clean(self) -> dict:
        """The CA certificate checked with the sslmode it goes with, before a check or a save uses it."""
        cd = super().clean()
        if "sslmode" in cd and "ssl_root_cert" in cd:
            try:
                cd["ssl_root_cert"] = tls.clean_root_cert(cd["ssl_root_cert"], sslmode=cd["sslmode"])
            except ValidationError as exc:
                self.add_service_error(exc)
        return cd

    def connection(self) -> Connection:
        """The connection as inventory.services.server_create takes it."""
        return Connection.of(self.cleaned_data)

    def moves(self) -> bool:
        """The connection fields differ from the stored server's (a stored password must not follow)."""
        return self.server is None or connection_moves(self.server, self.cleaned_data)

    def add_service_error(self, error: ValidationError) -> None:
        """A service's ValidationError on the fields it names, the rest on the form."""
        if hasattr(error, "error_dict"):
            for name, errors in error.error_dict.items():
                self.add_error(name if name in self.fields else None, errors)
        else:
            self.add_error(None, error)


def _typable(name: str) -> bool:
    """Whether the comma-separated field gives `name` back as it is."""
    return "," not in name and name == name.strip()


# The roles as the console names them everywhere (viewer, dba, admin), not the model's title-cased labels.
ROLE_CHOICES = [(role, role) for role in Membership.Role.values]


class MemberAddForm(forms.Form):
    username = forms.CharField(max_length=150, label="User name")
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial=Membership.Role.VIEWER)


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=ROLE_CHOICES)


class AdvisorThresholdsForm(forms.Form):
    """An organization's overrides of the advisor's thresholds: blank keeps the default, shown as the placeholder."""

    def __init__(self, *args, overrides: dict[str, float | int | None] | None = None, **kwargs):
        kwargs.setdefault("initial", {}).update({k: v for k, v in (overrides or {}).items() if v is not None})
        super().__init__(*args, **kwargs)
        self.defaults = {o.field: o.default() for o in OVERRIDES}
        for o in OVERRIDES:
            default = self.defaults[o.field]
            if o.kind == "count":
                field = forms.IntegerField(min_value=o.minimum, max_value=int(o.maximum))
            else:
                field = forms.FloatField(min_value=0.0, max_value=o.maximum)
            field.required, field.label, field.help_text = False, o.label, f"Default {default:g}. {o.help_text}"
            field.widget = forms.NumberInput(
                attrs={"placeholder": f"{default:g}", "step": "1" if o.kind == "count" else "any"}
            )
            self.fields[o.field] = field

    def clean(self) -> dict:
        cleaned = super().clean()
        for warning, critical in OVERRIDE_PAIRS:
            low = cleaned.get(warning) if cleaned.get(warning) is not None else self.defaults[warning]
            high = cleaned.get(critical) if cleaned.get(critical) is not None else self.defaults[critical]
            if warning in cleaned and critical in cleaned and low >= high:
                self.add_error(warning, f"The warning threshold must be below the critical one ({high:g}).")
        return cleaned

    def rows(self) -> list[tuple[forms.BoundField, float | int | None, float | int]]:
        """(field, the organization's value or None for the default, the default) of every threshold."""
        return [(self[o.field], self.initial.get(o.field), self.defaults[o.field]) for o in OVERRIDES]
