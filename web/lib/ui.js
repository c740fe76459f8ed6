// Small building blocks shared by the pages: headers, cards, status lines,
// confirmation dialogs and the error text of a failed request.
import { el, uid } from "./dom.js";
import { errorString, formatSize, t } from "./i18n.js";

export function pageHeader(title, intro) {
  return el("header", { class: "page-header" }, el("h1", { text: title }), intro ? el("p", { class: "intro", text: intro }) : null);
}

export const section = (title, ...children) =>
  el("section", { class: "card" }, title ? el("h2", { text: title }) : null, ...children);

export const notice = (kind, text) => el("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status", text });

/** A failed request in the reader's words: the string for its error code, else the
 * server's message ({"error": "...", "code": "..."}), else a generic one. */
/** The password policy's minimum length (GET /api/setup's `password_min_length`, set
 * as the page starts): the password fields say it under them, not only a refusal. */
let passwordMin = 8;
export const passwordMinLength = () => passwordMin;
export function setPasswordMinLength(value) {
  if (Number.isInteger(value) && value > 0) passwordMin = value;
}

export function errorText(response) {
  if (response.status === 0) return t("common.offline");
  const known = errorString(response.data?.code, response.data?.values);
  if (known) return known;
  if (response.status === 403 && !response.data?.error) return t("common.forbidden");
  return response.data?.error || t("common.error", { message: response.status });
}

/** A form with changes not saved yet (the shell asks before leaving it, see app.js):
 * marked on input, unmarked here. */
export const DIRTY = "unsaved";

/** The form a status line speaks for: the one it is in, else the one just before it. */
function formOf(node) {
  const inside = node.closest("form");
  if (inside) return inside;
  const before = node.previousElementSibling;
  return before instanceof HTMLFormElement ? before : null;
}

/** Its changes are saved (or undone): the shell no longer asks before leaving it. */
export function markSaved(form) {
  if (form) delete form.dataset[DIRTY];
}

/** A live line under a form: status.ok(text), status.error(text), status.clear().
 * ok() says the form's work succeeded: its changes are saved, the one place every form
 * is marked clean (the shell's guard for unsaved changes). */
export function statusLine() {
  const node = el("p", { class: "form-status", role: "status", "aria-live": "polite" });
  const set = (kind, text) => sayIn(node, kind, text);
  const ok = (text) => { markSaved(formOf(node)); set("ok", text); };
  return { node, ok, error: (text) => set("error", text), clear: () => set("", "") };
}

/** Put `text` in a status line's node (kind "ok", "error" or ""): what statusLine's
 * methods do, for a line the caller holds only the node of (the shell's re-render). */
export function sayIn(node, kind, text) {
  node.className = `form-status ${kind}`.trim();
  node.textContent = text;
}

/** The words a control's visible label shows (not its " *" required marker). */
function visibleLabel(control) {
  const label = control.labels?.[0];
  if (!label) return control.getAttribute("aria-label") || control.name;
  const copy = label.cloneNode(true);
  copy.querySelectorAll("input, select, textarea, .required, [aria-hidden=true]").forEach((node) => node.remove());
  return copy.textContent.trim() || control.name;
}

/** The control of a form named `name` that can take the focus, or null. */
function namedControl(form, name) {
  const control = name ? form.elements.namedItem(name) : null;
  return control instanceof HTMLElement && !control.disabled ? control : null;
}

/** Undo markField: no control of the form marked wrong, the status line empty. */
export function clearFieldErrors(form, status = null) {
  for (const control of form.querySelectorAll("[aria-invalid]")) control.removeAttribute("aria-invalid");
  for (const node of form.querySelectorAll(".field-error")) {
    if (!node.hasAttribute("data-added")) { node.textContent = ""; continue; }
    for (const control of form.querySelectorAll(`[aria-describedby~="${node.id}"]`)) {
      const rest = control.getAttribute("aria-describedby").split(/\s+/).filter((id) => id && id !== node.id);
      if (rest.length) control.setAttribute("aria-describedby", rest.join(" ")); else control.removeAttribute("aria-describedby");
    }
    node.remove();
  }
  status?.clear();
}

/**
 * Mark the form's control `name` wrong, the way every form does it: `message` under
 * the control (its description), aria-invalid, the focus on it, and the status line
 * naming it by its visible label, since a reason alone ("Must be 1-200 characters.")
 * does not say which field. False, changing nothing, when the form has no such control
 * that can take the focus.
 */
export function markField(form, status, name, message) {
  const control = namedControl(form, name);
  if (!control) return false;
  if (!control.id) control.id = uid("field");
  let node = form.querySelector(`[id="${control.id}-error"]`);
  if (!node) {
    node = el("p", { class: "field-error", id: `${control.id}-error`, "data-added": "" });
    const wrapper = control.closest(".field");
    if (wrapper && form.contains(wrapper)) wrapper.append(node); else control.after(node);
  }
  const described = (control.getAttribute("aria-describedby") || "").split(/\s+/).filter(Boolean);
  if (!described.includes(node.id)) control.setAttribute("aria-describedby", [...described, node.id].join(" "));
  node.textContent = message;
  control.setAttribute("aria-invalid", "true");
  status.error(t("config.fix_field", { field: visibleLabel(control) }));
  control.focus();
  return true;
}

/**
 * A failed request of a form: a refusal of one field (the API names it in `field`, or
 * in `values.field`) is marked on that field (markField), in the reader's words with
 * the field called by its label; anything else goes to the status line. Marks of an
 * earlier try are cleared first. `fieldFor(code)` names the field of a refusal whose
 * answer names none (an API that refuses by code only, as the schedules' does).
 */
export function showFormError(form, status, response, { fieldFor = () => null } = {}) {
  clearFieldErrors(form, status);
  const data = response.data || {};
  const control = namedControl(form, data.field || data.values?.field || (data.code ? fieldFor(data.code) : null));
  if (control) {
    const reason = errorString(data.code, { ...data.values, field: visibleLabel(control) }) || data.error || errorText(response);
    if (markField(form, status, control.name, reason)) return;
  }
  status.error(errorText(response));
}

/**
 * Escape inside `node` (an inline editor, a disclosure) calls `close`, the keyboard's
 * way out beside the Cancel button or a second click; `close` puts the focus back on
 * what opened it. It returns false when nothing was open: then the Escape goes on to
 * the shell (which closes the phone menu with it), else it stops here.
 */
export function closeOnEscape(node, close) {
  node.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || event.defaultPrevented || event.isComposing) return;
    if (close() === false) return;
    event.preventDefault();
    event.stopPropagation();
  });
}

/** The hint under `control`, its description too (a screen reader says it with the
 * control, not only when it reads the page line by line): added to the control's
 * aria-describedby, after any description it has (an error message's). */
export function hintFor(control, text) {
  if (!control.id) control.id = uid();
  const hint = el("p", { class: "hint", id: `${control.id}-hint`, text });
  const described = (control.getAttribute("aria-describedby") || "").split(/\s+/).filter(Boolean);
  if (!described.includes(hint.id)) control.setAttribute("aria-describedby", [...described, hint.id].join(" "));
  return hint;
}

/** A label + control pair; returns [wrapper, control]. */
export function field(labelText, control, { hint, required } = {}) {
  if (!control.id) control.id = uid();
  const label = el("label", { for: control.id }, labelText, required ? el("span", { class: "required", "aria-hidden": "true", text: " *" }) : null);
  const wrapper = el("div", { class: "field" }, label, control, hint ? hintFor(control, hint) : null);
  return [wrapper, control];
}

export function checkbox(labelText, { checked = false, disabled = false, name, role } = {}) {
  const input = el("input", { type: "checkbox", name, role, disabled, props: { checked } });
  const label = el("label", { class: "check" }, input, el("span", { text: labelText }));
  return [label, input];
}

export function button(text, { kind = "", type = "button", onClick, disabled = false, attrs = {} } = {}) {
  return el("button", { class: `btn ${kind}`.trim(), type, disabled, on: onClick ? { click: onClick } : {}, text, ...attrs });
}

/**
 * Disable a form's submit button while `work` runs. Disabling the focused button drops
 * focus to <body> (a keyboard or screen reader user loses their place), so it gets the
 * focus back after, unless the work put it somewhere else.
 */
export async function busy(buttonNode, work) {
  const hadFocus = document.activeElement === buttonNode;
  buttonNode.disabled = true;
  try { return await work(); } finally {
    buttonNode.disabled = false;
    const lost = !document.activeElement || document.activeElement === document.body;
    if (hadFocus && lost && buttonNode.isConnected) buttonNode.focus();
  }
}

/**
 * A modal <dialog> and the heading that names it (aria-labelledby): without a name a
 * screen reader announces only "dialog" as it opens. The caller places the heading.
 */
export function titledDialog(title) {
  const heading = el("h2", { id: uid("dlg"), text: title });
  return { dialog: el("dialog", { class: "confirm", "aria-labelledby": heading.id }), heading };
}

/**
 * An in-page confirmation (a <dialog>, not window.confirm, so it can say enough and
 * be styled and translated). Resolves true when confirmed.
 */
export function confirmDialog({ title, message, confirmLabel, cancelLabel = t("common.cancel"), danger = true }) {
  return new Promise((resolve) => {
    const { dialog, heading } = titledDialog(title);
    const finish = (value) => { dialog.close(); dialog.remove(); resolve(value); };
    const cancel = button(cancelLabel, { kind: "quiet", onClick: () => finish(false) });
    const confirm = button(confirmLabel, { kind: danger ? "danger" : "primary", onClick: () => finish(true) });
    // Described by its message, so a screen reader reads what confirming does as it opens,
    // not only the title and the focused Cancel.
    const said = el("p", { id: uid("dlg-text"), text: message });
    dialog.setAttribute("aria-describedby", said.id);
    dialog.append(heading, said, el("div", { class: "actions" }, cancel, confirm));
    dialog.addEventListener("cancel", (event) => { event.preventDefault(); finish(false); });
    document.body.append(dialog);
    dialog.showModal();
    cancel.focus();
  });
}

// The shell's one date format: the reader's language's medium style ("06.12.2026,
// 16:19:14" and "06.12.2026" in German, "Dec 6, 2026, 4:19:14 PM" in English), as the
// Markdown export dates itself (Babel's medium format). Made once per language and zone.
const dateFormats = new Map();
function dateFormat(withTime, timeZone) {
  const locale = document.documentElement.lang || undefined;
  const id = `${locale}|${withTime}|${timeZone || ""}`;
  if (!dateFormats.has(id)) {
    dateFormats.set(id, new Intl.DateTimeFormat(locale, { dateStyle: "medium", ...(withTime ? { timeStyle: "medium" } : {}), ...(timeZone ? { timeZone } : {}) }));
  }
  return dateFormats.get(id);
}

/** A moment (an ISO time, a Date) with its time, in the reader's format. */
export function formatDate(value) {
  if (!value) return "—";
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : dateFormat(true).format(date);
}

/** A day without its time, in the same format as `formatDate`; `timeZone` the zone it
 * is read in ("UTC" for a YYYY-MM-DD day the server counts in UTC). */
export function formatDay(value, { timeZone } = {}) {
  if (!value) return "—";
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : dateFormat(false, timeZone).format(date);
}

// A size in the reader's number format ("901,1 KiB" in German): in i18n.js, where
// errorString says a refusal's sizes with it too.
export { formatSize };
