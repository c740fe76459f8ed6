// The plugin page kit: what a plugin's page imports from the shell instead of writing its
// own fetch wrapper, DOM helper and string lookup (since spec 1.3).
//
//   import { call, upload, node, text, KitError } from "/lib/plugin-kit.js";
//
// It is the shell's own code under a stable name: calls carry the member's session and
// the shell's CSRF token, a 401 ends the session in the shell as any other request does,
// and a refusal's text is the reader's language when the host or the plugin has a string
// for its code. Only the names exported here are the contract; the shell's other modules
// may change. Everything a page puts on screen goes in as text, never as markup.

import { api, csrf, setCsrfToken, signalSessionLost } from "./api.js";
import { el } from "./dom.js";
import { currentLocale, errorString, t } from "./i18n.js";
import { confirmDialog } from "./ui.js";

/** el("p", {class: "x", text: "…", on: {click}}, child, …): the shell's DOM builder. */
export { el };
/** renderMarkdown(text) → a sanitised fragment, MarkdownStream for text that grows as it
 * streams: Markdown as the chat shows it (links checked, no raw HTML, code highlighted). */
export { MarkdownStream, renderMarkdown } from "./markdown.js";

/** A refused or failed call: `message` in the reader's words, with the answer's
 * `status`, stable `code`, `values` and offending `field` for a page that wants them. */
export class KitError extends Error {
  constructor(message, { status = 0, code = null, values = {}, field = null } = {}) {
    super(message);
    this.name = "KitError";
    this.status = status;
    this.code = code;
    this.values = values;
    this.field = field;
  }
}

/** The session's CSRF token for a write. Mounted outside the shell (which learns it at
 * sign-in), the page asks the session for it. */
async function ensureCsrf() {
  if (csrf()) return;
  const session = await api("GET", "/api/auth/session");
  if (session.ok) setCsrfToken(session.data.csrf_token);
}

/** The answer's body, or a KitError in the reader's words. */
function answered(response) {
  if (response.ok) return response.data;
  const data = response.data || {};
  const message = response.status === 0
    ? t("common.offline")
    : (errorString(data.code, data.values) || data.error || `HTTP ${response.status}`);
  throw new KitError(message, { status: response.status, code: data.code || null, values: data.values || {}, field: data.field || null });
}

/** JSON over fetch with the member's session: resolves to the answer's body, or
 * throws a KitError (status 0 when the server could not be reached). */
export async function call(method, path, body) {
  if (method !== "GET") await ensureCsrf();
  return answered(await api(method, path, body));
}

/** Send a file (a File from an <input type="file"> or a drop, or any Blob) as the raw
 * body of a plugin route that declares one, `@accepts({"type": "string", "format":
 * "binary"}, content_type=...)`: with the member's session and CSRF token, as `call`.
 * The body's `Content-Type` is `type`, else the file's own, else
 * application/octet-stream; a File's name goes in the `X-Filename` header,
 * percent-encoded UTF-8 (`filename` overrides it), as the shell's own uploads send it.
 * `method` is "POST" (default) or "PUT". Resolves to the answer's JSON body, or throws
 * a KitError like `call` (a file over the host's limit: code `upload_too_large`, its
 * message naming the limit in the reader's language). Since spec 1.11. */
export async function upload(path, file, { method = "POST", type, filename } = {}) {
  if (!(file instanceof Blob)) throw new TypeError("upload(path, file): file must be a File or Blob");
  // A body goes with POST or PUT only: fetch refuses another, which read as "the server
  // cannot be reached" (a plugin author's GET).
  if (method !== "POST" && method !== "PUT") throw new TypeError(`upload(path, file, {method}): method must be POST or PUT, not ${method}`);
  await ensureCsrf();
  const headers = { Accept: "application/json", "Content-Type": type || file.type || "application/octet-stream" };
  const name = filename ?? file.name;
  if (name) headers["X-Filename"] = encodeURIComponent(name);
  if (csrf()) headers["X-CSRF-Token"] = csrf();
  let response;
  try {
    response = await fetch(path, { method, headers, credentials: "same-origin", body: file });
  } catch (error) {
    return answered({ ok: false, status: 0, data: { error: error.message } });
  }
  const data = await response.json().catch(() => ({}));
  if (response.status === 401) signalSessionLost(); // the session ended: the shell shows its sign-in, as for any request
  return answered({ ok: response.ok, status: response.status, data });
}

/** node("p", "Hello", "greeting") or node("p", "Hello", {class: "greeting", …}): an
 * element whose text is set as text; the third argument is a class name or attributes. */
export function node(tag, content, attrs = {}) {
  const given = typeof attrs === "string" ? { class: attrs } : attrs;
  return el(tag, content === undefined ? given : { ...given, text: content });
}

/** The page's own string `key` for the reader's language out of `strings`
 * ({locale: {key: text}}, as a plugin's strings.py has them), English underneath;
 * `{name}` placeholders are filled from `values`. */
export function text(strings, key, values = {}) {
  const found = strings?.[currentLocale()]?.[key] ?? strings?.en?.[key] ?? key;
  return String(found).replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
}

/** The reader's language ("de"), as the shell shows it. */
export const locale = () => currentLocale();

/** Ask before what cannot be undone, in the shell's own dialog (translated Cancel,
 * Escape closes it): resolves to true when confirmed. The focus goes back to what had
 * it, so what follows starts from there. `confirmLabel` names the action ("Remove");
 * `danger` (default true) colours it. Since spec 1.6. */
export async function confirm({ title, message, confirmLabel, danger = true }) {
  const opener = document.activeElement;
  const confirmed = await confirmDialog({ title, message, confirmLabel, danger });
  if (opener instanceof HTMLElement && opener.isConnected) opener.focus();
  return confirmed;
}
