"""The Django admin for organizations and servers; every server write goes through inventory/services.py,
every delete through console/services.py (it removes the history too)."""

from django import forms
from django.contrib import admin, messages

from console.services import organization_delete, organizations_delete, server_delete, servers_delete
from history.public import Statement
from inventory.models import Membership, Organization, Server
from inventory.services import CONNECTION_FIELDS, PLANS_TRUST_FIELDS, UPDATABLE_FIELDS, server_update


class ServerAdminForm(forms.ModelForm):
    # Write-only: the stored password is never rendered back into the page.
    password = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Leave empty to keep the current password; it is cleared when organization, host, port, "
        "database, user, sslmode, CA certificate or Require SCRAM change. Stored encrypted.",
    )
    clear_password = forms.BooleanField(required=False, help_text="Remove the stored password.")

    class Meta:
        model = Server
        fields = [*CONNECTION_FIELDS, "name", "enabled", "interval_s", "cpu_count", "tags", *PLANS_TRUST_FIELDS]

    password_cleared = False  # set by save(): the connection changed and the password went with it

    def save(self, commit: bool = True) -> Server:
        if not commit:  # the admin's save_form: nothing stored yet
            return super().save(commit=False)
        password = self.cleaned_data.get("password") or None
        if self.instance._state.adding:
            server = super().save(commit=False)
            server.set_password(password)
            server.save()
            return server
        stored = Server.objects.get(pk=self.instance.pk)  # the row as it was before this form's changes
        had_password = bool(stored.password_encrypted)
        clear = self.cleaned_data.get("clear_password", False)
        data = {field: value for field, value in self.cleaned_data.items() if field in UPDATABLE_FIELDS}
        server = server_update(server=stored, data=data, password=password, clear_password=clear)
        self.password_cleared = had_password and not clear and not server.password_encrypted
        self.instance.password_encrypted = server.password_encrypted
        return server


class _DeletesHistory:
    """Deletes go through console.services, which remove the servers' history too: the confirmation
    needs no delete permission on the history's own pages (they allow none)."""

    def get_deleted_objects(self, objs, request):
        deleted, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        return deleted, model_count, perms_needed - {Statement._meta.verbose_name}, protected


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Organization)
class OrganizationAdmin(_DeletesHistory, admin.ModelAdmin):
    list_display = ["name", "created_at", "max_servers", "min_interval_s", "max_collecting", "max_planning"]
    inlines = [MembershipInline]

    # An organization's servers go with it, and their history with them.
    def delete_model(self, request, obj):
        organization_delete(organization=obj)

    def delete_queryset(self, request, queryset):
        organizations_delete(organizations=queryset)


@admin.register(Server)
class ServerAdmin(_DeletesHistory, admin.ModelAdmin):
    form = ServerAdminForm
    list_display = [
        "name",
        "organization",
        "host",
        "port",
        "database",
        "enabled",
        "interval_s",
        "status",
        "last_success_at",
        "last_error_class",
        "server_version_num",
        "extension_version",
    ]
    list_filter = ["organization", "enabled", "last_error_class"]
    search_fields = ["name", "host"]
    readonly_fields = [
        "last_attempt_at",
        "last_success_at",
        "last_error_class",
        "last_error_message",
        "consecutive_failures",
        "status_notes",
        "server_version_num",
        "extension_version",
        "next_collect_at",
    ]

    def save_model(self, request, obj, form, change):
        form.save()
        if form.password_cleared:
            messages.warning(
                request,
                f"The stored password of {obj} was cleared because its organization, host, port, database, user, "
                "sslmode, CA certificate or Require SCRAM changed: enter it again to use it there.",
            )

    def delete_model(self, request, obj):
        server_delete(server=obj)

    def delete_queryset(self, request, queryset):
        servers_delete(servers=queryset)
