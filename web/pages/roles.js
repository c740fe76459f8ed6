// #roles: the presets and the admin's own roles: label, whether members of the role
// receive new plugins automatically (auto_grant), the chat agents they may start and the
// one they start at (chat_agent), the interface they get (ui_mode) and their capabilities.
import { api } from "../lib/api.js";
import { el } from "../lib/dom.js";
import { seeded, t, unseeded } from "../lib/i18n.js";
import {
  busy, button, checkbox, clearFieldErrors, confirmDialog, errorText, field, hintFor, notice, pageHeader, section, showFormError, statusLine,
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

// Where a re-render after a create or a delete puts the focus and says the outcome
// (ctx.rerender, app.js): the new card's heading; after a delete the next card's, and the
// status line under the cards. Never the page's title.
const roleCard = (id) => `article[data-role="${CSS.escape(String(id))}"]`;

const agentList = (text) => text.split(",").map((a) => a.trim()).filter(Boolean);
/** fnmatch's * and ? (the only wildcards a chat_agents entry may have). */
const globMatch = (pattern, id) => {
  const source = [...pattern].map((c) => (c === "*" ? ".*" : c === "?" ? "." : c.replace(/[\\^$.|+()[\]{}]/g, "\\$&"))).join("");
  return new RegExp(`^${source}$`).test(id);
};

/** The role's default chat agent (attrs.chat_agent, where its members start a
 * conversation): one of the chat agents its list allows, offered as they are typed. The
 * API refuses a default the list does not hold ("The list must include assistant"), and
 * a role made for companion alone had no way to say so. `known`: the chat agents there are
 * ({id, title}); without them (not readable), the ids the list names. */
function defaultAgentSelect(role, agents, known) {
  const select = el("select", { name: "chat_agent" });
  const titles = new Map(known.map((a) => [a.id, a.title]));
  const fill = () => {
    const current = role.attrs?.chat_agent || "assistant"; // as last saved
    const list = agentList(agents.value);
    const literal = list.filter((entry) => !/[*?]/.test(entry));
    const candidates = [...new Set([...known.map((a) => a.id), ...(known.length ? [] : literal), current])];
    const allowed = candidates.filter((id) => list.some((entry) => globMatch(entry, id)));
    const chosen = allowed.includes(select.value) ? select.value : allowed.includes(current) ? current : allowed[0] || "";
    select.replaceChildren(...allowed.map((id) => {
      const title = titles.get(id);
      return el("option", { value: id, text: title && title !== id ? `${title} (${id})` : id });
    }));
    select.value = chosen;
  };
  fill();
  agents.addEventListener("input", fill);
  return select;
}

/** The interface the role's members get (attrs.ui_mode): the full one, or the simple
 * one (Chat and My account). Not offered for the admin role: an admin's is always full. */
function interfaceSelect(mode) {
  const select = el("select", { name: "ui_mode" },
    el("option", { value: "full", text: t("roles.ui_mode_full") }),
    el("option", { value: "simple", text: t("roles.ui_mode_simple") }));
  select.value = mode === "simple" ? "simple" : "full";
  return select;
}

function roleArticle(role, ctx, known) {
  const isAdmin = role.id === "admin";
  const label = el("input", { name: "label", maxlength: "64", props: { value: seeded(role.label) } });
  const [autoLabel, autoGrant] = checkbox(t("roles.auto_grant"), { checked: role.attrs?.auto_grant === true });
  const boxes = capabilityBoxes(role.capabilities || [], isAdmin);
  const agents = el("input", { name: "chat_agents", maxlength: "400", props: { value: (role.attrs?.chat_agents || []).join(", ") } });
  const chatAgent = defaultAgentSelect(role, agents, known);
  const uiMode = interfaceSelect(role.attrs?.ui_mode);
  const submit = el("button", { class: "btn primary", type: "submit", text: t("common.save") });
  const status = statusLine();
  const actions = el("div", { class: "actions" }, submit);
  if (!role.builtin) {
    actions.append(button(t("roles.delete"), {
      kind: "danger",
      onClick: async () => {
        const ok = await confirmDialog({ title: t("roles.delete_confirm_title", { label: seeded(role.label) }), message: t("roles.delete_confirm"), confirmLabel: t("roles.delete") });
        if (!ok) return;
        const cards = [...card.parentElement.querySelectorAll(":scope > article[data-role]")];
        const at = cards.indexOf(card);
        const next = (cards[at + 1] || cards[at - 1])?.dataset.role;
        const response = await api("DELETE", `/api/admin/roles/${encodeURIComponent(role.id)}`);
        if (!response.ok) { status.error(errorText(response)); return; }
        await ctx.rerender({ focus: next && `${roleCard(next)} h2`, status: ".roles-status", say: t("roles.deleted", { label: seeded(role.label) }) });
      },
    }));
  }
  const form = el("form", { class: "stack", novalidate: true },
    field(t("roles.label"), label)[0],
    isAdmin ? null : el("div", { class: "field" }, autoLabel, hintFor(autoGrant, t("roles.auto_grant_hint"))),
    isAdmin ? null : field(t("roles.chat_agents"), agents, { hint: t("roles.chat_agents_hint") })[0],
    isAdmin ? null : field(t("roles.chat_agent"), chatAgent, { hint: t("roles.chat_agent_hint") })[0],
    isAdmin ? null : field(t("roles.ui_mode"), uiMode, { hint: t("roles.ui_mode_hint") })[0],
    capabilityFieldset(boxes, isAdmin ? t("roles.admin_caps") : null),
    actions, status.node);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearFieldErrors(form, status);
    const body = { label: unseeded(role.label, label.value.trim()) };
    if (!isAdmin) body.attrs = { auto_grant: autoGrant.checked, chat_agents: agentList(agents.value), ui_mode: uiMode.value };
    // None offered (the list allows no chat agent there is): the role keeps its default,
    // and the API says at the list which one it must hold.
    if (!isAdmin && chatAgent.value) body.attrs.chat_agent = chatAgent.value;
    if (!isAdmin) body.capabilities = boxes.filter((b) => b.input.checked).map((b) => b.input.value);
    busy(submit, async () => {
      const response = await api("PATCH", `/api/admin/roles/${encodeURIComponent(role.id)}`, body);
      if (!response.ok) { showFormError(form, status, response); return; }
      role.attrs = response.data.attrs || role.attrs;
      heading.textContent = seeded(response.data.label);
      status.ok(t("common.saved"));
    });
  });
  const heading = el("h2", { text: seeded(role.label) });
  const card = el("article", { class: "card role-card", "data-role": role.id },
    el("header", { class: "plugin-head" }, heading,
      el("p", { class: "meta" }, el("code", { text: role.id }), role.builtin ? el("span", { class: "tag", text: t("roles.preset") }) : null)),
    form);
  return card;
}

/** The form of a new role. It starts strict, as a role made beside the presets usually
 * is (one for a teenager, say): new plugins are not granted automatically (ticked, every
 * plugin turned on later reaches its members unasked), and its chat agents and default
 * agent are in the form, not only in the card after the create. */
function createForm(ctx, known) {
  const id = el("input", { name: "id", maxlength: "32", autocomplete: "off", pattern: "[a-z][a-z0-9_-]{1,31}" });
  const label = el("input", { name: "label", maxlength: "64", autocomplete: "off" });
  const [autoLabel, autoGrant] = checkbox(t("roles.auto_grant"), { checked: false });
  const draft = { attrs: { chat_agent: "assistant" } }; // the API's own default for a new role
  const agents = el("input", { name: "chat_agents", maxlength: "400", autocomplete: "off", props: { value: "assistant" } });
  const chatAgent = defaultAgentSelect(draft, agents, known);
  const uiMode = interfaceSelect("full");
  const boxes = capabilityBoxes(["chat.use"], false);
  const submit = el("button", { class: "btn primary", type: "submit", text: t("roles.create_submit") });
  const status = statusLine();
  const form = el("form", { class: "stack", novalidate: true },
    field(t("roles.id"), id, { required: true, hint: t("roles.id_hint") })[0],
    field(t("roles.label"), label, { required: true })[0],
    el("div", { class: "field" }, autoLabel, hintFor(autoGrant, t("roles.auto_grant_new_hint"))),
    field(t("roles.chat_agents"), agents, { hint: t("roles.chat_agents_hint") })[0],
    field(t("roles.chat_agent"), chatAgent, { hint: t("roles.chat_agent_hint") })[0],
    field(t("roles.ui_mode"), uiMode, { hint: t("roles.ui_mode_hint") })[0],
    capabilityFieldset(boxes), el("div", { class: "actions" }, submit), status.node);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearFieldErrors(form, status);
    const attrs = { auto_grant: autoGrant.checked, chat_agents: agentList(agents.value), ui_mode: uiMode.value };
    // None offered (the list allows no chat agent there is): the API says at the list why.
    if (chatAgent.value) attrs.chat_agent = chatAgent.value;
    busy(submit, async () => {
      const response = await api("POST", "/api/admin/roles", {
        id: id.value.trim(), label: label.value.trim(), attrs,
        capabilities: boxes.filter((b) => b.input.checked).map((b) => b.input.value),
      });
      if (!response.ok) { showFormError(form, status, response); return; }
      const card = roleCard(response.data.id);
      await ctx.rerender({ focus: `${card} h2`, status: `${card} form > .form-status`, say: t("roles.created", { label: seeded(response.data.label) }) });
    });
  });
  return form;
}

export async function renderRoles(ctx) {
  const [response, definitions] = await Promise.all([api("GET", "/api/admin/roles"), api("GET", "/api/agent-definitions")]);
  const page = el("div", { class: "page" }, pageHeader(t("roles.title"), t("roles.intro")));
  if (!response.ok) { page.append(notice("error", errorText(response))); return page; }
  // The chat agents there are, for each role's default agent (not the task agents).
  const known = definitions.ok ? (definitions.data.definitions || []).filter((d) => d.kind === "chat").map((d) => ({ id: d.id, title: d.title || d.id })) : [];
  const status = statusLine(); // what a delete says (the card that would is gone)
  status.node.classList.add("roles-status");
  page.append(el("div", { class: "card-grid wide" }, ...(response.data.roles || []).map((r) => roleArticle(r, ctx, known))),
    status.node, section(t("roles.create_title"), createForm(ctx, known)));
  return page;
}
