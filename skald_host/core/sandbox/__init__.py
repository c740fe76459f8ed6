"""Members' sandboxes: where ``execute_cmd`` runs (seed 001 "Filesystem & containers").

The backends come from plugins (``register_sandbox_backends``); ``SandboxManager``
picks one by the ``sandbox.backend`` setting and builds each member's ``SandboxSpec``:
their own uid, their home and memberships as mounts, the memory signposts, the
instance's limits. A member's command never runs on the bare host: without a backend
``execute`` raises ``SandboxUnavailable`` naming what to install.
"""

from skald_host.core.sandbox.manager import AUTO_ORDER, SandboxManager, validate_backend

__all__ = ["AUTO_ORDER", "SandboxManager", "validate_backend"]
