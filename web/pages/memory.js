// #memory[/mine|/shared][?key=<note>|?new=1|?q=<words>]: the notes the assistant keeps.
// "Mine" are the member's private notes (their own file); "shared" is the pool every
// member with the capability reads. The server decides who may read or change the
// shared pool (403 with its reason, which the page shows); the page only leaves out
// what the member's role (the session's capabilities) does not let them use: the
// shared tab without memory.shared.read, "New note", Save and Delete there without
// memory.shared.write.
import { api } from "../lib/api.js";
import { may as mayDo } from "../lib/capabilities.js";
import { el, link } from "../lib/dom.js";
import { currentLocale, t } from "../lib/i18n.js";
import { busy, button, confirmDialog, errorText, field, formatDate, formatSize, notice, pageHeader, section, statusLine } from "../lib/ui.js";

const TABS = [
  { id: "mine", root: "user-memory", label: "memory.tab_mine" },
  { id: "shared", root: "shared-memory", label: "memory.tab_shared", read: "memory.shared.read", write: "memory.shared.write" },
];

// A tab without a capability to read or write is everyone's.
const may = (ctx, capability) => !capability || mayDo(ctx.session, capability);

const encodeKey = (key) => key.split("/").map(encodeURIComponent).join("/");
// A name the browser would rewrite in the URL ("a/../b" becomes "b", "a/./b" "a/b") or
// the server refuses (a "." or ".." part: note_key_dot_segment): refused here, before
// any request, so a note is never written under another name.
const unsafeKey = (key) => key.startsWith("/") || key.split("/").some((part) => [".", ".."].includes(part.trim()));
const notesApi = (root, key) => `/api/memory/${root}/notes${key === undefined ? "" : `/${encodeKey(key)}`}`;
const route = (tab, params = {}) => {
  const query = new URLSearchParams(params).toString();
  return `#memory/${tab}${query ? `?${query}` : ""}`;
};

/**
 * Go to `hash` as a step on this page (a search, "New note", a note just made), not as
 * a new page: a navigation puts the focus on <main> and the keyboard starts over at the
 * top. The address changes as a link's would (Back goes back); the shell's re-render
 * (ctx.rerender, app.js) puts the focus at `after.focus` and says `after.say`.
 */
function step(ctx, hash, after) {
  if (location.hash === hash) history.replaceState(history.state, "", hash);
  else history.pushState(null, "", hash);
  return ctx.rerender(after);
}
const SEARCH_BOX = "form[role=search] input[name=q]";
const EDITOR = "[data-testid=memory-editor]";

/** Links between the two note collections (each its own address): a nav, not a
 * tablist, which would promise arrow keys and a tab panel. */
function tabBar(active, ctx) {
  return el("nav", { class: "actions", "aria-label": t("memory.title") },
    ...TABS.filter((tab) => tab.id === active.id || may(ctx, tab.read)).map((tab) => el("a", {
      href: route(tab.id), class: `btn ${tab.id === active.id ? "primary" : "quiet"}`,
      "aria-current": tab.id === active.id ? "page" : null, "data-tab": tab.id, text: t(tab.label),
    })));
}

/** A plain click on a link to a step of this page (see step); a click meant for another
 * tab or window is left to the browser. */
function stepLink(ctx, hash, text, attrs, after) {
  const anchor = link(hash, text, attrs);
  anchor.addEventListener("click", (event) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    step(ctx, hash, after);
  });
  return anchor;
}

function searchForm(tab, ctx, query, status) {
  const input = el("input", { type: "search", name: "q", maxlength: "200", autocomplete: "off", props: { value: query } });  // MAX_SEARCH_CHARS
  const submit = el("button", { class: "btn", type: "submit", text: t("memory.search_submit") });
  const form = el("form", { class: "grid-form", role: "search", novalidate: true },
    field(t("memory.search_label"), input)[0],
    el("div", { class: "actions" }, submit,
      query ? link(route(tab.id), t("memory.search_clear"), { class: "btn quiet" }) : null,
      may(ctx, tab.write)
        ? stepLink(ctx, route(tab.id, { new: "1" }), t("memory.new"), { class: "btn", "data-testid": "memory-new" }, { focus: `${EDITOR} input[name=key]` })
        : null),
    el("div", { class: "span" }, status.node));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const words = input.value.trim();
    // The focus stays in the box, with the words, for the next search; the status line
    // under it says what was found (listSection's count, once the list is drawn).
    step(ctx, words ? route(tab.id, { q: words }) : route(tab.id), { focus: SEARCH_BOX });
  });
  return form;
}

/** Notes in the reader's alphabetical order ("apfel.md", "Äpfel.md", "ärger.md",
 * "Birne.md", "Öl.md" in German; the server's list is by code point, capitals and
 * umlauts apart), a folder's notes together: compared name by name along the path,
 * numbers as numbers ("note 2" before "note 10"). Sorted here, where the reader's
 * language is: the server has no collation for it (Babel has none, SQLite's is binary). */
function byReadersOrder(rows) {
  const collator = new Intl.Collator(currentLocale(), { numeric: true });
  const compare = (a, b) => {
    const left = a.split("/"), right = b.split("/");
    for (let i = 0; i < Math.min(left.length, right.length); i += 1) {
      const order = collator.compare(left[i], right[i]) || (left[i] < right[i] ? -1 : left[i] > right[i] ? 1 : 0);
      if (order) return order;
    }
    return left.length - right.length;
  };
  return [...rows].sort((a, b) => compare(a.key, b.key));
}

async function listSection(tab, ctx, query, status) {
  const response = query
    ? await api("GET", `/api/memory/${tab.root}/search?${new URLSearchParams({ q: query })}`)
    : await api("GET", notesApi(tab.root));
  if (!response.ok) return section(null, notice("error", errorText(response)));
  const rows = query ? response.data.hits : byReadersOrder(response.data.notes);  // hits: best first
  // What a search found, said under the search box (where the focus stays) once the page
  // is in place: a live region filled before it is shown is not read out.
  if (query) requestAnimationFrame(() => status.ok(rows.length ? t("memory.hits", { count: rows.length, query }) : t("memory.no_hits_for", { query })));
  if (!rows.length) return section(null, el("p", { class: "muted", text: t(query ? "memory.no_hits" : "memory.none") }));
  const items = rows.map((row) => el("li", { "data-key": row.key },
    link(route(tab.id, { key: row.key }), row.key),
    query
      ? el("p", { class: "muted", text: row.snippet })
      : el("span", { class: "muted", text: ` · ${formatDate(row.updated_at)} · ${formatSize(row.size)}` })));
  // The list stops at the server's limit (2,000 notes): said, with the way to the rest.
  const cut = !query && response.data.truncated ? notice("info", t("memory.list_cut", { count: rows.length })) : null;
  return section(query ? t("memory.results", { query }) : null, cut, el("ul", { class: "plain", "data-testid": "memory-list" }, ...items));
}

function editor(tab, ctx, note) {
  const isNew = note === null;
  const key = el("input", { name: "key", maxlength: "300", required: true, autocomplete: "off", props: { value: isNew ? "" : note.key } });
  if (!isNew) key.readOnly = true;
  const content = el("textarea", { name: "content", rows: "16", props: { value: isNew ? "" : note.content } });
  const writable = may(ctx, tab.write);  // a shared note the role may read, not change: shown, not offered to save
  if (!isNew && !writable) content.readOnly = true;
  const submit = el("button", { class: "btn primary", type: "submit", text: t("common.save") });
  const status = statusLine();
  // The version this editor was opened at, sent with each save ("expected"): a save from
  // an old editor (another tab, another member saved or deleted since) is refused, 409,
  // rather than silently undoing the newer text. After "Load the newer version" it is
  // that one's, so the next save is the member's informed choice. `gone`: the note was
  // deleted since; the next save creates it anew (create=1 never replaces one).
  let version = isNew ? null : note.version;
  let gone = false;
  const newer = el("div", { class: "span", hidden: true, "data-testid": "memory-newer" });
  const loadNewer = button(t("memory.load_newer"), { attrs: { hidden: true, "data-testid": "memory-load-newer" }, onClick: () => busy(loadNewer, async () => {
    const response = await api("GET", notesApi(tab.root, note.key));
    if (!response.ok) { status.error(errorText(response)); return; }
    version = response.data.version;
    const text = el("textarea", { name: "newer", rows: "8", readonly: true, props: { value: response.data.content } });
    newer.replaceChildren(field(t("memory.newer_label"), text, { hint: t("memory.newer_hint") })[0]);
    newer.hidden = false;
    loadNewer.hidden = true;
    status.ok(t("memory.newer_loaded"));
    text.focus();
  }) });
  const actions = el("div", { class: "actions span" }, isNew || writable ? submit : null, loadNewer, link(route(tab.id), t("memory.back"), { class: "btn quiet" }));
  if (!isNew && writable) {
    actions.append(button(t("memory.delete"), { kind: "danger", onClick: async () => {
      const ok = await confirmDialog({ title: t("memory.delete_title"), message: t("memory.delete_text", { key: note.key }), confirmLabel: t("memory.delete") });
      if (!ok) return;
      const response = await api("DELETE", notesApi(tab.root, note.key));
      if (response.ok) ctx.navigate(route(tab.id));
      else status.error(errorText(response));
    } }));
  }
  const form = el("form", { class: "grid-form", novalidate: true, "data-testid": "memory-editor" },
    el("div", { class: "span" }, field(t("memory.key_label"), key, { required: true, hint: isNew ? t("memory.key_hint") : `${tab.root}/${note.key}` })[0]),
    el("div", { class: "span" }, field(t("memory.content_label"), content)[0]),
    actions, el("div", { class: "span" }, status.node), newer);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    status.clear();
    const name = key.value.trim();
    if (!name) { status.error(t("memory.key_required")); key.focus(); return; }
    if (isNew && unsafeKey(name)) { status.error(t("memory.key_invalid")); key.focus(); return; }
    busy(submit, async () => {
      // "New note" never replaces one: a plain PUT would, silently (create=1: 409).
      const create = isNew || gone;
      const body = create ? { content: content.value } : { content: content.value, expected: version };
      const response = await api("PUT", `${notesApi(tab.root, name)}${create ? "?create=1" : ""}`, body);
      if (!response.ok) {
        status.error(errorText(response));
        const code = response.data?.code;
        // The member's text stays in the editor, whatever was refused.
        if (code === "note_changed") { loadNewer.hidden = false; loadNewer.focus(); } else if (code === "note_gone") gone = true;
        else if (response.status === 409) key.focus();
        return;
      }
      if (!isNew) {
        version = response.data.version;
        gone = false;
        loadNewer.hidden = true;
        status.ok(t("memory.saved"));
        return;
      }
      // The new note opens on its own page, the focus on its Save and "Saved." said
      // there (once: a reload of that page does not say it again).
      const saved = `${EDITOR} button[type=submit]`;
      await step(ctx, route(tab.id, { key: response.data.key }), { focus: [saved, `${EDITOR} textarea`], status: `${EDITOR} .form-status`, say: t("memory.saved") });
    });
  });
  return section(isNew ? t("memory.new") : note.key, form);
}

export async function renderMemory(ctx) {
  const tab = TABS.find((candidate) => candidate.id === ctx.rest[0]) || TABS[0];
  const page = el("div", { class: "page", "data-memory-tab": tab.id },
    pageHeader(t("memory.title"), t("memory.intro")), tabBar(tab, ctx));
  const key = ctx.params.get("key");
  if (ctx.params.get("new")) {
    page.append(editor(tab, ctx, null));
    return page;
  }
  if (key) {
    const response = await api("GET", notesApi(tab.root, key));
    page.append(response.ok ? editor(tab, ctx, response.data) : section(null, notice("error", errorText(response)), link(route(tab.id), t("memory.back"))));
    return page;
  }
  const query = ctx.params.get("q") || "";
  const status = statusLine();
  page.append(section(null, searchForm(tab, ctx, query, status)), await listSection(tab, ctx, query, status));
  return page;
}
