// The light/dark/system switch. The choice is this browser's (localStorage): it
// applies before anyone signs in, and "system" follows prefers-color-scheme.
import { el, uid } from "./dom.js";
import { t } from "./i18n.js";

const KEY = "skald.theme";
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

/** A labelled select for the sidebar. */
export function themeSwitch() {
  const id = uid("theme");
  const select = el("select", { id, class: "theme-select", on: { change: () => setTheme(select.value) } },
    ...CHOICES.map((choice) => el("option", { value: choice, text: t(`theme.${choice}`) })));
  select.value = storedTheme();
  return el("div", { class: "theme-switch" }, el("label", { for: id, text: t("theme.label") }), select);
}
