// The icons a plugin may name (PluginInfo.icon, WebPage.icon), drawn from Lucide's
// SVGs vendored under web/vendor/lucide/ (ISC; see its LICENSE). docs/plugins.md lists
// the same names; an unknown name is drawn as "puzzle". The SVG is a CSS mask over
// currentColor, so an icon takes the colour of the text beside it.
import { el } from "./dom.js";

export const ICONS = [
  "bell", "book", "bot", "box", "calendar", "chat", "checklist", "clock", "cloud", "database", "file",
  "folder", "globe", "hand", "heart", "home", "image", "key", "language", "mail", "music", "pin",
  "puzzle", "search", "send", "settings", "shield", "sparkles", "star", "terminal", "tool", "user", "users",
];

/** A decorative icon (hidden from screen readers: the text beside it says what it is). */
export function icon(name) {
  const known = ICONS.includes(name) ? name : "puzzle";
  const node = el("span", { class: "icon", "aria-hidden": "true", "data-icon": known });
  node.style.setProperty("--icon", `url("/ui/vendor/lucide/${known}.svg")`);
  return node;
}
