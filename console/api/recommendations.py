"""/api/v1/ endpoints: recommendations (being built)."""

urlpatterns: list = []
