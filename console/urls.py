from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from console.views import (
    account,
    advisor,
    alerts,
    exports,
    fleet,
    health,
    indexes,
    manage,
    metrics,
    organizations,
    planning,
    plans,
    reports,
    servers,
    statements,
    top,
)

urlpatterns = [
    path("", include(health.urlpatterns)),
    path("", include(metrics.urlpatterns)),
    path("", account.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("preferences/", account.preferences, name="preferences"),
    path("login/code/", account.two_factor_verify, name="two-factor-verify"),
    path("preferences/two-factor/", account.two_factor_settings, name="two-factor"),
    path("preferences/tokens/", account.tokens, name="tokens"),
    path("preferences/tokens/<str:prefix>/revoke/", account.token_revoke_view, name="token-revoke"),
    path("", include(fleet.urlpatterns)),
    path("", include(servers.urlpatterns)),
    path("", include(top.urlpatterns)),
    path("", include(statements.urlpatterns)),
    path("", include(plans.urlpatterns)),
    path("", include(planning.urlpatterns)),
    path("", include(indexes.urlpatterns)),
    path("", include(manage.urlpatterns)),
    path("", include(organizations.urlpatterns)),
    path("", include(advisor.urlpatterns)),
    path("", include(exports.urlpatterns)),
    path("", include(reports.urlpatterns)),
    path("", include(alerts.urlpatterns)),
    path("", include("console.api.urls")),
    path("admin/", admin.site.urls),
]

handler403 = "console.views.errors.forbidden"
handler404 = "console.views.errors.not_found"
handler500 = "console.views.errors.server_error"
