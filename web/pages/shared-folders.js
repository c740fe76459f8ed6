// #shared-folders (admin): folders on the host that several members reach as
// shared/<slug>/ — create, rename, delete (the content moves to the trash folder of
// the data directory), and who may read or write each one.
import { api } from "../lib/api.js";
import { el } from "../lib/dom.js";
import { t } from "../lib/i18n.js";
import {
  busy, button, checkbox, clearFieldErrors, confirmDialog, errorText, field, markField, notice, pageHeader, section, showFormError, statusLine,
} from "../lib/ui.js";

const folderApi = (id, rest = "") => `/api/admin/shared-folders/${encodeURIComponent(id)}${rest}`;

function memberRows(folder, ctx, status) {
  return folder.members.map((m) => {
    const [writeLabel, write] = checkbox(t("shared.can_write"), { checked: m.can_write });
    // Named with the member, as Remove is: a column of "can write" boxes told a screen
    // reader nothing of whose each was.
    write.setAttribute("aria-label", t("shared.can_write_named", { name: m.username }));
    write.addEventListener("change", async () => {
      status.clear();
      const response = await api("PATCH", folderApi(folder.id, `/members/${encodeURIComponent(m.id)}`), { can_write: write.checked });
      if (!response.ok) { write.checked = !write.checked; status.error(errorText(response)); return; }
      status.ok(t("common.saved"));
    });
    const remove = button(t("shared.remove_member"), { kind: "quiet", attrs: { "aria-label": t("shared.remove_member_named", { name: m.username }) }, onClick: async () => {
      // Cuts them off at once: asked first, as deleting the folder is.
      const ok = await confirmDialog({
        title: t("shared.remove_member_title", { name: m.username }),
        message: t("shared.remove_member_text", { name: m.username, title: folder.title }),
        confirmLabel: t("shared.remove_member"),
      });
      if (!ok) return;
      const response = await api("DELETE", folderApi(folder.id, `/members/${encodeURIComponent(m.id)}`));
      if (response.ok) ctx.rerender();
      else status.error(errorText(response));
    } });
    return el("tr", { "data-member": m.username },
      el("td", {}, el("span", { text: m.display_name || m.username }), el("span", { class: "muted block", text: `@${m.username}` })),
      el("td", {}, writeLabel), el("td", { class: "row-actions" }, remove));
  });
}

function folderCard(folder, members, ctx) {
  const status = statusLine();
  const title = el("input", { name: "title", maxlength: "200", props: { value: folder.title } });
  const save = el("button", { class: "btn", type: "submit", text: t("shared.rename") });
  const renameForm = el("form", { class: "grid-form", novalidate: true }, field(t("shared.title_label"), title)[0], el("div", { class: "actions" }, save));
  renameForm.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(save, async () => {
      const response = await api("PATCH", folderApi(folder.id), { title: title.value });
      if (response.ok) ctx.rerender();
      else status.error(errorText(response));
    });
  });
  const inFolder = new Set(folder.members.map((m) => m.id));
  const candidates = members.filter((m) => !inFolder.has(m.id));
  const who = el("select", { name: "username" }, ...candidates.map((m) => el("option", { value: m.username, text: `${m.display_name || m.username} (@${m.username})` })));
  const [writeLabel, write] = checkbox(t("shared.can_write"));
  const add = el("button", { class: "btn", type: "submit", text: t("shared.add_member"), disabled: !candidates.length });
  const addForm = el("form", { class: "grid-form", novalidate: true },
    field(t("shared.add_member_label"), who)[0], el("div", { class: "field checks-inline" }, writeLabel), el("div", { class: "actions" }, add));
  addForm.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(add, async () => {
      const response = await api("POST", folderApi(folder.id, "/members"), { username: who.value, can_write: write.checked });
      if (response.ok) ctx.rerender();
      else status.error(errorText(response));
    });
  });
  const remove = button(t("shared.delete"), { kind: "danger", onClick: async () => {
    const ok = await confirmDialog({ title: t("shared.delete_title"), message: t("shared.delete_text", { title: folder.title }), confirmLabel: t("shared.delete") });
    if (!ok) return;
    const response = await api("DELETE", folderApi(folder.id));
    if (response.ok) ctx.rerender();
    else status.error(errorText(response));
  } });
  const rows = memberRows(folder, ctx, status);
  return el("article", { class: "card role-card", "data-folder": folder.slug },
    el("header", { class: "plugin-head" }, el("h2", { text: folder.title }), el("p", { class: "meta" }, el("code", { text: `${folder.agent_path}/` }))),
    rows.length
      ? el("div", { class: "table-wrap" }, el("table", { class: "table" }, el("tbody", {}, ...rows)))
      : el("p", { class: "muted", text: t("shared.no_members") }),
    addForm, renameForm, el("div", { class: "actions" }, remove), status.node);
}

function createForm(ctx) {
  const slug = el("input", { name: "slug", maxlength: "64", required: true, autocomplete: "off" });
  const title = el("input", { name: "title", maxlength: "200", autocomplete: "off" });
  const submit = el("button", { class: "btn primary", type: "submit", text: t("shared.create_submit") });
  const status = statusLine();
  const form = el("form", { class: "grid-form", novalidate: true },
    field(t("shared.slug_label"), slug, { required: true, hint: t("shared.slug_hint") })[0],
    field(t("shared.title_label"), title)[0],
    el("div", { class: "actions span" }, submit), el("div", { class: "span" }, status.node));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearFieldErrors(form, status);
    // As every admin form: the empty field marked, described and focused, before any request.
    if (!slug.value.trim()) { markField(form, status, "slug", t("error.field_required", { field: t("shared.slug_label") })); return; }
    busy(submit, async () => {
      const response = await api("POST", "/api/admin/shared-folders", { slug: slug.value.trim(), title: title.value.trim() || null });
      if (response.ok) ctx.rerender();
      else showFormError(form, status, response);
    });
  });
  return form;
}

export async function renderSharedFolders(ctx) {
  const page = el("div", { class: "page" }, pageHeader(t("shared.title"), t("shared.intro")));
  const [folders, members] = await Promise.all([api("GET", "/api/admin/shared-folders"), api("GET", "/api/admin/members")]);
  if (!folders.ok) { page.append(notice("error", errorText(folders))); return page; }
  const list = folders.data.folders || [];
  const everyone = members.ok ? members.data.members || [] : [];
  page.append(list.length
    ? el("div", { class: "card-grid wide" }, ...list.map((f) => folderCard(f, everyone, ctx)))
    : section(null, el("p", { class: "muted", text: t("shared.none") })));
  page.append(section(t("shared.create_title"), createForm(ctx)));
  return page;
}
