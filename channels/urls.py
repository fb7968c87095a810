"""URLs of the channels' inbound side: each channel's own (mounted at the site's root)."""

from core.channels import channel_providers

urlpatterns = [
    pattern for channel in channel_providers().values() for pattern in channel.urlpatterns()
]
