// #roles: the presets and the admin's own roles: label, whether members of the role
// receive new plugins automatically (auto_grant), and their capabilities.
import { api } from "../lib/api.js";
import { el } from "../lib/dom.js";
import { seeded, t, unseeded } from "../lib/i18n.js";
import {
  busy, button, checkbox, clearFieldErrors, confirmDialog, errorText, field, notice, pageHeader, section, showFormError, statusLine,
} from "../lib/ui.js";

/** The capabilities a role may be given (skald_host.core.identity.access.GRANTABLE). */
export const CAPABILITIES = [
  "chat.use", "memory.shared.read", "memory.shared.write", "projects.create", "projects.chat", "sandbox.network",
  "tools.shell", "tools.files.write", "tools.schedule", "tools.delegate",
  "connectors.activate", "connectors.remote",
];

function capabilityBoxes(selected, disabled) {
  return CAPABILITIES.map((cap) => {
    const [label, input] = checkbox(t(`capability.${cap}`), { checked: disabled || selected.includes(cap), disabled, name: "capability" });
    input.value = cap;
    label.querySelector("span").append(el("code", { class: "cap-id", text: cap }));
    return { label, input };
  });
}

function capabilityFieldset(boxes, note) {
  return el("fieldset", { class: "caps" }, el("legend", { text: t("roles.capabilities") }),
    note ? el("p", { class: "hint", text: note }) : null,
    el("ul", { class: "checks" }, ...boxes.map((b) => el("li", {}, b.label))));
}

function roleCard(role, ctx) {
  const isAdmin = role.id === "admin";
  const label = el("input", { name: "label", maxlength: "64", props: { value: seeded(role.label) } });
  const [autoLabel, autoGrant] = checkbox(t("roles.auto_grant"), { checked: role.attrs?.auto_grant === true });
  const boxes = capabilityBoxes(role.capabilities || [], isAdmin);
  const agents = el("input", { name: "chat_agents", maxlength: "400", props: { value: (role.attrs?.chat_agents || []).join(", ") } });
  const submit = el("button", { class: "btn primary", type: "submit", text: t("common.save") });
  const status = statusLine();
  const actions = el("div", { class: "actions" }, submit);
  if (!role.builtin) {
    actions.append(button(t("roles.delete"), {
      kind: "danger",
      onClick: async () => {
        const ok = await confirmDialog({ title: t("roles.delete_confirm_title", { label: seeded(role.label) }), message: t("roles.delete_confirm"), confirmLabel: t("roles.delete") });
        if (!ok) return;
        const response = await api("DELETE", `/api/admin/roles/${encodeURIComponent(role.id)}`);
        if (response.ok) ctx.rerender(); else status.error(errorText(response));
      },
    }));
  }
  const form = el("form", { class: "stack", novalidate: true },
    field(t("roles.label"), label)[0],
    isAdmin ? null : el("div", { class: "field" }, autoLabel, el("p", { class: "hint", text: t("roles.auto_grant_hint") })),
    isAdmin ? null : field(t("roles.chat_agents"), agents, { hint: t("roles.chat_agents_hint") })[0],
    capabilityFieldset(boxes, isAdmin ? t("roles.admin_caps") : null),
    actions, status.node);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearFieldErrors(form, status);
    const body = { label: unseeded(role.label, label.value.trim()) };
    if (!isAdmin) body.attrs = { auto_grant: autoGrant.checked, chat_agents: agents.value.split(",").map((a) => a.trim()).filter(Boolean) };
    if (!isAdmin) body.capabilities = boxes.filter((b) => b.input.checked).map((b) => b.input.value);
    busy(submit, async () => {
      const response = await api("PATCH", `/api/admin/roles/${encodeURIComponent(role.id)}`, body);
      if (!response.ok) { showFormError(form, status, response); return; }
      heading.textContent = seeded(response.data.label);
      status.ok(t("common.saved"));
    });
  });
  const heading = el("h2", { text: seeded(role.label) });
  return el("article", { class: "card role-card", "data-role": role.id },
    el("header", { class: "plugin-head" }, heading,
      el("p", { class: "meta" }, el("code", { text: role.id }), role.builtin ? el("span", { class: "tag", text: t("roles.preset") }) : null)),
    form);
}

function createForm(ctx) {
  const id = el("input", { name: "id", maxlength: "32", autocomplete: "off", pattern: "[a-z][a-z0-9_-]{1,31}" });
  const label = el("input", { name: "label", maxlength: "64", autocomplete: "off" });
  const [autoLabel, autoGrant] = checkbox(t("roles.auto_grant"), { checked: true });
  const boxes = capabilityBoxes(["chat.use"], false);
  const submit = el("button", { class: "btn primary", type: "submit", text: t("roles.create_submit") });
  const status = statusLine();
  const form = el("form", { class: "stack", novalidate: true },
    field(t("roles.id"), id, { required: true, hint: t("roles.id_hint") })[0],
    field(t("roles.label"), label, { required: true })[0],
    el("div", { class: "field" }, autoLabel, el("p", { class: "hint", text: t("roles.auto_grant_hint") })),
    capabilityFieldset(boxes), el("div", { class: "actions" }, submit), status.node);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearFieldErrors(form, status);
    busy(submit, async () => {
      const response = await api("POST", "/api/admin/roles", {
        id: id.value.trim(), label: label.value.trim(), attrs: { auto_grant: autoGrant.checked },
        capabilities: boxes.filter((b) => b.input.checked).map((b) => b.input.value),
      });
      if (response.ok) ctx.rerender(); else showFormError(form, status, response);
    });
  });
  return form;
}

export async function renderRoles(ctx) {
  const response = await api("GET", "/api/admin/roles");
  const page = el("div", { class: "page" }, pageHeader(t("roles.title"), t("roles.intro")));
  if (!response.ok) { page.append(notice("error", errorText(response))); return page; }
  page.append(el("div", { class: "card-grid wide" }, ...(response.data.roles || []).map((r) => roleCard(r, ctx))),
    section(t("roles.create_title"), createForm(ctx)));
  return page;
}
