"""The web plumbing the apps' presentation shares: the ASGI layer (asgi_body, asgi_cors,
asgi_http), the gunicorn worker (webserver), the startup heap freeze, the open-file caps,
the database outage window, the middleware, the HTTP error envelope (errors), the JSON
parser, and the toolkits: api/ (DRF), console/ (Django admin), rendering/ (sanitized
markup of what agents send). Only presentation imports it (the domain-not-presentation
contract in pyproject.toml)."""
