"""/oidc/authenticate/ and /oidc/callback/ (the paths admins register and tests are told:
mozilla-django-oidc's own), and /oidc/logout/."""

from django.urls import path

from sso import views

urlpatterns = [
    path("callback/", views.SignInCallback.as_view(), name="oidc_authentication_callback"),
    path("authenticate/", views.SignInStart.as_view(), name="oidc_authentication_init"),
    path("logout/", views.SignOut.as_view(), name="oidc_logout"),
]
