"""console.forms: a server's form (name trimmed, tags and the names trusted for plans split once each, its connection
from its fields, the CA certificate checked with its sslmode, the stored password never shown), the members' roles,
and the advisor's thresholds (blank keeps the default; shares within 0..1; a warning below its critical). Each form
used directly."""

import pytest

from console.forms import AdvisorThresholdsForm, MemberAddForm, RoleForm, ServerForm
from devenv.tls import new_ca
from inventory.connection import Connection, parse_dsn
from inventory.models import Organization
from inventory.services import server_create

pytestmark = pytest.mark.django_db
REQUIRED = ["This field is required."]


@pytest.fixture
def org():
    return Organization.objects.create(name="forms-acme")


def server_data(org, **changes) -> dict:
    data = {"organization": org.pk, "name": "  db1  ", "host": "db1.internal", "port": "5433", "database": "app"}
    data |= {"user": "monitor", "password": " p w'd ", "sslmode": "require", "require_scram": "on", "interval_s": "60"}
    return data | changes


def test_a_server_form_trims_the_name_splits_the_tags_and_makes_the_connection(org):
    form = ServerForm(server_data(org, tags=" prod, eu-west,, prod ,x "), organizations=Organization.objects.all())
    assert form.is_valid(), form.errors
    assert (form.cleaned_data["name"], form.cleaned_data["tags"]) == ("db1", ["prod", "eu-west", "x"])
    assert form.connection() == Connection(
        host="db1.internal",
        port=5433,
        database="app",
        user="monitor",
        password=" p w'd ",  # not stripped: a password's blanks are part of it
        sslmode="require",
    )
    assert form.moves() and "forget_password" not in form.fields
    empty = ServerForm(server_data(org, password=""), organizations=Organization.objects.all())
    assert empty.is_valid() and empty.connection().password == ""


def test_a_server_form_refuses_bad_fields_with_their_messages(org):
    other = Organization.objects.create(name="forms-other")
    bad = {"name": "   ", "port": "70000", "interval_s": "4", "sslmode": "bogus", "organization": other.pk}
    form = ServerForm(server_data(org, **bad), organizations=Organization.objects.filter(pk=org.pk))
    assert form.errors == {
        "name": REQUIRED,
        "port": ["Ensure this value is less than or equal to 65535."],
        "interval_s": ["Ensure this value is greater than or equal to 5."],
        "sslmode": ["Select a valid choice. bogus is not one of the available choices."],
        "organization": ["Select a valid choice. That choice is not one of the available choices."],
    }


@pytest.mark.parametrize(
    "sslmode, root, field, words",
    [
        ("require", "system", "ssl_root_cert", "the system's trusted roots are used with sslmode verify-full only"),
        ("verify-full", "/etc/ssl/ca.pem", "ssl_root_cert", "a path on the console's machine is not accepted"),
        ("require", "CA", "sslmode", "choose sslmode verify-full (or verify-ca), not require"),
    ],
)
def test_the_ca_certificate_is_checked_with_its_sslmode_on_the_field_at_fault(org, sslmode, root, field, words):
    ca = new_ca("forms test CA").cert_pem
    form = ServerForm(
        server_data(org, sslmode=sslmode, ssl_root_cert=ca if root == "CA" else root),
        organizations=Organization.objects.all(),
    )
    assert not form.is_valid() and list(form.errors) == [field] and words in form.errors[field][0]


def test_a_pasted_ca_certificate_is_kept_without_its_crlf_for_verify_full(org):
    ca = new_ca("forms test CA").cert_pem
    pasted = "\r\n" + ca.replace("\n", "\r\n") + "  "
    form = ServerForm(server_data(org, sslmode="verify-full", ssl_root_cert=pasted), organizations=Organization.objects)
    assert form.is_valid(), form.errors
    assert form.cleaned_data["ssl_root_cert"] == ca.strip()


def test_editing_shows_the_server_never_its_password_and_knows_when_the_connection_moves(org):
    dsn = "postgresql://monitor:secret@db1.internal:5433/app?sslmode=require"
    server = server_create(name="db1", connection=parse_dsn(dsn), organization_name=org.name, tags=["prod", "eu"])
    form = ServerForm(organizations=Organization.objects.all(), server=server)
    assert (form.initial["tags"], form.initial["host"], form.initial["organization"]) == (
        "prod, eu",
        "db1.internal",
        org.pk,
    )
    assert "forget_password" in form.fields and "(one is stored)" in form.fields["password"].help_text
    assert "secret" not in str(form["password"])
    same = ServerForm(server_data(org, password=""), organizations=Organization.objects.all(), server=server)
    assert same.is_valid() and not same.moves()
    moved = ServerForm(server_data(org, host="db9.internal"), organizations=Organization.objects.all(), server=server)
    assert moved.is_valid() and moved.moves()
    weaker = server_data(org, password="")
    del weaker["require_scram"]  # the box unticked: SCRAM no longer required, the password must not follow
    unticked = ServerForm(weaker, organizations=Organization.objects.all(), server=server)
    assert unticked.is_valid() and unticked.moves()


def test_the_names_trusted_for_plans_are_split_at_commas_with_their_inner_blanks_kept(org):
    typed = {"plans_trusted_roles": " app_owner , Reporting,, my role ,app_owner ", "plans_trusted_schemas": "ext"}
    form = ServerForm(server_data(org, **typed), organizations=Organization.objects.all())
    assert form.is_valid(), form.errors
    assert form.cleaned_data["plans_trusted_roles"] == ["app_owner", "Reporting", "my role"]
    assert form.cleaned_data["plans_trusted_schemas"] == ["ext"]
    assert form.fields["plans_trusted_roles"].label == "Trusted roles (plans)"
    assert (
        "Name only roles whose code may safely run as the monitoring role."
        in form.fields["plans_trusted_roles"].help_text
    )
    empty = ServerForm(server_data(org), organizations=Organization.objects.all())
    assert empty.is_valid() and empty.cleaned_data["plans_trusted_roles"] == []


def test_bad_names_trusted_for_plans_are_refused_on_their_field(org):
    typed = {"plans_trusted_roles": "ok, " + "é" * 32, "plans_trusted_schemas": "a\x00b"}
    form = ServerForm(server_data(org, **typed), organizations=Organization.objects.all())
    assert form.errors == {
        "plans_trusted_roles": [
            f"role name {'é' * 32!r} is 64 bytes in UTF-8: PostgreSQL's names have at most 63 (it truncates longer "
            "ones)"
        ],
        "plans_trusted_schemas": ["Null characters are not allowed."],  # Django's CharField says it first
    }


def test_editing_shows_the_names_trusted_for_plans_and_keeps_a_name_the_field_cannot_carry(org):
    server = server_create(
        name="db1",
        connection=parse_dsn("postgresql://monitor:secret@db1.internal:5433/app"),
        organization_name=org.name,
        plans_trusted_roles=["app_owner", "my role"],
        plans_trusted_schemas=["a,b"],
    )
    form = ServerForm(organizations=Organization.objects.all(), server=server)
    assert form.initial["plans_trusted_roles"] == "app_owner, my role"
    assert not form.fields["plans_trusted_roles"].disabled
    # Shown joined, "a,b" would come back as two schemas: the field is read-only and keeps the stored list.
    assert form.fields["plans_trusted_schemas"].disabled
    assert "It holds such a name: change it there." in form.fields["plans_trusted_schemas"].help_text
    posted = server_data(org, plans_trusted_roles="app_owner", plans_trusted_schemas="a, b, c")
    edited = ServerForm(posted, organizations=Organization.objects.all(), server=server)
    assert edited.is_valid(), edited.errors
    assert (edited.cleaned_data["plans_trusted_roles"], edited.cleaned_data["plans_trusted_schemas"]) == (
        ["app_owner"],
        ["a,b"],
    )
    assert not edited.moves()


def test_a_member_gets_one_of_the_consoles_three_roles():
    assert [value for value, _ in RoleForm().fields["role"].choices] == ["viewer", "dba", "admin"]
    assert MemberAddForm({"username": "bob", "role": "dba"}).is_valid()
    assert MemberAddForm({"username": "", "role": "owner"}).errors == {
        "username": REQUIRED,
        "role": ["Select a valid choice. owner is not one of the available choices."],
    }
    assert RoleForm({"role": "Admin"}).errors == {
        "role": ["Select a valid choice. Admin is not one of the available choices."]
    }


def test_blank_thresholds_keep_the_defaults_shown_as_placeholders():
    defaults = AdvisorThresholdsForm({}).defaults
    assert defaults["clear_after_minutes"] == 120 and defaults["dealloc_critical_per_s"] == 10.0
    form = AdvisorThresholdsForm({}, overrides={"plan_share": 0.7, "resets_max": None})
    assert form.is_valid() and set(form.cleaned_data.values()) == {None}
    rows = {field.name: (value, default) for field, value, default in form.rows()}
    assert rows["plan_share"] == (0.7, 0.5) and rows["resets_max"] == (None, 1)
    assert form.fields["dealloc_warning_per_s"].widget.attrs["placeholder"] == "0.01"


def test_thresholds_out_of_range_or_a_warning_not_below_its_critical_are_refused():
    out_of_range = {"plan_share": "1.5", "dealloc_critical_per_s": "-1", "family_min_entries": "0", "resets_max": "0"}
    assert AdvisorThresholdsForm(out_of_range).errors == {
        "plan_share": ["Ensure this value is less than or equal to 1.0."],
        "dealloc_critical_per_s": ["Ensure this value is greater than or equal to 0.0."],
        "family_min_entries": ["Ensure this value is greater than or equal to 1."],
    }
    warning = "The warning threshold must be below the critical one ({})."
    assert AdvisorThresholdsForm({"dealloc_warning_per_s": "10"}).errors == {
        "dealloc_warning_per_s": [warning.format(10)]  # the default critical, 10/s
    }
    assert AdvisorThresholdsForm({"lwlock_share_warning": "0.3", "lwlock_share_critical": "0.25"}).errors == {
        "lwlock_share_warning": [warning.format(0.25)]
    }
    assert AdvisorThresholdsForm({"dealloc_warning_per_s": "20", "dealloc_critical_per_s": "50"}).is_valid()
