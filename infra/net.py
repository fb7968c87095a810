"""Address safety (SSRF): which hosts a notification may reach, and reaching only those.

Public addresses are allowed; private, loopback and link-local ones only when
BPM_WEBHOOK_ALLOWED_HOSTS names the host or a network holding them. A host name is
resolved once per attempt and the request goes to the vetted addresses themselves, so
a rebinding DNS cannot swap in a private address between the check and the connect.
"""

import ipaddress
import socket
from urllib.parse import urlsplit, urlunsplit

import httpx
from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class DeliveryRefused(Exception):
    """The target may not be reached (private address not allowed): no retry."""


def literal_address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def resolve(host: str, port: int | None) -> list[IPAddress]:
    infos = socket.getaddrinfo(host, port or 443, proto=socket.IPPROTO_TCP)
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def host_allowed(host: str, addresses: list) -> bool:
    """Public addresses are allowed; private/loopback ones only via BPM_WEBHOOK_ALLOWED_HOSTS."""
    allowed_names, allowed_networks = set(), []
    for entry in settings.BPM_WEBHOOK_ALLOWED_HOSTS:
        try:
            allowed_networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            allowed_names.add(entry.lower())
    if host.lower() in allowed_names:
        return True
    return bool(addresses) and all(
        address.is_global or any(address in network for network in allowed_networks)
        for address in addresses
    )


def refused_at_subscription(host: str, port: int | None) -> bool:
    """Whether subscribing to `host` is refused now: an address or localhost that is not
    allowed. Other names are vetted at each attempt (what they resolve to may change)."""
    literal = literal_address(host)
    if literal is None and host != "localhost":
        return False
    return not host_allowed(host, [literal] if literal is not None else resolve(host, port))


def vetted_addresses(url: str) -> list[IPAddress]:
    """Resolve the URL's host once and vet every address it gives."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        addresses = resolve(host, parts.port)
    except OSError as exc:
        raise httpx.ConnectError(f"cannot resolve {host}: {exc}") from exc
    if not host_allowed(host, addresses):
        raise DeliveryRefused(f"{host} resolves to a private or loopback address")
    return addresses


def post_pinned(
    client: httpx.Client, url: str, addresses: list[IPAddress], body: bytes, headers: dict
) -> httpx.Response:
    """POST to the vetted addresses themselves, not to a second DNS answer.

    The URL's host is replaced by the address (so a rebinding DNS cannot swap in a
    private one after the check); Host and TLS SNI/certificate checks keep the name.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    extensions = {}
    if parts.scheme == "https" and literal_address(host) is None:
        extensions["sni_hostname"] = host
    auth = (
        httpx.BasicAuth(parts.username, parts.password or "")
        if parts.username
        else httpx.USE_CLIENT_DEFAULT
    )
    headers = {**headers, "host": parts.netloc.rpartition("@")[2]}  # without user:password
    error: httpx.ConnectError | None = None
    for address in addresses:
        literal = f"[{address}]" if address.version == 6 else str(address)
        pinned = urlunsplit(parts._replace(netloc=f"{literal}{port}"))
        try:
            return client.post(
                pinned, content=body, headers=headers, extensions=extensions, auth=auth
            )
        except httpx.ConnectError as exc:  # try the host's next address
            error = exc
    assert error is not None  # vetted_addresses never returns an empty list
    raise error


def redacted_url(url: str) -> str:
    """The URL without user:password, query string or fragment: scheme, host, port, path.

    A subscription's URL may carry credentials; only this form goes into the audit trail,
    the API and the console's lists.
    """
    try:
        parts = urlsplit(str(url))
        host = parts.netloc.rpartition("@")[2]
    except ValueError:
        return ""
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
