// A warning before an idle session ends (WCAG 2.2.1): the server ends a session that
// has made no request for auth.session_idle_minutes (12 h by default), and the page
// became the sign-in form with no word before, losing what was typed in a form. Shortly
// before that time a dialog says so; "Stay signed in" (or Escape) asks the server, which,
// like every request, starts the idle time again. The dialog is modal and takes the
// focus, so a screen reader reads its title and text (aria-describedby); the focus goes
// back where it was after. Requests from any tab of this browser count (lib/api.js keeps
// the last one's time in localStorage): another tab's request closes the warning here.
import { LAST_REQUEST_KEY, api, lastRequestAt } from "./api.js";
import { el, uid } from "./dom.js";
import { t } from "./i18n.js";
import { button, titledDialog } from "./ui.js";

/** Warned this long before the end: two minutes, or half the idle time when that is
 * shorter (a one-minute limit warns after 30 s, leaving 30 s, more than WCAG's 20). */
const warnBefore = (idleMs) => Math.min(2 * 60 * 1000, idleMs / 2);

let watched = null; // { idleMs, timer, dialog }

/** Watch the signed-in session; `idleSeconds` from /api/auth/session. */
export function watchIdleSession(idleSeconds) {
  stopIdleWatch();
  const idleMs = Number(idleSeconds) * 1000;
  if (!(idleMs > 0)) return;
  watched = { idleMs, timer: null, dialog: null };
  schedule();
}

/** The session ended or was left: no warning any more. */
export function stopIdleWatch() {
  if (!watched) return;
  clearTimeout(watched.timer);
  closeWarning();
  watched = null;
}

function schedule() {
  if (!watched) return;
  clearTimeout(watched.timer);
  const due = lastRequestAt() + watched.idleMs - warnBefore(watched.idleMs);
  // Checked again when it fires: a request meanwhile moved the time on.
  watched.timer = setTimeout(() => {
    if (!watched) return;
    if (Date.now() < lastRequestAt() + watched.idleMs - warnBefore(watched.idleMs)) schedule();
    else showWarning();
  }, Math.max(0, due - Date.now()));
}

function showWarning() {
  if (!watched || watched.dialog) return;
  const left = Math.max(1, Math.round((lastRequestAt() + watched.idleMs - Date.now()) / 1000));
  const { dialog, heading } = titledDialog(t("session.idle_title"));
  const words = left >= 90
    ? t("session.idle_minutes_left", { count: Math.round(left / 60) })
    : t("session.idle_seconds_left", { count: left });
  const text = el("p", { id: uid("idle"), text: words });
  dialog.setAttribute("aria-describedby", text.id);
  dialog.classList.add("idle-warning");
  const returnTo = document.activeElement;
  const stay = button(t("session.idle_stay"), { kind: "primary", onClick: () => extend() });
  dialog.append(heading, text, el("div", { class: "actions" }, stay));
  dialog.addEventListener("cancel", (event) => { event.preventDefault(); extend(); });
  watched.dialog = { node: dialog, returnTo };
  document.body.append(dialog);
  dialog.showModal();
  stay.focus();
}

function closeWarning() {
  const shown = watched?.dialog;
  if (!shown) return;
  watched.dialog = null;
  shown.node.close();
  shown.node.remove();
  if (shown.returnTo?.isConnected) shown.returnTo.focus();
}

async function extend() {
  closeWarning();
  await api("GET", "/api/auth/session"); // a 401 here (too late) shows the sign-in form, as any does
  schedule();
}

// Another tab's request: this tab's warning goes, and the next one is timed from it.
window.addEventListener("storage", (event) => {
  if (event.key !== LAST_REQUEST_KEY || !watched) return;
  closeWarning();
  schedule();
});
