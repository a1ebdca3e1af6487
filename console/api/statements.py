"""/api/v1/ endpoints: statements (being built)."""

urlpatterns: list = []
