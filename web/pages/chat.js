// #chat and #chat/<conversation_id>: the member's conversations (new, rename, delete,
// search by title), one conversation's transcript (chat-transcript.js) and the
// composer. Live events arrive over the member socket (lib/socket.js); whenever the
// socket comes back, the open conversation is read again from the server, so a turn
// still running and the approvals still waiting show as they are.
import { api, upload } from "../lib/api.js";
import { el, followTypedDirection, link, present, uid } from "../lib/dom.js";
import { errorString, t } from "../lib/i18n.js";
import * as socket from "../lib/socket.js";
import { button, confirmDialog, errorText, formatDate, notice, statusLine } from "../lib/ui.js";
import { installShortcuts } from "./chat-shortcuts.js";
import { isLive, showAgentTitle, taskStrip } from "./chat-tasks.js";
import { appendDelta, Transcript } from "./chat-transcript.js";

const MAX_MESSAGE_CHARS = 100_000;
const chatRoute = (id) => `#chat/${encodeURIComponent(id)}`;
const titleOf = (c) => (c?.title || "").trim() || t("chat.untitled");
const narrow = () => window.matchMedia("(max-width: 700px)").matches;

let current = null; // the chat view on screen; a newer one replaces it
let focusComposer = false; // "New conversation" opened the fresh composer: the next start page focuses it
let focusSearch = false; // the search's shortcut, pressed where no list was on screen: the next start page focuses its search
let deletedElsewhere = false; // the conversation on screen was deleted elsewhere: the next start page says so
let startedHere = null; // the conversation the fresh composer's first message just created: its page says what it shows once attached
// "All conversations" left this conversation: the next start page focuses its entry in
// the list, where the member came from (on a phone the list is that page), not main#content.
let returnTo = null;
// `branch_changed` events already acted on: a read replays what it heard meanwhile
// (recordEvents), and one event must not be acted on twice, nor counted twice as this tab's own.
const branchEvents = new WeakSet();
// What the member searched the list for: kept when a result is opened (each page draws
// the list anew), so the results stay beside the conversation, until the box is cleared.
let searched = "";

/**
 * The text streamed so far per assistant message, kept for every conversation while
 * the socket is up. A view that (re)loads a conversation mid-answer starts from it
 * when it holds more than the read gave (a route change right after sending reads
 * while the answer's first tokens are on their way). Only answers seen from their
 * first token (`at` 0) are kept, and one whose tokens skip words is dropped: the
 * server's text so far is the better start then.
 */
const live = { texts: new Map(), watched: new Set() };
socket.onMessage((message) => {
  if (message.type === "socket_open") { live.texts.clear(); live.watched.clear(); return; }
  if (message.type !== "event" || message.event?.kind !== "chat") return;
  const data = message.event.data || {};
  if ((data.depth ?? 0) > 0) return;
  if (data.type === "turn_started") live.watched.add(data.conversation_id);
  else if (data.type === "turn_finished") live.watched.delete(data.conversation_id);
  else if (data.type === "token" && live.watched.has(data.conversation_id)) {
    const entry = live.texts.get(data.message_id) || { content: "", reasoning: "" };
    if (!appendDelta(entry, data)) { live.texts.delete(data.message_id); return; }
    live.texts.set(data.message_id, entry);
    if (live.texts.size > 64) live.texts.delete(live.texts.keys().next().value);
  } else if (["done", "assistant", "answer_cancelled", "model_fallback", "error"].includes(data.type)) live.texts.delete(data.message_id);
});

/** The chat events the conversation list follows, of every conversation (ChatView.onEvent). */
const LIST_EVENTS = new Set(["turn_started", "turn_finished", "user_message", "conversation_changed", "conversation_deleted"]);

/**
 * The chat events of one conversation (and the list's, of every conversation) that
 * arrive while it is being read: replayed onto the fresh render, so nothing that
 * happens between the server's snapshot and the view listening is lost (a turn that
 * ends right then would otherwise look like it runs forever, in the transcript and in
 * the list read with it). Every event is safe to see twice: a root answer's token says
 * where its delta goes (`at`), and what the read's text so far holds of it is dropped.
 */
function recordEvents(conversationId) {
  const seen = [];
  const off = socket.onMessage((message) => {
    const data = message.type === "event" && message.event?.kind === "chat" ? message.event.data : null;
    if (!data) return;
    if (LIST_EVENTS.has(data.type) || data.conversation_id === conversationId) seen.push(data);
  });
  return () => { off(); return seen; };
}

function debounce(fn, ms) {
  let timer = null;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

// -- the conversation list ------------------------------------------------------------------

/** A search result's snippet: plain words (the host read its Markdown), the words the
 * search matched marked. Text nodes only, never markup: the words are the member's and
 * the model's. `snippet_parts` alternates text and matched words. */
function snippetOf(c) {
  const parts = Array.isArray(c.snippet_parts) ? c.snippet_parts : [c.snippet];
  const words = parts.map((part, index) => (index % 2 ? el("mark", { text: part }) : String(part)));
  if (!c.snippet_in_earlier_version) return el("span", { class: "conv-snippet" }, ...words);
  // "In an earlier version: {snippet}", its snippet marked alike wherever a language puts it.
  const slot = "\u0001";
  const [before, after = ""] = t("chat.search_in_earlier_version", { snippet: slot }).split(slot);
  return el("span", { class: "conv-snippet" }, before, ...words, after);
}

function conversationList(view) {
  const list = el("ul", { class: "conv-list" });
  const empty = el("p", { class: "muted small conv-empty" });
  // What a search found, said politely once its answer is drawn (WCAG 4.1.3): the list
  // changing under the search box is silent to a screen reader otherwise.
  const found = el("p", { class: "visually-hidden conv-search-status", role: "status" });
  let saying = null;
  const sayFound = (text) => {
    clearTimeout(saying);
    found.textContent = "";
    // Emptied first, filled a moment later: a second search with as many results is said too.
    if (text) saying = setTimeout(() => { found.textContent = text; }, 100);
  };
  const search = el("input", {
    type: "search", class: "conv-search", placeholder: t("chat.search"), "aria-label": t("chat.search"), maxlength: "200", autocomplete: "off",
    "aria-keyshortcuts": "Control+K /",
    props: { value: searched },
  });
  const fresh = button(t("chat.new"), { kind: "primary new-conversation", onClick: () => view.newConversation(), attrs: { "aria-keyshortcuts": "Control+Shift+O" } });
  fresh.prepend(el("span", { class: "plus", "aria-hidden": "true" }));
  const status = statusLine();

  // The entries drawn, by conversation id with what they show: a list read after each
  // turn's end draws again only those that changed (one, mostly), and moves none that
  // stays in its place (nor the focus in it).
  let entries = new Map();
  const render = (items) => {
    const next = new Map();
    const nodes = items.map((c) => {
      // A result found in the messages opens at the message that matched (reveal()).
      const query = c.snippet ? search.value.trim() : "";
      // One found only in an earlier version opens at that version (openEarlierVersion).
      const target = query ? `${chatRoute(c.id)}?${new URLSearchParams(c.snippet_in_earlier_version ? { find: query, earlier: "1" } : { find: query, snippet: c.snippet })}` : chatRoute(c.id);
      const shows = JSON.stringify([target, titleOf(c), c.running, c.updated_at, c.snippet, c.snippet_parts, c.snippet_in_earlier_version, c.id === view.conversationId, document.documentElement.lang, new Date().toDateString()]);
      const had = entries.get(c.id);
      if (had?.shows === shows && !next.has(c.id)) { next.set(c.id, had); return had.node; }
      const anchor = link(target, "", { class: "conv-link", title: titleOf(c) });
      anchor.append(...present(
        el("span", { class: "conv-title", text: titleOf(c) }),
        el("span", { class: "conv-meta" },
          c.running ? el("span", { class: "running-dot", title: t("chat.running"), "aria-label": t("chat.running") }) : null,
          el("time", { datetime: c.updated_at, text: shortDate(c.updated_at) })),
        c.snippet ? snippetOf(c) : null)); // where the words were found
      if (c.id === view.conversationId) anchor.setAttribute("aria-current", "page");
      const node = el("li", { "data-conversation-id": c.id }, anchor);
      if (!next.has(c.id)) next.set(c.id, { shows, node });
      return node;
    });
    entries = next;
    nodes.forEach((node, index) => { if (list.children[index] !== node) list.insertBefore(node, list.children[index] || null); });
    while (list.children.length > nodes.length) list.lastElementChild.remove();
    empty.textContent = items.length ? "" : (search.value.trim() ? t("chat.search_none") : t("chat.none_yet"));
    empty.hidden = items.length > 0;
  };

  // A list answer is the server's state when it was asked. Answers can arrive out of
  // order, and after a turn's start or end reached the page: only the newest read is
  // drawn, and a turn event heard since it was asked wins over its `running` (else a
  // read made mid-turn and answered after turn_finished left the dot on for good).
  let reads = 0;
  const heardSinceRead = new Map(); // conversation id → running, as turn events said
  const gone = new Set(); // deleted (here or elsewhere): a read answered after that does not bring them back
  // The list comes a page at a time: `next` is the cursor of the page after those shown
  // (null: none), `paged` says "More conversations" added pages, `listed` the search they
  // belong to. A re-read (a turn's end) reads the first page again and keeps the pages
  // added after it; another search starts from its first page.
  let next = null;
  let paged = false;
  let listed = null;
  let lists = 0; // counts the lists started afresh (another search): a page asked for before belongs to none
  let adding = false;
  const more = button(t("chat.more_conversations"), { kind: "conv-more", onClick: () => addPage() });
  more.hidden = true;
  const listUrl = (query, before) => {
    const params = new URLSearchParams();
    if (query) params.set("search", query);
    if (before) params.set("before", before);
    const text = params.toString();
    return `/api/conversations${text ? `?${text}` : ""}`;
  };
  const addPage = async () => {
    if (!next || adding) return;
    adding = true;
    const started = lists;
    const response = await api("GET", listUrl(listed, next)).finally(() => { adding = false; });
    if (started !== lists) return; // another list since: not a page of it
    if (!response.ok) { status.error(errorText(response)); return; }
    status.clear();
    const shown = new Set(view.conversations.map((c) => c.id));
    const added = (response.data.conversations || []).filter((c) => !gone.has(c.id) && !shown.has(c.id));
    view.conversations = [...view.conversations, ...added];
    next = response.data.next_before || null;
    paged = true;
    const focused = document.activeElement === more;
    render(view.conversations);
    more.hidden = !next;
    // The button gone (the last page): the focus goes on to the first conversation it added.
    if (focused && more.hidden && added.length) entries.get(added[0].id)?.node.querySelector("a")?.focus();
  };
  /** `announce`: a read the member's search asked for, whose result is said (sayFound). */
  const refresh = async ({ announce = false } = {}) => {
    const read = ++reads;
    heardSinceRead.clear();
    const query = search.value.trim();
    searched = query;
    const response = await api("GET", listUrl(query, null));
    if (read !== reads) return;
    if (!response.ok) {
      status.error(errorText(response));
      // The list's "nothing matches" belonged to the last answer, not to this search:
      // beside "the server is unreachable" it read as a result.
      empty.textContent = "";
      empty.hidden = true;
      sayFound("");
      return;
    }
    status.clear();
    const first = (response.data.conversations || [])
      .filter((c) => !gone.has(c.id))
      .map((c) => (heardSinceRead.has(c.id) ? { ...c, running: heardSinceRead.get(c.id) } : c));
    // The pages added after the first stay (those the first page now holds move up to it),
    // and so does the cursor after them.
    const keep = paged && query === listed;
    const ids = new Set(first.map((c) => c.id));
    const rest = keep ? view.conversations.filter((c) => !ids.has(c.id) && !gone.has(c.id)) : [];
    if (!keep) { next = response.data.next_before || null; paged = false; }
    if (query !== listed) lists += 1;
    listed = query;
    view.conversations = [...first, ...rest];
    render(view.conversations);
    more.hidden = !next;
    view.titleChanged?.();
    if (announce) {
      const count = view.conversations.length;
      // Not the words of the visible "nothing matches" line: it names what was searched.
      sayFound(!query ? "" : count ? t("chat.search_found", { count }) : t("chat.search_none_for", { query }));
    }
  };
  search.addEventListener("input", debounce(() => refresh({ announce: true }), 250));

  const node = el("aside", { class: "conv-sidebar", "aria-label": t("chat.conversations") },
    el("h2", { class: "visually-hidden", text: t("chat.conversations") }),
    fresh, search, status.node, found, list, more, empty);
  /** The first page, read with the page's own data (`nextBefore`: its `next_before`). */
  const start = (items, nextBefore, query = "") => {
    next = nextBefore || null;
    paged = false;
    lists += 1;
    listed = query;
    render(items);
    more.hidden = !next;
  };
  return { node, render, start, refresh, setRunning: (id, running) => {
    heardSinceRead.set(id, running);
    const item = view.conversations.find((c) => c.id === id);
    if (item && item.running !== running) { item.running = running; render(view.conversations); }
  }, stopAll: () => {
    const running = view.conversations.filter((c) => c.running);
    for (const item of running) { heardSinceRead.set(item.id, false); item.running = false; }
    if (running.length) render(view.conversations);
  }, changed: (data) => {
    // Renamed or given another model (here or elsewhere): shown at once, in its place;
    // the read after it (ChatView.onEvent) puts it where the list orders it.
    const item = view.conversations.find((c) => c.id === data.conversation_id);
    if (item) { item.title = data.title; item.model = data.model; render(view.conversations); }
  }, removed: (id) => {
    gone.add(id);
    if (!view.conversations.some((c) => c.id === id)) return;
    view.conversations = view.conversations.filter((c) => c.id !== id);
    render(view.conversations);
  } };
}

// Made once per language: toLocale*String with options builds a formatter on each call,
// which for a list of hundreds of conversations took tens of milliseconds a render.
const dateFormats = new Map();
function dateFormat(locale) {
  if (!dateFormats.has(locale)) {
    dateFormats.set(locale, {
      time: new Intl.DateTimeFormat(locale, { hour: "2-digit", minute: "2-digit" }),
      day: new Intl.DateTimeFormat(locale, { day: "numeric", month: "short" }),
    });
  }
  return dateFormats.get(locale);
}

function shortDate(value) {
  if (!value) return "";
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return "";
  const format = dateFormat(document.documentElement.lang || undefined);
  const today = new Date();
  if (date.toDateString() === today.toDateString()) return format.time.format(date);
  return format.day.format(date);
}

// -- the composer ----------------------------------------------------------------------------------

// What the member typed and has not sent, per conversation: kept in this tab's
// sessionStorage, so a session that ends (a restart, an expiry) and the sign-in after it
// lose nothing; never in localStorage, which outlives the tab on a shared computer.
// Gone when it is sent, and at sign-out (forgetDrafts).
const DRAFT_PREFIX = "skald.draft.";
const draftKey = (view) => `${DRAFT_PREFIX}${view.ctx.member.id}.${view.conversationId || ""}`;

function keepDraft(key, value) {
  try {
    if (value) sessionStorage.setItem(key, value); else sessionStorage.removeItem(key);
  } catch { /* storage full or off: the draft stays on this page only */ }
}

function draftOf(key) {
  try { return sessionStorage.getItem(key) || ""; } catch { return ""; }
}

/** ``memberId``: keep that member's drafts, drop everyone else's (none: drop all). */
function forgetDrafts(memberId = null) {
  const kept = memberId == null ? null : `${DRAFT_PREFIX}${memberId}.`;
  try {
    for (const key of Object.keys(sessionStorage)) {
      if (key.startsWith(DRAFT_PREFIX) && !(kept && key.startsWith(kept))) sessionStorage.removeItem(key);
    }
  } catch { /* storage off: nothing was kept */ }
}

/** A member signed in on this tab: drafts another member left here when their session
 * ended on its own (no sign-out cleared them) are not theirs to find in its storage. */
export function draftsFor(memberId) {
  forgetDrafts(memberId);
}

// A chosen image shows as a thumbnail before it is sent. It is not uploaded yet, so it is
// read as a data: URL (the CSP's img-src allows 'self' and data:, not blob:); a large
// one stays a chip rather than be held in memory twice.
const THUMBNAIL_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
const THUMBNAIL_MAX_BYTES = 8 * 1024 * 1024;
const thumbnails = new WeakMap(); // File → Promise of its data: URL, read once
const uploaded = new WeakMap(); // File → { conversationId, path }: where a try uploaded it

function showThumbnail(item, file) {
  if (!thumbnails.has(file)) {
    thumbnails.set(file, new Promise((resolve) => {
      const reader = new FileReader();
      reader.addEventListener("load", () => resolve(typeof reader.result === "string" ? reader.result : null));
      reader.addEventListener("error", () => resolve(null));
      reader.readAsDataURL(file);
    }));
  }
  const image = el("img", { class: "attachment-thumb", alt: file.name, title: file.name, loading: "lazy", decoding: "async" });
  const name = item.querySelector(".attachment-name");
  thumbnails.get(file).then((url) => {
    if (!url || !item.isConnected) return;
    // Not an image after all (the browser guessed the type from the name): a chip again.
    image.addEventListener("error", () => { item.classList.replace("attachment-image", "attachment-chip"); image.replaceWith(name); }, { once: true });
    image.src = url;
    item.classList.replace("attachment-chip", "attachment-image");
    name.replaceWith(image);
  });
}

function composer(view) {
  const text = el("textarea", {
    // No maxlength: it cut a longer paste short without a word and sent what was left.
    // Over the limit, the status line says so and Send waits (sync below).
    class: "composer-input", rows: "1", "aria-label": t("chat.message"),
    placeholder: t("chat.placeholder"), enterkeyhint: "send",
  });
  text.value = draftOf(draftKey(view));
  const send = el("button", { class: "btn primary send", type: "submit", "aria-label": t("chat.send"), title: t("chat.send") },
    el("span", { class: "send-icon", "aria-hidden": "true" }), el("span", { class: "send-text", text: t("chat.send") }));
  let stopPressed = false; // Stop hides itself when the turn ends: focus goes to the message box, not <body>
  const stop = button(t("chat.stop"), { kind: "stop", onClick: () => { stopPressed = true; view.stop(stop); } });
  stop.prepend(el("span", { class: "stop-icon", "aria-hidden": "true" }));
  stop.hidden = true;
  const status = statusLine();
  // Attachments: chosen with the button or dropped on the composer, uploaded when the
  // message is sent (into the conversation's uploads folder), then sent as their paths.
  const files = [];
  const picker = el("input", { type: "file", multiple: true, hidden: true, class: "attach-input", "aria-hidden": "true" });
  // On a phone only its icon shows (the label stays its accessible name), as for Send.
  const attach = el("button", { class: "btn quiet attach", type: "button", "aria-label": t("chat.attach"), on: { click: () => picker.click() } },
    el("span", { class: "icon attach-icon", "aria-hidden": "true" }), el("span", { class: "attach-text", text: t("chat.attach") }));
  const chips = el("ul", { class: "attachments", "aria-label": t("chat.attachments") });
  // The file an upload error is about: the error goes when that file is removed.
  let failed = null; // { file, text }
  const fileFailed = (file, message) => { failed = { file, text: message }; status.error(message); };
  const forgetFailure = (file) => {
    if (!failed || failed.file !== file) return;
    if (status.node.textContent === failed.text) status.clear();
    failed = null;
  };
  // The host's upload limit (GET /api/chat/status): a file over it is said on its chip
  // as it is chosen, not only when Send has the server refuse it.
  const uploadLimit = Number(view.chatStatus?.upload_max_bytes) || null;
  const renderChips = () => {
    chips.replaceChildren(...files.map((file, index) => {
      const tooLarge = uploadLimit !== null && file.size > uploadLimit;
      const refusal = tooLarge ? errorString("upload_too_large", { size_bytes: uploadLimit }) : null;
      const refusalId = tooLarge ? uid("attachment-refusal") : null;
      const item = el("li", { class: `attachment-chip${tooLarge ? " attachment-too-large" : ""}` },
        el("span", { class: "attachment-name", text: file.name, ...(tooLarge ? { "aria-describedby": refusalId } : {}) }),
        tooLarge ? el("span", { class: "attachment-refusal error-text", id: refusalId, text: refusal }) : null,
        button("×", { kind: "quiet small", attrs: { "aria-label": t("chat.attachment_remove", { name: file.name }) },
          onClick: () => {
            files.splice(index, 1);
            forgetFailure(file);
            renderChips();
            sync();
            // The chip and its button are gone: the next chip's remove button, else the composer.
            (chips.querySelectorAll("li button")[Math.min(index, files.length - 1)] || text).focus();
          } }));
      if (!tooLarge && THUMBNAIL_TYPES.has(file.type) && file.size <= THUMBNAIL_MAX_BYTES) showThumbnail(item, file);
      return item;
    }));
    chips.hidden = !files.length;
  };
  const add = (list) => { for (const file of list) files.push(file); renderChips(); sync(); };
  picker.addEventListener("change", () => { add(picker.files); picker.value = ""; });
  const form = el("form", { class: "composer", novalidate: true },
    chips,
    el("div", { class: "composer-row" }, attach, picker, text, stop, send),
    el("p", { class: "composer-hint hint", text: t("chat.composer_hint") }), status.node);
  form.addEventListener("dragover", (event) => { if (event.dataTransfer?.types.includes("Files")) { event.preventDefault(); form.classList.add("dropping"); } });
  form.addEventListener("dragleave", () => form.classList.remove("dropping"));
  form.addEventListener("drop", (event) => {
    if (!event.dataTransfer?.files.length) return;
    event.preventDefault();
    form.classList.remove("dropping");
    add(event.dataTransfer.files);
  });
  // A file pasted (an image or a file copied to the clipboard) is attached as a dropped
  // one is; pasted text stays text.
  text.addEventListener("paste", (event) => {
    const pasted = event.clipboardData?.files;
    if (!pasted?.length) return;
    event.preventDefault();
    add([...pasted]);
  });
  // The server counts code points; a string's length (UTF-16 units) is never fewer.
  const length = () => (text.value.length > MAX_MESSAGE_CHARS ? [...text.value].length : text.value.length);
  let tooLongSaid = null; // the words the status line says the text is too long with
  const direction = followTypedDirection(text);
  const sync = () => {
    direction();
    const count = length();
    const over = count > MAX_MESSAGE_CHARS;
    send.disabled = over || (!text.value.trim() && !files.length);
    if (over) text.setAttribute("aria-invalid", "true"); else text.removeAttribute("aria-invalid");
    if (over) {
      tooLongSaid = t("chat.too_long", { length: count, limit: MAX_MESSAGE_CHARS });
      if (status.node.textContent !== tooLongSaid) status.error(tooLongSaid);
    } else if (tooLongSaid !== null) {
      if (status.node.textContent === tooLongSaid) status.clear();
      tooLongSaid = null;
    }
  };
  text.addEventListener("input", () => { sync(); keepDraft(draftKey(view), text.value); });
  text.addEventListener("keydown", (event) => {
    // Escape in the message box stops the running answer, as Stop does (what else takes
    // Escape, a dialog or an edit box, holds the focus itself).
    if (event.key === "Escape" && !event.isComposing && !stop.hidden && !stop.disabled && !event.defaultPrevented) {
      event.preventDefault();
      stopPressed = true;
      view.stop(stop);
      return;
    }
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  let sending = false; // a double Enter on the start page must not open two conversations
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const value = text.value;
    if ((!value.trim() && !files.length) || sending) return;
    if (length() > MAX_MESSAGE_CHARS) { sync(); text.focus(); return; } // never a part of it
    const draft = draftKey(view); // the start page's, even once the conversation it starts is open
    status.clear();
    failed = null;
    sending = true;
    try {
      const chosen = files.splice(0);
      if (await view.send(value.trim() ? value : t("chat.attached_only"), chosen)) {
        if (text.value === value) { text.value = ""; keepDraft(draft, ""); }
      } else {
        files.unshift(...chosen);
        text.focus();
      }
      renderChips();
      sync();
    } finally {
      sending = false;
    }
  });
  renderChips();
  sync();
  const setRunning = (running) => {
    if (!running && (stopPressed || stop.contains(document.activeElement))) text.focus({ preventScroll: true });
    if (!running) stopPressed = false;
    stop.hidden = !running;
  };
  return { node: form, text, send, stop, status, setRunning, fileFailed };
}

// -- one conversation ----------------------------------------------------------------------------------

/** The conversation's title in its h1, whole in its `title` too: a phone (or 200 % zoom)
 * shows two lines of it, and a longer one was cut with nothing to read it by. */
function showTitle(heading, title) {
  heading.textContent = title;
  heading.title = title;
}

// The header works on view.conversation, never on a copy: reload() replaces that object
// (a reconnect), and a rename kept on the old one was lost to the delete dialog.
function conversationHeader(view) {
  const heading = el("h1", { class: "conv-heading" });
  showTitle(heading, titleOf(view.conversation));
  const status = statusLine();
  const rename = button(t("chat.rename"), { kind: "quiet small", onClick: () => startRename() });
  const remove = button(t("chat.delete"), { kind: "quiet small danger-text", onClick: () => view.deleteConversation() });
  const exportUrl = (format) => `/api/conversations/${encodeURIComponent(view.conversation.id)}/export?format=${format}`;
  const exports = el("details", { class: "conv-export" },
    el("summary", { class: "btn quiet small", text: t("chat.export") }),
    el("ul", { class: "export-menu" },
      el("li", {}, el("a", { href: exportUrl("md"), download: "", text: t("chat.export_markdown") })),
      el("li", {}, el("a", { href: exportUrl("json"), download: "", text: t("chat.export_json") }))));
  exports.addEventListener("click", (event) => {
    // Closing hides the focused link: the focus goes back to the menu's button.
    if (event.target.closest("a")) { exports.open = false; exports.querySelector("summary").focus(); }
  });
  exports.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && exports.open) { event.stopPropagation(); exports.open = false; exports.querySelector("summary").focus(); }
  });
  const actions = el("div", { class: "conv-actions", id: uid("actions") }, rename, exports, remove);
  // On a phone Rename, Export and Delete fold behind one button (app.css hides it on a
  // desktop, where they stay beside the title): on their own row, with the back link and
  // the picker, the header took 190 of a 844 px screen from the transcript.
  const more = button(t("chat.conversation_actions"), {
    kind: "quiet small conv-actions-toggle",
    attrs: { "aria-expanded": "false", "aria-controls": actions.id },
    onClick: () => showActions(more.getAttribute("aria-expanded") !== "true"),
  });
  const showActions = (open) => {
    more.setAttribute("aria-expanded", String(open));
    node.classList.toggle("actions-open", open);
    if (open) document.addEventListener("click", outside, true);
    else document.removeEventListener("click", outside, true);
    // Folding hides the focused action: the focus goes to Actions, not to <body>.
    if (!open && actions.contains(document.activeElement) && more.offsetParent !== null) more.focus();
  };
  // A tap anywhere else folds the actions, as a menu does (they stayed open over the
  // transcript). Not the fold's own button: its click toggles them itself. Nor during a
  // rename, whose form stands in the fold's row: its Save (Enter's click too) goes back
  // to Rename, which must still be shown to take the focus. Nor in a dialog (Delete's
  // confirmation): a modal is no tap beside the fold, and closing it gives the focus back
  // to Delete, which folding hid (the focus fell to <body>).
  const outside = (event) => {
    if (!node.isConnected) { document.removeEventListener("click", outside, true); return; }
    if (!titleRow.isConnected || event.target.closest?.("dialog")) return;
    if (!more.contains(event.target) && !actions.contains(event.target)) showActions(false);
  };
  // Escape folds the actions from inside them and from Actions itself, as a menu's button does.
  const foldOnEscape = (event) => {
    const folded = more.offsetParent !== null;  // shown: a phone, where the actions fold
    if (event.key === "Escape" && folded && !event.defaultPrevented && more.getAttribute("aria-expanded") === "true") {
      event.stopPropagation();
      showActions(false);
      more.focus();
    }
  };
  actions.addEventListener("keydown", foldOnEscape);
  more.addEventListener("keydown", foldOnEscape);
  const titleRow = el("div", { class: "conv-title-row" }, heading, more, actions);

  function startRename() {
    const input = el("input", { type: "text", maxlength: "200", "aria-label": t("chat.title_label"), props: { value: view.conversation.title || "" } });
    const save = el("button", { class: "btn primary small", type: "submit", text: t("common.save") });
    const cancel = button(t("common.cancel"), { kind: "quiet small", onClick: () => finish() });
    const form = el("form", { class: "rename-form", novalidate: true }, input, save, cancel);
    const finish = () => { form.replaceWith(titleRow); rename.focus(); };
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const title = input.value.trim();
      if (!title) { status.error(t("chat.title_missing")); input.focus(); return; }
      save.disabled = true;
      const response = await api("PATCH", `/api/conversations/${encodeURIComponent(view.conversation.id)}`, { title });
      save.disabled = false;
      if (!response.ok) { status.error(errorText(response)); return; }
      status.clear();
      view.conversation.title = response.data.title;
      showTitle(heading, titleOf(view.conversation));
      document.title = `${heading.textContent} · ${t("app.name")}`;
      finish();
      view.list.refresh();
    });
    input.addEventListener("keydown", (event) => { if (event.key === "Escape") { event.stopPropagation(); finish(); } });
    titleRow.replaceWith(form);
    input.focus();
    input.select();
  }

  const picker = modelPicker(view, status);
  const back = link("#chat", t("chat.back"), { on: { click: () => { returnTo = view.conversationId; } } });
  const node = el("header", { class: "conv-header" },
    el("p", { class: "conv-back" }, back), titleRow, projectLine(view.conversation), picker, status.node);
  /** view.conversation changed elsewhere (another tab, another device): its title and model shown. */
  const update = () => {
    showTitle(heading, titleOf(view.conversation));
    document.title = `${heading.textContent} · ${t("app.name")}`;
    const select = picker?.querySelector("select");
    if (select && !select.disabled) showChoice(select, view.chatStatus?.models || [], view.conversation.model);
  };
  return { node, heading, update, renaming: () => !titleRow.isConnected, answerStarted: () => settleChoice(status) };
}

/** A project's conversation ("Chat in this project") says so under its title: the
 * project's name, a link back to it, and the agent it talks to. Its `source` is
 * "project:<id>"; the name is read from the member's projects (one they left, or one
 * deleted, is said to be gone). Null for any other conversation. */
function projectLine(conversation) {
  const source = conversation?.source || "";
  if (!source.startsWith("project:")) return null;
  const id = source.slice("project:".length);
  const place = el("span", { class: "conv-project-name" });
  const agent = el("span", { class: "conv-project-agent" });
  const line = el("p", { class: "conv-project hint" }, el("span", { text: t("chat.project_label") }), " ", place, agent);
  line.hidden = true; // shown once the project's name is known: no bare "Project:"
  if (conversation.agent_id) {
    showAgentTitle(conversation.agent_id, (name) => { agent.textContent = ` · ${t("chat.project_agent", { agent: name })}`; });
  }
  api("GET", `/api/projects/${encodeURIComponent(id)}`).then((response) => {
    if (response.ok && response.data?.title) place.replaceChildren(link(`#projects/${encodeURIComponent(id)}`, response.data.title));
    else if (response.status === 404 || response.status === 403) place.textContent = t("chat.project_gone");
    else return;
    line.hidden = false;
  });
  return line;
}

// The picker's "the next answer comes from this model" is said once (the polite status
// line) and goes when that answer starts, or after a while: left under the picker it
// read as news turn after turn.
const CHOICE_SHOWN_MS = 8000;
const choiceTimers = new WeakMap();

function confirmChoice(status) {
  clearTimeout(choiceTimers.get(status));
  status.ok(t("chat.model_chosen"));
  choiceTimers.set(status, setTimeout(() => settleChoice(status), CHOICE_SHOWN_MS));
}

function settleChoice(status) {
  clearTimeout(choiceTimers.get(status));
  choiceTimers.delete(status);
  if (status.node.textContent === t("chat.model_chosen")) status.clear();
}

/** The model this conversation tries first, among the enabled ones (with more than one).
 * On the fresh composer there is no conversation yet: the choice stays in the page
 * (view.draftModel) until the first message creates one. */
function modelPicker(view, status) {
  const models = view.chatStatus?.models || [];
  if (models.length < 2) return null;
  const id = uid("model");
  const select = el("select", { id, class: "model-select" },
    el("option", { value: "", text: t("chat.model_automatic") }),
    ...models.map((m) => el("option", { value: m.id, text: m.label })));
  showChoice(select, models, view.conversation ? view.conversation.model : view.draftModel);
  select.addEventListener("change", async () => {
    if (!view.conversation) { view.draftModel = select.value || null; confirmChoice(status); return; }
    const hadFocus = document.activeElement === select;
    select.disabled = true;
    // keepalive: a reload right after the choice does not cut its save.
    const response = await api("PATCH", `/api/conversations/${encodeURIComponent(view.conversation.id)}`, { model: select.value || null }, { keepalive: true });
    select.disabled = false;
    if (hadFocus) select.focus();  // disabling it dropped the focus to <body>
    if (!response.ok) { status.error(errorText(response)); select.value = view.conversation.model || ""; return; }
    view.conversation.model = response.data.model;
    confirmChoice(status);
  });
  return el("p", { class: "conv-model" }, el("label", { for: id, text: t("chat.model_label") }), select);
}

/** The picker shows `chosen` (null: automatic). */
function showChoice(select, models, chosen) {
  select.querySelector("option.model-unavailable")?.remove();
  if (chosen && !models.some((m) => m.id === chosen)) {
    // Picked once, then disabled or removed by an admin: said here, not shown as
    // "Automatic" while the answers quietly come from another model.
    select.append(el("option", { value: chosen, disabled: true, class: "model-unavailable", text: t("chat.model_unavailable") }));
  }
  select.value = chosen || "";
}

function modelNotice(ctx) {
  const box = el("div", { class: "notice warning no-model", role: "status" }, el("strong", { text: t("chat.no_model_title") }), " ");
  if (ctx.member.is_admin) box.append(t("chat.no_model_admin"), " ", link("#models", t("chat.no_model_link")));
  else box.append(t("chat.no_model_member"));
  return box;
}

/** An admin's password reset lost what the member had (their old file could not be
 * opened with the new password): said on the empty start page, instead of an account
 * that is simply empty, until the member has a conversation again. Whether the operator
 * can give it back (`recoverable`): a reset by an earlier version kept no key for it. */
function dataResetNotice(member, conversations, recoverable) {
  if (!member.data_reset_at || conversations.length) return null;
  const key = recoverable ? "chat.data_reset" : "chat.data_reset_kept";
  return el("p", { class: "notice info data-reset", role: "status", text: t(key, { date: formatDate(member.data_reset_at) }) });
}

/** Titles the host announced (``conversation_changed``), by conversation, the newest
 * few: a view opened after the event (a new conversation's first message) reads the
 * title there when its own read raced the title's write. */
const heardTitles = new Map();
function hearTitle(data) {
  if (!data.conversation_id || !data.title) return;
  heardTitles.delete(data.conversation_id);
  heardTitles.set(data.conversation_id, data.title);
  if (heardTitles.size > 50) heardTitles.delete(heardTitles.keys().next().value);
}

class ChatView {
  constructor(ctx, status, conversations, loaded, nextBefore = null, listedFor = "") {
    this.ctx = ctx;
    this.status = status;
    this.chatStatus = status;
    this.conversations = conversations;
    this.conversation = loaded?.conversation || null;
    this.conversationId = this.conversation?.id || null;
    // Its title, heard from the host before this view existed (the fresh composer's
    // view got the event, and a read racing the title's write answered none).
    if (this.conversation && !this.conversation.title && heardTitles.has(this.conversationId)) {
      this.conversation.title = heardTitles.get(this.conversationId);
    }
    this.draftModel = null; // the fresh composer's model choice, applied when its first message creates the conversation
    this.started = null; // { id, model }: created by a first message not sent yet (an upload failed), reused by the next try
    this.seen = false;
    this.needsReload = false;
    this.readWhenDone = false; // a change elsewhere started a turn: read the conversation again when it ends
    this.reads = 0; // reads of the conversation: only the newest is drawn (two may overlap)
    // This tab's own regenerates, edits, version flips and retries whose `branch_changed`
    // has not come back yet: it reads their result itself (keeping the focus where it put it).
    this.ownChanges = 0;
    this.deleting = null; // the conversation this tab is deleting: its own deletion, not news from elsewhere
    this.list = conversationList(this);
    this.composer = composer(this);
    this.transcript = new Transcript({
      decide: (id, decision) => this.decide(id, decision),
      answer: (id, action, content) => this.answer(id, action, content),
      retry: (trigger) => this.answerAgain(trigger, "retry"),
      regenerate: (trigger) => this.regenerate(trigger),
      showVersion: (variant) => this.showVersion(variant),
      edit: (messageId, text) => this.edit(messageId, text),
      // Earlier rows drawn: the sub-agent boxes of their calls, as a load brings them back.
      earlierDrawn: () => this.restoreSubagents(),
      // Another part of the conversation ("Earlier messages" past the rows read, "Later messages").
      readPart: async (params) => {
        if (!this.conversationId) return null;
        const response = await api("GET", `/api/conversations/${encodeURIComponent(this.conversationId)}?${new URLSearchParams(params)}`);
        return response.ok ? response.data : null;
      },
      reload: () => this.reload(),
      // An answer names the model it came from; the member knows it by its label. The
      // catalog entry (`model_id`) says which: two providers may serve one model name.
      // An answer from before entries were recorded is known by its name alone; one
      // whose entry is gone, by its model name.
      modelLabel: (name, id) => (id
        ? (status.models || []).find((m) => m.id === id)?.label
        : (status.models || []).find((m) => m.model === name)?.label) || name,
      // The provider of that entry (a failed answer names it): found alike.
      modelProvider: (name, id) => (id
        ? (status.models || []).find((m) => m.id === id)?.provider
        : (status.models || []).find((m) => m.model === name)?.provider) || null,
      admin: ctx.member.is_admin === true,
      // A token skipped words this page never had (it read the answer before them):
      // read again, once at a time; the read's replay carries on from its text.
      gap: () => {
        if (this.gapRead) return;
        this.gapRead = this.reload().finally(() => { this.gapRead = null; });
      },
    }, live.texts);
    this.connection = el("p", { class: "connection-status", role: "status", hidden: true });
    this.noModel = status.models_configured ? null : modelNotice(ctx);
    this.unsubscribe = [];
    this.root = this.build(loaded);
    this.list.start(conversations, nextBefore, listedFor);
    this.unsubscribe.push(
      socket.onMessage((message) => { if (this.alive()) this.onMessage(message); }),
      socket.onState((state) => { if (this.alive()) this.onSocketState(state); }),
    );
    this.onSocketState(socket.connectionState());
  }

  build(loaded) {
    const main = el("section", { class: "conv-main" });
    if (!this.conversation) {
      const name = this.ctx.member.display_name || this.ctx.member.username;
      const choice = statusLine();
      const picker = modelPicker(this, choice);
      const deleted = deletedElsewhere ? notice("info", t("chat.deleted_elsewhere")) : null;
      deletedElsewhere = false;
      if (deleted) deleted.classList.add("deleted-elsewhere");
      main.append(el("div", { class: "chat-welcome" },
        el("h1", { text: t("chat.title", { name }) }), deleted, el("p", { class: "intro", text: t("chat.intro") }),
        dataResetNotice(this.ctx.member, this.conversations, this.ctx.session?.data_recoverable), picker, picker && choice.node, this.noModel),
        this.connection, this.composer.node);
      // The list comes first in both pages, so it keeps its place in the tab order.
      const page = el("div", { class: "chat-page" }, this.list.node, main);
      // Focus stays where the route put it (a keyboard's first Tab from there is the skip
      // link), unless "New conversation" brought the member here to write, or they have
      // just signed in to write (on a phone the keyboard would cover the page at once).
      const searching = focusSearch;
      const focus = !searching && (focusComposer || (this.ctx.arrived && !narrow()));
      focusComposer = false;
      focusSearch = false;
      const cameFrom = returnTo;
      returnTo = null;
      requestAnimationFrame(() => {
        this.seen = page.isConnected;
        if (!page.isConnected) return;
        const entry = cameFrom && [...this.list.node.querySelectorAll("li[data-conversation-id]")]
          .find((item) => item.dataset.conversationId === cameFrom)?.querySelector("a");
        if (searching) this.list.node.querySelector(".conv-search")?.focus();
        else if (entry && !focus) entry.focus();
        else if (focus) this.composer.text.focus({ preventScroll: true });
      });
      return page;
    }
    this.header = conversationHeader(this);
    this.tasks = taskStrip(this.conversationId, { admin: this.ctx.member.is_admin === true });
    this.unsubscribe.push(this.tasks.dispose);
    // A project's conversation names the agent it talks to (projectLine): its answers say so too.
    if ((this.conversation.source || "").startsWith("project:") && this.conversation.agent_id) {
      showAgentTitle(this.conversation.agent_id, (name) => this.transcript.setAuthor(name));
    }
    // The first message of a new conversation was sent from the fresh composer, whose page
    // this one replaced: what it brought (that message, an approval card, "waiting for
    // your approval") is news, said once the log and its status line are in the document.
    const fresh = startedHere === this.conversationId;
    startedHere = null;
    if (fresh) this.transcript.sayOnceAttached();
    this.transcript.load(loaded, socket.unacknowledged(this.conversationId));
    this.restoreSubagents();
    this.setRunning(Boolean(loaded.running));
    main.append(...[this.header.node, this.tasks.node, this.noModel, this.transcript.node, this.transcript.announcer, this.transcript.versionStatus, this.connection, this.composer.node].filter(Boolean));
    // `running` on the page itself: setRunning above ran before this.root was this page,
    // and the CSS that hides Edit and the version arrows during a turn reads it.
    const page = el("div", { class: `chat-page has-conversation${this.running ? " running" : ""}` }, this.list.node, main);
    requestAnimationFrame(() => {
      this.seen = page.isConnected;
      this.transcript.follow(true);
      // Opened from a search result: at the message that matched, not at the end.
      const found = this.ctx.params?.get("find");
      if (found && page.isConnected && this.ctx.params.get("earlier")) { this.openEarlierVersion(found); return; }
      if (found && page.isConnected && this.transcript.reveal(found, this.ctx.params.get("snippet") || "")) return;
      // Its first message was just written in the start page's box: the member goes on
      // writing in this one, on a phone too (the route had put the focus on <main>, and
      // the next words typed were lost). Else a phone's keyboard is not opened unasked.
      if (page.isConnected && (fresh || !narrow())) this.composer.text.focus({ preventScroll: true });
    });
    return page;
  }

  /** False once the page was replaced by another: the view then lets go. */
  alive() {
    if (this.root.isConnected) { this.seen = true; return true; }
    if (this.seen || current !== this) { this.dispose(); return false; }
    return true;
  }

  dispose() {
    for (const off of this.unsubscribe) off();
    this.unsubscribe = [];
  }

  setRunning(running) {
    this.running = running;
    this.composer.setRunning(running);
    this.transcript.setRunning(running);
    this.root?.classList.toggle("running", running);
  }

  onSocketState(state) {
    const down = state === "reconnecting" || state === "refused";
    this.connection.hidden = !down;
    this.connection.textContent = state === "refused" ? t("chat.too_many_tabs") : down ? t("chat.reconnecting") : "";
    this.transcript.connection(state === "open");
  }

  // -- actions ------------------------------------------------------------------------------

  /** The fresh composer, as in other chat apps: nothing is stored until the first message
   * (send()), so clicks that are never followed by one leave no empty conversations behind. */
  newConversation() {
    if (!this.conversationId) { this.composer.text.focus(); return; }  // it is open already, with what was typed
    // This page's composer stays on screen until the fresh one renders: from the click
    // on it is the fresh composer too, so a message sent meanwhile starts the new
    // conversation instead of going to the one being left.
    this.conversation = null;
    this.conversationId = null;
    this.composer.text.value = draftOf(draftKey(this)); // the fresh composer's own draft, if one was begun there
    this.composer.text.dispatchEvent(new Event("input"));
    focusComposer = true;
    this.ctx.navigate("#chat");
  }

  /** The conversation the fresh composer's first message goes to: created now, with the
   * model picked there. Kept until that message is sent, so a retry after a failed upload
   * does not create a second one (a model picked after that is set on it). */
  async startConversation() {
    if (!this.started) {
      const response = await api("POST", "/api/conversations", { model: this.draftModel });
      if (!response.ok) { this.composer.status.error(errorText(response)); return null; }
      this.started = { id: response.data.id, model: this.draftModel };
    }
    if (this.draftModel !== this.started.model) {
      const response = await api("PATCH", `/api/conversations/${encodeURIComponent(this.started.id)}`, { model: this.draftModel });
      if (!response.ok) { this.composer.status.error(errorText(response)); return null; }
      this.started.model = this.draftModel;
    }
    return this.started.id;
  }

  /** Upload the chosen files into the conversation; their agent paths, or null. A file
   * uploaded into it before (a try whose later file was refused) is not uploaded again:
   * its path is kept, so a retry sends only what did not go. */
  async uploadAll(conversationId, files) {
    const paths = [];
    for (const file of files) {
      const done = uploaded.get(file);
      if (done?.conversationId === conversationId) { paths.push(done.path); continue; }
      this.composer.status.ok(t("chat.uploading", { name: file.name }));
      const response = await upload(`/api/conversations/${encodeURIComponent(conversationId)}/uploads`, file,
        { "X-Filename": encodeURIComponent(file.name) });
      if (!response.ok) { this.composer.fileFailed(file, `${file.name}: ${errorText(response)}`); return null; }
      uploaded.set(file, { conversationId, path: response.data.path });
      paths.push(response.data.path);
    }
    this.composer.status.clear();
    return paths;
  }

  /** Queue the message in the outbox (sent now, or when the socket is back). */
  async send(text, files = []) {
    if (!this.conversationId) {
      const id = await this.startConversation();
      if (!id) return false;
      const attachments = await this.uploadAll(id, files);
      if (attachments === null) {
        // Nothing was sent: the conversation made for it goes too, or the list kept an
        // empty "New conversation" (crash-kill probe). If the server cannot delete it now,
        // it is kept for the retry, which then reuses it.
        const gone = await api("DELETE", `/api/conversations/${encodeURIComponent(id)}`);
        if (gone.ok) this.started = null;
        return false;
      }
      socket.sendChat(id, text, attachments);
      startedHere = id;
      this.ctx.navigate(chatRoute(id));
      return true;
    }
    const attachments = await this.uploadAll(this.conversationId, files);
    if (attachments === null) return false;
    const item = socket.sendChat(this.conversationId, text, attachments);
    const bubble = this.transcript.addPending(item);
    if (socket.connectionState() !== "open") this.transcript.setBubbleState(bubble, "waiting");
    // Sent from an earlier part (a search result's): the newest is where it goes, and is shown.
    if (this.transcript.windowed()) this.reload({ newest: true });
    return true;
  }

  async stop(trigger) {
    trigger.disabled = true;
    const response = await api("POST", `/api/conversations/${encodeURIComponent(this.conversationId)}/stop`);
    trigger.disabled = false;
    if (!response.ok) this.composer.status.error(errorText(response));
  }

  /** One of this tab's own changes of what the conversation shows was refused: no event comes of it. */
  refused() {
    this.ownChanges = Math.max(0, this.ownChanges - 1);
  }

  /** Retry (a failed turn) or regenerate (a finished one): the answer shown goes
   * before the new one's first token can show (it may come before the reply). */
  async answerAgain(trigger, action) {
    trigger.disabled = true;
    this.ownChanges += 1;
    const last = this.transcript.lastUserId();
    if (last != null) this.transcript.truncate(last, { after: true });
    const response = await api("POST", `/api/conversations/${encodeURIComponent(this.conversationId)}/${action}`);
    if (!response.ok) {
      this.refused();
      this.composer.status.error(errorText(response));
      await this.reload();
      this.composer.text.focus({ preventScroll: true });  // its button went with the reload
      return false;
    }
    this.composer.text.focus({ preventScroll: true });
    await this.reload();
    return true;
  }

  async regenerate(trigger) {
    if (!(await this.answerAgain(trigger, "regenerate"))) return;
    // When the new answer is done, the versions are read again (now, if it is done already).
    if (this.running) this.needsReload = true; else await this.reload();
  }

  async edit(messageId, text) {
    this.ownChanges += 1;
    // The answers after it go before the new answer's first token can show (it may come
    // before the reply); the message itself, with the form that says a refusal, stays.
    const taken = this.transcript.truncate(messageId, { after: true });
    const response = await api("POST", `/api/conversations/${encodeURIComponent(this.conversationId)}/edit`, { message_id: messageId, text });
    if (!response.ok) { this.refused(); this.transcript.restore(taken); return { ok: false, error: errorText(response) }; }
    this.transcript.truncate(messageId); // the old branch goes from the screen (kept as a version)
    this.composer.text.focus({ preventScroll: true });
    await this.reload();
    if (this.running) this.needsReload = true; else await this.reload(); // the branch's versions, once answered
    return { ok: true };
  }

  /** A search result found only in an earlier version (a regenerated answer, an edited
   * branch): that version shown, as its ‹ › would show it, and the message that holds the
   * words revealed. When it cannot be (none found, the change refused), the view says the
   * words are in an earlier version and how to reach it. */
  async openEarlierVersion(words) {
    const tx = this.transcript;
    const id = this.conversationId;
    if (tx.reveal(words)) return; // shown already (that version was flipped to since)
    let variant = tx.versionHolding(words, tx.all);
    if (variant == null) {
      // Not among the versions of the part read: the whole conversation's, read (not drawn).
      const whole = await api("GET", `/api/conversations/${encodeURIComponent(id)}?all=1`);
      if (whole.ok) variant = tx.versionHolding(words, whole.data.messages || []);
    }
    if (!this.alive() || id !== this.conversationId) return;
    if (variant != null) {
      this.ownChanges += 1;
      const changed = await api("PUT", `/api/conversations/${encodeURIComponent(id)}/version`, { variant });
      if (changed.ok) {
        // Opened again as any search result: at the part around the message, revealed there.
        if (this.alive() && id === this.conversationId) this.ctx.navigate(`${chatRoute(id)}?${new URLSearchParams({ find: words.slice(0, 200) })}`);
        return;
      }
      this.refused();
    }
    if (!this.alive() || id !== this.conversationId) return;
    const said = notice("info", t("chat.search_earlier_version_notice"));
    said.classList.add("earlier-version-notice");
    this.header.node.after(said);
  }

  async showVersion(variant) {
    this.ownChanges += 1;
    const response = await api("PUT", `/api/conversations/${encodeURIComponent(this.conversationId)}/version`, { variant });
    if (!response.ok) { this.refused(); this.composer.status.error(errorText(response)); return; }
    await this.reload();
    const versions = this.transcript.node.querySelector(".versions .version-at")?.closest(".versions");
    versions?.querySelector("button:not(:disabled)")?.focus({ preventScroll: true });
    // The focus moved from one arrow to the other: nothing said which version shows now.
    if (versions) this.transcript.sayVersion(versions);
  }

  async decide(approvalId, decision) {
    const response = await api("POST", `/api/approvals/${encodeURIComponent(approvalId)}`, { decision });
    return response.ok ? { ok: true } : { ok: false, error: errorText(response) };
  }

  async answer(questionId, action, content) {
    const body = action === "accept" ? { action, content } : { action };
    const response = await api("POST", `/api/questions/${encodeURIComponent(questionId)}`, body);
    return response.ok ? { ok: true } : { ok: false, error: errorText(response) };
  }

  async deleteConversation() {
    const ok = await confirmDialog({
      title: t("chat.delete_confirm_title", { title: titleOf(this.conversation) }),
      message: t("chat.delete_confirm"),
      confirmLabel: t("chat.delete"),
    });
    if (!ok) return;
    this.deleting = this.conversationId;
    const response = await api("DELETE", `/api/conversations/${encodeURIComponent(this.conversationId)}`);
    if (response.ok) { this.list.removed(this.deleting); this.gone(); return; }  // gone already if its event came first
    this.deleting = null;
    this.composer.status.error(errorText(response));
  }

  /** Read the open conversation again: after a reconnect, or when events can't say enough.
   * A reader scrolled up stays where they were; the composer (a draft) is not touched. */
  async reload({ newest = false } = {}) {
    if (!this.conversationId) return;
    this.needsReload = false;
    const read = ++this.reads;
    const missed = recordEvents(this.conversationId);
    // The newest part, or, for a reader scrolled up past it, the part around the row they
    // read: a bounded number of rows drawn again, never the whole history.
    const tx = this.transcript;
    const at = newest || tx.stick ? null : tx.rowInView();
    const around = at && !tx.amongNewest(at.id) ? `?${new URLSearchParams({ around: at.id })}` : "";
    const response = await api("GET", `/api/conversations/${encodeURIComponent(this.conversationId)}${around}`);
    const events = missed();
    if (read !== this.reads) return; // a newer read, begun after this one, draws the conversation
    if (!response.ok) {
      if (response.status === 404 && this.alive()) this.gone();
      return;
    }
    this.conversation = response.data.conversation;
    this.header.update();
    const kept = tx.stick || newest ? null : tx.node.scrollTop;
    tx.load(response.data, socket.unacknowledged(this.conversationId));
    if (kept !== null && !tx.keepInView(at)) { tx.node.scrollTop = kept; tx.stick = tx.nearBottom() && !tx.windowed(); }
    if (newest) tx.follow(true);
    this.setRunning(Boolean(response.data.running));
    this.replay(events);
    this.tasks.refresh();
    this.restoreSubagents();
  }

  /** The sub-agents' boxes, which the render just made lacks (a live `agent_start` makes
   * them): from the conversation's runs (not the strip's, which leaves out the completed
   * ones), each run's transcript so far — a live run's, and a finished one's whose call
   * is on screen, so a reload shows what the live view showed. Their events meanwhile
   * wait in the transcript. */
  async restoreSubagents() {
    const load = this.transcript.loads;
    let details = [];
    try {
      const response = await api("GET", `/api/conversations/${encodeURIComponent(this.conversationId)}/runs`);
      const runs = response.ok ? response.data.runs || [] : [];
      const shown = new Set(); // runs whose box can be rebuilt: a nested one's caller has one
      for (const run of [...runs].sort((a, b) => a.depth - b.depth)) {
        const host = run.depth === 1 ? this.transcript.toolCards.has(run.spawned_by_call_id) : shown.has(run.caller_run_id);
        if (run.frame_id && (host || isLive(run.status))) shown.add(run.id);
      }
      details = await Promise.all(runs.filter((run) => shown.has(run.id)).map(async (run) => {
        const response = await api("GET", `/api/agent-runs/${encodeURIComponent(run.id)}`);
        return response.ok ? response.data : null;
      }));
    } finally {
      this.transcript.restoreSubagents(load, details.filter(Boolean)); // held events stop being held either way
    }
  }

  /** The conversation on screen is gone (deleted in another tab or on another device):
   * the start page, which says so; what was typed here is the fresh composer's, unless
   * that has a draft of its own. */
  gone() {
    const id = this.conversationId;
    if (!id || current !== this) return;
    // Deleted here (by keyboard, say): the fresh composer takes the focus, where it can be
    // seen, instead of the page itself, which shows no ring. Not on a phone, whose
    // keyboard would cover the page.
    if (this.deleting === id && !narrow()) focusComposer = true;
    if (this.deleting !== id) {
      deletedElsewhere = true;
      const draft = this.composer.text.value;
      const fresh = `${DRAFT_PREFIX}${this.ctx.member.id}.`;
      if (draft.trim() && !draftOf(fresh)) keepDraft(fresh, draft);
    }
    keepDraft(draftKey(this), "");
    this.conversation = null;
    this.conversationId = null;
    this.ctx.navigate("#chat");
  }

  /** A regenerate, an edit, a version or a retry elsewhere changed what the conversation
   * shows: read again, as a reload would show it; when it starts a turn (`reason` other than
   * "version"), again once that turn ends, for the new answer's versions. */
  branchChanged(data) {
    if (data.reason !== "version") this.readWhenDone = true;
    this.reload();
  }

  /** Events that arrived while the conversation was read, applied to the new render. */
  replay(events) {
    for (const data of events) this.onEvent(data);
  }

  // -- events ------------------------------------------------------------------------------------

  onMessage(message) {
    if (message.type === "socket_open") {
      // Whatever happened before the socket listened is only in the server's state.
      this.ownChanges = 0; // their events, if any were lost, are in what this reads
      this.reload();
      if (message.reconnected) this.list.refresh();
      return;
    }
    if (message.type === "socket_closed" && message.code === 1001) {
      // The server is stopping: what was running was cut (interrupted, resumed at its
      // next start). Had its turn_finished not come first, nothing runs any more all the
      // same: no typing cursor, running dot or Stop for an answer left streaming.
      if (this.running) this.setRunning(false);
      this.list.stopAll();
      return;
    }
    if (message.type === "ack") {
      if (message.conversation_id === this.conversationId) {
        if (!this.transcript.acknowledged(message) && !message.queued) this.reload();
      }
      this.refreshList();
      return;
    }
    if (message.type === "error" && message.idempotency_key) {
      if (message.retry_after > 0) this.transcript.sendRetrying(message.idempotency_key, message.code);
      else this.transcript.sendFailed(message.idempotency_key, errorString(message.code, message.values, { admin: this.ctx.member.is_admin === true }) || message.error || "");
      return;
    }
    if (message.type !== "event" || message.event?.kind !== "chat") return;
    this.onEvent(message.event.data || {});
  }

  /** One chat event, live or replayed: the list follows every conversation's turns,
   * the transcript the open one's events. */
  onEvent(data) {
    if (data.type === "turn_started" || data.type === "turn_finished") this.list.setRunning(data.conversation_id, data.type === "turn_started");
    if (data.type === "user_message" || data.type === "turn_finished") this.refreshList();
    if (data.type === "conversation_changed") { this.list.changed(data); this.refreshList(); hearTitle(data); }
    if (data.type === "conversation_deleted") this.list.removed(data.conversation_id);
    if (data.conversation_id === this.conversationId) this.onChatEvent(data);
  }

  // A view already replaced reads nothing more: its list is off the screen.
  refreshList = debounce(() => { if (this.alive()) this.list.refresh(); }, 400);

  /** The list was read again: a title the first message gave is the header's too. */
  titleChanged() {
    if (!this.header || !this.conversation) return;
    const listed = this.conversations.find((c) => c.id === this.conversationId);
    if (!listed || listed.title === this.conversation.title || this.header.renaming()) return;
    this.conversation.title = listed.title;
    showTitle(this.header.heading, titleOf(this.conversation));
    document.title = `${this.header.heading.textContent} · ${t("app.name")}`;
  }

  onChatEvent(data) {
    const tx = this.transcript;
    // A part before the newest on screen (a search result's): the newest rows' events have
    // no place in it. "Later messages" reads them; a change of the whole is read again.
    if (tx.windowed() && !["turn_started", "turn_finished", "branch_changed", "compacted", "conversation_changed", "conversation_deleted"].includes(data.type)) return;
    if ((data.depth ?? 0) > 0) {
      // A sub-agent's progress shows in the card of the call that started it; what it
      // asks the member is a card of its own.
      if (data.type === "approval_required") tx.approvalRequired(data);
      else if (data.type === "question") tx.questionAsked(data);
      else if (data.type === "question_resolved") tx.questionResolved(data);
      else if (data.type === "agent_start") tx.subagentStarted(data);
      else if (data.type === "agent_done") tx.subagentDone(data);
      else if (data.type === "token") tx.subagentToken(data);
      else if (data.type === "tool_start") tx.subagentStep(data, "running");
      else if (["tool_done", "tool_error", "tool_denied", "tool_cancelled"].includes(data.type)) tx.subagentStep(data, data.status || data.type.slice(5));
      return;
    }
    switch (data.type) {
      case "user_message":
        if (!tx.userMessage(data)) this.needsReload = true;
        break;
      case "turn_started":
        this.header?.answerStarted();
        this.setRunning(true);
        if (this.needsReload) this.reload();
        break;
      case "token":
        if (this.noModel) { this.noModel.remove(); this.noModel = null; }  // a model answers now: the notice is past
        tx.token(data);
        break;
      case "done":
        tx.finished(data);
        break;
      case "assistant":
        tx.finished(data, data.tool_calls || []);
        break;
      case "model_fallback":
        tx.dropStream(data.message_id);
        tx.fallback(data);
        break;
      case "error":
        tx.failed(data, errorString(data.code, data.values, { admin: this.ctx.member.is_admin === true }) || data.error || t("chat.turn_failed"));
        if (data.code === "no_model" && !this.noModel) {
          this.noModel = modelNotice(this.ctx);
          this.header?.node.after(this.noModel);
        }
        break;
      case "tool_start":
        tx.toolUpdate(data, "running");
        break;
      case "tool_done":
      case "tool_error":
      case "tool_denied":
      case "tool_cancelled":
        tx.toolUpdate(data, data.status || data.type.slice(5));
        break;
      case "approval_required":
        tx.approvalRequired(data);
        break;
      case "approval_resolved":
        tx.approvalResolved(data);
        break;
      case "question":
        tx.questionAsked(data);
        break;
      case "question_resolved":
        tx.questionResolved(data);
        break;
      case "notification":
        tx.note(errorString(data.code, data.values) || data.content || "", "info", data.message_id);
        break;
      case "answer_cancelled":
        tx.answerCancelled(data);
        break;
      case "cancelled":
        tx.cancelled();
        tx.expireOpenApprovals();
        break;
      case "compacted":
        this.needsReload = true;
        if (!this.running) this.reload();
        break;
      case "branch_changed":
        // This tab's own change reads the result itself; another's is read here.
        if (branchEvents.has(data)) break;
        branchEvents.add(data);
        if (this.ownChanges > 0) this.ownChanges -= 1; else this.branchChanged(data);
        break;
      case "conversation_changed":
        if (!this.conversation) break;
        this.conversation.title = data.title;
        this.conversation.model = data.model;
        this.header?.update();
        break;
      case "conversation_deleted":
        this.gone();
        break;
      case "turn_finished":
        this.setRunning(false);
        if (this.needsReload || this.readWhenDone) { this.readWhenDone = false; this.reload(); }
        break;
      default:
        break;
    }
  }
}

/** `?find=…&snippet=…` for a search result's read (#chat/<id>?find=words), else "". */
function findQuery(params) {
  const find = params?.get("find");
  if (!find) return "";
  return `?${new URLSearchParams({ find: find.slice(0, 200), snippet: (params.get("snippet") || "").slice(0, 200) })}`;
}

// Chat renders begun: only the newest may become the chat view (renderChat).
let renders = 0;

export async function renderChat(ctx) {
  const render = ++renders;
  const id = ctx.rest[0] || null;
  socket.connect(ctx.member.id);
  const missed = recordEvents(id);
  const listed = searched;
  const [status, conversations, loaded] = await Promise.all([
    api("GET", "/api/chat/status"),
    // The search the member left in the box (a result opened): its results, not the whole list.
    api("GET", listed ? `/api/conversations?${new URLSearchParams({ search: listed })}` : "/api/conversations"),
    // A search result opens at the part around the message the search found.
    id ? api("GET", `/api/conversations/${encodeURIComponent(id)}${findQuery(ctx.params)}`) : null,
  ]);
  const name = ctx.member.display_name || ctx.member.username;
  const events = missed();
  // A newer render began meanwhile (a message sent right after "New conversation" opens
  // its conversation while the fresh composer is still read) and may be on screen
  // already: this one, answered last, must not replace it as `current` (disposing it
  // left the shown transcript deaf to its answer until a reload). The router drops this
  // render's page, being older.
  if (render !== renders) return el("div");
  if (status.status === 403) {
    return el("div", { class: "page" },
      el("header", { class: "page-header" }, el("h1", { text: t("chat.title", { name }) })),
      notice("info", t("chat.not_allowed")), el("p", {}, link("#account", t("nav.account"))));
  }
  if (!status.ok || !conversations.ok) {
    return el("div", { class: "page" }, el("header", { class: "page-header" }, el("h1", { text: t("chat.title", { name }) })),
      notice("error", errorText(status.ok ? conversations : status)));
  }
  if (loaded && !loaded.ok) {
    return el("div", { class: "page" }, el("header", { class: "page-header" }, el("h1", { text: t("chat.not_found") })),
      notice("info", loaded.status === 404 ? t("chat.not_found_text") : errorText(loaded)), el("p", {}, link("#chat", t("chat.back"))));
  }
  current?.dispose();
  current = new ChatView(ctx, status.data, conversations.data.conversations || [], loaded?.data || null, conversations.data.next_before, listed);
  current.replay(events);
  return current.root;
}

/** The chat view on screen, or null (another page is). */
// The chat screen the member sees: connected, and still the route (after a click to
// another page the old screen stays in the page until the new one has rendered).
const onScreen = () => (current?.root.isConnected && /^#chat(\/|$)/.test(location.hash || "#chat") ? current : null);
const shown = (node) => Boolean(node?.isConnected && node.getClientRects().length);

installShortcuts({
  new: () => {
    if (onScreen()) { onScreen().newConversation(); return true; }
    focusComposer = true;
    location.hash = "#chat";
    return true;
  },
  search: () => {
    const box = onScreen()?.list.node.querySelector(".conv-search");
    if (shown(box)) { box.focus(); box.select(); return true; }
    // Another page, or a phone's conversation (its list is on the start page).
    focusSearch = true;
    location.hash = "#chat";
    return true;
  },
  composer: () => {
    const box = onScreen()?.composer.text;
    if (!shown(box)) return false;
    box.focus();
    return true;
  },
});

/** The shell signs out: close the socket (and forget unsent messages and drafts on purpose). */
export function endChat({ forget = false } = {}) {
  current?.dispose();
  current = null;
  socket.stop({ forget });
  if (forget) { forgetDrafts(); searched = ""; }
}

