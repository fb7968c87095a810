"""OpenAPI: describe the bearer-token scheme to drf-spectacular (imported in AppConfig.ready)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "breakpoints.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An agent token (create_agent_token) or a personal token "
            "(create_user_token): `Authorization: Bearer bpm_…`.",
        }
