"""The host's own HTTP surface, one blueprint per concern."""

from skald_host.web.routes import (
    admin_members,
    admin_models,
    admin_plugins,
    admin_roles,
    admin_status,
    auth,
    channels,
    chat,
    events,
    files,
    folders,
    health,
    me,
    plugins,
    setup,
    static,
)

BLUEPRINTS = (
    health.bp,
    setup.bp,
    auth.bp,
    me.bp,
    admin_members.bp,
    admin_roles.bp,
    admin_plugins.bp,
    admin_models.bp,
    admin_status.bp,
    plugins.bp,
    chat.bp,
    folders.bp,
    events.bp,
    files.bp,
    channels.bp,
    static.bp,
)
