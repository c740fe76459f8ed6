"""Channels: messaging surfaces outside the browser (contract: ``skald_hookspecs.channels``).

Inbound through ``HostApi.send_message`` (the sealed inbox holds what a locked member
is sent); outbound through ``ChannelRouter`` to ``Channel.deliver``.
"""

from skald_host.core.channels.router import ChannelRouter, validate_channel
from skald_host.core.channels.service import ChannelService

__all__ = ["ChannelRouter", "ChannelService", "validate_channel"]
