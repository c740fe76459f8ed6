from skald_host.core.plugins.manager import PluginManager, PluginStatus, Contribution

__all__ = ["PluginManager", "PluginStatus", "Contribution"]
