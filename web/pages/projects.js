// #projects: the invitations waiting for the member's answer, the member's projects and
// making one. #projects/<id>[?path=<folder>]: one project — its details, "Chat in this
// project", who is in it and who is invited, and a file explorer of its folder. Nobody
// joins a project without accepting: "Invite" asks, Accept joins. Write controls appear only for members who may write; the server refuses
// a read-only member's changes regardless (403), so hiding them is courtesy, not a gate.
import { api, upload } from "../lib/api.js";
import { may } from "../lib/capabilities.js";
import { el, link } from "../lib/dom.js";
import { t } from "../lib/i18n.js";
import {
  busy, button, checkbox, clearFieldErrors, confirmDialog, errorText, field, formatDate, formatSize, markField, notice, pageHeader, section,
  showFormError, statusLine, titledDialog,
} from "../lib/ui.js";

const projectRoute = (id, path = "") => `#projects/${encodeURIComponent(id)}${path ? `?path=${encodeURIComponent(path)}` : ""}`;
const projectApi = (id, rest = "") => `/api/projects/${encodeURIComponent(id)}${rest}`;
const filesApi = (id, rest, params) => `${projectApi(id, `/files${rest}`)}?${new URLSearchParams(params)}`;
const encodePath = (path) => path.split("/").map(encodeURIComponent).join("/");

/** "My garden plan" → "my-garden-plan": a suggestion the member may edit. */
const slugOf = (title) => title.toLowerCase().normalize("NFKD").replace(/[\u0300-\u036f]/g, "")
  .replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 64);

// -- the list -----------------------------------------------------------------------------

function projectCard(p) {
  return el("article", { class: "card plugin-card", "data-project-id": p.id },
    el("header", { class: "plugin-head" },
      el("h2", {}, link(projectRoute(p.id), p.title)),
      el("p", { class: "meta" }, p.is_owner ? el("span", { class: "tag", text: t("projects.owner_tag") }) : null,
        el("span", { class: `tag ${p.can_write ? "on" : "off"}`, text: p.can_write ? t("projects.can_write") : t("projects.read_only") }))),
    el("p", { class: "description", text: p.description || "" }),
    el("p", { class: "meta" }, el("code", { text: `${p.agent_path}/` }),
      el("span", { text: t("projects.member_count", { count: p.members.length }) })));
}

function createForm(ctx) {
  const title = el("input", { name: "title", maxlength: "200", required: true, autocomplete: "off" });
  const slug = el("input", { name: "slug", maxlength: "64", required: true, autocomplete: "off", pattern: "[a-z0-9][a-z0-9-]*" });
  const description = el("textarea", { name: "description", rows: "3", maxlength: "4000" });
  let slugTouched = false;
  slug.addEventListener("input", () => { slugTouched = true; });
  title.addEventListener("input", () => { if (!slugTouched) slug.value = slugOf(title.value); });
  const submit = el("button", { class: "btn primary", type: "submit", text: t("projects.create_submit") });
  const status = statusLine();
  const form = el("form", { class: "grid-form", novalidate: true },
    field(t("projects.title_label"), title, { required: true })[0],
    field(t("projects.slug_label"), slug, { required: true, hint: t("projects.slug_hint") })[0],
    el("div", { class: "span" }, field(t("projects.description_label"), description, { hint: t("projects.registry_hint") })[0]),
    el("div", { class: "actions span" }, submit), el("div", { class: "span" }, status.node));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearFieldErrors(form, status);
    // A blank title is said at the title, not as the short name it leaves empty.
    if (!title.value.trim()) { markField(form, status, "title", t("error.field_required", { field: t("projects.title_label") })); return; }
    busy(submit, async () => {
      const response = await api("POST", "/api/projects", { title: title.value.trim(), slug: slug.value.trim(), description: description.value });
      if (response.ok) ctx.navigate(projectRoute(response.data.id));
      else showFormError(form, status, response);
    });
  });
  return form;
}

/** "Berta (@berta)", or "@berta" when they gave no display name. */
const personOf = (who) => (who.display_name && who.display_name !== who.username ? `${who.display_name} (@${who.username})` : `@${who.username}`);

function invitationsSection(invitations, ctx) {
  const status = statusLine();
  const rows = invitations.map((invitation) => {
    const title = invitation.project.title;
    const accept = button(t("projects.accept"), { kind: "primary", attrs: { "aria-label": t("projects.accept_named", { title }) }, onClick: () => busy(accept, async () => {
      const response = await api("POST", `/api/project-invitations/${encodeURIComponent(invitation.id)}/accept`);
      if (response.ok) ctx.navigate(projectRoute(response.data.id));
      else status.error(errorText(response));
    }) });
    const decline = button(t("projects.decline"), { kind: "quiet", attrs: { "aria-label": t("projects.decline_named", { title }) }, onClick: () => busy(decline, async () => {
      const response = await api("DELETE", `/api/project-invitations/${encodeURIComponent(invitation.id)}`);
      if (response.ok) ctx.rerender({ focus: "[data-testid=project-invitations] button, h1" });
      else status.error(errorText(response));
    }) });
    return el("li", { class: "stack", "data-invitation-id": invitation.id },
      el("p", { text: t("projects.invitation_text", { inviter: personOf(invitation.invited_by), title }) }),
      el("p", { class: "meta", text: t(invitation.can_write ? "projects.invitation_access_write" : "projects.invitation_access_read") }),
      el("div", { class: "actions" }, accept, decline));
  });
  return section(t("projects.invitations_title"), el("ul", { class: "plain", "data-testid": "project-invitations" }, ...rows), status.node);
}

async function renderList(ctx) {
  const page = el("div", { class: "page" }, pageHeader(t("projects.title"), t("projects.intro")));
  const response = await api("GET", "/api/projects");
  if (!response.ok) { page.append(notice("error", errorText(response))); return page; }
  const invitations = response.data.invitations || [];
  if (invitations.length) page.append(invitationsSection(invitations, ctx));
  const projects = response.data.projects || [];
  page.append(projects.length
    ? el("div", { class: "card-grid", "data-testid": "project-list" }, ...projects.map(projectCard))
    : section(null, el("p", { class: "muted", text: t("projects.none") })));
  if (response.data.can_create) page.append(section(t("projects.create_title"), createForm(ctx)));
  return page;
}

// -- one project: details and members ----------------------------------------------------

function detailsSection(project, ctx) {
  const facts = el("dl", { class: "facts" },
    el("dt", { text: t("projects.folder") }), el("dd", {}, el("code", { text: `${project.agent_path}/` })),
    el("dt", { text: t("projects.owner") }), el("dd", { text: `@${project.owner.username}` }),
    el("dt", { text: t("projects.created") }), el("dd", { text: formatDate(project.created_at) }));
  const status = statusLine();
  const actions = el("div", { class: "actions" });
  // Offered only to a role with project chat (as of sign-in; a role changed since is
  // still refused by the server, and said so); without it, the reason instead of a
  // button that could only fail.
  const chatNote = may(ctx.session, "projects.chat") ? null : el("p", { class: "muted", "data-testid": "project-chat-unavailable", text: t("projects.chat_not_in_role") });
  if (!chatNote) {
    const chat = button(t("projects.chat"), { kind: "primary", onClick: () => busy(chat, async () => {
      const response = await api("POST", projectApi(project.id, "/chat"));
      if (response.ok) ctx.navigate(`#chat/${encodeURIComponent(response.data.id)}`);
      else status.error(errorText(response));
    }) });
    actions.append(chat);
  }
  if (project.can_delete) { // the owner; or, once the owner is gone from it, a member who writes
    actions.append(button(t("projects.delete"), { kind: "danger", onClick: async () => {
      const ok = await confirmDialog({ title: t("projects.delete_title"), message: t("projects.delete_text", { title: project.title }), confirmLabel: t("projects.delete") });
      if (!ok) return;
      const response = await api("DELETE", projectApi(project.id));
      if (response.ok) ctx.navigate("#projects");
      else status.error(errorText(response));
    } }));
  }
  if (!project.is_owner) {
    const last = project.members.length === 1; // leaving deletes it: nobody else could reach it
    actions.append(button(t("projects.leave"), { kind: "quiet", onClick: async () => {
      const ok = await confirmDialog({ title: t("projects.leave_title"), message: t(last ? "projects.leave_last_text" : "projects.leave_text", { title: project.title }), confirmLabel: t("projects.leave") });
      if (!ok) return;
      const response = await api("DELETE", projectApi(project.id, `/members/${encodeURIComponent(ctx.member.id)}`));
      if (response.ok) ctx.navigate("#projects");
      else status.error(errorText(response));
    } }));
  }
  const parts = [facts, chatNote, actions, status.node].filter(Boolean);
  if (project.can_write) parts.push(editForm(project, ctx));
  return section(t("projects.details"), ...parts);
}

function editForm(project, ctx) {
  const title = el("input", { name: "title", maxlength: "200", props: { value: project.title } });
  const description = el("textarea", { name: "description", rows: "3", maxlength: "4000", props: { value: project.description } });
  const submit = el("button", { class: "btn", type: "submit", text: t("common.save") });
  const status = statusLine();
  const form = el("form", { class: "grid-form", novalidate: true },
    el("h3", { class: "subhead span", text: t("projects.edit") }),
    field(t("projects.title_label"), title)[0],
    el("div", { class: "span" }, field(t("projects.description_label"), description, { hint: t("projects.registry_hint") })[0]),
    el("div", { class: "actions span" }, submit), el("div", { class: "span" }, status.node));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(submit, async () => {
      const response = await api("PATCH", projectApi(project.id), { title: title.value, description: description.value });
      if (response.ok) ctx.rerender();
      else showFormError(form, status, response);  // the refused field marked, called by its label
    });
  });
  return form;
}

function membersSection(project, ctx) {
  const status = statusLine();
  const rows = project.members.map((m) => {
    const [writeLabel, write] = checkbox(t("projects.can_write"), { checked: m.can_write, disabled: !project.can_write || m.is_owner });
    write.addEventListener("change", async () => {
      const response = await api("PATCH", projectApi(project.id, `/members/${encodeURIComponent(m.id)}`), { can_write: write.checked });
      if (response.ok) ctx.rerender();
      else { write.checked = !write.checked; status.error(errorText(response)); }
    });
    const remove = project.can_write && !m.is_owner && m.id !== ctx.member.id
      ? button(t("projects.remove_member"), { kind: "quiet", attrs: { "aria-label": t("projects.remove_member_named", { name: m.username }) }, onClick: async () => {
        const response = await api("DELETE", projectApi(project.id, `/members/${encodeURIComponent(m.id)}`));
        if (response.ok) ctx.rerender();
        else status.error(errorText(response));
      } })
      : null;
    return el("tr", { "data-member": m.username },
      el("td", {}, el("span", { text: m.display_name || m.username }), el("span", { class: "muted block", text: `@${m.username}` })),
      el("td", {}, m.is_owner ? el("span", { class: "tag", text: t("projects.owner_tag") }) : null, writeLabel),
      el("td", { class: "row-actions" }, remove));
  });
  const table = el("div", { class: "table-wrap" }, el("table", { class: "table" }, el("tbody", {}, ...rows)));
  const parts = [table];
  if (project.can_write) parts.push(pendingInvitations(project, ctx, status));
  if (project.can_write) {
    const username = el("input", { name: "username", autocomplete: "off", required: true });
    const [writeLabel, write] = checkbox(t("projects.can_write"));
    const submit = el("button", { class: "btn", type: "submit", text: t("projects.add_member") });
    const form = el("form", { class: "grid-form", novalidate: true },
      field(t("projects.add_member_label"), username, { hint: t("projects.add_member_hint") })[0],
      el("div", { class: "field checks-inline" }, writeLabel),
      el("div", { class: "actions span" }, submit));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      status.clear();
      busy(submit, async () => {
        const name = username.value.trim().replace(/^@/, "");
        const response = await api("POST", projectApi(project.id, "/members"), { username: name, can_write: write.checked });
        // Said alike whether or not anyone has that name: the server does not tell.
        if (response.ok) ctx.rerender({ focus: "input[name=username]", status: "[data-testid=members-status]", say: t("projects.invited", { name }) });
        else status.error(errorText(response));
      });
    });
    parts.push(form);
  }
  status.node.dataset.testid = "members-status";
  parts.push(status.node);
  return section(t("projects.members"), ...parts);
}

/** The invitations of the project no one has answered yet, for those who may withdraw them. */
function pendingInvitations(project, ctx, status) {
  const invitations = project.invitations || [];
  const rows = invitations.map((invitation) => {
    const withdraw = button(t("projects.withdraw"), { kind: "quiet", attrs: { "aria-label": t("projects.withdraw_named", { name: invitation.username }) }, onClick: async () => {
      const response = await api("DELETE", projectApi(project.id, `/invitations/${encodeURIComponent(invitation.id)}`));
      if (response.ok) ctx.rerender({ focus: "[data-testid=pending-invitations] button, input[name=username]" });
      else status.error(errorText(response));
    } });
    return el("tr", { "data-invitation": invitation.username },
      el("td", {}, el("span", { text: `@${invitation.username}` }), el("span", { class: "muted block", text: t("projects.invited_by", { name: invitation.invited_by.username }) })),
      el("td", {}, el("span", { class: `tag ${invitation.can_write ? "on" : "off"}`, text: invitation.can_write ? t("projects.can_write") : t("projects.read_only") })),
      el("td", { class: "row-actions" }, withdraw));
  });
  return el("div", { "data-testid": "pending-invitations" },
    el("h3", { class: "subhead", text: t("projects.pending") }),
    rows.length
      ? el("div", { class: "table-wrap" }, el("table", { class: "table" }, el("tbody", {}, ...rows)))
      : el("p", { class: "muted", text: t("projects.pending_none") }));
}

// -- one project: the file explorer ----------------------------------------------------

function breadcrumb(project, path) {
  const parts = path ? path.split("/") : [];
  const crumbs = [link(projectRoute(project.id), project.title)];
  parts.forEach((part, i) => crumbs.push(el("span", { class: "muted", text: " / " }), link(projectRoute(project.id, parts.slice(0, i + 1).join("/")), part)));
  return el("nav", { class: "meta breadcrumb", "aria-label": t("projects.breadcrumb") }, ...crumbs);
}

function fileRow(project, entry, ctx, status) {
  const name = entry.is_dir
    ? link(projectRoute(project.id, entry.path), `${entry.name}/`)
    : el("a", { href: filesApi(project.id, "/content", { path: entry.path }), download: entry.name, text: entry.name });
  const actions = el("td", { class: "row-actions" });
  if (project.can_write) {
    actions.append(
      button(t("projects.rename"), { kind: "quiet", attrs: { "aria-label": t("projects.rename_named", { name: entry.name }) }, onClick: async () => {
        const next = await renameDialog(entry.name);
        if (!next || next === entry.name) return;
        const folder = entry.path.includes("/") ? entry.path.slice(0, entry.path.lastIndexOf("/") + 1) : "";
        const response = await api("POST", projectApi(project.id, "/files/rename"), { from: entry.path, to: folder + next });
        if (response.ok) ctx.rerender();
        else status.error(errorText(response));
      } }),
      button(t("projects.delete_file"), { kind: "quiet", attrs: { "aria-label": t("projects.delete_file_named", { name: entry.name }) }, onClick: async () => {
        const ok = await confirmDialog({ title: t("projects.delete_file_title"), message: t("projects.delete_file_text", { name: entry.name }), confirmLabel: t("projects.delete_file") });
        if (!ok) return;
        const response = await api("POST", projectApi(project.id, "/files/delete"), { path: entry.path });
        if (response.ok) ctx.rerender();
        else status.error(errorText(response));
      } }));
  }
  return el("tr", { "data-entry": entry.path },
    el("td", {}, name),
    el("td", { class: "num wide-only", text: entry.is_dir ? "" : formatSize(entry.size) }),
    el("td", { class: "wide-only", text: formatDate(entry.modified_at) }),
    actions);
}

/** Ask for a new name in an in-page dialog (like confirmDialog); resolves null on cancel. */
function renameDialog(current) {
  return new Promise((resolve) => {
    const { dialog, heading } = titledDialog(t("projects.rename_named", { name: current }));
    const input = el("input", { name: "name", maxlength: "255", props: { value: current } });
    const finish = (value) => { dialog.close(); dialog.remove(); resolve(value); };
    const form = el("form", { class: "stack", novalidate: true },
      heading,
      field(t("projects.rename_prompt"), input)[0],
      el("div", { class: "actions" },
        button(t("common.cancel"), { kind: "quiet", onClick: () => finish(null) }),
        el("button", { class: "btn primary", type: "submit", text: t("projects.rename") })));
    form.addEventListener("submit", (event) => { event.preventDefault(); finish(input.value.trim() || null); });
    dialog.addEventListener("cancel", (event) => { event.preventDefault(); finish(null); });
    dialog.append(form);
    document.body.append(dialog);
    dialog.showModal();
    input.select();
  });
}

async function filesSection(project, ctx) {
  const path = ctx.params.get("path") || "";
  const status = statusLine();
  const response = await api("GET", filesApi(project.id, "", { path }));
  const refresh = button(t("projects.refresh"), { kind: "quiet", onClick: () => ctx.rerender() });
  const head = el("div", { class: "actions" }, breadcrumb(project, path), refresh);
  if (!response.ok) return section(t("projects.files"), head, notice("error", errorText(response)));
  const entries = response.data.entries || [];
  const body = entries.length
    ? el("div", { class: "table-wrap" }, el("table", { class: "table files" },
      el("thead", {}, el("tr", {}, ...["projects.name", "projects.size", "projects.modified", "projects.actions"]
        .map((key, i) => el("th", { scope: "col", class: i === 1 || i === 2 ? "wide-only" : null, text: t(key) })))),
      el("tbody", {}, ...entries.map((e) => fileRow(project, e, ctx, status)))))
    : el("p", { class: "muted", text: t("projects.empty_folder") });
  const parts = [head, body];
  if (response.data.truncated) parts.push(notice("info", t("projects.truncated", { count: entries.length })));
  if (project.can_write) {
    const picker = el("input", { type: "file", multiple: true, name: "upload" });
    const [pickerField] = field(t("projects.upload"), picker);
    picker.addEventListener("change", async () => {
      status.clear();
      for (const file of picker.files) {
        status.ok(t("projects.uploading", { name: file.name }));
        const response = await upload(projectApi(project.id, `/files/upload/${encodePath(path ? `${path}/${file.name}` : file.name)}`), file);
        if (!response.ok) { status.error(`${file.name}: ${errorText(response)}`); return; }
      }
      ctx.rerender();
    });
    const folderName = el("input", { name: "folder", autocomplete: "off" });
    const makeFolder = el("button", { class: "btn", type: "submit", text: t("projects.new_folder") });
    const folderForm = el("form", { class: "grid-form", novalidate: true },
      field(t("projects.new_folder_label"), folderName)[0], el("div", { class: "actions" }, makeFolder));
    folderForm.addEventListener("submit", (event) => {
      event.preventDefault();
      status.clear();
      busy(makeFolder, async () => {
        const name = folderName.value.trim();
        if (!name) return;
        const response = await api("POST", projectApi(project.id, "/files/folder"), { path: path ? `${path}/${name}` : name });
        if (response.ok) ctx.rerender();
        else status.error(errorText(response));
      });
    });
    parts.push(el("div", { class: "grid-form" }, pickerField), folderForm);
  } else {
    parts.push(el("p", { class: "hint", text: t("projects.read_only_hint") }));
  }
  parts.push(status.node);
  return section(t("projects.files"), ...parts);
}

async function renderProject(ctx) {
  const id = ctx.rest[0];
  const response = await api("GET", projectApi(id));
  if (!response.ok) {
    return el("div", { class: "page" }, pageHeader(t("projects.not_found")), notice("error", errorText(response)), link("#projects", t("projects.back")));
  }
  const project = response.data;
  const header = pageHeader(project.title, project.description || null);
  return el("div", { class: "page", "data-project-id": project.id },
    el("p", {}, link("#projects", t("projects.back"))), header,
    await filesSection(project, ctx), detailsSection(project, ctx), membersSection(project, ctx));
}

export async function renderProjects(ctx) {
  return ctx.rest[0] ? renderProject(ctx) : renderList(ctx);
}
