"""Tenancy (organizations and their members) and the monitored servers with their collection status.

The tables keep the names they had when these models lived in the console app (db_table): moving the
models changed no table (inventory/migrations/0001_initial.py)."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.views.decorators.debug import sensitive_variables

from inventory import network_policy, tls
from inventory.catalog_names import clean_names
from inventory.crypto import decrypt_secret, encrypt_secret
from inventory.endpoint import ENDPOINT_FIELDS, Endpoint


class Organization(models.Model):
    name = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # What one organization may ask of the console (inventory.services enforces the first two, collectors.shares
    # the last two); empty: the defaults, settings ORG_MAX_SERVERS, ORG_MIN_INTERVAL_S, ORG_MAX_COLLECTING and
    # ORG_MAX_PLANNING. Set by a console administrator (Django admin).
    max_servers = models.PositiveIntegerField(
        null=True, blank=True, help_text="Servers it may register (empty: ORG_MAX_SERVERS)."
    )
    min_interval_s = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Shortest collection interval of its servers, seconds (empty: ORG_MIN_INTERVAL_S).",
    )
    max_collecting = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Collections of its servers running at once across the workers (empty: ORG_MAX_COLLECTING; "
        "0: no limit).",
    )
    max_planning = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Plan jobs of its servers (rounds, EXPLAINs asked for) running at once on the plans workers "
        "(empty: ORG_MAX_PLANNING; 0: no limit).",
    )

    def server_limit(self) -> int:
        return self.max_servers if self.max_servers is not None else settings.ORG_MAX_SERVERS

    def interval_floor_s(self) -> int:
        return self.min_interval_s if self.min_interval_s is not None else settings.ORG_MIN_INTERVAL_S

    def collecting_limit(self) -> int:
        """Its share of the collection workers (collectors.shares): 0 for none."""
        return self.max_collecting if self.max_collecting is not None else settings.ORG_MAX_COLLECTING

    def planning_limit(self) -> int:
        """Its share of the plans workers' threads (collectors.shares, collectors.plans.service): 0 for none."""
        return self.max_planning if self.max_planning is not None else settings.ORG_MAX_PLANNING

    class Meta:
        db_table = "console_organization"

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        VIEWER = "viewer"
        DBA = "dba"
        ADMIN = "admin"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)

    class Meta:
        db_table = "console_membership"
        constraints = [models.UniqueConstraint(fields=["organization", "user"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} in {self.organization} ({self.role})"


class Server(models.Model):
    class SslMode(models.TextChoices):
        DISABLE = "disable"
        ALLOW = "allow"
        PREFER = "prefer"
        REQUIRE = "require"
        VERIFY_CA = "verify-ca"
        VERIFY_FULL = "verify-full"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="servers")
    name = models.CharField(max_length=200)
    host = models.CharField(max_length=255)
    port = models.PositiveIntegerField(default=5432, validators=[MinValueValidator(1), MaxValueValidator(65535)])
    database = models.CharField(max_length=255, default="postgres")
    user = models.CharField(max_length=255)
    password_encrypted = models.TextField(blank=True, default="", editable=False)
    # New servers require TLS; servers added before keep what they had (their page warns, inventory.tls).
    sslmode = models.CharField(max_length=12, choices=SslMode.choices, default=SslMode.REQUIRE)
    ssl_root_cert = models.TextField(
        blank=True,
        default="",
        verbose_name="CA certificate",
        help_text="The CA that signed the server's certificate (PEM), or system for the machine's trusted roots; "
        "empty: ~/.postgresql/root.crt of the console's account. Used with sslmode verify-full or verify-ca.",
    )
    # The password goes only through SCRAM-SHA-256 (libpq's require_auth): never in clear nor as an MD5 hash to
    # a server, or an impostor, that asks for it so. New servers require it; servers added before do not.
    require_scram = models.BooleanField(
        default=True,
        verbose_name="Require SCRAM",
        help_text="Send the password only through SCRAM-SHA-256: the connection fails rather than send it in "
        "clear or as an MD5 hash.",
    )
    enabled = models.BooleanField(default=True)
    interval_s = models.PositiveIntegerField(default=60, validators=[MinValueValidator(5)])
    cpu_count = models.PositiveIntegerField(null=True, blank=True)
    tags = models.JSONField(default=list, blank=True)
    # Whose code the planner may run when the console plans this server's statements, besides PostgreSQL's, the
    # extensions' and the superusers' (collectors/plans/user_code.py): role and schema names as the catalog spells them.
    plans_trusted_roles = models.JSONField(
        default=list,
        blank=True,
        verbose_name="trusted roles (plans)",
        help_text="Roles whose functions, operators, casts and checks may run while the console plans a statement "
        "(a JSON list of names as the catalog spells them).",
    )
    plans_trusted_schemas = models.JSONField(
        default=list,
        blank=True,
        verbose_name="trusted schemas (plans)",
        help_text="Schemas whose functions, operators, casts and checks may run while the console plans a "
        "statement, whoever owns them (a JSON list of names as the catalog spells them).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    # Collection status, written by collectors only.
    next_collect_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_attempt_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_success_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_error_class = models.CharField(max_length=40, blank=True, default="", editable=False)
    last_error_message = models.TextField(blank=True, default="", editable=False)
    consecutive_failures = models.PositiveIntegerField(default=0, editable=False)
    status_notes = models.TextField(blank=True, default="", editable=False)
    server_version_num = models.PositiveIntegerField(null=True, blank=True, editable=False)
    extension_version = models.CharField(max_length=20, blank=True, default="", editable=False)

    class Meta:
        db_table = "console_server"
        constraints = [models.UniqueConstraint(fields=["organization", "name"], name="server_name_unique_per_org")]
        indexes = [models.Index(fields=["enabled", "next_collect_at"], name="server_due_idx")]

    def __str__(self) -> str:
        return f"{self.organization}/{self.name}"

    def clean(self) -> None:
        """The console dials only where its network policy allows (checked again at every connection), and
        verifies the server's certificate against a CA it can read; the names it trusts for plans could be in
        the catalog (each once)."""
        errors: dict[str, list[str]] = {}
        for field, kind in (("plans_trusted_roles", "role"), ("plans_trusted_schemas", "schema")):
            try:
                setattr(self, field, clean_names(getattr(self, field), kind=kind))
            except ValidationError as exc:
                errors[field] = exc.messages
        try:
            self.ssl_root_cert = tls.clean_root_cert(self.ssl_root_cert, sslmode=self.sslmode)
        except ValidationError as exc:
            raise ValidationError(exc.update_error_dict(errors)) from exc
        if errors:
            raise ValidationError(errors)
        if self.host and self.port:
            try:
                network_policy.check(self.host, self.port)
            except network_policy.Refused as exc:
                raise ValidationError({"host": exc.message}) from exc

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint.of({name: getattr(self, name) for name in ENDPOINT_FIELDS})

    def set_password(self, plain: str | None) -> None:
        self.password_encrypted = encrypt_secret(plain) if plain else ""

    @sensitive_variables()
    def get_password(self) -> str | None:
        return decrypt_secret(self.password_encrypted) if self.password_encrypted else None

    @property
    def tls_warnings(self) -> list[str]:
        """What its connection settings leave open, for its pages (servers added before the console required
        TLS and SCRAM keep their settings until someone changes them)."""
        warnings = []
        if self.sslmode in (self.SslMode.DISABLE, self.SslMode.ALLOW, self.SslMode.PREFER):
            warnings.append(
                f"sslmode={self.sslmode}: the connection may go without TLS, and the password, the query texts and "
                "the statistics cross the network in clear to whoever answers. Choose require, or verify-full with "
                "the server's CA certificate."
            )
        if self.password_encrypted and not self.require_scram:
            warnings.append(
                "SCRAM is not required: a server, or an impostor, that asks for the password in clear or as an MD5 "
                "hash gets it. Require SCRAM once the role's password is stored as SCRAM-SHA-256."
            )
        return warnings

    @property
    def status(self) -> str:
        if not self.enabled:
            return "disabled"
        if self.last_attempt_at is None:
            return "never collected"
        return "ok" if self.consecutive_failures == 0 else "failing"
