"""Admin API for members. Metadata only: nothing here reads a member's own file."""

from quart import Blueprint, current_app

from skald_host.core.identity.passwords import PasswordRejected
from skald_host.core.identity.users import PROFILE_FIELDS, MemberError, MemberNotFound
from skald_host.web.auth import current_principal, reader_locale, requires
from skald_host.web.body import BOOL, INT, TEXT, accepts, array, field, json_object, nullable, obj, ref, returns
from skald_host.web.errors import ApiError, unknown_fields

bp = Blueprint("admin_members", __name__)
PROFILE = {name: TEXT for name in PROFILE_FIELDS}


def _core():
    return current_app.config["SKALD_CORE"]


def _view(member, locale: str) -> dict:
    """``locale``: the reader's (``reader_locale``), for a preset role's label."""
    core = _core()
    return {
        **member.summary(core.strings, locale),
        "unlocked": core.users.is_unlocked(member.id),
        "sessions": core.auth.sessions.count_for(member.id),
    }


#: The form field a refusal is about, by its code: the admin's form marks that field and
#: moves the focus there (``showFormError``), as setup's form does.
_REFUSED_FIELD = {
    "username_invalid": "username", "username_taken": "username", "username_compatibility_form": "username",
    "username_mixed_scripts": "username", "username_confusable": "username",
    "birthdate_invalid": "birthdate", "locale_invalid": "locale",
}


async def _guard(coro, password_field: str = "password"):
    """``password_field``: the request's field a refused password was given in."""
    try:
        return await coro
    except MemberNotFound:
        raise ApiError(404, "no such member", code="member_not_found") from None
    except PasswordRejected as exc:
        raise ApiError.refusing(400, exc, field=password_field) from None
    except MemberError as exc:
        raise ApiError.refusing(400, exc, field=_REFUSED_FIELD.get(exc.code or "") or exc.values.get("field")) from None


@bp.get("/api/admin/members")
@returns(obj({"members": array(ref("MemberAdminView"))}))
@requires("members.manage")
async def list_members() -> dict:
    locale = await reader_locale()
    return {"members": [_view(m, locale) for m in await _core().users.list()]}


@bp.post("/api/admin/members")
@accepts(obj({"username": TEXT, "password": TEXT}, {"role": TEXT, "encrypted": BOOL, **PROFILE}, extra=False))
@returns(ref("MemberAdminView"), 201)
@requires("members.manage")
async def create_member():
    data = await json_object()
    unknown = set(data) - set(PROFILE_FIELDS) - {"username", "password", "role", "encrypted"}
    if unknown:
        raise unknown_fields(unknown)
    profile = {k: field(data, k, str, required=False) for k in PROFILE_FIELDS if k in data}
    member = await _guard(
        _core().administration.create(
            field(data, "username", str),
            field(data, "password", str),
            role_id=field(data, "role", str, required=False, default="member"),
            encrypted=field(data, "encrypted", bool, required=False, default=True),
            **profile,
        )
    )
    return _view(member, await reader_locale()), 201


@bp.get("/api/admin/members/<member_id>")
@returns(ref("MemberAdminView"))
@requires("members.manage")
async def get_member(member_id: str) -> dict:
    return _view(await _guard(_core().users.get(member_id)), await reader_locale())


@bp.patch("/api/admin/members/<member_id>")
@accepts(obj(optional={"role": TEXT, "active": BOOL, **PROFILE}, extra=False))
@returns(ref("MemberAdminView"))
@requires("members.manage")
async def update_member(member_id: str) -> dict:
    data = await json_object()
    unknown = set(data) - set(PROFILE_FIELDS) - {"role", "active"}
    if unknown:
        raise unknown_fields(unknown)
    profile = {k: field(data, k, str, required=False) for k in PROFILE_FIELDS if k in data}
    member = await _guard(
        _core().administration.update(
            member_id,
            role_id=field(data, "role", str, required=False),
            active=field(data, "active", bool, required=False),
            **profile,
        )
    )
    return _view(member, await reader_locale())


@bp.delete("/api/admin/members/<member_id>")
@returns(ref("Ok"))
@requires("members.manage")
async def delete_member(member_id: str) -> dict:
    await _guard(_core().administration.delete(member_id, acting=current_principal().member))
    return {"ok": True}


@bp.post("/api/admin/members/<member_id>/reset-password")
@accepts(obj({"new_password": TEXT}, {"confirm_data_loss": BOOL}))
@returns(obj({"ok": BOOL, "data_lost": BOOL, "quarantined_file": nullable(TEXT),
              "removed_from": array(obj({"kind": TEXT, "title": TEXT}))}))
@requires("members.manage")
async def reset_password(member_id: str) -> dict:
    """For an encrypted member this loses their data (the key went with the old
    password), so the request must say it knows: ``confirm_data_loss: true``."""
    data = await json_object()
    password = field(data, "new_password", str)
    member = await _guard(_core().users.get(member_id))
    if member.encrypted and data.get("confirm_data_loss") is not True:
        raise ApiError(
            400,
            "this member's data is encrypted with their password: a reset gives them a new, empty database "
            "and their previous data is set aside, out of reach unless they remember the old password. "
            "Send confirm_data_loss: true to proceed.",
            field="confirm_data_loss", code="confirm_data_loss_required",
        )
    # What the reset takes away besides the data (an encrypted member's memberships end
    # with it): named in the answer, so the admin can tell the member and the folders'
    # other members, instead of reading "no shared folders or projects" after the fact.
    removed = await _core().folders.memberships(member_id) if member.encrypted else []
    quarantined = await _guard(_core().administration.reset_password(member_id, password), password_field="new_password")
    return {
        "ok": True, "data_lost": member.encrypted, "quarantined_file": quarantined.name if quarantined else None,
        "removed_from": [{"kind": access.kind, "title": access.title} for access in removed],
    }


@bp.post("/api/admin/members/<member_id>/end-sessions")
@returns(obj({"ended": INT}))
@requires("members.manage")
async def end_sessions(member_id: str) -> dict:
    return {"ended": await _guard(_core().administration.end_sessions(member_id))}
