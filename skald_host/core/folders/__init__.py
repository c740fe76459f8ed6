"""Shared folders and projects: host folders several members reach, and who may
(seed 001 "Projects", "Filesystem & containers")."""

from skald_host.core.folders.service import (
    MEMBERSHIP_CHANGED,
    FolderAccess,
    FolderConflict,
    FolderError,
    FolderForbidden,
    FolderMember,
    FolderNotFound,
    FolderService,
    Project,
    ProjectMember,
    SharedFolder,
)

__all__ = [
    "MEMBERSHIP_CHANGED",
    "FolderAccess",
    "FolderConflict",
    "FolderError",
    "FolderForbidden",
    "FolderMember",
    "FolderNotFound",
    "FolderService",
    "Project",
    "ProjectMember",
    "SharedFolder",
]
