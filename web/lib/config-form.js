// A form generated from a ConfigField schema (plugin instance config and the
// general settings sets share it). The server validates; a 400 names the field
// ("retries: must be a whole number") and the message is shown under that field.
import { el, uid } from "./dom.js";
import { currentLocale, errorString, t } from "./i18n.js";
import { busy, clearFieldErrors, errorText, markField, statusLine } from "./ui.js";

export const MASK = "********";

function hintFor(spec) {
  const parts = [];
  if (spec.description) parts.push(spec.description);
  // In the reader's digits: "Zwischen 1 und 100.000", "0,5".
  const fmt = (n) => Number(n).toLocaleString(currentLocale());
  if (spec.minimum != null && spec.maximum != null) parts.push(t("config.range", { minimum: fmt(spec.minimum), maximum: fmt(spec.maximum) }));
  else if (spec.minimum != null) parts.push(t("config.minimum", { minimum: fmt(spec.minimum) }));
  else if (spec.maximum != null) parts.push(t("config.maximum", { maximum: fmt(spec.maximum) }));
  return parts.join(" ");
}

/** A choice in the reader's words: the text the host sends for it in `choice_labels`
 * (from the plugin's bundle), else the value itself, which is what is stored. */
const choiceText = (spec, choice) => {
  const text = spec.choice_labels?.[choice];
  return typeof text === "string" && text ? text : choice;
};

function buildControl(spec, value, id) {
  if (spec.type === "boolean") {
    return el("input", { id, type: "checkbox", name: spec.name, props: { checked: value === true } });
  }
  if (spec.type === "choice") {
    // "Not set" only where unset is a state of its own: a field with a default reads
    // unset as that default (the server drops the value, the plugin gets the default),
    // so offering both showed one setting twice under two names.
    const unsettable = !spec.required && spec.default == null;
    const select = el("select", { id, name: spec.name },
      unsettable ? el("option", { value: "", text: t("config.not_set") }) : null,
      ...(spec.choices || []).map((choice) => el("option", { value: choice, text: choiceText(spec, choice) })));
    select.value = value ?? spec.default ?? "";
    return select;
  }
  if (spec.secret) {
    return el("input", {
      id, name: spec.name, type: "password", autocomplete: "new-password",
      placeholder: value === MASK ? MASK : "", props: { value: "" },
    });
  }
  const attrs = { id, name: spec.name, type: spec.type === "url" ? "url" : "text", props: { value: value ?? "" } };
  if (spec.type === "integer") attrs.inputmode = "numeric";
  if (spec.type === "number") attrs.inputmode = "decimal";
  if (spec.max_length) attrs.maxlength = spec.max_length;
  if (spec.type === "url") attrs.placeholder = "https://";
  return el("input", attrs);
}

function readValue(spec, control, stored, clearBox) {
  if (spec.type === "boolean") return control.checked;
  if (spec.secret) {
    if (clearBox?.checked) return null;
    if (control.value !== "") return control.value;
    return stored === MASK ? MASK : null;
  }
  const text = control.value.trim();
  if (spec.type === "choice") return text || null;
  if (spec.type === "integer" || spec.type === "number") {
    if (text === "") return null;
    const number = Number(text.replace(",", "."));
    return Number.isFinite(number) ? number : text; // not a number: let the server name the field
  }
  // Only-whitespace is empty (a required field says so); anything else is saved as
  // typed, as the API stores it: trimmed here, "NK: " was stored "NK:" and a re-save
  // of the stored "NK: " counted as a change. A URL cannot hold outer spaces.
  if (text === "") return spec.required ? "" : null;
  return spec.type === "url" ? text : control.value;
}

/**
 * configForm({fields, values, submitLabel, save}) → <form>.
 * `save(values)` performs the request and resolves {response, values} where
 * `values` are the stored (masked) values to show afterwards.
 */
export function configForm(options) {
  const { fields, values = {}, submitLabel, save, savedNote = false } = options;
  const form = el("form", { class: "config-form", novalidate: true });
  const status = statusLine();
  const rows = new Map();
  const stored = { ...values };

  for (const spec of fields) {
    const id = uid("cfg");
    const control = buildControl(spec, stored[spec.name], id);
    const errorNode = el("p", { class: "field-error", id: `${id}-error` });
    const hintText = hintFor(spec);
    const hint = hintText ? el("p", { class: "hint", id: `${id}-hint`, text: hintText }) : null;
    control.setAttribute("aria-describedby", [hint ? `${id}-hint` : null, `${id}-error`].filter(Boolean).join(" "));
    if (spec.required) control.setAttribute("aria-required", "true");
    const label = el("span", { class: "label-text" }, spec.label || spec.name,
      spec.required ? el("span", { class: "required", title: t("config.required"), text: " *" }) : null);
    let clearBox = null;
    const extras = [];
    if (spec.secret) {
      extras.push(el("p", { class: "hint", text: stored[spec.name] === MASK ? t("config.secret_set") : t("config.secret_unset") }));
      if (stored[spec.name] === MASK && !spec.required) {
        clearBox = el("input", { type: "checkbox" });
        extras.push(el("label", { class: "check small" }, clearBox, el("span", { text: t("config.secret_clear") })));
      }
    }
    const wrapper = spec.type === "boolean"
      ? el("div", { class: "field" }, el("label", { class: "check", for: id }, control, label), hint, errorNode)
      : el("div", { class: "field" }, el("label", { for: id }, label), control, hint, ...extras, errorNode);
    rows.set(spec.name, { spec, control, clearBox });
    form.append(wrapper);
  }

  const submit = el("button", { class: "btn primary", type: "submit", text: submitLabel || t("common.save") });
  form.append(el("div", { class: "actions" }, submit), status.node);
  if (savedNote) status.ok(t("common.saved"));

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearFieldErrors(form, status);
    const outgoing = {};
    for (const [name, row] of rows) outgoing[name] = readValue(row.spec, row.control, stored[name], row.clearBox);
    busy(submit, async () => {
      const { response, values: fresh } = await save(outgoing);
      if (response.ok) {
        // Rebuilt from what the server stored, so masks and secret notes are true.
        const next = configForm({ ...options, values: fresh, savedNote: true });
        form.replaceWith(next);
        next.querySelector("button[type=submit]").focus();
        return;
      }
      const message = errorText(response);
      const match = /^([^:]+): (.+)$/s.exec(response.data?.error || "");
      const row = rows.get(response.data?.field) || (match && rows.get(match[1]));
      // The reason in the reader's words when the code has them ("Muss eine Zahl sein.").
      const reason = row && (errorString(response.data?.code, response.data?.values) || (match ? match[2] : message));
      if (!row || !markField(form, status, row.spec.name, reason)) status.error(message);
    });
  });
  return form;
}
