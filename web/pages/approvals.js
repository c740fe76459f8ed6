// #approvals (admin): the rules of the approval gate and the security groups they
// may be limited to (seed 001 "Approval gate"). Deciding: among the rules that
// apply, any deny wins; otherwise the lowest priority number decides; the built-in
// catch-all `*` asks about everything else and can be changed but not deleted.
// A group takes effect for the roles that list it; that is set here too.
import { api } from "../lib/api.js";
import { el } from "../lib/dom.js";
import { seeded, t, unseeded } from "../lib/i18n.js";
import {
  busy, button, checkbox, clearFieldErrors, closeOnEscape, confirmDialog, errorText, field, notice, pageHeader, section, showFormError, statusLine,
} from "../lib/ui.js";

const ACTIONS = ["allow", "require", "deny"];

function actionLabel(action) {
  if (action === "allow") return t("approvals.action_allow");
  if (action === "deny") return t("approvals.action_deny");
  return t("approvals.action_require");
}

const isCatchAll = (rule) => rule.builtin && rule.tool_pattern === "*";

// Where a re-render after an add, a save or a delete puts the focus and says the outcome
// (ctx.rerender, app.js): the row's Edit button and status line, a card's heading, or,
// after a delete, the next one and the section's status line; never the page's title
// above a long table.
const ruleRow = (id) => `tr[data-rule="${CSS.escape(String(id))}"]`;
const groupCard = (id) => `article[data-group="${CSS.escape(String(id))}"]`;
/** The id (``data-<key>``) of the row or card after ``node`` among its like, else the one
 * before it: where the focus goes once ``node``'s is deleted. */
function neighbour(node, selector, key) {
  const all = [...node.parentElement.querySelectorAll(`:scope > ${selector}`)];
  const at = all.indexOf(node);
  return (all[at + 1] || all[at - 1])?.dataset[key] ?? null;
}

// -- rules -------------------------------------------------------------------------------------

function ruleForm(groups, ctx, rule = null, onCancel = null) {
  const pattern = el("input", { name: "tool_pattern", maxlength: "200", autocomplete: "off", placeholder: "write_*", props: { value: rule?.tool_pattern || "" } });
  const pathClass = el("input", { name: "path_class", maxlength: "300", autocomplete: "off", placeholder: "user-memory/*", props: { value: rule?.path_class || "" } });
  const action = el("select", { name: "action" }, ...ACTIONS.map((a) => el("option", { value: a, text: actionLabel(a) })));
  action.value = rule?.action || "require";
  const priority = el("input", { name: "priority", type: "number", min: "0", max: "10000000", step: "1", inputmode: "numeric", props: { value: String(rule?.priority ?? 500) } });
  const group = el("select", { name: "group_id" },
    el("option", { value: "", text: t("approvals.group_everyone") }),
    ...groups.map((g) => el("option", { value: g.id, text: g.label })));
  group.value = rule?.group_id || "";
  const note = el("input", { name: "note", maxlength: "500", autocomplete: "off", props: { value: seeded(rule?.note || "") } });
  const submit = el("button", { class: "btn primary", type: "submit", text: rule ? t("common.save") : t("approvals.rule_add") });
  const status = statusLine();
  const catchAll = rule && isCatchAll(rule);
  if (catchAll) pattern.disabled = true;
  const form = el("form", { class: "grid-form rule-form", novalidate: true },
    field(t("approvals.tool_pattern"), pattern, { required: true, hint: catchAll ? t("approvals.catch_all_hint") : t("approvals.tool_pattern_hint") })[0],
    field(t("approvals.path_class"), pathClass, { hint: t("approvals.path_class_hint") })[0],
    field(t("approvals.action"), action, { required: true })[0],
    field(t("approvals.priority"), priority, { required: true, hint: t("approvals.priority_hint") })[0],
    field(t("approvals.group"), group)[0],
    field(t("approvals.note"), note)[0],
    el("div", { class: "actions span" }, submit, onCancel ? button(t("common.cancel"), { kind: "quiet", onClick: onCancel }) : null),
    el("div", { class: "span" }, status.node));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearFieldErrors(form, status);
    const text = priority.value.trim();
    const body = {
      path_class: pathClass.value.trim() || null, action: action.value,
      priority: text !== "" && Number.isInteger(Number(text)) ? Number(text) : text,
      group_id: group.value || null, note: unseeded(rule?.note || "", note.value.trim()),
    };
    if (!catchAll) body.tool_pattern = pattern.value.trim();
    busy(submit, async () => {
      const response = rule
        ? await api("PATCH", `/api/admin/approval-rules/${rule.id}`, body)
        : await api("POST", "/api/admin/approval-rules", body);
      if (!response.ok) { showFormError(form, status, response); return; }
      const row = ruleRow(response.data.id);
      await ctx.rerender({
        focus: [`${row} .row-actions button`, ".rules-section h2"], status: `${row} .form-status`,
        say: rule ? t("common.saved") : t("approvals.rule_added", { pattern: response.data.tool_pattern }),
      });
    });
  });
  if (onCancel) closeOnEscape(form, onCancel);
  return form;
}

/** What a rule's Edit and Delete buttons are named by: its tool pattern, and where
 * other rules share that pattern, what tells them apart (its path class, its group);
 * "Delete: read_file" three times over said not which. */
function ruleName(rule, rules, groupLabel) {
  const alike = rules.filter((r) => r.tool_pattern === rule.tool_pattern);
  if (alike.length < 2) return rule.tool_pattern;
  let name = t("approvals.rule_name_path", { pattern: rule.tool_pattern, path: rule.path_class || t("approvals.any_path") });
  if (alike.some((r) => r !== rule && (r.path_class || "") === (rule.path_class || ""))) name = t("approvals.rule_name_group", { name, group: groupLabel });
  return name;
}

function ruleRows(rule, groups, ctx, rules = [rule]) {
  const status = statusLine();
  const editRow = el("tr", { class: "edit-row", hidden: true });
  const groupLabel = rule.group_id ? (groups.find((g) => g.id === rule.group_id)?.label || rule.group_id) : t("approvals.group_everyone");
  const named = ruleName(rule, rules, groupLabel);
  const edit = button(t("approvals.edit"), {
    kind: "quiet small",
    attrs: { "aria-label": `${t("approvals.edit")}: ${named}`, "aria-expanded": "false" },
    onClick: () => {
      const open = editRow.hidden;
      editRow.hidden = !open;
      edit.setAttribute("aria-expanded", String(open));
      const close = () => { editRow.hidden = true; edit.setAttribute("aria-expanded", "false"); edit.focus(); };
      editRow.replaceChildren(open ? el("td", { colspan: "7" }, ruleForm(groups, ctx, rule, close)) : "");
      if (open) editRow.querySelector("select[name=action]")?.focus();
    },
  });
  const remove = isCatchAll(rule) ? null : button(t("approvals.delete"), {
    kind: "quiet small danger-text",
    attrs: { "aria-label": `${t("approvals.delete")}: ${named}` },
    onClick: async () => {
      const ok = await confirmDialog({ title: t("approvals.rule_delete_title", { pattern: rule.tool_pattern }), message: t("approvals.rule_delete_text"), confirmLabel: t("approvals.delete") });
      if (!ok) return;
      const next = neighbour(row, "tr[data-rule]", "rule");
      const response = await api("DELETE", `/api/admin/approval-rules/${rule.id}`);
      if (!response.ok) { status.error(errorText(response)); return; }
      await ctx.rerender({
        focus: [next && `${ruleRow(next)} .row-actions button`, ".rules-section h2"], status: ".rules-status",
        say: t("approvals.rule_deleted", { pattern: rule.tool_pattern }),
      });
    },
  });
  // data-label: a phone shows each row stacked, a value under its column's name (app.css
  // .stack-on-phone, as Models and Usage do): seven columns ran 464 px off a 390 px
  // screen and broke "read_file" mid-word.
  const note = seeded(rule.note || "");
  const row = el("tr", { "data-rule": rule.id },
    el("td", {}, el("code", { text: rule.tool_pattern }), rule.builtin ? el("span", { class: "tag", text: t("approvals.builtin") }) : null),
    el("td", { "data-label": t("approvals.path_class") },
      rule.path_class ? el("code", { text: rule.path_class }) : el("span", { class: "muted", text: t("approvals.any_path") })),
    el("td", { "data-label": t("approvals.action") }, el("span", { class: `tag action-${rule.action}`, text: actionLabel(rule.action) })),
    el("td", { class: "num", "data-label": t("approvals.priority"), text: String(rule.priority) }),
    el("td", { class: "wide-only", "data-label": t("approvals.group"), text: groupLabel }),
    el("td", { class: "wide-only note-cell", "data-label": note ? t("approvals.note") : null, text: note }),
    el("td", { class: "row-actions" }, edit, remove, status.node));
  return [row, editRow];
}

function rulesSection(rules, groups, ctx) {
  const head = el("tr", {}, ...[
    ["approvals.tool_pattern", ""], ["approvals.path_class", ""], ["approvals.action", ""], ["approvals.priority", "num"],
    ["approvals.group", "wide-only"], ["approvals.note", "wide-only"], ["approvals.actions", "row-actions"],
  ].map(([key, cls]) => el("th", { scope: "col", class: cls || null, text: t(key) })));
  const status = statusLine(); // what a delete says (the row that would is gone)
  status.node.classList.add("rules-status");
  const part = section(t("approvals.rules_title"),
    el("p", { class: "hint", text: t("approvals.rules_intro") }),
    el("div", { class: "table-wrap" }, el("table", { class: "table rules-table stack-on-phone" },
      el("thead", {}, head), el("tbody", {}, ...rules.flatMap((r) => ruleRows(r, groups, ctx, rules))))),
    status.node,
    el("h3", { class: "subhead", text: t("approvals.rule_add_title") }),
    ruleForm(groups, ctx));
  part.classList.add("rules-section");
  return part;
}

// -- security groups ---------------------------------------------------------------------------------

function groupRoles(group, roles) {
  const status = statusLine();
  const boxes = roles.map((role) => {
    const holds = (role.attrs?.permission_groups || []).includes(group.id);
    const [label, input] = checkbox(seeded(role.label), { checked: holds, name: "role" });
    // While its change is saved the box takes no other (a click or Space is undone), but
    // stays enabled: disabling it dropped the focus to <body>, and a keyboard user's place.
    input.addEventListener("click", (event) => { if (input.getAttribute("aria-busy") === "true") event.preventDefault(); });
    input.addEventListener("change", async () => {
      input.setAttribute("aria-busy", "true");
      status.clear();
      const current = new Set(role.attrs?.permission_groups || []);
      if (input.checked) current.add(group.id); else current.delete(group.id);
      const response = await api("PATCH", `/api/admin/roles/${encodeURIComponent(role.id)}`, { attrs: { permission_groups: [...current] } });
      input.removeAttribute("aria-busy");
      if (!response.ok) { input.checked = !input.checked; status.error(errorText(response)); return; }
      role.attrs = response.data.attrs || { ...role.attrs, permission_groups: [...current] };
      status.ok(t("common.saved"));
    });
    return el("li", {}, label);
  });
  return el("fieldset", { class: "caps group-roles" }, el("legend", { text: t("approvals.group_roles") }),
    el("ul", { class: "checks inline" }, ...boxes), status.node);
}

function groupArticle(group, rules, roles, ctx) {
  const status = statusLine();
  const used = rules.filter((r) => r.group_id === group.id).length;
  const remove = button(t("approvals.delete"), {
    kind: "quiet small danger-text",
    attrs: { "aria-label": `${t("approvals.delete")}: ${group.label}` },
    onClick: async () => {
      const ok = await confirmDialog({
        title: t("approvals.group_delete_title", { label: group.label }),
        message: used ? t("approvals.group_delete_rules", { count: used }) : t("approvals.group_delete_text"),
        confirmLabel: t("approvals.delete"),
      });
      if (!ok) return;
      const next = neighbour(card, "article[data-group]", "group");
      const response = await api("DELETE", `/api/admin/security-groups/${encodeURIComponent(group.id)}`);
      if (!response.ok) { status.error(errorText(response)); return; }
      await ctx.rerender({
        focus: [next && `${groupCard(next)} h3`, ".groups-section h2"], status: ".groups-status",
        say: t("approvals.group_deleted", { label: group.label }),
      });
    },
  });
  const card = el("article", { class: "card group-card", "data-group": group.id },
    el("header", { class: "plugin-head" }, el("h3", { text: group.label }), remove),
    el("p", { class: "meta" }, el("code", { text: group.id }), el("span", { text: t("approvals.group_rule_count", { count: used }) })),
    group.description ? el("p", { class: "description", text: group.description }) : null,
    roles.length ? groupRoles(group, roles) : null,
    status.node);
  return card;
}

function groupForm(ctx) {
  const id = el("input", { name: "id", maxlength: "40", autocomplete: "off", pattern: "[A-Za-z0-9_-]{1,40}" });
  const label = el("input", { name: "label", maxlength: "80", autocomplete: "off" });
  const description = el("input", { name: "description", maxlength: "500", autocomplete: "off" });
  const submit = el("button", { class: "btn primary", type: "submit", text: t("approvals.group_add") });
  const status = statusLine();
  const form = el("form", { class: "grid-form", novalidate: true },
    field(t("approvals.group_id"), id, { required: true, hint: t("approvals.group_id_hint") })[0],
    field(t("approvals.group_label"), label, { required: true })[0],
    el("div", { class: "span" }, field(t("approvals.group_description"), description)[0]),
    el("div", { class: "actions span" }, submit), el("div", { class: "span" }, status.node));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearFieldErrors(form, status);
    busy(submit, async () => {
      const response = await api("POST", "/api/admin/security-groups", {
        id: id.value.trim(), label: label.value.trim(), description: description.value.trim(),
      });
      if (!response.ok) { showFormError(form, status, response); return; }
      const card = groupCard(response.data.id);
      await ctx.rerender({
        focus: [`${card} h3`, ".groups-section h2"], status: `${card} > .form-status`,
        say: t("approvals.group_added", { label: response.data.label }),
      });
    });
  });
  return form;
}

export async function renderApprovals(ctx) {
  const [response, roles] = await Promise.all([api("GET", "/api/admin/approval-rules"), api("GET", "/api/admin/roles")]);
  const page = el("div", { class: "page approvals-page" }, pageHeader(t("approvals.title"), t("approvals.intro")));
  if (!response.ok) { page.append(notice("error", errorText(response))); return page; }
  const rules = response.data.rules || [];
  const groups = response.data.groups || [];
  const editableRoles = roles.ok ? roles.data.roles || [] : [];
  const groupsStatus = statusLine(); // what a delete says
  groupsStatus.node.classList.add("groups-status");
  const groupsPart = section(t("approvals.groups_title"),
    el("p", { class: "hint", text: t("approvals.groups_intro") }),
    groups.length ? el("div", { class: "card-grid" }, ...groups.map((g) => groupArticle(g, rules, editableRoles, ctx)))
      : el("p", { class: "muted", text: t("approvals.groups_none") }),
    groupsStatus.node,
    el("h3", { class: "subhead", text: t("approvals.group_add_title") }),
    groupForm(ctx));
  groupsPart.classList.add("groups-section");
  page.append(rulesSection(rules, groups, ctx), groupsPart);
  return page;
}
