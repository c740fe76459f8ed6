// #members: who is here, and adding someone. #members/<id>: one member's profile,
// role and active flag, their plugins (the one place grants are written), their
// sessions, a password reset that is honest about encrypted data, and deletion.
import { api } from "../lib/api.js";
import { el, link, uid } from "../lib/dom.js";
import { availableLocales, localeName, seeded, t } from "../lib/i18n.js";
import {
  busy, button, checkbox, clearFieldErrors, confirmDialog, errorText, field, formatDate, hintFor, markField, notice, pageHeader, passwordMinLength, section, showFormError, statusLine,
} from "../lib/ui.js";

const memberRoute = (id) => `#members/${encodeURIComponent(id)}`;
const nameOf = (m) => m.display_name || m.username;

async function loadRoles() {
  const response = await api("GET", "/api/admin/roles");
  return response.ok ? response.data.roles || [] : [];
}

function roleSelect(roles, value) {
  const select = el("select", { name: "role" }, ...roles.map((r) => el("option", { value: r.id, text: seeded(r.label) })));
  select.value = value;
  return select;
}

function localeSelect(value) {
  const select = el("select", { name: "locale" },
    el("option", { value: "", text: t("members.locale_default") }),
    ...availableLocales().map((code) => el("option", { value: code, text: localeName(code) })));
  select.value = value || "";
  return select;
}

// -- the list --------------------------------------------------------------------

function memberTable(members) {
  const head = el("tr", {}, ...["members.name", "members.role", "members.status", "members.sessions", "members.last_login"]
    .map((key, i) => el("th", { scope: "col", class: i > 2 ? "wide-only" : null, text: t(key) })));
  const rows = members.map((m) => el("tr", {},
    el("td", {}, link(memberRoute(m.id), nameOf(m)), el("span", { class: "muted block", text: `@${m.username}` })),
    el("td", { text: seeded(m.role_label || m.role) }),
    el("td", {},
      el("span", { class: `tag ${m.active ? "on" : "off"}`, text: m.active ? t("members.active") : t("members.inactive") }),
      m.encrypted ? el("span", { class: "tag", text: t("members.encrypted_tag") }) : null),
    el("td", { class: "wide-only", text: String(m.sessions ?? 0) }),
    el("td", { class: "wide-only", text: formatDate(m.last_login_at) })));
  return el("div", { class: "table-wrap" }, el("table", { class: "table" }, el("thead", {}, head), el("tbody", {}, ...rows)));
}

function createForm(roles, ctx) {
  const username = el("input", { name: "username", autocomplete: "off", required: true });
  const displayName = el("input", { name: "display_name", autocomplete: "off" });
  const password = el("input", { name: "password", type: "password", autocomplete: "new-password", required: true });
  const role = roleSelect(roles, "member");
  const locale = localeSelect("");
  const [encryptedLabel, encrypted] = checkbox(t("members.encrypt"), { checked: true });
  const submit = el("button", { class: "btn primary", type: "submit", text: t("members.create_submit") });
  const status = statusLine();
  const form = el("form", { class: "grid-form", novalidate: true },
    field(t("members.username"), username, { required: true })[0],
    field(t("members.display_name"), displayName)[0],
    // The policy's minimum first: a failed submit was the first the admin heard of it.
    field(t("members.password"), password, { required: true, hint: `${t("setup.password_rule", { min: passwordMinLength() })} ${t("members.password_hint")}` })[0],
    field(t("members.role"), role)[0],
    field(t("members.language"), locale)[0],
    el("div", { class: "field span" }, encryptedLabel, hintFor(encrypted, t("members.encrypt_hint"))),
    el("div", { class: "actions span" }, submit), el("div", { class: "span" }, status.node));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearFieldErrors(form, status);
    // Every empty field said at once, as the setup form does, before any request; the
    // first takes the focus (marked last).
    const empty = [[password, "password", "members.password"], [username, "username", "members.username"]]
      .filter(([control]) => !control.value.trim());
    for (const [, name, label] of empty) markField(form, status, name, t("error.field_required", { field: t(label) }));
    if (empty.length) return;
    busy(submit, async () => {
      const response = await api("POST", "/api/admin/members", {
        username: username.value.trim(), password: password.value, display_name: displayName.value.trim(),
        role: role.value, locale: locale.value || null, encrypted: encrypted.checked,
      });
      // A refused field (the server names it) is marked there and takes the focus.
      if (response.ok) ctx.navigate(memberRoute(response.data.id));
      else showFormError(form, status, response);
    });
  });
  return form;
}

export async function renderMembers(ctx) {
  const [response, roles] = await Promise.all([api("GET", "/api/admin/members"), loadRoles()]);
  const page = el("div", { class: "page" }, pageHeader(t("members.title"), t("members.intro")));
  if (!response.ok) { page.append(notice("error", errorText(response))); return page; }
  page.append(section(null, memberTable(response.data.members || [])), section(t("members.create_title"), createForm(roles, ctx)));
  return page;
}

// -- one member ----------------------------------------------------------------------

function profileSection(member, roles, ctx, isSelf) {
  const displayName = el("input", { name: "display_name", maxlength: "100", props: { value: member.display_name || "" } });
  const locale = localeSelect(member.locale);
  const birthdate = el("input", { name: "birthdate", type: "date", props: { value: member.birthdate || "" } });
  const sex = el("input", { name: "sex", maxlength: "40", props: { value: member.sex || "" } });
  const notes = el("textarea", { name: "notes", rows: "3", maxlength: "4000", props: { value: member.notes || "" } });
  const role = roleSelect(roles, member.role);
  const activeId = uid("active");
  const active = el("input", { id: activeId, type: "checkbox", role: "switch", class: "switch", disabled: isSelf, props: { checked: member.active } });
  const submit = el("button", { class: "btn primary", type: "submit", text: t("common.save") });
  const status = statusLine();
  const form = el("form", { class: "grid-form", novalidate: true },
    field(t("members.display_name"), displayName)[0],
    field(t("members.language"), locale)[0],
    field(t("members.role"), role, { hint: isSelf ? t("members.self_role_hint") : null })[0],
    field(t("members.birthdate"), birthdate)[0],
    field(t("members.sex"), sex)[0],
    el("div", { class: "field" }, el("span", { class: "label-text", text: t("members.status") }),
      el("div", { class: "switch-row" }, active, el("label", { for: activeId, text: t("members.active_label") })),
      // Like every field of this form it applies on Save (which asks first when it signs
      // the member out), not as it is flipped: the hint says so.
      hintFor(active, isSelf ? t("members.self_active_hint") : `${t("members.active_hint")} ${t("members.active_on_save")}`)),
    el("div", { class: "span" }, field(t("members.notes"), notes)[0]),
    el("div", { class: "actions span" }, submit), el("div", { class: "span" }, status.node));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearFieldErrors(form, status);
    const body = {
      display_name: displayName.value.trim(), locale: locale.value || null, birthdate: birthdate.value || null,
      sex: sex.value.trim() || null, notes: notes.value, role: role.value,
    };
    if (!isSelf) body.active = active.checked;
    busy(submit, async () => {
      // What cuts the member off at once is asked first, as deleting them is.
      if (!isSelf && member.active && !active.checked && !await confirmDialog({
        title: t("members.deactivate_confirm_title", { name: nameOf(member) }), message: t("members.active_hint"),
        confirmLabel: t("members.deactivate_confirm"),
      })) return;
      if (member.is_admin && role.value !== member.role && !await confirmDialog({
        title: t("members.demote_confirm_title", { name: nameOf(member) }), message: t("members.demote_confirm_text"),
        confirmLabel: t("members.demote_confirm"),
      })) return;
      const response = await api("PATCH", `/api/admin/members/${encodeURIComponent(member.id)}`, body);
      if (!response.ok) { showFormError(form, status, response); return; }
      Object.assign(member, response.data);
      if (!member.active) member.sessions = 0;  // turning sign-in off ended them all
      sessionCounts.get(member)?.();
      ctx.header.querySelector("h1").textContent = nameOf(member);
      ctx.header.querySelector(".intro").textContent = `@${member.username} · ${seeded(member.role_label || member.role)}`;
      status.ok(t("common.saved"));
    });
  });
  return section(t("members.profile_title"), form);
}

async function pluginsSection(member) {
  const title = t("members.plugins_title");
  const response = await api("GET", `/api/admin/members/${encodeURIComponent(member.id)}/plugins`);
  if (!response.ok) return section(title, notice("error", errorText(response)));
  const plugins = response.data.plugins || [];
  if (!plugins.length) return section(title, el("p", { class: "muted" }, t("members.plugins_none"), " ", link("#plugins", t("nav.plugins"))));
  if (member.is_admin) {
    return section(title, el("p", { class: "hint", text: t("members.plugins_admin") }),
      el("ul", { class: "checks" }, ...plugins.map((p) => el("li", {}, checkbox(p.title, { checked: true, disabled: true })[0]))));
  }
  const boxes = plugins.map((p) => {
    const [label, input] = checkbox(p.title, { checked: p.granted, name: "plugin" });
    input.value = p.plugin_id;
    if (!p.enabled) label.append(el("span", { class: "tag off", text: t("members.plugin_disabled") }));
    return { label, input };
  });
  const submit = el("button", { class: "btn primary", type: "submit", text: t("members.plugins_save") });
  const status = statusLine();
  const form = el("form", { class: "stack", novalidate: true },
    el("p", { class: "hint", text: t("members.plugins_hint") }),
    el("ul", { class: "checks" }, ...boxes.map((b) => el("li", {}, b.label))),
    el("div", { class: "actions" }, submit), status.node);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    status.clear();
    const wanted = boxes.filter((b) => b.input.checked).map((b) => b.input.value);
    busy(submit, async () => {
      const saved = await api("PUT", `/api/admin/members/${encodeURIComponent(member.id)}/plugins`, { plugins: wanted });
      if (!saved.ok) { status.error(errorText(saved)); return; }
      const granted = new Set((saved.data.plugins || []).filter((p) => p.granted).map((p) => p.plugin_id));
      for (const b of boxes) b.input.checked = granted.has(b.input.value);
      status.ok(t("common.saved"));
    });
  });
  return section(title, form);
}

/** Who supervises this member (the conversation review reports to them). */
async function supervisionSection(member) {
  const title = t("members.supervision_title");
  const [current, all] = await Promise.all([
    api("GET", `/api/admin/members/${encodeURIComponent(member.id)}/supervisors`), api("GET", "/api/admin/members")]);
  if (!current.ok || !all.ok) return section(title, notice("error", errorText(current.ok ? all : current)));
  const chosen = new Set(current.data.supervisors || []);
  const boxes = (all.data.members || []).filter((m) => m.id !== member.id).map((m) => {
    const [label, input] = checkbox(nameOf(m), { checked: chosen.has(m.id), name: "supervisor" });
    input.value = m.id;
    return { label, input };
  });
  const submit = el("button", { class: "btn primary", type: "submit", text: t("members.supervision_save") });
  const status = statusLine();
  const form = el("form", { class: "stack", novalidate: true, "data-testid": "supervision" },
    el("p", { class: "hint", text: t("members.supervision_hint") }),
    el("ul", { class: "checks" }, ...boxes.map((b) => el("li", {}, b.label))),
    el("div", { class: "actions" }, submit), status.node);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    status.clear();
    const wanted = boxes.filter((b) => b.input.checked).map((b) => b.input.value);
    busy(submit, async () => {
      const saved = await api("PUT", `/api/admin/members/${encodeURIComponent(member.id)}/supervisors`, { supervisors: wanted });
      if (!saved.ok) { status.error(errorText(saved)); return; }
      const kept = new Set(saved.data.supervisors || []);
      for (const b of boxes) b.input.checked = kept.has(b.input.value);
      status.ok(t("common.saved"));
    });
  });
  return section(title, form);
}

/** The range the API takes for a per-member interval (in the agent's own unit). */
const INTERVAL_MIN = 1;
const INTERVAL_MAX = 100000;

/** Per-member intervals of the agents that allow one (event triage); empty inherits. Not
 * of an agent whose plugin is off: nothing of it runs (its field read as if it did). */
async function intervalsSection(member) {
  const title = t("members.intervals_title");
  const response = await api("GET", `/api/admin/members/${encodeURIComponent(member.id)}/agent-intervals`);
  if (!response.ok) return section(title, notice("error", errorText(response)));
  const intervals = (response.data.intervals || []).filter((item) => item.plugin_enabled !== false);
  if (!intervals.length) { const empty = section(title); empty.hidden = true; return empty; }
  const rows = intervals.map((item) => {
    const input = el("input", { type: "text", inputmode: "numeric", name: item.agent_id, props: { value: item.interval ?? "" } });
    const status = statusLine();
    const label = t("members.interval_label", { agent: item.title, unit: t(`members.unit_${item.interval_unit}`), instance: item.instance_interval });
    const save = el("button", { class: "btn", type: "submit", text: t("common.save") });
    const form = el("form", { class: "stack", novalidate: true }, field(label, input)[0], el("div", { class: "actions" }, save), status.node);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      clearFieldErrors(form, status);
      const text = input.value.trim();
      // Empty is "the server's setting" (null); anything else must be a whole number in
      // range: Number("abc") is NaN, which JSON sends as null and would clear the setting.
      const interval = text === "" ? null : (/^\d+$/.test(text) ? Number(text) : NaN);
      if (interval !== null && !(interval >= INTERVAL_MIN && interval <= INTERVAL_MAX)) {
        markField(form, status, item.agent_id, t("members.interval_invalid", { low: INTERVAL_MIN, high: INTERVAL_MAX }));
        return;
      }
      busy(save, async () => {
        const saved = await api("PUT", `/api/admin/members/${encodeURIComponent(member.id)}/agent-intervals`, { agent_id: item.agent_id, interval });
        if (saved.ok) status.ok(t("common.saved")); else showFormError(form, status, saved);
      });
    });
    return form;
  });
  return section(title, el("p", { class: "hint", text: t("members.intervals_hint") }), ...rows);
}

/** Member → shows their session count again: a reset or turning sign-in off ends every
 * session as "Sign out everywhere" does, and the count said "1 device" until a reload. */
const sessionCounts = new WeakMap();

function sessionsSection(member) {
  const count = el("p", { text: t("members.sessions_count", { count: member.sessions ?? 0 }) });
  sessionCounts.set(member, () => { count.textContent = t("members.sessions_count", { count: member.sessions ?? 0 }); });
  const status = statusLine();
  const end = button(t("members.end_sessions"), {
    onClick: () => busy(end, async () => {
      const ok = await confirmDialog({
        title: t("members.end_sessions_confirm_title", { name: nameOf(member) }), message: t("members.sessions_hint"),
        confirmLabel: t("members.end_sessions"),
      });
      if (!ok) return;
      const response = await api("POST", `/api/admin/members/${encodeURIComponent(member.id)}/end-sessions`);
      if (!response.ok) { status.error(errorText(response)); return; }
      member.sessions = 0;
      count.textContent = t("members.sessions_count", { count: 0 });
      status.ok(t("members.sessions_ended", { count: response.data.ended ?? 0 }));
    }),
  });
  return section(t("members.sessions_title"), count, el("p", { class: "hint", text: t("members.sessions_hint") }),
    el("div", { class: "actions" }, end), status.node);
}

function resetSection(member, isSelf) {
  const title = t("members.reset_title");
  if (isSelf) return section(title, el("p", { class: "muted" }, t("members.reset_self"), " ", link("#account", t("nav.account"))));
  const password = el("input", { type: "password", autocomplete: "new-password", name: "new_password" });
  const repeat = el("input", { type: "password", autocomplete: "new-password", name: "repeat" });
  const submit = el("button", { class: `btn ${member.encrypted ? "danger" : "primary"}`, type: "submit", text: t("members.reset_submit") });
  const status = statusLine();
  const parts = [field(t("members.new_password"), password, { hint: t("setup.password_rule", { min: passwordMinLength() }) })[0], field(t("members.repeat_password"), repeat)[0]];
  let confirm = null;
  if (member.encrypted) {
    const [label, input] = checkbox(t("members.reset_confirm", { name: nameOf(member) }), { name: "confirm_data_loss" });
    confirm = input;
    submit.disabled = true;
    confirm.addEventListener("change", () => { submit.disabled = !confirm.checked; });
    parts.unshift(el("div", { class: "notice danger", role: "note" },
      el("strong", { text: t("members.reset_loss_title") }), el("p", { text: t("members.reset_loss", { name: nameOf(member) }) })));
    parts.push(label);
  } else {
    parts.unshift(el("p", { class: "hint", text: t("members.reset_plain") }));
  }
  // An action, not a setting held until Save: leaving it asks nothing (data-guard, app.js).
  const form = el("form", { class: "stack", novalidate: true, "data-guard": "off" }, ...parts, el("div", { class: "actions" }, submit), status.node);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearFieldErrors(form, status);
    // Each refusal at its field, which takes the focus (a breached password too: the
    // API names new_password).
    if (!password.value) { markField(form, status, "new_password", t("members.password_missing")); return; }
    if (password.value !== repeat.value) { markField(form, status, "repeat", t("setup.mismatch")); return; }
    if (member.encrypted && !confirm.checked) { status.error(t("members.reset_need_confirm")); return; }
    let done = false;
    await busy(submit, async () => {
      const response = await api("POST", `/api/admin/members/${encodeURIComponent(member.id)}/reset-password`, {
        new_password: password.value, confirm_data_loss: member.encrypted ? confirm.checked : false,
      });
      if (!response.ok) { showFormError(form, status, response); return; }
      member.sessions = 0;  // a reset signs the member out everywhere
      sessionCounts.get(member)?.();
      form.reset();
      // The shared folders and projects the reset took them out of, by name.
      const removed = (response.data.removed_from || []).map((item) => item.title);
      const said = response.data.data_lost ? t("members.reset_done_lost") : t("members.reset_done");
      status.ok(removed.length ? `${said} ${t("members.reset_removed_from", { names: removed.join(", ") })}` : said);
      done = true;
    });
    if (!confirm) return;
    // form.reset() unticked the box: a second reset asks again. The button it disables had
    // the focus (busy gave it back): the result takes it, not <body>.
    const hadFocus = document.activeElement === submit;
    submit.disabled = !confirm.checked;
    if (done && hadFocus && submit.disabled) {
      status.node.tabIndex = -1;
      status.node.focus();
    }
  });
  return section(title, form);
}

function deleteSection(member, ctx, isSelf) {
  const title = t("members.delete_title");
  if (isSelf) return section(title, el("p", { class: "muted", text: t("members.delete_self") }));
  const status = statusLine();
  const remove = button(t("members.delete"), {
    kind: "danger",
    onClick: async () => {
      const ok = await confirmDialog({
        title: t("members.delete_confirm_title", { name: nameOf(member) }),
        message: member.encrypted ? t("members.delete_confirm_encrypted") : t("members.delete_confirm"),
        confirmLabel: t("members.delete"),
      });
      if (!ok) return;
      const response = await api("DELETE", `/api/admin/members/${encodeURIComponent(member.id)}`);
      if (response.ok) ctx.navigate("#members");
      else status.error(errorText(response));
    },
  });
  return section(title, el("p", { class: "hint", text: t("members.delete_hint") }), el("div", { class: "actions" }, remove), status.node);
}

/** What enabled plugins add to a member's admin page (WebPage.slot "member_admin"):
 * a connector's grants, say; each mounted like a plugin page, told the member's id. */
function pluginSections(member, ctx) {
  const pages = (ctx.pages ? ctx.pages() : []).filter((p) => p.slot === "member_admin");
  return pages.map((p) => section(p.title, el("plugin-page-host", {
    "plugin-id": p.plugin_id, "page-id": p.page_id, "entry-url": p.entry_url, "page-title": p.title, "member-id": member.id,
  })));
}

export async function renderMember(ctx) {
  const id = ctx.rest[0];
  const [response, roles] = await Promise.all([api("GET", `/api/admin/members/${encodeURIComponent(id)}`), loadRoles()]);
  const back = el("p", { class: "back" }, link("#members", t("members.back")));
  if (!response.ok) return el("div", { class: "page" }, back, pageHeader(t("members.not_found")), notice("error", errorText(response)));
  const member = response.data;
  const isSelf = member.id === ctx.member.id;
  const header = pageHeader(nameOf(member), `@${member.username} · ${seeded(member.role_label || member.role)}`);
  const local = { ...ctx, header };
  return el("div", { class: "page" }, back, header,
    profileSection(member, roles, local, isSelf),
    await pluginsSection(member),
    await supervisionSection(member),
    await intervalsSection(member),
    ...pluginSections(member, ctx),
    sessionsSection(member),
    resetSection(member, isSelf),
    deleteSection(member, ctx, isSelf));
}
