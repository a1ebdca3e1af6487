"""/api/v1/ endpoints: servers (being built)."""

urlpatterns: list = []
