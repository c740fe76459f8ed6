// The chat's keyboard shortcuts, as members coming from Open WebUI expect them:
// Ctrl+Shift+O a new conversation, Ctrl+K or "/" the conversation search, Shift+Esc or
// Ctrl+Shift+; the message box, Ctrl+/ the list of them (a small dialog). Cmd on a Mac.
//
// Keys without Ctrl are the member's while they type: "/" and Shift+Esc act only when
// no text field has the focus (a screen reader's browse mode takes single keys before
// the page, so they never clash with its quick navigation). None of them is a key the
// browser or a screen reader needs: Ctrl+K and Ctrl+Shift+O are a search box and a
// bookmark manager the page may take; Shift+Esc, the task manager in Chrome on Linux
// and Windows, never reaches a page there, hence Ctrl+Shift+; beside it.
import { el, uid } from "../lib/dom.js";
import { t } from "../lib/i18n.js";
import { button, titledDialog } from "../lib/ui.js";

/** The shortcuts in the order the help lists them: the action, its keys (both locale keys). */
const SHORTCUTS = [
  ["shortcuts.new", "shortcuts.new_keys"],
  ["shortcuts.search", "shortcuts.search_keys"],
  ["shortcuts.composer", "shortcuts.composer_keys"],
  ["shortcuts.help", "shortcuts.help_keys"],
];

/** Whether the focus is in a field the member types in (where single keys are text). */
function typing(target) {
  return target instanceof Element && Boolean(target.closest("input, textarea, select, [contenteditable]:not([contenteditable=false])"));
}

/** The shortcut a key press is, or null. By the key's value first (a layout's own "/"
 * and ";" wherever they are: Shift+7 and Shift+, on a German keyboard), and for the
 * letters by their place too (Ctrl+Shift+O on a Cyrillic layout). */
export function shortcutOf(event) {
  if (event.isComposing || event.altKey) return null;
  const ctrl = event.ctrlKey || event.metaKey;
  const key = event.key || "";
  if (ctrl) {
    if (event.shiftKey && (key.toLowerCase() === "o" || event.code === "KeyO")) return "new";
    if (!event.shiftKey && (key.toLowerCase() === "k" || event.code === "KeyK")) return "search";
    if (event.shiftKey && (key === ";" || key === ":" || event.code === "Semicolon")) return "composer";
    if (key === "/" || (!event.shiftKey && event.code === "Slash")) return "help";
    return null;
  }
  if (typing(event.target)) return null;
  if (key === "/") return "search";
  if (key === "Escape" && event.shiftKey) return "composer";
  return null;
}

/** Listen for the shortcuts once, for the signed-in shell (its #sidebar) while no modal
 * dialog has the keyboard. Each action returns false when it did nothing: the key then
 * goes on to the browser. */
export function installShortcuts(actions) {
  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.repeat) return;
    if (!document.getElementById("sidebar") || document.querySelector("dialog[open]")) return;
    const which = shortcutOf(event);
    if (!which) return;
    const done = which === "help" ? showShortcuts() : actions[which]?.();
    if (done !== false) event.preventDefault();
  });
}

/** The shortcuts' help: a modal dialog named by its heading, the focus kept in it (Tab
 * goes round its controls), closed by Escape or Close, the focus back where it was. */
export function showShortcuts() {
  const returnTo = document.activeElement;
  const { dialog, heading } = titledDialog(t("shortcuts.title"));
  dialog.classList.add("shortcuts-help");
  const hint = el("p", { id: uid("shortcuts-hint"), text: t("shortcuts.hint") });
  dialog.setAttribute("aria-describedby", hint.id);
  const list = el("dl", { class: "shortcut-list" }, ...SHORTCUTS.map(([what, keys]) =>
    el("div", {}, el("dt", {}, el("kbd", { text: t(keys) })), el("dd", { text: t(what) }))));
  const finish = () => {
    dialog.close();
    dialog.remove();
    if (returnTo instanceof HTMLElement && returnTo.isConnected) returnTo.focus({ preventScroll: true });
  };
  const close = button(t("shortcuts.close"), { kind: "primary", onClick: () => finish() });
  dialog.append(heading, hint, list, el("div", { class: "actions" }, close));
  dialog.addEventListener("cancel", (event) => { event.preventDefault(); finish(); });
  dialog.addEventListener("keydown", (event) => {
    if (event.key !== "Tab") return;
    // A modal dialog leaves the page behind inert, but Tab would still go on to the
    // browser's own controls: it goes round the dialog's instead.
    const stops = [...dialog.querySelectorAll("button, [href], input, select, textarea, [tabindex]:not([tabindex='-1'])")];
    const at = stops.indexOf(document.activeElement);
    const next = event.shiftKey ? (at <= 0 ? stops.at(-1) : null) : (at === stops.length - 1 || at < 0 ? stops[0] : null);
    if (next) { event.preventDefault(); next.focus(); }
  });
  document.body.append(dialog);
  dialog.showModal();
  close.focus();
  return true;
}
