// The Skald phone app: pair by code, conversations, chat with a streamed answer, stop,
// approve or deny, attach a photo or file, notifications that waited, settings.
//
// - The device token lives in this phone's localStorage and goes in the Authorization
//   header of every call (never a cookie: the app carries no ambient credential).
// - The last conversations are kept here too, so the app opens read-only without the
//   server (the service worker caches the shell).
// - The host's web libraries are imported, not copied: /ui/lib/dom.js builds every node
//   (no innerHTML: data stays text) and /ui/lib/markdown.js renders answers (marked +
//   DOMPurify, images never loaded). That renderer words its own parts (a code block's
//   Copy button, an image it does not load) through the host's /ui/lib/i18n.js, so the
//   app loads that module's table (the host's public /api/i18n) in its own language too:
//   without it they read as their keys ("chat.copy_code").
import { el, MarkdownStream, renderMarkdown } from "/ui/lib/plugin-kit.js";
import { errorString as sharedErrorText, loadLocale as loadSharedWords, matchLocale, textDirection } from "/ui/lib/i18n.js";

const BASE = new URL("..", location.href).pathname.replace(/\/$/, ""); // /api/plugin/mobile-connector
const TOKEN_KEY = "skald.mobile.token";
const CACHE_KEY = "skald.mobile.cache";
const LOCALE_KEY = "skald.mobile.locale"; // the language chosen in this app's settings
const ACCOUNT_LOCALE_KEY = "skald.mobile.account_locale"; // the paired member's account language, as /me last said
// The push notification's words in the app's language, for the service worker (sw.js),
// which has no table of its own: a new locale file words the notification too.
const PUSH_WORDS_CACHE = "skald-mobile-push-words";
const PUSH_WORDS_URL = "push-words";
const LOCALES_KEY = "skald.mobile.locales"; // the languages the server last said it has
const VOICE_KEY = "skald.mobile.voice";
const OUTBOX_KEY = "skald.mobile.outbox"; // messages the server does not have yet (see "the outbox")
const DRAFTS_KEY = "skald.mobile.drafts"; // what each chat's composer holds, not sent yet (see "drafts")
const SVG = "http://www.w3.org/2000/svg";

const view = document.getElementById("view");
// Whether the reader is at the end of what the view shows: growth after it was drawn
// (math typeset once KaTeX arrives, an answer redrawn whole as it ends) keeps them
// there; one who scrolled up stays where they are. Growth itself fires no scroll.
let atEnd = true;
view.addEventListener("scroll", () => { atEnd = view.scrollHeight - view.scrollTop - view.clientHeight < 48; }, { passive: true });
const keepAtEnd = new ResizeObserver(() => { if (atEnd) view.scrollTop = view.scrollHeight; });
const banner = document.getElementById("banner");
const title = document.getElementById("title");
const back = document.getElementById("back");
const settingsButton = document.getElementById("settings-button");

let words = {};
let locale = "en";
// The languages the server has (its /app/strings answer: the plugin's locale files),
// as it last said; English until it has said.
let locales = storedLocales();
let me = null;
let online = true;
let current = null; // the open conversation: {id, messagesBox, typing, stop, running, streamBody, stream, streamRound, streamText}
let streamAbort = null;
let streamOpened = false; // a hello came before: the next one is a stream opened again
let lockedShown = false; // the locked screen is up: the stream's hello says when to leave it

const t = (key, values = {}) => String(words[key] ?? key).replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
const token = () => localStorage.getItem(TOKEN_KEY);

/** A byte count as the reader reads a size, in their number format ("1008 KiB",
 * "1,5 MiB" in German), as the web shell's formatSize: never a raw byte count. */
function sizeText(bytes) {
  const number = (value) => value.toLocaleString(locale, { maximumFractionDigits: 1 });
  if (bytes < 1024) return `${number(bytes)} B`;
  if (bytes < 1024 ** 2) return `${number(bytes / 1024)} KiB`;
  if (bytes < 1024 ** 3) return `${number(bytes / 1024 ** 2)} MiB`;
  return `${number(bytes / 1024 ** 3)} GiB`;
}

class Refused extends Error {}
class Locked extends Error {}
class Offline extends Error {}

// -- talking to the server ----------------------------------------------------------------

async function call(method, path, body, { raw = false, headers = {} } = {}) {
  const init = { method, headers: { Accept: "application/json", ...headers } };
  if (token()) init.headers.Authorization = `Bearer ${token()}`;
  if (body !== undefined) {
    if (raw) init.body = body;
    else {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
  }
  let response;
  try {
    response = await fetch(`${BASE}${path}`, init);
  } catch {
    setOnline(false);
    throw new Offline("offline");
  }
  setOnline(true);
  const data = await response.json().catch(() => ({}));
  if (response.status === 401) throw new Refused(t("refused"));
  if (response.status === 423) throw new Locked(data.error || t("locked"));
  if (!response.ok) throw Object.assign(new Error(data.error || `HTTP ${response.status}`), { code: data.code, values: data.values });
  return data;
}

function setOnline(value) {
  const back = value && !online;
  online = value;
  document.body.classList.toggle("offline", !value);
  showBanner();
  showOnline();
  if (back) flushOutbox(); // what waited goes now
}

function showBanner(text) {
  const message = text || (!online ? t("offline") : "");
  banner.textContent = message;
  banner.hidden = !message;
}

function cache() {
  try {
    return JSON.parse(localStorage.getItem(CACHE_KEY) || "{}");
  } catch {
    return {};
  }
}

function remember(update) {
  const stored = cache();
  update(stored);
  localStorage.setItem(CACHE_KEY, JSON.stringify(stored));
}

async function loadWords(wanted) {
  try {
    const response = await fetch(`${BASE}/app/strings?locale=${encodeURIComponent(wanted)}`);
    const data = await response.json();
    words = data.strings;
    locale = data.locale;
    locales = data.locales;
    localStorage.setItem(LOCALES_KEY, JSON.stringify(locales));
  } catch {
    words = words || {};
  }
  try {
    await loadSharedWords(locale);
  } catch {
    /* offline and never cached: the renderer's few labels read as their keys */
  }
  document.documentElement.lang = locale;
  document.documentElement.dir = textDirection(locale); // also offline, when the line above failed
  keepPushWords();
}

/** What a push shows (sw.js reads it), in the language the app now speaks. */
function keepPushWords() {
  if (!("caches" in self) || !words.push_body) return;
  const body = JSON.stringify({ title: t("push_title"), body: t("push_body"), lang: locale });
  caches
    .open(PUSH_WORDS_CACHE)
    .then((cache) => cache.put(new URL(PUSH_WORDS_URL, location.href).href, new Response(body, { headers: { "Content-Type": "application/json" } })))
    .catch(() => {});
}

function storedLocales() {
  try {
    const stored = JSON.parse(localStorage.getItem(LOCALES_KEY));
    if (Array.isArray(stored) && stored.length && stored.every((code) => typeof code === "string")) return stored;
  } catch {
    /* none kept yet */
  }
  return ["en"];
}

/** The words to start in: the language chosen in this app, else (paired) the member's
 * account language as the server last said it, else the phone's (its whole tag, pt-BR,
 * else its language, de-AT → de) among those the server has. The server's list comes
 * with its first answer: a phone that never had it asks again once known. */
async function loadFirstWords() {
  const chosen = localStorage.getItem(LOCALE_KEY);
  if (chosen) return loadWords(chosen);
  const account = token() && localStorage.getItem(ACCOUNT_LOCALE_KEY);
  if (account && matchLocale([account], locales)) return loadWords(matchLocale([account], locales));
  const phone = () => matchLocale(navigator.languages || [navigator.language || "en"], locales) || "en";
  await loadWords(phone());
  if (phone() !== locale) await loadWords(phone());
}

/** Once paired, the member's account language (their own choice on the web, else the
 * instance's: what the web shell shows them) is the app's, unless a language was chosen
 * in this app's settings. Kept for the next start, offline too. */
async function followAccount() {
  const account = me && typeof me.locale === "string" ? me.locale : null;
  if (!account) return;
  localStorage.setItem(ACCOUNT_LOCALE_KEY, account);
  if (localStorage.getItem(LOCALE_KEY)) return;
  const wanted = matchLocale([account], locales);
  if (wanted && wanted !== locale) await loadWords(wanted);
}

/** A language's name in its own words ("Deutsch", "português (Brasil)"), else its code. */
function languageName(code) {
  try {
    return new Intl.DisplayNames([code], { type: "language" }).of(code) || code;
  } catch {
    return code;
  }
}

// -- screens ------------------------------------------------------------------------------

function screen(heading, { backTo = null, settings = true, chat = false } = {}) {
  title.textContent = heading;
  view.classList.toggle("chat", chat); // the composer ends the view (app.css: main.chat)
  back.hidden = !backTo;
  back.onclick = backTo ? () => (location.hash = backTo) : null;
  back.setAttribute("aria-label", t("back"));  // "‹" alone is no name a screen reader can say
  settingsButton.hidden = !settings || !token();
  settingsButton.setAttribute("aria-label", t("settings"));
  settingsButton.onclick = () => (location.hash = "#settings");
  if (current && current.stream) current.stream = null;
  current = null;
  lockedShown = false;
}

function pairScreen(code = "", reason = "") {
  screen(t("pair_title"), { settings: false });
  const codeInput = el("input", { name: "code", autocomplete: "one-time-code", autocapitalize: "characters", props: { value: code } });
  const nameInput = el("input", { name: "name", props: { value: guessName() } });
  const message = el("p", { class: "muted", role: "alert", text: reason });
  const form = el(
    "form",
    { class: "stack" },
    el("p", { text: t("pair_intro") }),
    el("label", {}, t("pair_code"), codeInput),
    el("label", {}, t("pair_name"), nameInput),
    el("button", { type: "submit", class: "btn primary", text: t("pair_button") }),
    message,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    message.textContent = "";
    try {
      const response = await fetch(`${BASE}/pair?locale=${locale}`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify({ code: codeInput.value, name: nameInput.value || t("phone_name"), platform: platform() }),
      });
      const data = await response.json().catch(() => ({}));
      if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
      localStorage.setItem(TOKEN_KEY, data.token);
      // Paired anew (perhaps to another member): no copy or draft of the last one shows.
      for (const key of [CACHE_KEY, DRAFTS_KEY]) localStorage.removeItem(key);
      chosenFiles.clear();
      history.replaceState(null, "", location.pathname);
      await start();
    } catch (error) {
      message.textContent = error.message;
    }
  });
  view.replaceChildren(form);
}

// The name the pairing form offers, in the app's language: the page lists the device by it.
function guessName() {
  const ua = navigator.userAgent;
  if (/iPhone/.test(ua)) return "iPhone";
  if (/Android/.test(ua)) return t("android_phone_name");
  return t("phone_name");
}

function platform() {
  const ua = navigator.userAgent;
  if (/iPhone|iPad/.test(ua)) return "ios";
  if (/Android/.test(ua)) return "android";
  return "web";
}

// Locked: nothing can be read, but a message can still be written. The server seals it
// to the member and delivers it once, at their next login on the web, into this app's
// conversation the phone last sent into (so that is where it is addressed).
function lockedScreen(message) {
  screen(t("locked_title"), { chat: true });
  lockedShown = true;
  const text = el("textarea", { name: "text", rows: 2, placeholder: t("placeholder"), "aria-label": t("placeholder") });
  // Its words are the draft of the chat they go to (see "drafts"): unlocked before they
  // are sent, that chat's composer holds them.
  const slot = cache().last || NEW_CHAT;
  const held = () => draftOf(slot)?.attachments || [];
  text.dataset.slot = slot;
  text.value = draftOf(slot)?.typed || "";
  text.addEventListener("input", () => {
    if (text.isConnected) keepDraft(slot, text.value, held());
  });
  const sent = el("div", { class: "messages", id: "messages" });
  const composer = el("form", { class: "composer" }, text, el("button", { type: "submit", class: "btn primary", text: t("send") }));
  composer.addEventListener("submit", async (event) => {
    event.preventDefault();
    const content = text.value.trim();
    if (!content) return;
    const target = cache().last || "current";
    try {
      const answer = await call("POST", `/conversations/${encodeURIComponent(target)}/messages`, { text: content, idempotency_key: `m-${crypto.randomUUID()}` });
      text.value = "";
      keepDraft(slot, "", held());
      sent.append(messageNode({ role: "user", content }));
      if (answer.status === "sealed") sent.append(el("p", { class: "muted sealed", role: "status", text: answer.notice || t("sealed_notice") }));
      else route(); // unlocked meanwhile: it went straight in
    } catch (error) {
      handle(error);
    }
  });
  view.replaceChildren(el("div", { class: "locked", role: "alert" }, el("p", { text: message }), el("p", { class: "muted", text: t("locked_write") })), sent, composer);
}

// No longer paired: nothing of the member stays on this phone, not the copy of their
// conversations, nor what waited to be sent (their server will never take it now).
function forgetEverything() {
  for (const key of [TOKEN_KEY, CACHE_KEY, OUTBOX_KEY, DRAFTS_KEY, ACCOUNT_LOCALE_KEY]) localStorage.removeItem(key);
  chosenFiles.clear();
  clearTimeout(retryTimer);
}

function refusedScreen() {
  forgetEverything();
  stopStream();
  pairScreen("", t("refused"));
}

async function handle(error) {
  if (error instanceof Refused) refusedScreen();
  else if (error instanceof Locked) lockedScreen(error.message);
  else if (!(error instanceof Offline)) toast(t("error", { message: error.message }));
}

// A conversation the server no longer has (deleted on the web or another phone): its
// copy goes from this phone too, as the README promises (offline, the app keeps only the
// conversations it lists), and so does a draft left in its composer, to the new chat's.
function forgetConversation(id) {
  remember((stored) => {
    if (stored.messages) delete stored.messages[id];
    stored.conversations = (stored.conversations || []).filter((c) => c.id !== id);
    if (stored.last === id) delete stored.last;
  });
  const held = draftOf(id);
  if (held) {
    const fresh = draftOf(NEW_CHAT);
    keepDraft(NEW_CHAT, [fresh?.typed, held.typed].filter(Boolean).join("\n"), [...(fresh?.attachments || []), ...held.attachments]);
    keepDraft(id, "", []);
  }
}

// The server's answer for a conversation it does not have: every call naming one says
// not_found only for that reason.
const gone = (error) => error?.code === "not_found";

// The open conversation was deleted elsewhere: said, and back to the list (a composer
// beside "no such conversation" would only refuse what is written in it).
function conversationGone(id, key = "conversation_deleted") {
  forgetConversation(id);
  if (current && current.id === id) {
    current = null;
    location.hash = "#list";
  }
  toast(t(key));
}

function toast(text) {
  const node = el("div", { class: "toast", role: "status", text });
  document.body.append(node);
  setTimeout(() => node.remove(), 4000);
}

async function listScreen() {
  screen(t("conversations"));
  const list = el("ul", { class: "list", id: "conversations" });
  // A draft, as the web's new chat: the conversation is made when its first message is
  // sent, so one left without a word leaves nothing in the member's list (chatScreen).
  const newButton = el("button", { type: "button", class: "btn primary", text: t("new_chat"), disabled: !online });
  newButton.addEventListener("click", () => (location.hash = "#new"));
  const projectsButton = el("button", { type: "button", class: "btn", text: t("projects"), on: { click: () => (location.hash = "#projects") } });
  view.replaceChildren(el("div", { class: "row" }, newButton, projectsButton), list);
  let conversations;
  try {
    conversations = (await call("GET", "/conversations")).conversations;
    remember((stored) => {
      stored.conversations = conversations;
      stored.listedAt = Date.now();
      // Copies of conversations no longer listed (deleted elsewhere) go with them.
      const listed = new Set(conversations.map((c) => c.id));
      for (const id of Object.keys(stored.messages || {})) if (!listed.has(id)) delete stored.messages[id];
    });
  } catch (error) {
    if (!(error instanceof Offline)) return handle(error);
    conversations = cache().conversations || [];
    newButton.disabled = true;
  }
  if (!conversations.length) list.replaceChildren(el("li", { class: "muted", text: t("empty") }));
  else
    list.replaceChildren(
      ...conversations.map((c) =>
        el("li", {}, el("a", { href: `#chat/${encodeURIComponent(c.id)}`, text: c.title || new Date(c.updated_at).toLocaleString(locale) })),
      ),
    );
}

// -- projects, read-only, and the file viewer -------------------------------------------------

const IMAGE_TYPES = { png: "image/png", jpg: "image/jpeg", jpeg: "image/jpeg", gif: "image/gif", webp: "image/webp", svg: "image/svg+xml" };
const TEXT_EXTENSIONS = new Set(["txt", "md", "markdown", "csv", "json", "log", "py", "js", "ts", "html", "css", "yaml", "yml", "toml", "ini", "sh", "xml"]);
const encodePath = (path) => path.split("/").map(encodeURIComponent).join("/");

async function projectsScreen() {
  screen(t("projects"), { backTo: "#list" });
  const list = el("ul", { class: "list", id: "projects" });
  view.replaceChildren(list);
  try {
    const { projects } = await call("GET", "/projects");
    if (!projects.length) list.replaceChildren(el("li", { class: "muted", text: t("no_projects") }));
    else list.replaceChildren(...projects.map((p) => el("li", {}, el("a", { href: `#project/${encodeURIComponent(p.id)}/`, text: p.title }))));
  } catch (error) {
    handle(error);
  }
}

async function folderScreen(projectId, path) {
  const up = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : "";
  screen(path || t("projects"), { backTo: path ? `#project/${encodeURIComponent(projectId)}/${encodePath(up)}` : "#projects" });
  const list = el("ul", { class: "list", id: "entries" });
  view.replaceChildren(list);
  try {
    const { entries } = await call("GET", `/projects/${encodeURIComponent(projectId)}/files?path=${encodeURIComponent(path)}`);
    if (!entries.length) list.replaceChildren(el("li", { class: "muted", text: t("folder_empty") }));
    else
      list.replaceChildren(
        ...entries.map((entry) => {
          const target = entry.is_dir ? `#project/${encodeURIComponent(projectId)}/${encodePath(entry.path)}` : `#file/${encodeURIComponent(projectId)}/${encodePath(entry.path)}`;
          return el("li", {}, el("a", { href: target, text: entry.is_dir ? `${entry.name}/` : entry.name }));
        }),
      );
  } catch (error) {
    handle(error);
  }
}

async function fileScreen(projectId, path) {
  const folder = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : "";
  screen(path.split("/").pop(), { backTo: `#project/${encodeURIComponent(projectId)}/${encodePath(folder)}` });
  const body = el("div", { class: "viewer", id: "viewer" });
  view.replaceChildren(body);
  try {
    const response = await fetch(`${BASE}/projects/${encodeURIComponent(projectId)}/file?path=${encodeURIComponent(path)}`, {
      headers: { Authorization: `Bearer ${token()}` },
    });
    if (!response.ok) {
      const data = await response.json().catch(() => ({}));
      if (response.status === 401) throw new Refused(t("refused"));
      if (response.status === 423) throw new Locked(data.error || t("locked"));
      throw new Error(data.error || `HTTP ${response.status}`);
    }
    const bytes = await response.arrayBuffer();
    const extension = (path.split(".").pop() || "").toLowerCase();
    if (IMAGE_TYPES[extension]) {
      // A data: URL (the CSP allows no other image source but ours); an image element
      // never runs what an SVG carries.
      const url = await new Promise((resolve) => {
        const reader = new FileReader();
        reader.onload = () => resolve(reader.result);
        reader.readAsDataURL(new Blob([bytes], { type: IMAGE_TYPES[extension] }));
      });
      body.replaceChildren(el("img", { src: url, alt: path, class: "viewer-image" }));
    } else if (TEXT_EXTENSIONS.has(extension)) {
      const text = new TextDecoder().decode(bytes);
      if (extension === "md" || extension === "markdown") body.replaceChildren(el("div", { class: "message assistant" }, ...renderMarkdown(text)));
      else body.replaceChildren(el("pre", { text }));
    } else body.replaceChildren(el("p", { class: "muted", text: t("cannot_show", { size: bytes.byteLength }) }));
  } catch (error) {
    handle(error);
  }
}

function messageNode(message) {
  const node = fillMessage(el("div", { class: `message ${message.role}` }), message);
  if (message.key) node.dataset.key = message.key;
  if (message.id != null) node.dataset.messageId = String(message.id);
  return node;
}

// An answer's tool call as a reload shows it (the web's "tool — Done — Approved."): the
// live card settled by its decision, or a line of its own for a call that asked none.
function toolCallNode(call) {
  const status = `tool_${call.status}` in words ? t(`tool_${call.status}`) : call.status;
  const card = el("div", { class: "approval settled tool-call", "data-tool-call": call.id });
  card.append(el("p", { text: `${call.tool} — ${status}` }));
  if (call.approval) card.append(el("p", { class: "muted decision", text: settledText(call.approval) }));
  return card;
}

// Words the host wrote for a cause it names (a Stop left queued messages unanswered, an
// answer cut off was asked for again) are stored in English, with the cause's code: the
// app says them in its reader's language. Its own words where the web's would offer what
// the phone has not (the web's "Retry"); the host's (`error.<code>`) for any other cause.
function reasonText(message) {
  const code = message.reason?.code;
  if (!code) return message.content;
  if (`reason_${code}` in words) return t(`reason_${code}`, message.reason.values || {});
  return sharedErrorText(code, message.reason.values || {}, { admin: false }) || message.content;
}

// One rendering of a message for a reload and for an answer that ends live, so both
// read the same: a stopped answer says so under its words, as the web's chat does.
function fillMessage(node, message) {
  const content = reasonText(message);
  if (message.role === "assistant" && !message.reason) node.replaceChildren(...renderMarkdown(content));
  else node.textContent = content;
  node.classList.toggle("failed", Boolean(message.reason));
  // What the member attached, by name: the words alone did not say a photo went with them.
  // The server names them (`attachments`); a message this phone has not handed over yet
  // holds them as `files`.
  const files = message.files || (message.attachments || []).map((a) => a.name);
  if (files.length) node.append(el("ul", { class: "files" }, ...files.map((name) => el("li", { text: name }))));
  const stopped = message.status === "cancelled";
  node.classList.toggle("stopped", stopped);
  if (stopped) node.append(el("p", { class: "message-status", text: t("stopped") }));
  if (message.sendAgain) {
    node.append(el("button", { type: "button", class: "btn send-again", text: t("send_again"), on: { click: () => message.sendAgain() } }));
  }
  return node;
}

// What a settled approval's card says instead of its buttons.
function settledText(status) {
  if (status === "approved" || status === "approve" || status === "used") return t("approved");
  if (status === "denied" || status === "deny") return t("denied");
  if (status === "expired") return t("approval_expired");
  if (status === "stopped") return t("approval_stopped"); // the app's own: its turn was stopped
  return t("approval_settled");
}

function settleCard(card, status) {
  if (!card || card.classList.contains("settled")) return;
  card.classList.add("settled");
  card.replaceChildren(...[...card.children].filter((child) => !child.matches(".row")), el("p", { class: "muted decision", text: settledText(status) }));
}

// A call's arguments as the member reads them: one "name: value" line each (a value that
// is not text in its JSON form), not the raw JSON object.
function argumentList(args) {
  if (typeof args === "string") {
    try {
      args = JSON.parse(args);
    } catch {
      return el("p", { class: "arguments", text: args });
    }
  }
  if (!args || typeof args !== "object" || Array.isArray(args)) return el("p", { class: "arguments", text: JSON.stringify(args) });
  const entries = Object.entries(args);
  if (!entries.length) return null;
  return el(
    "dl",
    { class: "arguments" },
    ...entries.flatMap(([name, value]) => [el("dt", { text: name }), el("dd", { text: typeof value === "string" ? value : JSON.stringify(value, null, 1) })]),
  );
}

function approvalNode(approval) {
  const card = el("div", { class: "approval", "data-approval": approval.approval_id });
  const buttons = el("div", { class: "row" });
  const decide = async (approve) => {
    buttons.querySelectorAll("button").forEach((b) => (b.disabled = true));
    try {
      await call("POST", `/approvals/${encodeURIComponent(approval.approval_id)}`, { approve });
      settleCard(card, approve ? "approved" : "denied");
    } catch (error) {
      // Settled meanwhile elsewhere (the web, a Stop, its time ran out): the card says so.
      if (error.code === "conflict" || error.code === "not_found") return settleCard(card, "settled");
      buttons.querySelectorAll("button").forEach((b) => (b.disabled = false));
      handle(error);
    }
  };
  buttons.append(
    el("button", { type: "button", class: "btn primary", text: t("approve"), on: { click: () => decide(true) } }),
    el("button", { type: "button", class: "btn", text: t("deny"), on: { click: () => decide(false) } }),
  );
  card.append(el("p", { text: t("approval_wants", { tool: approval.tool }) }), argumentList(approval.arguments) || "", buttons);
  return card;
}

// Drawn, not typed: "📎" is a box on a phone without an emoji font. Lucide's paperclip
// (ISC, as the web's icons in web/vendor/lucide/), stroked in the button's text colour.
function paperclip() {
  const svg = document.createElementNS(SVG, "svg");
  const path = document.createElementNS(SVG, "path");
  path.setAttribute("d", "m16 6-8.414 8.586a2 2 0 0 0 2.829 2.829l8.414-8.586a4 4 0 1 0-5.657-5.657l-8.379 8.551a6 6 0 1 0 8.485 8.485l8.379-8.551");
  for (const [name, value] of Object.entries({ viewBox: "0 0 24 24", "aria-hidden": "true", focusable: "false" })) svg.setAttribute(name, value);
  svg.append(path);
  return svg;
}

// -- the outbox: messages the server does not have yet -----------------------------------------
//
// A message goes into the outbox, with its idempotency key and its uploaded attachments,
// before it is sent, and leaves it only when the server has it (the same key twice is
// stored once, so one whose answer was lost is safely sent again) or refused it: then its
// words and attachments go back to its composer and the member is told. While the
// server cannot be reached it stays, marked "waiting to send" (after a reload too), and
// goes by itself when the server answers again. Nothing typed is ever silently lost.

function outbox() {
  try {
    return JSON.parse(localStorage.getItem(OUTBOX_KEY) || "[]");
  } catch {
    return [];
  }
}

function saveOutbox(items) {
  if (items.length) localStorage.setItem(OUTBOX_KEY, JSON.stringify(items));
  else localStorage.removeItem(OUTBOX_KEY);
}

// -- drafts: what a composer holds, not sent yet --------------------------------------------
//
// Kept as it is typed (and as files are attached or taken off), per chat: {slot: {typed,
// attachments}}, the slot a conversation's id, or NEW_CHAT for the new chat. A chat's
// screen is built again when the network comes back, the member's data is unlocked, or
// the app is reloaded: its composer gives back what it held. Handed to the outbox by
// Send, the draft is cleared (the outbox keeps it until the server has it; a refused
// message comes back here, or to its open composer). The files of a new chat are not
// uploaded before its conversation is made: a File cannot be kept in localStorage, so
// they wait in `chosenFiles` for as long as the page lives.

const NEW_CHAT = "#new"; // no conversation's id starts with "#"
const chosenFiles = new Map(); // slot → [{file, name}]

function drafts() {
  try {
    return JSON.parse(localStorage.getItem(DRAFTS_KEY) || "{}");
  } catch {
    return {};
  }
}

/** What the composer of `slot` held: {typed, attachments}, or null. */
function draftOf(slot) {
  const kept = drafts()[slot];
  const files = chosenFiles.get(slot) || [];
  if (!kept && !files.length) return null;
  return { typed: kept?.typed || "", attachments: [...(kept?.attachments || []), ...files] };
}

/** Keep what the composer of `slot` holds now (nothing: its draft goes). */
function keepDraft(slot, typed, attachments) {
  const uploaded = attachments.filter((a) => !a.file).map(({ path, name }) => ({ path, name }));
  const files = attachments.filter((a) => a.file);
  if (files.length) chosenFiles.set(slot, files);
  else chosenFiles.delete(slot);
  const waiting = drafts();
  if (typed.trim() || uploaded.length) waiting[slot] = { typed, attachments: uploaded };
  else delete waiting[slot];
  try {
    if (Object.keys(waiting).length) localStorage.setItem(DRAFTS_KEY, JSON.stringify(waiting));
    else localStorage.removeItem(DRAFTS_KEY);
  } catch {
    /* storage full: the draft stays in its composer only */
  }
}

let flushing = null;
let retryTimer = null;
let retryDelay = 2000;

/** Send what waits, oldest first; one that cannot go yet holds the rest (their order is the conversation's). */
function flushOutbox() {
  if (!token()) return Promise.resolve();
  // Let go in .finally, after it is set: an empty outbox finishes before the assignment.
  flushing ||= sendWaiting().finally(() => (flushing = null));
  return flushing;
}

async function sendWaiting() {
  for (let item = outbox()[0]; item; item = outbox()[0]) if (!(await deliver(item))) return;
  retryDelay = 2000;
}

const pendingBubble = (key) => current?.messagesBox.querySelector(`.message.user[data-key="${CSS.escape(key)}"]`) || null;

function markWaiting(bubble, waiting) {
  if (!bubble) return;
  bubble.classList.toggle("waiting", waiting);
  const note = bubble.querySelector(".waiting-note");
  if (waiting && !note) bubble.append(el("p", { class: "message-status waiting-note", text: t("waiting_to_send") }));
  else if (!waiting) note?.remove();
}

/** true: this item is done with (sent, or refused and given back); false: it waits. */
async function deliver(item) {
  const here = () => current && current.id === item.conversation_id;
  // Sent while a turn runs, it waits for the next turn: what this turn still says goes
  // above it (placeInTurn), as the server stores it and a reload shows it.
  const queued = here() ? current.running : false;
  pendingBubble(item.key)?.classList.toggle("queued", queued);
  // Running from now, not from the server's reply: a quick answer can come before it,
  // and must not be followed by a running state that nothing ends.
  if (here()) setRunning(true);
  try {
    const answer = await call("POST", `/conversations/${encodeURIComponent(item.conversation_id)}/messages`, {
      text: item.text,
      attachments: item.attachments.map((a) => a.path),
      idempotency_key: item.key,
    });
    saveOutbox(outbox().filter((i) => i.key !== item.key));
    markWaiting(pendingBubble(item.key), false);
    if (answer.status === "sealed") toast(answer.notice || t("sealed_notice"));
    return true;
  } catch (error) {
    if (here()) setRunning(queued);
    if (error instanceof Offline) {
      markWaiting(pendingBubble(item.key), true);
      clearTimeout(retryTimer);
      retryTimer = setTimeout(flushOutbox, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 30_000);
      return false;
    }
    if (error instanceof Refused || error instanceof Locked) {
      handle(error);
      return false;
    }
    saveOutbox(outbox().filter((i) => i.key !== item.key));
    if (gone(error)) {
      // Its conversation was deleted meanwhile: the words wait in the new chat's draft.
      pendingBubble(item.key)?.remove();
      const fresh = draftOf(NEW_CHAT);
      keepDraft(NEW_CHAT, [fresh?.typed, item.typed].filter(Boolean).join("\n"), [...(fresh?.attachments || []), ...item.attachments]);
      conversationGone(item.conversation_id, "conversation_deleted_unsent");
      return true;
    }
    giveBack(item, error);
    return true;
  }
}

// Refused by the server: the bubble goes, its words and attachments go back to be sent
// again or changed, and the member is told it was not sent.
function giveBack(item, error) {
  pendingBubble(item.key)?.remove();
  if (current && current.id === item.conversation_id && current.restore) current.restore(item);
  else {
    // Before what its composer was left holding, as `restore` puts it.
    const held = draftOf(item.conversation_id);
    keepDraft(item.conversation_id, [item.typed, held?.typed].filter(Boolean).join("\n"), [...item.attachments, ...(held?.attachments || [])]);
  }
  toast(t("not_sent", { message: error.message }));
}

// `id` null: a new chat (#new), a draft until its first message is sent, as the web's
// new chat is. Only then is its conversation made (startDraft), so a chat left without a
// word leaves no empty conversation in the member's list; files chosen meanwhile wait on
// the phone and are uploaded into it then.
async function chatScreen(id) {
  const known = id ? (cache().conversations || []).find((c) => c.id === id) : null;
  screen(known?.title || (id ? t("app_title") : t("new_chat")), { backTo: "#list", chat: true });
  if (id) remember((stored) => (stored.last = id));
  const draftKey = id ? null : `d-${crypto.randomUUID()}`; // asked twice, the server makes it once
  const messagesBox = el("div", { class: "messages", id: "messages" });
  keepAtEnd.disconnect();
  keepAtEnd.observe(messagesBox);
  atEnd = true;
  const typing = el("p", { class: "typing", text: t("typing"), hidden: true });
  const text = el("textarea", { name: "text", rows: 1, placeholder: t("placeholder"), "aria-label": t("placeholder") });
  const file = el("input", { type: "file", name: "file", accept: "image/*,*/*", hidden: true });
  const attached = []; // {path, name}: uploaded, not sent yet ({file, name} in a draft: not uploaded yet)
  const attachedList = el("ul", { class: "attached", hidden: true });
  const attach = el("button", { type: "button", class: "btn icon-only", "aria-label": t("attach"), on: { click: () => file.click() } }, paperclip());
  const send = el("button", { type: "submit", class: "btn primary", text: t("send") });
  const stop = el("button", { type: "button", class: "btn", text: t("stop"), hidden: true });
  const composer = el("form", { class: "composer" }, attach, file, text, stop, send);
  view.replaceChildren(messagesBox, typing, attachedList, composer);

  // What the composer holds is its chat's draft from the first key (see "drafts"): only
  // while it is the one shown (one left behind by a rebuild keeps nothing over it).
  const keep = () => {
    if (current?.composer === composer) keepDraft(id || NEW_CHAT, text.value, attached);
  };
  text.addEventListener("input", keep);
  // Each chosen attachment by name, with its own remove button.
  const drawAttached = () => {
    keep();
    attachedList.hidden = !attached.length;
    attachedList.replaceChildren(
      ...attached.map((one) =>
        el(
          "li",
          {},
          el("span", { text: one.name }),
          el("button", {
            type: "button",
            class: "btn icon-only remove",
            text: "×",
            "aria-label": t("remove_attachment", { name: one.name }),
            on: {
              click: () => {
                attached.splice(attached.indexOf(one), 1);
                drawAttached();
              },
            },
          }),
        ),
      ),
    );
  };
  const restore = (item) => {
    text.value = [item.typed, text.value].filter(Boolean).join("\n");
    attached.unshift(...item.attachments);
    drawAttached();
  };
  current = { id, messagesBox, typing, stop, running: false, streamBody: null, stream: null, streamRound: null, streamText: "", restore, composer, send, attach };
  const draft = draftOf(id || NEW_CHAT); // what it held when this chat was last shown
  if (draft) restore(draft);

  // One file into the conversation's uploads: {path, name}, or null (said why).
  const upload = async (chosen) => {
    try {
      const saved = await call("POST", `/uploads?name=${encodeURIComponent(chosen.name)}&conversation_id=${encodeURIComponent(id)}`, chosen, {
        raw: true,
        headers: { "Content-Type": "application/octet-stream" },
      });
      return { path: saved.path, name: chosen.name }; // as the member knows it
    } catch (error) {
      // The server names its limit (upload_too_large) or the room the member's home has
      // left (home_full), in bytes: say it in the reader's words and number format.
      const bytes = (value) => (typeof value === "number" ? sizeText(value) : null);
      if (error.code === "upload_too_large") toast(t("upload_too_large", { name: chosen.name, size: bytes(error.values?.limit) ?? error.values?.size ?? "" }));
      else if (error.code === "home_full") toast(t("home_full", { name: chosen.name, left: bytes(error.values?.left) ?? "" }));
      else if (error.code === "upload_empty") toast(t("upload_empty", { name: chosen.name }));
      else handle(error);
      return null;
    }
  };
  file.addEventListener("change", async () => {
    for (const chosen of file.files) {
      const saved = id ? await upload(chosen) : { file: chosen, name: chosen.name }; // a draft has no uploads folder yet
      if (saved) attached.push(saved);
      drawAttached();
    }
    file.value = "";
  });
  // The draft's first message: its conversation is made now (the draft's key makes a
  // second ask answer the same one), the screen and its address become that
  // conversation's, and the files chosen meanwhile are uploaded into it. false: nothing
  // was sent (offline, locked, refused, a file refused); what was typed and chosen stays.
  const startDraft = async () => {
    if (!id) {
      try {
        id = (await call("POST", "/conversations", { draft: draftKey })).id;
      } catch (error) {
        const typed = text.value;
        await handle(error);
        const lockedBox = lockedShown && view.querySelector("textarea[name=text]");
        if (lockedBox && !lockedBox.value.includes(typed)) {
          // Locked meanwhile: the words go on to its composer (and its draft), not kept twice.
          lockedBox.value = [lockedBox.value, typed].filter(Boolean).join("\n");
          lockedBox.dispatchEvent(new Event("input"));
          if (lockedBox.dataset.slot !== NEW_CHAT) keepDraft(NEW_CHAT, "", attached);
        }
        return false;
      }
      keepDraft(NEW_CHAT, "", []); // the draft is this conversation's from now
      if (current?.composer === composer) {
        current.id = id;
        history.replaceState(null, "", `#chat/${encodeURIComponent(id)}`);
        keep();
      }
      remember((stored) => (stored.last = id));
    }
    for (const one of attached.filter((a) => a.file)) {
      const saved = await upload(one.file);
      if (!saved) return false;
      attached.splice(attached.indexOf(one), 1, saved);
      drawAttached();
    }
    return true;
  };
  stop.addEventListener("click", async () => {
    try {
      const { stopped } = await call("POST", `/conversations/${encodeURIComponent(id)}/stop`);
      // The stream's "stopped" finishes the answer with what it had said.
      if (stopped) {
        setRunning(false);
        withdrawApprovals();
      }
    } catch (error) {
      handle(error);
    }
  });
  const submit = (typed, files) => {
    const item = {
      key: `m-${crypto.randomUUID()}`,
      conversation_id: id,
      typed,
      // Files alone go with the words the web sends for them (its chat.attached_only).
      text: typed || t("attached_only"),
      attachments: files,
    };
    saveOutbox([...outbox(), item]);
    messagesBox.append(messageNode({ role: "user", content: item.text, files: files.map((a) => a.name), key: item.key }));
    if (!online) markWaiting(pendingBubble(item.key), true);
    flushOutbox();
  };
  current.submit = submit;
  let starting = false; // a draft's conversation is being made: Send waits for it
  composer.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (starting || (!text.value.trim() && !attached.length)) return;
    if (!id || attached.some((one) => one.file)) {
      starting = true;
      send.disabled = true;
      const started = await startDraft();
      starting = false;
      send.disabled = !online;
      if (!started) return;
    }
    const typed = text.value.trim();
    if (!typed && !attached.length) return;
    submit(typed, attached.splice(0));
    text.value = "";
    drawAttached();
  });

  let data = { messages: [], approvals: [], running: false }; // a draft: nothing yet
  if (id) {
    try {
      data = await call("GET", `/conversations/${encodeURIComponent(id)}`);
      remember((stored) => {
        stored.messages = stored.messages || {};
        stored.messages[id] = data.messages;
      });
    } catch (error) {
      if (gone(error)) return conversationGone(id);
      if (!(error instanceof Offline)) return handle(error);
      data = { messages: (cache().messages || {})[id] || [], approvals: [], running: false };
    }
  }
  if (!current || current.id !== id) return;
  showTitle(id, data.conversation?.title);
  draw(data);
  composer.hidden = !online; // opened offline: read-only until the server answers again
  showOnline();
  setRunning(data.running);
  messagesBox.lastElementChild?.scrollIntoView({ block: "end" });
  flushOutbox();
}

// The conversation as the server has it, then what this phone has not handed over yet.
function draw(data) {
  // A model round that only called tools has no words: nothing to show for it.
  const shown = data.messages.filter((m) => String(m.content || "").trim());
  const textNode = (message) => {
    const index = shown.indexOf(message);
    if (message.reason?.code !== "stopped_unanswered" || !online) return messageNode(message);
    // Not answered because of a Stop: the member's messages it was for, sent again as new.
    let first = index;
    while (first > 0 && shown[first - 1].role === "user") first -= 1;
    const again = shown.slice(first, index).map((m) => m.content).join("\n\n");
    return messageNode(again ? { ...message, sendAgain: () => current?.submit?.(again, []) } : message);
  };
  // Its tool calls follow an answer's words (a round of calls alone has only them); one
  // that waits for the member is the approval card below, with its buttons.
  const nodes = data.messages.flatMap((message) => [
    ...(shown.includes(message) ? [textNode(message)] : []),
    ...(message.tool_calls || []).filter((call) => call.status !== "awaiting_approval").map(toolCallNode),
  ]);
  const waiting = outbox()
    .filter((item) => item.conversation_id === current.id)
    .map((item) => messageNode({ role: "user", content: item.text, files: item.attachments.map((a) => a.name), key: item.key }));
  current.messagesBox.replaceChildren(...nodes, ...data.approvals.map(approvalNode), ...waiting);
  waiting.forEach((bubble) => markWaiting(bubble, true));
}

// A Stop withdraws what its turn asked: the cards say so instead of offering buttons
// that would only be told the approval is gone.
function withdrawApprovals() {
  current?.messagesBox.querySelectorAll(".approval:not(.settled)").forEach((card) => settleCard(card, "stopped"));
}

// Offline, Send and attach wait (what is typed stays in the box); back online they work again.
function showOnline() {
  if (!current?.composer) return;
  current.send.disabled = !online;
  current.attach.disabled = !online;
  if (online) current.composer.hidden = false;
}

// Voice replies: the server speaks the answer with the member's voice (a TTS engine must
// be installed); the audio is played through Web Audio from the fetched bytes, so no
// media URL is needed (the CSP allows none but the server's own).
let audio = null;

async function speak(text) {
  try {
    const response = await fetch(`${BASE}/speech`, {
      method: "POST",
      headers: { Authorization: `Bearer ${token()}`, "Content-Type": "application/json" },
      // The whole answer: the host counts only what is read aloud (not code blocks or
      // links) against its own limit and says so when it is too long.
      body: JSON.stringify({ text }),
    });
    if (!response.ok) {
      const data = await response.json().catch(() => ({}));
      throw new Error(data.error || `HTTP ${response.status}`);
    }
    audio = audio || new AudioContext();
    const buffer = await audio.decodeAudioData(await response.arrayBuffer());
    const source = audio.createBufferSource();
    source.buffer = buffer;
    source.connect(audio.destination);
    source.start();
    document.body.dataset.spoke = String(Number(document.body.dataset.spoke || 0) + 1);
    return true;
  } catch (error) {
    toast(t("error", { message: error.message }));
    return false;
  }
}

// The read-only copy the app opens offline: refreshed whenever an answer lands
// (`redraw`: and the open chat drawn from it).
async function keepCopy(id, redraw = false) {
  const asked = Date.now();
  try {
    const data = await call("GET", `/conversations/${encodeURIComponent(id)}`);
    remember((stored) => {
      // A list read since this was asked no longer names it (deleted meanwhile): the
      // answer arriving late must not bring the copy back.
      if ((stored.listedAt || 0) >= asked && !(stored.conversations || []).some((c) => c.id === id)) return;
      stored.messages = stored.messages || {};
      stored.messages[id] = data.messages;
    });
    showTitle(id, data.conversation?.title);
    if (redraw && current && current.id === id && !current.running) draw(data);
  } catch (error) {
    if (gone(error)) conversationGone(id); // else the copy stays as it was
  }
}

// The conversation's title, as the server gave it (its first message names it, the web
// renames it): the open chat's header and the kept list take it. A new chat's header
// said "New chat" until the app was reloaded: only opening a chat read its title.
function showTitle(id, text) {
  if (!id || typeof text !== "string" || !text.trim()) return;
  if (current && current.id === id) title.textContent = text;
  remember((stored) => {
    const kept = (stored.conversations || []).find((c) => c.id === id);
    if (kept) kept.title = text;
  });
}

function setRunning(running) {
  if (!current) return;
  current.running = running;
  current.typing.hidden = !running;
  current.stop.hidden = !running;
}

async function settingsScreen() {
  screen(t("settings"), { backTo: "#list", settings: false });
  // First, the account's language (the default; value ""): choosing it again drops this
  // phone's own choice, so the app follows the account once more.
  const chosen = localStorage.getItem(LOCALE_KEY);
  const account = localStorage.getItem(ACCOUNT_LOCALE_KEY);
  const accountOption = account
    ? [el("option", { value: "", text: t("language_account", { language: languageName(matchLocale([account], locales) || account) }), props: { selected: !chosen } })]
    : [];
  const language = el(
    "select",
    { name: "language" },
    ...accountOption,
    ...locales.map((code) => el("option", { value: code, text: languageName(code), props: { selected: code === locale && !(account && !chosen) } })),
  );
  language.addEventListener("change", async () => {
    if (language.value) {
      localStorage.setItem(LOCALE_KEY, language.value);
      await loadWords(language.value);
    } else {
      localStorage.removeItem(LOCALE_KEY);
      await loadWords(matchLocale([account], locales) || locale);
    }
    settingsScreen();
  });
  const pushLine = el("p", { class: "muted" });
  const pushButton = el("button", { type: "button", class: "btn", text: t("notifications_enable"), on: { click: () => enablePush(pushLine) } });
  if (!("serviceWorker" in navigator) || !("PushManager" in window)) {
    pushButton.hidden = true;
    pushLine.textContent = t("notifications_unavailable");
  } else if (me && me.push) pushLine.textContent = t("notifications_on");
  const voice = el("input", { type: "checkbox", name: "voice", props: { checked: localStorage.getItem(VOICE_KEY) === "on" } });
  voice.addEventListener("change", async () => {
    if (voice.checked && !(await speak(t("voice_sample")))) voice.checked = false;
    localStorage.setItem(VOICE_KEY, voice.checked ? "on" : "off");
  });
  const unlink = el("button", {
    type: "button",
    class: "btn",
    text: t("unlink_self"),
    on: {
      click: async () => {
        try {
          if (me && me.device_id) await call("DELETE", `/devices/${encodeURIComponent(me.device_id)}`);
        } catch {
          /* already unlinked */
        }
        refusedScreen();
      },
    },
  });
  view.replaceChildren(
    el("label", {}, t("language"), language),
    el("label", { class: "row" }, voice, t("voice_replies")),
    el("h2", { text: t("notifications") }),
    pushButton,
    pushLine,
    el("hr"),
    unlink,
  );
}

async function enablePush(line) {
  try {
    const permission = await Notification.requestPermission();
    if (permission !== "granted") throw new Error(t("notifications_unavailable"));
    const registration = await navigator.serviceWorker.ready;
    const key = Uint8Array.from(atob(me.vapid_public_key.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));
    const subscription = await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
    await call("PUT", "/push", subscription.toJSON());
    me.push = true;
    line.textContent = t("notifications_on");
  } catch (error) {
    line.textContent = error.message;
  }
}

// -- the event stream ---------------------------------------------------------------------

function stopStream() {
  if (streamAbort) streamAbort.abort();
  streamAbort = null;
}

async function runStream() {
  stopStream();
  const controller = new AbortController();
  streamAbort = controller;
  while (streamAbort === controller && token()) {
    try {
      const response = await fetch(`${BASE}/stream`, { headers: { Authorization: `Bearer ${token()}`, Accept: "text/event-stream" }, signal: controller.signal });
      if (response.status === 401) return refusedScreen();
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      setOnline(true);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const chunk = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          for (const line of chunk.split("\n")) if (line.startsWith("data: ")) await onEvent(JSON.parse(line.slice(6)));
        }
      }
    } catch (error) {
      if (controller.signal.aborted) return;
      setOnline(false);
    }
    if (streamAbort !== controller) return;
    await new Promise((resolve) => setTimeout(resolve, online ? 500 : 2000));
    // Asking who we are tells a refused device from a server that is away.
    try {
      me = await call("GET", "/me");
    } catch (error) {
      if (error instanceof Refused) return refusedScreen();
    }
  }
}

async function onEvent(event) {
  const here = current && event.conversation_id === current.id;
  switch (event.kind) {
    case "hello":
      // Also sent again when the member's data is unlocked (a login on the web) or locked.
      if (event.locked) {
        if (!lockedShown) lockedScreen(me?.lock_message || t("locked"));
        return;
      }
      if (lockedShown) await leaveLocked();
      // A stream opened again (the phone was offline, or the member's data was locked):
      // what was said meanwhile (a message written on the web, an answer's start) is
      // drawn from the server, so an answer that follows never comes without its question.
      if (streamOpened) await redrawCurrent();
      streamOpened = true;
      return catchUp();
    case "closed":
      return; // the loop re-asks /me: a revoked device lands on the pairing screen
    case "typing":
      if (here) setRunning(true);
      return;
    case "partial": {
      if (!here) return;
      // A new round after tool calls is a new answer: the words said before the tools
      // ran stay in their own bubble, as a reload shows them.
      const round = event.data?.message_id ?? null;
      if (current.streamBody && round !== current.streamRound) endAnswer(current.streamText);
      if (!current.streamBody) {
        current.streamBody = el("div", { class: "message assistant streaming" });
        current.stream = new MarkdownStream(current.streamBody);
        current.streamRound = round;
        placeInTurn(current.streamBody);
      }
      current.stream.update(event.text);
      current.streamText = event.text;
      // Followed to the view's very end (the typing line below it too), and only for a
      // reader who is there: lining up the answer's own bottom left the view short of
      // its end, so it stopped following the rest of the answer.
      if (atEnd) view.scrollTop = view.scrollHeight;
      return;
    }
    case "member_message":
      // The member's message written elsewhere (the web, the API, another phone), in
      // place before the answer it starts; not drawn twice: this phone's own is known by
      // its key, one drawn already (a redraw) by its id.
      if (here) {
        const box = current.messagesBox;
        const key = event.data?.idempotency_key;
        const id = event.data?.message_id;
        if ((key && pendingBubble(key)) || (id != null && box.querySelector(`[data-message-id="${CSS.escape(String(id))}"]`))) return;
        box.append(messageNode({ role: "user", id, content: event.text, attachments: event.data?.attachments || [] }));
        if (atEnd) view.scrollTop = view.scrollHeight;
      }
      return;
    case "answer":
      if (here) {
        endTurn(event.text);
        if (localStorage.getItem(VOICE_KEY) === "on") speak(event.text);
      }
      break;
    case "error":
      // Its text is the host's English; the stored message names its cause (a Stop left
      // queued messages unanswered, ...): the conversation is drawn again from the
      // server, so it reads as after a reload, in the member's language.
      if (here) endTurn(event.text, "complete", { redraw: true });
      break;
    case "stopped":
      if (here) {
        endTurn(event.text, "cancelled"); // what the stopped answer had said
        withdrawApprovals();
      }
      return;
    case "approval":
      if (here && !current.messagesBox.querySelector(`[data-approval="${CSS.escape(event.approval_id)}"]`)) placeInTurn(approvalNode(event));
      else if (!here) toast(t("approval_wants", { tool: event.tool }));
      break;
    case "approval_resolved":
      // Settled elsewhere (the web), or its time ran out: the card stops offering buttons.
      if (here) settleCard(current.messagesBox.querySelector(`[data-approval="${CSS.escape(event.approval_id || "")}"]`), event.data?.status);
      return;
    case "notification":
      toast(event.text);
      break;
    case "conversation_changed":
      // Titled by its first message, or renamed elsewhere (the web): said as it happens.
      // (Today's host may not say it for a first message: the copy read as the turn
      // ends, keepCopy, brings the title then.)
      showTitle(event.conversation_id, event.data?.title);
      return;
    default:
      return;
  }
  if (event.cursor) await acknowledge(event.cursor);
}

// The open conversation drawn again as the server has it (the stream was away).
async function redrawCurrent() {
  if (!current?.id) return;
  const id = current.id;
  try {
    const data = await call("GET", `/conversations/${encodeURIComponent(id)}`);
    if (!current || current.id !== id) return;
    current.streamBody = current.stream = current.streamRound = null;
    current.streamText = "";
    // The answer still streaming is drawn by its next partial (its whole text so far),
    // not twice.
    draw({ ...data, messages: data.messages.filter((m) => m.status !== "streaming") });
    setRunning(data.running);
  } catch (error) {
    if (gone(error)) conversationGone(id); // else what is drawn stays; the next hello tries again
  }
}

// What the running turn shows goes before the messages queued behind it (sent while it
// ran): they start the next turn, so a reload shows them after this turn's answer.
function placeInTurn(node) {
  current.messagesBox.insertBefore(node, current.messagesBox.querySelector(".message.user.queued"));
}

// The streaming answer ends as a reload shows it: `text` rendered, `status` marked (an
// empty answer leaves no bubble: a reload shows none).
function endAnswer(text, status = "complete") {
  let node = current.streamBody;
  current.streamBody = current.stream = current.streamRound = null;
  current.streamText = "";
  if (!String(text || "").trim()) return node?.remove();
  if (!node) placeInTurn((node = el("div", { class: "message assistant" })));
  node.classList.remove("streaming");
  fillMessage(node, { role: "assistant", content: text, status });
}

// The turn is over with its last answer's `text`. A streaming bubble whose words that
// text does not go on from shows an earlier round (the last one ended before it sent a
// partial): it stays as it was, complete, and the text gets its own. The messages
// queued behind the turn are the next turn's (all of them: the server moves every
// queued message into it).
function endTurn(text = "", status = "complete", { redraw = false } = {}) {
  if (!text.trim().startsWith(current.streamText.trim())) endAnswer(current.streamText);
  endAnswer(text, status);
  current.messagesBox.querySelectorAll(".message.user.queued").forEach((node) => node.classList.remove("queued"));
  setRunning(false);
  keepCopy(current.id, redraw);
}

// The member logged in on the web while the locked screen was up: go on where the app was.
async function leaveLocked() {
  try {
    me = await call("GET", "/me");
  } catch (error) {
    return handle(error);
  }
  await route();
}

// What waited while the phone was away: shown once, then acknowledged by cursor.
async function catchUp() {
  try {
    const { notifications } = await call("GET", "/notifications");
    if (!notifications.length) return;
    const notes = notifications.filter((n) => n.kind === "notification" || n.kind === "approval");
    const box = el(
      "div",
      { class: "notice", id: "waiting" },
      el("p", { text: t("new_items", { count: notes.length }) }),
      ...notes.map((n) => el("p", { class: "waited", text: n.kind === "approval" ? t("approval_wants", { tool: n.tool }) : n.text })),
    );
    if (notes.length) view.prepend(box);
    await acknowledge(notifications[notifications.length - 1].cursor);
  } catch (error) {
    handle(error);
  }
}

async function acknowledge(cursor) {
  try {
    await call("POST", "/notifications/ack", { cursor });
  } catch {
    /* the next catch-up offers it again */
  }
}

// -- routing ------------------------------------------------------------------------------

async function route() {
  const hash = location.hash;
  if (hash.startsWith("#pair=")) return pairScreen(decodeURIComponent(hash.slice(6)));
  if (!token()) return pairScreen();
  if (hash.startsWith("#chat/")) return chatScreen(decodeURIComponent(hash.slice(6)));
  if (hash === "#new") return chatScreen(null);
  if (hash === "#settings") return settingsScreen();
  if (hash === "#projects") return projectsScreen();
  let match = hash.match(/^#project\/([^/]+)\/(.*)$/);
  if (match) return folderScreen(decodeURIComponent(match[1]), match[2].split("/").map(decodeURIComponent).join("/"));
  match = hash.match(/^#file\/([^/]+)\/(.+)$/);
  if (match) return fileScreen(decodeURIComponent(match[1]), match[2].split("/").map(decodeURIComponent).join("/"));
  return listScreen();
}

async function start() {
  if (!token()) return route();
  try {
    me = await call("GET", "/me");
  } catch (error) {
    if (error instanceof Refused) return refusedScreen();
    if (!(error instanceof Offline)) return handle(error);
  }
  await followAccount();
  if (me && me.locked) {
    lockedScreen(me.lock_message);
    runStream();
    return;
  }
  await route();
  runStream();
}

window.addEventListener("hashchange", route);
window.addEventListener("online", () => start());
// The phone lost its network: an open stream may not notice for a while, the page does.
window.addEventListener("offline", () => setOnline(false));
if ("serviceWorker" in navigator) {
  navigator.serviceWorker.register("sw.js", { scope: "./" }).catch(() => {});
  navigator.serviceWorker.addEventListener("message", (event) => {
    if (event.data && event.data.type === "push") catchUp();
  });
}

await loadFirstWords();
await start();
