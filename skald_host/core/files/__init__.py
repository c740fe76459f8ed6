"""Members' files on the host: home folders, shared folders and projects, uploads, and
the agent namespace that routes a path to the note store, a host folder or the sandbox
(seed 001 "Filesystem & containers")."""
