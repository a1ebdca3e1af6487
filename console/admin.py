from django import forms
from django.contrib import admin

from console.models import Membership, Organization, Server


class ServerForm(forms.ModelForm):
    # Write-only: the stored password is never rendered back into the page.
    password = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Leave empty to keep the current password. Stored encrypted.",
    )
    clear_password = forms.BooleanField(required=False, help_text="Remove the stored password.")

    class Meta:
        model = Server
        fields = ["organization", "name", "host", "port", "database", "user", "sslmode", "enabled",
                  "interval_s", "cpu_count", "tags"]  # fmt: skip

    def save(self, commit=True):
        server = super().save(commit=False)
        if self.cleaned_data.get("clear_password"):
            server.set_password(None)
        elif self.cleaned_data.get("password"):
            server.set_password(self.cleaned_data["password"])
        if commit:
            server.save()
        return server


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    inlines = [MembershipInline]


@admin.register(Server)
class ServerAdmin(admin.ModelAdmin):
    form = ServerForm
    list_display = ["name", "organization", "host", "port", "database", "enabled", "interval_s", "status",
                    "last_success_at", "last_error_class", "server_version_num", "extension_version"]  # fmt: skip
    list_filter = ["organization", "enabled", "last_error_class"]
    search_fields = ["name", "host"]
    readonly_fields = ["last_attempt_at", "last_success_at", "last_error_class", "last_error_message",
                       "consecutive_failures", "status_notes", "server_version_num", "extension_version",
                       "next_collect_at"]  # fmt: skip
