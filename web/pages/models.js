// #models (admin): the providers Skald may call (name, base URL, API key), a
// connection test that lists the provider's model names, the models chat may use
// (strength picks one for agents asking by strength, priority orders the fallback
// chain) and the presets this machine suggests. API keys are write-only: the server
// answers "********" for a stored key, and the field stays empty unless replaced.
import { api } from "../lib/api.js";
import { MASK } from "../lib/config-form.js";
import { el, present, uid } from "../lib/dom.js";
import { errorString, t } from "../lib/i18n.js";
import {
  busy, button, checkbox, clearFieldErrors, closeOnEscape, confirmDialog, errorText, field, notice, pageHeader, section, showFormError, statusLine,
} from "../lib/ui.js";

const enc = encodeURIComponent;

/** Model names a provider's test returned, per provider id, for the model form. */
const discovered = new Map();

// Where a re-render after an add, a save or a delete puts the focus and says the outcome
// (ctx.rerender, app.js): a provider's Test button (the next step) or Edit, a model row's
// Edit; after a delete the next card or row and the section's status line, never the
// page's title.
const providerCard = (id) => `article[data-provider-id="${CSS.escape(String(id))}"]`;
const modelRow = (id) => `tr[data-model-id="${CSS.escape(String(id))}"]`;
/** The id (``data-<key>``) of the row or card after ``node`` among its like, else the one
 * before it: where the focus goes once ``node``'s is deleted. */
function neighbour(node, selector, key) {
  const all = [...node.parentElement.querySelectorAll(`:scope > ${selector}`)];
  const at = all.indexOf(node);
  return (all[at + 1] || all[at - 1])?.dataset[key] ?? null;
}
/** A provider just added (form, preset): its card's Test button takes the focus. */
const providerAdded = (provider) => {
  const card = providerCard(provider.id);
  return { focus: [`${card} .provider-test`, ".providers-section h2"], status: `${card} .provider-body > .form-status`, say: t("models.provider_added", { name: provider.name }) };
};

/** What the "Add model" form held when the page was drawn again after another add or
 * save (a provider added, a model row saved): the re-render built an empty form and
 * wiped what the admin had half typed. Read before the re-render, used once by it. */
let carriedDraft = null;

function readDraft() {
  const form = document.querySelector("form.model-add");
  if (!form) return null;
  const value = (name) => form.elements.namedItem(name)?.value ?? "";
  const checked = (name) => form.elements.namedItem(name)?.checked === true;
  return {
    provider_id: value("provider_id"), model: value("model"), label: value("label"), strength: value("strength"),
    priority: value("priority"), vision: checked("vision"), enabled: checked("enabled"),
  };
}

/** ctx.rerender, keeping the "Add model" form's values (keepDraft: false once it was
 * the form that was sent). */
async function rerender(ctx, after, { keepDraft = true } = {}) {
  carriedDraft = keepDraft ? readDraft() : null;
  try { await ctx.rerender(after); } finally { carriedDraft = null; }
}

function numberInput(name, value, { min, max }) {
  return el("input", { type: "number", name, min: String(min), max: String(max), step: "1", inputmode: "numeric", props: { value: String(value) } });
}

function readInt(input) {
  const text = input.value.trim();
  const number = Number(text);
  return text !== "" && Number.isInteger(number) ? number : text; // not a whole number: the server names the field
}

// -- providers -----------------------------------------------------------------------------

/** The names the provider's test offered, each not yet added with an "Add" button that
 * adds it: the provider just tested, its name as its label, the form's defaults. A button
 * that only filled the form below left the admin to find and press "Add model" as well
 * (a newcomer probe); the form stays for a name not offered, and Edit in the model's row
 * sets what only the admin knows (its label, whether it can see images). */
function offeredNames(provider, names, added, ctx, status) {
  const addButton = (name) => {
    const add = button(t("models.add_offered"), {
      kind: "small",
      attrs: { "aria-label": t("models.add_offered_name", { model: name }) },
      onClick: () => busy(add, async () => {
        status.clear();
        const index = [...add.closest(".model-names").querySelectorAll(".offered-add")].indexOf(add);
        const response = await api("POST", "/api/admin/models/entries", { provider_id: provider.id, model: name });
        if (!response.ok) { status.error(errorText(response)); return; }
        // The card says so and the focus goes to the next name offered (the Add pressed
        // is gone with its name), else to the Test button.
        const card = providerCard(provider.id);
        await rerender(ctx, {
          focus: [(content) => { const next = content.querySelectorAll(`${card} .offered-add`); return next[Math.min(index, next.length - 1)]; }, `${card} .provider-test`],
          status: `${card} .provider-body > .form-status`, say: t("models.offered_added", { model: name }),
        });
      }),
    });
    add.classList.add("offered-add");
    return add;
  };
  return el("span", { class: "model-names" }, ...names.slice(0, 40).map((n) => (added.has(n)
    ? el("code", { text: n })
    : el("span", { class: "offered-name" }, el("code", { text: n }), addButton(n)))));
}

/** The test's answer: how many names, and the names (again after a re-render). */
function showOffered(output, provider, names, added, ctx, status) {
  output.className = "test-result ok";
  output.replaceChildren(...present(
    el("strong", { text: t("models.test_ok", { count: names.length }) }),
    names.length ? offeredNames(provider, names, added, ctx, status) : null,
    names.length > 40 ? el("span", { class: "muted", text: ` ${t("models.test_more", { count: names.length - 40 })}` }) : null));
}

/** Why a connection test failed, said of the provider (no model is asked in a test):
 * `models.test_error.<code>` where there is one, else the error as a chat says it. */
function testFailure(data) {
  const key = `models.test_error.${data.code}`;
  const said = t(key, { why: "", reason: "", ...(data.values || {}) });
  return t("models.test_failed", { error: said !== key ? said : errorString(data.code, data.values) || data.error || "" });
}

/** A failed test on the page: what was wrong as the headline, and the connection's own
 * words ("Cannot connect to host … ssl:default […]"), which were the headline, folded
 * away beneath it for whoever searches for them. The fold is outside the live region,
 * right after it: inside, "Technical detail" was read out as part of the message. Its
 * summary names the provider, as the Test button does, among several providers' folds. */
function showFailure(output, data, provider) {
  output.className = "test-result error";
  output.replaceChildren(el("span", { text: testFailure(data) }));
  const why = data.values && data.values.why;
  if (why) {
    output.after(el("details", { class: "test-detail" },
      el("summary", { text: t("models.test_detail", { name: provider.name }) }),
      el("p", { class: "muted", text: t("models.test_detail_text", { why }) })));
  }
}

/** The last failure's fold goes with the result it explained. */
function clearDetail(output) {
  const next = output.nextElementSibling;
  if (next?.matches(".test-detail")) next.remove();
}

function testButton(provider, output, added, ctx, status) {
  const test = button(t("models.test"), {
    kind: "small",
    onClick: () => busy(test, async () => {
      status.clear();  // a new action: the last one's "Saved." is not about this one
      output.className = "test-result";
      clearDetail(output);
      output.replaceChildren(el("span", { class: "muted", text: t("models.testing") }));
      const response = await api("POST", `/api/admin/models/providers/${enc(provider.id)}/test`);
      if (!response.ok) { output.className = "test-result error"; output.textContent = errorText(response); return; }
      if (!response.data.ok) { showFailure(output, response.data, provider); return; }
      const names = response.data.models || [];
      discovered.set(provider.id, names);
      document.dispatchEvent(new CustomEvent("skald:models-discovered", { detail: provider.id }));
      showOffered(output, provider, names, added, ctx, status);
    }),
    attrs: { "aria-label": `${t("models.test")}: ${provider.name}` },
  });
  test.classList.add("provider-test");
  return test;
}

function providerEditForm(provider, ctx, cancel) {
  const name = el("input", { name: "name", maxlength: "100", props: { value: provider.name } });
  const url = el("input", { name: "base_url", type: "url", props: { value: provider.base_url } });
  const key = el("input", { name: "api_key", type: "password", autocomplete: "new-password", placeholder: provider.api_key === MASK ? MASK : "" });
  const [clearLabel, clear] = checkbox(t("models.key_clear"));
  const save = el("button", { class: "btn primary small", type: "submit", text: t("common.save") });
  const status = statusLine();
  const stored = provider.api_key === MASK;
  key.id = uid("key");
  const form = el("form", { class: "grid-form", novalidate: true },
    field(t("models.provider_name"), name, { required: true })[0],
    field(t("models.base_url"), url, { required: true })[0],
    el("div", { class: "field" }, el("label", { for: key.id, text: t("models.api_key") }), key,
      el("p", { class: "hint", text: stored ? t("models.key_stored_hint") : t("models.key_none_hint") }),
      stored ? clearLabel : null),
    el("div", { class: "actions span" }, save, button(t("common.cancel"), { kind: "quiet small", onClick: cancel })),
    el("div", { class: "span" }, status.node));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearFieldErrors(form, status);
    const body = { name: name.value.trim(), base_url: url.value.trim() };
    if (clear.checked) body.api_key = null;
    else if (key.value) body.api_key = key.value;
    busy(save, async () => {
      const response = await api("PATCH", `/api/admin/models/providers/${enc(provider.id)}`, body);
      if (!response.ok) { showFormError(form, status, response); return; }
      const card = providerCard(provider.id);
      await rerender(ctx, { focus: `${card} .provider-edit`, status: `${card} .provider-body > .form-status`, say: t("common.saved") });
    });
  });
  closeOnEscape(form, cancel);
  return form;
}

function providerArticle(provider, ctx, own) {
  const modelCount = own.length;
  const added = new Set(own.map((m) => m.model));
  const output = el("div", { class: "test-result", role: "status", "aria-live": "polite" });
  const status = statusLine();
  if (discovered.has(provider.id)) showOffered(output, provider, discovered.get(provider.id), added, ctx, status);
  const facts = el("dl", { class: "facts compact" },
    el("dt", { text: t("models.base_url") }), el("dd", {}, el("code", { text: provider.base_url })),
    el("dt", { text: t("models.api_key") }), el("dd", { text: provider.api_key === MASK ? t("models.key_stored") : t("models.key_none") }),
    el("dt", { text: t("models.models_count") }), el("dd", { text: String(modelCount) }));
  const closeEdit = () => { body.replaceChildren(...view); edit.focus(); };
  const edit = button(t("models.edit"), {
    kind: "quiet small",
    attrs: { "aria-label": `${t("models.edit")}: ${provider.name}` },
    onClick: () => { body.replaceChildren(providerEditForm(provider, ctx, closeEdit)); body.querySelector("input[name=name]")?.focus(); },
  });
  edit.classList.add("provider-edit");
  const remove = button(t("models.delete"), {
    kind: "quiet small danger-text",
    attrs: { "aria-label": `${t("models.delete")}: ${provider.name}` },
    onClick: async () => {
      const ok = await confirmDialog({
        title: t("models.provider_delete_title", { name: provider.name }),
        message: modelCount ? t("models.provider_delete_models", { count: modelCount }) : t("models.provider_delete_text"),
        confirmLabel: t("models.delete"),
      });
      if (!ok) return;
      const next = neighbour(card, "article[data-provider-id]", "providerId");
      const response = await api("DELETE", `/api/admin/models/providers/${enc(provider.id)}`);
      if (!response.ok) { status.error(errorText(response)); return; }
      await rerender(ctx, {
        focus: [next && `${providerCard(next)} .provider-name`, ".providers-section h2"], status: ".providers-status",
        say: t("models.provider_deleted", { name: provider.name }),
      });
    },
  });
  const test = testButton(provider, output, added, ctx, status);
  const view = [facts, el("div", { class: "actions" }, test, edit, remove), output, status.node];
  const body = el("div", { class: "provider-body" }, ...view);
  const card = el("article", { class: "card provider-card", "data-provider": provider.name, "data-provider-id": provider.id },
    el("h3", { class: "provider-name", text: provider.name }), body);
  return card;
}

function providerForm(ctx) {
  const name = el("input", { name: "name", maxlength: "100", autocomplete: "off" });
  const url = el("input", { name: "base_url", type: "url", placeholder: "https://api.openai.com/v1", autocomplete: "off" });
  const key = el("input", { name: "api_key", type: "password", autocomplete: "new-password" });
  const submit = el("button", { class: "btn primary", type: "submit", text: t("models.provider_add") });
  const status = statusLine();
  const form = el("form", { class: "grid-form", novalidate: true },
    field(t("models.provider_name"), name, { required: true, hint: t("models.provider_name_hint") })[0],
    field(t("models.base_url"), url, { required: true, hint: t("models.base_url_hint") })[0],
    field(t("models.api_key"), key, { hint: t("models.api_key_hint") })[0],
    el("div", { class: "actions span" }, submit), el("div", { class: "span" }, status.node));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearFieldErrors(form, status);
    busy(submit, async () => {
      const response = await api("POST", "/api/admin/models/providers", {
        name: name.value.trim(), base_url: url.value.trim(), api_key: key.value || null,
      });
      if (response.ok) await rerender(ctx, providerAdded(response.data)); else showFormError(form, status, response);
    });
  });
  return form;
}

// -- presets -------------------------------------------------------------------------------------

/** A preset's name in the reader's language, from its stable key (the server holds no
 * words); the provider a preset makes is named so, as the admin's own label. */
const presetName = (preset) => ({
  openai: t("models.preset_openai"), openai_environment: t("models.preset_openai_environment"), ollama: t("models.preset_ollama"),
})[preset.key] || preset.key;

function presetsSection(presets, providers, ctx) {
  const known = new Set(providers.map((p) => p.base_url.replace(/\/+$/, "")));
  const items = presets.map((preset) => {
    const added = known.has(String(preset.base_url).replace(/\/+$/, ""));
    const status = statusLine();
    const name = presetName(preset);
    const apply = button(added ? t("models.preset_added") : t("models.preset_apply"), {
      kind: added ? "small" : "primary small",
      disabled: added,
      attrs: { "aria-label": `${t("models.preset_apply")}: ${name}` },
      onClick: () => busy(apply, async () => {
        const response = await api("POST", "/api/admin/models/presets/apply", {
          name, base_url: preset.base_url, api_key_from_environment: preset.api_key_from_environment === true,
        });
        if (response.ok) await rerender(ctx, providerAdded(response.data)); else status.error(errorText(response));
      }),
    });
    return el("li", { class: "preset" },
      el("div", { class: "preset-text" },
        el("strong", { text: name }), el("code", { class: "block-code", text: preset.base_url }),
        preset.api_key_from_environment ? el("span", { class: "hint", text: t("models.preset_env_key") }) : null,
        preset.models?.length ? el("span", { class: "hint", text: t("models.preset_models", { names: preset.models.slice(0, 8).join(", ") }) }) : null),
      el("div", { class: "preset-action" }, apply, status.node));
  });
  return section(t("models.presets_title"), el("p", { class: "hint", text: t("models.presets_intro") }), el("ul", { class: "presets" }, ...items));
}

// -- models --------------------------------------------------------------------------------------------

/** The model form for adding (model = null) or editing. */
function modelForm(providers, ctx, model = null, onCancel = null) {
  const provider = el("select", { name: "provider_id", disabled: Boolean(model) },
    ...providers.map((p) => el("option", { value: p.id, text: p.name })));
  if (model) provider.value = model.provider_id;
  const listId = uid("names");
  const names = el("datalist", { id: listId });
  const name = el("input", { name: "model", maxlength: "200", autocomplete: "off", list: listId, disabled: Boolean(model), props: { value: model?.model || "" } });
  const label = el("input", { name: "label", maxlength: "100", autocomplete: "off", props: { value: model && model.label !== model.model ? model.label : "" } });
  const strength = numberInput("strength", model?.strength ?? 50, { min: 0, max: 100 });
  const priority = numberInput("priority", model?.priority ?? 100, { min: 0, max: 100000 });
  const [visionLabel, vision] = checkbox(t("models.vision"), { checked: model?.vision === true, name: "vision" });
  const [enabledLabel, enabled] = checkbox(t("models.enabled"), { checked: model ? model.enabled : true, name: "enabled" });
  const suggestions = el("p", { class: "hint" });
  const load = button(t("models.load_names"), { kind: "small", onClick: () => busy(load, loadNames) });
  const submit = el("button", { class: "btn primary", type: "submit", text: model ? t("common.save") : t("models.model_add") });
  const status = statusLine();
  const draft = model ? null : carriedDraft;
  if (draft) {
    carriedDraft = null;
    if (providers.some((p) => String(p.id) === draft.provider_id)) provider.value = draft.provider_id;
    name.value = draft.model;
    label.value = draft.label;
    strength.value = draft.strength;
    priority.value = draft.priority;
    vision.checked = draft.vision;
    enabled.checked = draft.enabled;
  }

  const showNames = () => {
    const found = discovered.get(provider.value) || [];
    names.replaceChildren(...found.map((n) => el("option", { value: n })));
    suggestions.textContent = found.length ? t("models.names_offered", { count: found.length }) : t("models.names_hint");
    load.hidden = found.length > 0 || Boolean(model);
  };
  async function loadNames() {
    const response = await api("POST", `/api/admin/models/providers/${enc(provider.value)}/test`);
    if (response.ok && response.data.ok) {
      const found = response.data.models || [];
      discovered.set(provider.value, found);
      // With names loaded the button hides itself, and the focus on it would fall to
      // <body>: it goes to the field that offers them, and the form says how many.
      if (found.length) { name.focus(); status.ok(t("models.names_loaded", { count: found.length })); }
      showNames();
    } else suggestions.textContent = response.ok ? testFailure(response.data) : errorText(response);
  }
  provider.addEventListener("change", showNames);
  const onDiscovered = (event) => {
    if (!form.isConnected) { document.removeEventListener("skald:models-discovered", onDiscovered); return; }
    if (!model && !name.value.trim()) provider.value = event.detail; // just tested: the likely next step
    showNames();
  };
  document.addEventListener("skald:models-discovered", onDiscovered);

  const nameField = field(t("models.model_name"), name, { required: true })[0];
  nameField.append(names, el("div", { class: "inline-hint" }, suggestions, load));
  const form = el("form", { class: model ? "grid-form model-form" : "grid-form model-form model-add", novalidate: true },
    field(t("models.provider"), provider, { required: true })[0],
    nameField,
    field(t("models.label"), label, { hint: t("models.label_hint") })[0],
    field(t("models.strength"), strength, { hint: t("models.strength_hint") })[0],
    field(t("models.priority"), priority, { hint: t("models.priority_hint") })[0],
    el("div", { class: "field checks-inline" }, visionLabel, enabledLabel),
    el("div", { class: "actions span" }, submit, onCancel ? button(t("common.cancel"), { kind: "quiet", onClick: onCancel }) : null),
    el("div", { class: "span" }, status.node));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearFieldErrors(form, status);
    const body = {
      label: label.value.trim() || null, strength: readInt(strength), priority: readInt(priority),
      vision: vision.checked, enabled: enabled.checked,
    };
    busy(submit, async () => {
      const response = model
        ? await api("PATCH", `/api/admin/models/entries/${enc(model.id)}`, body)
        : await api("POST", "/api/admin/models/entries", { provider_id: provider.value, model: name.value.trim(), ...body });
      if (!response.ok) { showFormError(form, status, response); return; }
      const row = modelRow(response.data.id);
      await rerender(ctx, {
        focus: [`${row} .row-actions button`, ".models-section h2"], status: `${row} .form-status`,
        say: model ? t("common.saved") : t("models.model_added", { model: response.data.label || response.data.model }),
      }, { keepDraft: Boolean(model) }); // the model just added is not a draft any more
    });
  });
  showNames();
  if (onCancel) closeOnEscape(form, onCancel);
  return form;
}

function modelRows(model, providers, ctx) {
  const status = statusLine();
  const editRow = el("tr", { class: "edit-row", hidden: true });
  const edit = button(t("models.edit"), {
    kind: "quiet small",
    attrs: { "aria-label": `${t("models.edit")}: ${model.label}`, "aria-expanded": "false" },
    onClick: () => {
      const open = editRow.hidden;
      editRow.hidden = !open;
      edit.setAttribute("aria-expanded", String(open));
      editRow.replaceChildren(open ? el("td", { colspan: "7" }, modelForm(providers, ctx, model, () => { editRow.hidden = true; edit.setAttribute("aria-expanded", "false"); edit.focus(); })) : "");
      if (open) editRow.querySelector("input[name=label]")?.focus();
    },
  });
  const remove = button(t("models.delete"), {
    kind: "quiet small danger-text",
    attrs: { "aria-label": `${t("models.delete")}: ${model.label}` },
    onClick: async () => {
      const ok = await confirmDialog({ title: t("models.model_delete_title", { name: model.label }), message: t("models.model_delete_text"), confirmLabel: t("models.delete") });
      if (!ok) return;
      const next = neighbour(row, "tr[data-model-id]", "modelId");
      const response = await api("DELETE", `/api/admin/models/entries/${enc(model.id)}`);
      if (!response.ok) { status.error(errorText(response)); return; }
      await rerender(ctx, {
        focus: [next && `${modelRow(next)} .row-actions button`, ".models-section h2"], status: ".models-status",
        say: t("models.model_deleted", { model: model.label }),
      });
    },
  });
  // data-label: a phone shows each row stacked, a value under its column's name, and the
  // actions on a line of their own (app.css .stack-on-phone): side by side, Edit and
  // Delete were off to the right of a wrapper that scrolled sideways.
  const row = el("tr", { "data-model": model.model, "data-model-id": model.id },
    // The model's own name under its label, when the admin gave it one (not "x x").
    el("td", {}, el("span", { class: "model-label", text: model.label }), model.label !== model.model ? el("code", { class: "block-code muted", text: model.model }) : null),
    el("td", { class: "wide-only", "data-label": t("models.provider"), text: model.provider_name }),
    el("td", { class: "num", "data-label": t("models.strength"), text: String(model.strength) }),
    el("td", { class: "num wide-only", "data-label": t("models.priority"), text: String(model.priority) }),
    el("td", { class: "wide-only", "data-label": t("models.vision"), text: model.vision ? t("common.yes") : t("common.no") }),
    el("td", { "data-label": t("models.state") }, el("span", { class: `tag ${model.enabled ? "on" : "off"}`, text: model.enabled ? t("models.on") : t("models.off") })),
    el("td", { class: "row-actions" }, edit, remove, status.node));
  return [row, editRow];
}

function modelsSection(models, providers, ctx) {
  const parts = [];
  if (!models.length) parts.push(el("p", { class: "muted", text: t("models.models_none") }));
  else {
    const head = el("tr", {}, ...[
      ["models.model", ""], ["models.provider", "wide-only"], ["models.strength", "num"], ["models.priority", "num wide-only"],
      ["models.vision", "wide-only"], ["models.state", ""], ["models.actions", "row-actions"],
    ].map(([key, cls]) => el("th", { scope: "col", class: cls || null, text: t(key) })));
    parts.push(el("div", { class: "table-wrap" }, el("table", { class: "table models-table stack-on-phone" },
      el("thead", {}, head), el("tbody", {}, ...models.flatMap((m) => modelRows(m, providers, ctx))))));
  }
  const status = statusLine(); // what a delete says (the row that would is gone)
  status.node.classList.add("models-status");
  parts.push(status.node);
  if (providers.length) {
    parts.push(el("h3", { class: "subhead", text: t("models.model_add_title") }), modelForm(providers, ctx));
  } else {
    parts.push(notice("info", t("models.need_provider")));
  }
  const part = section(t("models.models_title"), el("p", { class: "hint", text: t("models.models_intro") }), ...parts);
  part.classList.add("models-section");
  return part;
}

export async function renderModels(ctx) {
  const [overview, presets] = await Promise.all([api("GET", "/api/admin/models"), api("GET", "/api/admin/models/presets")]);
  const page = el("div", { class: "page models-page" }, pageHeader(t("models.title"), t("models.intro")));
  if (!overview.ok) { page.append(notice("error", errorText(overview))); return page; }
  const providers = overview.data.providers || [];
  const models = overview.data.models || [];
  if (!models.some((m) => m.enabled)) page.append(notice("warning", t("models.none_enabled")));
  if (presets.ok && (presets.data.presets || []).length) page.append(presetsSection(presets.data.presets, providers, ctx));
  const own = (id) => models.filter((m) => m.provider_id === id);
  const status = statusLine(); // what a delete says
  status.node.classList.add("providers-status");
  const providersPart = section(t("models.providers_title"),
    el("p", { class: "hint", text: t("models.providers_intro") }),
    providers.length ? el("div", { class: "card-grid providers" }, ...providers.map((p) => providerArticle(p, ctx, own(p.id))))
      : el("p", { class: "muted", text: t("models.providers_none") }),
    status.node,
    el("h3", { class: "subhead", text: t("models.provider_add_title") }),
    providerForm(ctx));
  providersPart.classList.add("providers-section");
  page.append(providersPart, modelsSection(models, providers, ctx));
  return page;
}
