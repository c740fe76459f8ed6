// The one way the UI builds DOM. Data only ever reaches the page through
// textContent, property setters and setAttribute (checks E3/F1): there is no
// innerHTML anywhere in web/, so a name like `<img onerror=…>` stays text.

let counter = 0;

/** A page-unique id for label/input pairs. */
export const uid = (prefix = "f") => `${prefix}-${++counter}`;

/**
 * el("button", {class: "btn", text: "Save", on: {click}}, child, …)
 * - `text` sets textContent; `props` sets DOM properties (value, checked, …);
 * - `on` adds event listeners; `true` sets an empty attribute; false/null skip it;
 * - string children become text nodes (Node.append never parses HTML).
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "text") node.textContent = value ?? "";
    else if (name === "props") Object.assign(node, value);
    else if (name === "on") for (const [type, handler] of Object.entries(value)) node.addEventListener(type, handler);
    else if (value === true) node.setAttribute(name, "");
    else if (value !== false && value != null) node.setAttribute(name, String(value));
  }
  node.append(...present(children));
  return node;
}

/** Children for the DOM's own `append` / `replaceChildren`: a missing one (null,
 * undefined, false) left out, where the DOM would print it as the text "null". */
export function present(...children) {
  return children.flat(2).filter((child) => child != null && child !== false);
}

// Links are only ever built by the shell (hash routes from encodeURIComponent'd
// ids); no href comes from data, so no javascript: or data: URL can reach one.
export const link = (route, text, attrs = {}) => el("a", { href: route, text, ...attrs });

/**
 * `node`, a box that scrolls on its own (a code block, a tool's arguments), made
 * reachable: focusable, so a keyboard scrolls it too (WCAG 2.1.1; axe
 * scrollable-region-focusable), and a named region for the screen reader that lands there.
 */
export function scrollableRegion(node, label) {
  node.tabIndex = 0;
  node.setAttribute("role", "region");
  node.setAttribute("aria-label", label);
  return node;
}

/** A text box whose direction follows what is typed in it (Arabic in an English
 * interface runs right to left) and, while empty, the interface's, so its placeholder
 * sits where the interface reads from: Chromium resolves an empty dir="auto" box to
 * left to right whatever the page's direction. */
export function followTypedDirection(box) {
  const sync = () => { if (box.value.trim()) box.dir = "auto"; else box.removeAttribute("dir"); };
  box.addEventListener("input", sync);
  sync();
  return sync;
}
