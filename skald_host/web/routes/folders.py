"""Shared folders (admin) and projects (self-service), with a project's file explorer
and its chat source.

A project id the caller is not in answers 404, exactly like an id that never existed
(check C1); a member who may only read gets 403 on every change. Every path the
explorer takes goes through ``contain`` (symlinks followed, fail-closed), and is then
used only through a descriptor re-checked after it was opened (``open_inside``): a
project's members can rename and link inside it from their sandboxes while a request
runs, so a folder checked by name may be a link out of the project by the time it is
used. A change acts on the last component itself, relative to its parent folder's
descriptor, so a planted link is removed or renamed as a link and never followed.
"""

from __future__ import annotations

import asyncio
import errno
import os
import secrets
import shutil
import stat
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from quart import Blueprint, current_app, request

from skald_host.core.agent.runtime import ChatError
from skald_host.core.files.paths import PathRefused, clean_relative, contain, open_dir_inside, open_inside
from skald_host.core.folders import FolderAccess, FolderError
from skald_host.core.folders.listing import MAX_LISTING, PARTIAL_UPLOAD, listing as _listing
from skald_host.core.folders.service import SHARED_DIR_MODE, SHARED_FILE_MODE, open_to_members_at
from skald_host.web.auth import current_principal, requires
from skald_host.web.body import BOOL, TEXT, UPLOAD, accepts, field, json_object, obj, query
from skald_host.web.errors import ApiError, unknown_fields
from skald_host.web.routes.chat import runtime as chat_runtime
from skald_host.web.routes.files import file_response, upload_too_large

bp = Blueprint("folders", __name__)

PROJECT_AGENT = "project-coordinator"
CHUNK = 1024 * 1024


def _core() -> Any:
    return current_app.config["SKALD_CORE"]


def _me() -> Any:
    return current_principal().member


async def _guard(coro: Any) -> Any:
    try:
        return await coro
    except FolderError as exc:
        raise ApiError.refusing(exc.status, exc) from None


def _only(data: dict[str, Any], allowed: set[str]) -> None:
    unknown = set(data) - allowed
    if unknown:
        raise unknown_fields(unknown)


# -- shared folders: admin ------------------------------------------------------------------


@bp.get("/api/admin/shared-folders")
@requires("members.manage")
async def list_shared_folders() -> dict:
    return {"folders": [f.summary() for f in await _core().folders.list_shared()]}


@bp.post("/api/admin/shared-folders")
@accepts(obj({"slug": TEXT}, {"title": TEXT}, extra=False))
@requires("members.manage")
async def create_shared_folder() -> Any:
    data = await json_object()
    _only(data, {"slug", "title"})
    folder = await _guard(_core().folders.create_shared(data.get("slug"), data.get("title")))
    return folder.summary(), 201


@bp.get("/api/admin/shared-folders/<folder_id>")
@requires("members.manage")
async def get_shared_folder(folder_id: str) -> dict:
    return (await _guard(_core().folders.get_shared(folder_id))).summary()


@bp.patch("/api/admin/shared-folders/<folder_id>")
@accepts(obj(optional={"title": TEXT}, extra=False))
@requires("members.manage")
async def rename_shared_folder(folder_id: str) -> dict:
    data = await json_object()
    _only(data, {"title"})
    return (await _guard(_core().folders.rename_shared(folder_id, data.get("title")))).summary()


@bp.delete("/api/admin/shared-folders/<folder_id>")
@requires("members.manage")
async def delete_shared_folder(folder_id: str) -> dict:
    moved = await _guard(_core().folders.delete_shared(folder_id))
    return {"deleted": folder_id, "content_moved_to_trash": moved is not None}


@bp.post("/api/admin/shared-folders/<folder_id>/members")
@accepts(obj({"username": TEXT}, {"can_write": BOOL}, extra=False))
@requires("members.manage")
async def add_shared_folder_member(folder_id: str) -> Any:
    data = await json_object()
    _only(data, {"username", "can_write"})
    can_write = field(data, "can_write", bool, required=False, default=False)
    folder = await _guard(_core().folders.add_shared_member(folder_id, data.get("username"), can_write))
    return folder.summary(), 201


@bp.patch("/api/admin/shared-folders/<folder_id>/members/<member_id>")
@accepts(obj({"can_write": BOOL}, extra=False))
@requires("members.manage")
async def set_shared_folder_member(folder_id: str, member_id: str) -> dict:
    data = await json_object()
    _only(data, {"can_write"})
    can_write = field(data, "can_write", bool)
    return (await _guard(_core().folders.set_shared_member_write(folder_id, member_id, can_write))).summary()


@bp.delete("/api/admin/shared-folders/<folder_id>/members/<member_id>")
@requires("members.manage")
async def remove_shared_folder_member(folder_id: str, member_id: str) -> dict:
    return (await _guard(_core().folders.remove_shared_member(folder_id, member_id))).summary()


# -- projects: self-service -----------------------------------------------------------------


@bp.get("/api/projects")
async def list_projects() -> dict:
    me = _me()
    return {
        "projects": [p.summary(me.id) for p in await _core().folders.list_projects(me.id)],
        "can_create": _may_create(me),
        "invitations": [i.invitee_summary() for i in await _core().folders.invitations_for(me.id)],
    }


def _may_create(member: Any) -> bool:
    from skald_host.core.identity.access import allowed

    return allowed(member, "projects.create")


@bp.post("/api/projects")
@accepts(obj({"slug": TEXT}, {"title": TEXT, "description": TEXT}, extra=False))
@requires("projects.create")
async def create_project() -> Any:
    data = await json_object()
    _only(data, {"slug", "title", "description"})
    me = _me()
    project = await _guard(_core().folders.create_project(me.id, data.get("slug"), data.get("title"), data.get("description", "")))
    return project.summary(me.id), 201


@bp.get("/api/projects/<project_id>")
async def get_project(project_id: str) -> dict:
    me = _me()
    return (await _guard(_core().folders.get_project(project_id, me.id))).summary(me.id)


@bp.patch("/api/projects/<project_id>")
@accepts(obj(optional={"title": TEXT, "description": TEXT}, extra=False))
async def update_project(project_id: str) -> dict:
    me = _me()
    data = await json_object()
    _only(data, {"title", "description"})
    project = await _guard(
        _core().folders.update_project(project_id, me.id, title=data.get("title"), description=data.get("description"))
    )
    return project.summary(me.id)


@bp.delete("/api/projects/<project_id>")
async def delete_project(project_id: str) -> dict:
    moved = await _guard(_core().folders.delete_project(project_id, _me().id))
    return {"deleted": project_id, "content_moved_to_trash": moved is not None}


@bp.post("/api/projects/<project_id>/members")
@accepts(obj({"username": TEXT}, {"can_write": BOOL}, extra=False))
async def add_project_member(project_id: str) -> Any:
    """Invites: the named member joins only by accepting (``/api/project-invitations``).
    The answer is alike whether or not the name is an account's (core/folders/invitations.py)."""
    me = _me()
    data = await json_object()
    _only(data, {"username", "can_write"})
    can_write = field(data, "can_write", bool, required=False, default=False)
    project = await _guard(_core().folders.invite_to_project(project_id, me.id, data.get("username"), can_write))
    return project.summary(me.id), 201


@bp.delete("/api/projects/<project_id>/invitations/<invitation_id>")
async def withdraw_project_invitation(project_id: str, invitation_id: str) -> dict:
    """A write-member takes back a pending invitation of the project (listed in its ``invitations``)."""
    me = _me()
    return (await _guard(_core().folders.withdraw_invitation(project_id, me.id, invitation_id))).summary(me.id)


@bp.post("/api/project-invitations/<invitation_id>/accept")
async def accept_project_invitation(invitation_id: str) -> dict:
    """The invitee joins the project (invitations are listed by ``GET /api/projects``)."""
    me = _me()
    return (await _guard(_core().folders.accept_invitation(invitation_id, me.id))).summary(me.id)


@bp.delete("/api/project-invitations/<invitation_id>")
async def decline_project_invitation(invitation_id: str) -> dict:
    """The invitee declines: the invitation is removed."""
    await _guard(_core().folders.decline_invitation(invitation_id, _me().id))
    return {"declined": invitation_id}


@bp.patch("/api/projects/<project_id>/members/<member_id>")
@accepts(obj({"can_write": BOOL}, extra=False))
async def set_project_member(project_id: str, member_id: str) -> dict:
    me = _me()
    data = await json_object()
    _only(data, {"can_write"})
    can_write = field(data, "can_write", bool)
    return (await _guard(_core().folders.set_project_member_write(project_id, me.id, member_id, can_write))).summary(me.id)


@bp.delete("/api/projects/<project_id>/members/<member_id>")
async def remove_project_member(project_id: str, member_id: str) -> dict:
    me = _me()
    project = await _guard(_core().folders.remove_project_member(project_id, me.id, member_id))
    return project.summary(me.id) if project is not None else {"left": project_id}


@bp.post("/api/projects/<project_id>/chat")
@requires("chat.use")
async def start_project_chat(project_id: str) -> Any:
    """A new conversation of the caller's own with the project coordinator; every
    member keeps their own, only the folder is shared."""
    me = _me()
    project = await _guard(_core().folders.get_project(project_id, me.id))
    member_runtime = await chat_runtime()  # 423 while the member's own file is locked, as in chat
    try:
        conversation = await member_runtime.create_conversation(PROJECT_AGENT, title=project.title, source=f"project:{project.id}")
    except ChatError as exc:
        raise ApiError.refusing(exc.status, exc) from None
    return conversation, 201


# -- the project's file explorer ------------------------------------------------------------


async def _access(project_id: str, *, write: bool) -> FolderAccess:
    access = await _guard(_core().folders.project_access(_me().id, project_id))
    if write and not access.can_write:
        raise ApiError(403, "you can read this project but not change its files", code="read_only_files")
    return access


def _relative(value: Any, name: str = "path") -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ApiError(400, f"{name} must be text", field=name, code="field_type", values={"field": name})
    try:
        rel = clean_relative(value)
    except PathRefused as exc:
        raise ApiError.refusing(400, exc, field=name) from None
    return "" if str(rel) == "." else str(rel)


def _contained(access: FolderAccess, rel: str, name: str = "path") -> Path:
    try:
        return contain(access.host_path, rel)
    except PathRefused as exc:
        raise ApiError.refusing(400, exc, field=name) from None
    except OSError:  # a link changed under ``realpath`` while it read the path
        raise ApiError(404, f"no such file or folder: {rel or '/'}", field=name, code="no_such_entry", values={"path": rel or "/"}) from None


@contextmanager
def _folder(access: FolderAccess, rel: str, name: str = "path") -> Iterator[int]:
    """A descriptor of the project's folder ``rel``, opened and then checked to be
    inside the project: what is done with it stays there, whatever is renamed meanwhile."""
    path = _contained(access, rel, name)
    try:
        fd = open_dir_inside(access.host_path, path)
    except PathRefused as exc:
        raise ApiError.refusing(400, exc, field=name) from None
    except OSError:  # missing, not a folder
        raise ApiError(404, f"no such folder: {rel or '/'}", field=name, code="no_such_folder", values={"path": rel or "/"}) from None
    try:
        yield fd
    finally:
        os.close(fd)


def _split(rel: str, name: str = "path") -> tuple[str, str]:
    """``rel``'s parent folder and last component: changes act on that name itself (a
    link is renamed or removed as a link, never followed)."""
    if not rel:
        raise ApiError(400, "this acts on a file or folder inside the project, not on the project folder itself", field=name, code="not_the_root")
    pure = PurePosixPath(rel)
    holder = str(pure.parent)
    return ("" if holder == "." else holder), pure.name


def _new_name(leaf: str, name: str) -> str:
    """``leaf`` as the name of something new: not one the server keeps for an upload
    being written (``.part-<16 hex>``), which no listing shows and a start removes, nor
    one with a backslash."""
    if PARTIAL_UPLOAD.fullmatch(leaf):
        raise ApiError(400, f"{leaf} is a name the server keeps for uploads being written", field=name, code="name_reserved", values={"name": leaf})
    # A project's files are downloaded and exported to other systems, where "\" parts
    # folders: "..\..\x.txt" was accepted (an authorization sweep), harmless here only.
    if "\\" in leaf:
        raise ApiError(400, "a name may not contain a backslash", field=name, code="name_backslash")
    return leaf


def _lstat_at(folder: int, leaf: str) -> os.stat_result | None:
    try:
        return os.stat(leaf, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None


@bp.get("/api/projects/<project_id>/files")
@query(path=TEXT)
async def list_project_files(project_id: str) -> dict:
    access = await _access(project_id, write=False)
    rel = _relative(request.args.get("path"))
    with _folder(access, rel) as folder:
        entries = await asyncio.to_thread(_listing, folder, rel)
    return {
        "path": rel,
        "agent_path": f"{access.agent_prefix}/{rel}".rstrip("/"),
        "can_write": access.can_write,
        "entries": entries,
        "truncated": len(entries) >= MAX_LISTING,
    }


@bp.get("/api/projects/<project_id>/files/content")
@query(path={**TEXT, "x-required": True})
async def download_project_file(project_id: str) -> Any:
    """The file's bytes as a download: never rendered by the browser as a page of ours.
    Streamed, so any file an upload could put here comes out again."""
    access = await _access(project_id, write=False)
    rel = _relative(request.args.get("path"))
    fd, size = await asyncio.to_thread(_open_file, access, rel)
    return file_response(fd, size, PurePosixPath(rel).name)


def _open_file(access: FolderAccess, rel: str) -> tuple[int, int]:
    """A descriptor of the project's file ``rel``, checked to be a regular file inside
    the project, and its size (blocking: run it in a thread)."""
    missing = ApiError(404, f"no such file: {rel or '/'}", field="path", code="no_such_file", values={"path": rel or "/"})
    if not rel:
        raise missing
    path = _contained(access, rel)
    try:
        fd = open_inside(access.host_path, path, os.O_RDONLY)
    except PathRefused as exc:
        raise ApiError.refusing(400, exc, field="path") from None
    except OSError:
        raise missing from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise missing
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


@bp.post("/api/projects/<project_id>/files/upload/<path:target>")
@accepts(UPLOAD, content_type="application/octet-stream")
async def upload_project_file(project_id: str, target: str) -> Any:
    """Raw request body → ``target`` (a path inside the project), streamed to disk with
    the upload cap enforced while streaming; an existing name is refused, never replaced."""
    access = await _access(project_id, write=True)
    rel = _relative(target, "target")
    holder, leaf = _split(rel, "target")
    _new_name(leaf, "target")
    # The app's request class lets this route's body reach the upload cap (files.py's
    # UPLOAD_ROUTE); the cap is enforced here again while streaming, for chunked bodies.
    limit = _core().settings.files.upload_max_bytes
    if (request.content_length or 0) > limit:
        raise upload_too_large(limit)
    with _folder(access, holder, "target") as folder:
        size = await _stream_into(folder, leaf, limit, lambda: _access(project_id, write=True))
    return {"path": rel, "size": size}, 201


async def _stream_into(folder: int, name: str, limit: int, still_allowed: Callable[[], Awaitable[object]]) -> int:
    """The body into ``folder`` (a checked descriptor) as ``name``, through a temporary
    file beside it, linked under its name only once whole — and only if the uploader
    may still write there (``still_allowed`` raises otherwise): a slow body outlasted
    their removal from the project, and what it sent after it was kept."""
    temp = f".part-{secrets.token_hex(8)}"  # as a chat upload's: hidden from listings, removed at start after a crash
    if _lstat_at(folder, name) is not None:
        raise ApiError(409, f"{name} already exists here", field="target", code="exists_here", values={"name": name})
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, SHARED_FILE_MODE, dir_fd=folder)
    size = 0
    try:
        os.fchmod(fd, SHARED_FILE_MODE)
        async for chunk in request.body:
            size += len(chunk)
            if size > limit:
                raise upload_too_large(limit)
            await asyncio.to_thread(_write_all, fd, chunk)
        os.close(fd)
        fd = -1
        await still_allowed()
        try:  # never replaces what appeared meanwhile
            os.link(temp, name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
        except FileExistsError:
            raise ApiError(409, f"{name} already exists here", field="target", code="exists_here", values={"name": name}) from None
    finally:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(temp, dir_fd=folder)
        except FileNotFoundError:
            pass
    return size


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


@bp.post("/api/projects/<project_id>/files/folder")
@accepts(obj({"path": TEXT}))
async def make_project_folder(project_id: str) -> Any:
    access = await _access(project_id, write=True)
    data = await json_object()
    _only(data, {"path"})
    rel = _relative(field(data, "path", str))
    holder, leaf = _split(rel)
    _new_name(leaf, "path")
    with _folder(access, holder) as folder:
        try:
            os.mkdir(leaf, SHARED_DIR_MODE, dir_fd=folder)
        except FileExistsError:
            raise ApiError(409, f"{rel} already exists", field="path", code="exists_here", values={"name": rel}) from None
        open_to_members_at(folder, leaf)
    return {"path": rel}, 201


@bp.post("/api/projects/<project_id>/files/rename")
@accepts(obj({"from": TEXT, "to": TEXT}))
async def rename_project_file(project_id: str) -> dict:
    access = await _access(project_id, write=True)
    data = await json_object()
    _only(data, {"from", "to"})
    source_rel = _relative(field(data, "from", str), "from")
    target_rel = _relative(field(data, "to", str), "to")
    (source_holder, source_leaf), (target_holder, target_leaf) = _split(source_rel, "from"), _split(target_rel, "to")
    _new_name(target_leaf, "to")
    with _folder(access, source_holder, "from") as source, _folder(access, target_holder, "to") as target:
        found = _lstat_at(source, source_leaf)
        if found is None:
            raise ApiError(404, f"no such file or folder: {source_rel}", field="from", code="no_such_entry", values={"path": source_rel})
        if _lstat_at(target, target_leaf) is not None:
            raise ApiError(409, f"{target_rel} already exists", field="to", code="exists_here", values={"name": target_rel})
        try:
            os.rename(source_leaf, target_leaf, src_dir_fd=source, dst_dir_fd=target)
        except OSError as exc:
            if stat.S_ISDIR(found.st_mode) and exc.errno == errno.EINVAL:  # the kernel's word for a folder moved below itself
                raise ApiError(400, "a folder cannot move into itself", field="to", code="move_into_itself") from None
            raise
    return {"from": source_rel, "to": target_rel}


@bp.post("/api/projects/<project_id>/files/delete")
@accepts(obj({"path": TEXT}))
async def delete_project_file(project_id: str) -> dict:
    access = await _access(project_id, write=True)
    data = await json_object()
    _only(data, {"path"})
    rel = _relative(field(data, "path", str))
    holder, leaf = _split(rel)
    with _folder(access, holder) as folder:
        found = _lstat_at(folder, leaf)
        if found is None:
            raise ApiError(404, f"no such file or folder: {rel}", field="path", code="no_such_entry", values={"path": rel})
        if stat.S_ISDIR(found.st_mode):
            # By descriptor all the way down: follows no link, inside or at the top.
            await asyncio.to_thread(shutil.rmtree, leaf, dir_fd=folder)
        else:
            os.unlink(leaf, dir_fd=folder)
    return {"deleted": rel}
