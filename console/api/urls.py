"""/api/v1/ and the OpenAPI schema (/api/schema/) with its docs page (/api/docs/). API views handle
their own authentication (token or session), so the console's login redirect does not apply."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from console.api import (
    alerts,
    exports,
    fleet,
    indexes,
    organizations,
    plans,
    recommendations,
    servers,
    statements,
)
from console.api.common import api

urlpatterns = [
    path("api/schema/", api(SpectacularAPIView.as_view()), name="api-schema"),
    path("api/docs/", api(SpectacularSwaggerSplitView.as_view(url_name="api-schema")), name="api-docs"),
    path("api/v1/organizations/", api(organizations.Organizations.as_view()), name="api-organizations"),
    path("api/v1/fleet/", api(fleet.Fleet.as_view()), name="api-fleet"),
    # Each module's urlpatterns are relative to /api/v1/ and wrap their views with api().
    path("api/v1/", include(servers.urlpatterns)),
    path("api/v1/", include(statements.urlpatterns)),
    path("api/v1/", include(plans.urlpatterns)),
    path("api/v1/", include(indexes.urlpatterns)),
    path("api/v1/", include(recommendations.urlpatterns)),
    path("api/v1/", include(exports.urlpatterns)),
    path("api/v1/", include(alerts.urlpatterns)),
]
