"""Read-only admin pages over the collected history; it is removed only with its server."""

from django.contrib import admin

from history.models import Snapshot, Statement


@admin.register(Statement)
class StatementAdmin(admin.ModelAdmin):
    list_display = ["queryid", "server", "database_name", "user_name", "toplevel", "short_query", "first_seen_at"]
    list_filter = ["server", "text_status"]
    search_fields = ["query"]
    readonly_fields = [f.name for f in Statement._meta.fields]

    @admin.display(description="query")
    def short_query(self, obj: Statement) -> str:
        # Why there is no text, in the DBA's words (not visible to the role, or evicted before it was read).
        return (obj.query or f"<{obj.get_text_status_display()}>")[:120]

    def has_add_permission(self, request):
        return False

    # Statements are the facts' dimension: they go only with their server (console.services.server_delete).
    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Snapshot)
class SnapshotAdmin(admin.ModelAdmin):
    list_display = [
        "taken_at",
        "server",
        "kind",
        "interval_s",
        "entries",
        "entries_max",
        "changed",
        "new_entries",
        "gone_entries",
        "dealloc_delta",
        "track_planning",
        "full_reset",
    ]
    list_filter = ["server", "kind"]
    exclude = ["statements"]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in Snapshot._meta.fields if f.name != "statements"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
