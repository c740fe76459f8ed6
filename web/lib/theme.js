// The light/dark/system switch. The choice is kept in this browser (localStorage, so it
// applies before anyone signs in) and in the member's own settings (so it follows them
// to another browser); "system" follows prefers-color-scheme.
import { api } from "./api.js";
import { el, uid } from "./dom.js";
import { t } from "./i18n.js";

const KEY = "skald.theme";
// Set while a choice made here has not reached the member's settings (the save was cut
// by a reload, or failed): this browser's choice is the newer one until it has.
const UNSAVED = "skald.theme.unsaved";
const CHOICES = ["system", "light", "dark"];

export function storedTheme() {
  try {
    const value = localStorage.getItem(KEY);
    return CHOICES.includes(value) ? value : "system";
  } catch {
    return "system";
  }
}

export function applyTheme(choice = storedTheme()) {
  const root = document.documentElement;
  if (choice === "light" || choice === "dark") root.dataset.theme = choice;
  else delete root.dataset.theme;
}

function setTheme(choice) {
  try { localStorage.setItem(KEY, choice); } catch { /* private mode: for this page only */ }
  applyTheme(choice);
}

function unsaved() {
  try { return localStorage.getItem(UNSAVED) === "1"; } catch { return false; }
}

/** The choice into the member's settings; marked unsaved until the server has it. */
async function saveTheme(choice) {
  try { localStorage.setItem(UNSAVED, "1"); } catch { /* private mode */ }
  const response = await api("PUT", "/api/me/settings", { theme: choice }, { keepalive: true });
  if (response.ok && storedTheme() === choice) {
    try { localStorage.removeItem(UNSAVED); } catch { /* private mode */ }
  }
}

/** After sign-in: the member's stored choice, if they made one — unless a choice made
 * in this browser never reached it, which is newer: that one is saved now. */
export async function loadMemberTheme() {
  if (unsaved()) return saveTheme(storedTheme());
  const response = await api("GET", "/api/me/settings");
  const choice = response.ok ? response.data.settings?.theme : null;
  if (CHOICES.includes(choice) && choice !== storedTheme()) setTheme(choice);
}

/** A labelled select for the sidebar. */
export function themeSwitch() {
  const id = uid("theme");
  const select = el("select", {
    id, class: "theme-select",
    on: { change: () => { setTheme(select.value); saveTheme(select.value); } },
  },
    ...CHOICES.map((choice) => el("option", { value: choice, text: t(`theme.${choice}`) })));
  select.value = storedTheme();
  return el("div", { class: "theme-switch" }, el("label", { for: id, text: t("theme.label") }), select);
}
