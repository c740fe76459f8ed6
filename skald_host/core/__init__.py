"""The headless core: storage, identity, buses, plugins, agent loop. No HTTP here."""
