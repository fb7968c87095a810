"""OpenAPI: the bearer-token scheme (imported in AppConfig.ready) and path post-processing."""

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


def strip_trailing_slashes(result, generator, request, public):
    """POSTPROCESSING_HOOK: list paths as the contract writes them (/api/breakpoints/{id}/status).

    The router accepts both forms ("/?"), which drf-spectacular renders as a trailing slash.
    """
    result["paths"] = {path.rstrip("/") or "/": item for path, item in result["paths"].items()}
    return result
