// The Skald phone app: pair by code, conversations, chat with a streamed answer, stop,
// approve or deny, attach a photo or file, notifications that waited, settings.
//
// - The device token lives in this phone's localStorage and goes in the Authorization
//   header of every call (never a cookie: the app carries no ambient credential).
// - The last conversations are kept here too, so the app opens read-only without the
//   server (the service worker caches the shell).
// - The host's web libraries are imported, not copied: /ui/lib/dom.js builds every node
//   (no innerHTML: data stays text) and /ui/lib/markdown.js renders answers (marked +
//   DOMPurify, images never loaded).
import { el, MarkdownStream, renderMarkdown } from "/ui/lib/plugin-kit.js";

const BASE = new URL("..", location.href).pathname.replace(/\/$/, ""); // /api/plugin/mobile-connector
const TOKEN_KEY = "skald.mobile.token";
const CACHE_KEY = "skald.mobile.cache";
const LOCALE_KEY = "skald.mobile.locale";
const VOICE_KEY = "skald.mobile.voice";
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
let locales = ["en", "de"];
let me = null;
let online = true;
let current = null; // the open conversation: {id, messagesBox, typing, stop, running, streamBody, stream, streamRound, streamText}
let streamAbort = null;
let lockedShown = false; // the locked screen is up: the stream's hello says when to leave it

const t = (key, values = {}) => String(words[key] ?? key).replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
const token = () => localStorage.getItem(TOKEN_KEY);

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
  online = value;
  document.body.classList.toggle("offline", !value);
  showBanner();
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
  } catch {
    words = words || {};
  }
  document.documentElement.lang = locale;
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
        body: JSON.stringify({ code: codeInput.value, name: nameInput.value || "Phone", platform: platform() }),
      });
      const data = await response.json().catch(() => ({}));
      if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
      localStorage.setItem(TOKEN_KEY, data.token);
      localStorage.removeItem(CACHE_KEY);
      history.replaceState(null, "", location.pathname);
      await start();
    } catch (error) {
      message.textContent = error.message;
    }
  });
  view.replaceChildren(form);
}

function guessName() {
  const ua = navigator.userAgent;
  if (/iPhone/.test(ua)) return "iPhone";
  if (/Android/.test(ua)) return "Android phone";
  return "Phone";
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
      sent.append(messageNode({ role: "user", content }));
      if (answer.status === "sealed") sent.append(el("p", { class: "muted sealed", role: "status", text: answer.notice || t("sealed_notice") }));
      else route(); // unlocked meanwhile: it went straight in
    } catch (error) {
      handle(error);
    }
  });
  view.replaceChildren(el("div", { class: "locked", role: "alert" }, el("p", { text: message }), el("p", { class: "muted", text: t("locked_write") })), sent, composer);
}

function refusedScreen() {
  localStorage.removeItem(TOKEN_KEY);
  stopStream();
  pairScreen("", t("refused"));
}

async function handle(error) {
  if (error instanceof Refused) refusedScreen();
  else if (error instanceof Locked) lockedScreen(error.message);
  else if (!(error instanceof Offline)) toast(t("error", { message: error.message }));
}

function toast(text) {
  const node = el("div", { class: "toast", role: "status", text });
  document.body.append(node);
  setTimeout(() => node.remove(), 4000);
}

async function listScreen() {
  screen(t("conversations"));
  const list = el("ul", { class: "list", id: "conversations" });
  const newButton = el("button", { type: "button", class: "btn primary", text: t("new_chat"), disabled: !online });
  newButton.addEventListener("click", async () => {
    try {
      const { id } = await call("POST", "/conversations");
      location.hash = `#chat/${encodeURIComponent(id)}`;
    } catch (error) {
      handle(error);
    }
  });
  const projectsButton = el("button", { type: "button", class: "btn", text: t("projects"), on: { click: () => (location.hash = "#projects") } });
  view.replaceChildren(el("div", { class: "row" }, newButton, projectsButton), list);
  let conversations;
  try {
    conversations = (await call("GET", "/conversations")).conversations;
    remember((stored) => (stored.conversations = conversations));
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
  return fillMessage(el("div", { class: `message ${message.role}` }), message);
}

// One rendering of a message for a reload and for an answer that ends live, so both
// read the same: a stopped answer says so under its words, as the web's chat does.
function fillMessage(node, message) {
  if (message.role === "assistant") node.replaceChildren(...renderMarkdown(message.content));
  else node.textContent = message.content;
  const stopped = message.status === "cancelled";
  node.classList.toggle("stopped", stopped);
  if (stopped) node.append(el("p", { class: "message-status", text: t("stopped") }));
  return node;
}

function approvalNode(approval) {
  const card = el("div", { class: "approval", "data-approval": approval.approval_id });
  const buttons = el("div", { class: "row" });
  const decide = async (approve) => {
    buttons.querySelectorAll("button").forEach((b) => (b.disabled = true));
    try {
      await call("POST", `/approvals/${encodeURIComponent(approval.approval_id)}`, { approve });
      card.replaceChildren(el("p", { class: "muted", text: approve ? t("approved") : t("denied") }));
    } catch (error) {
      buttons.querySelectorAll("button").forEach((b) => (b.disabled = false));
      handle(error);
    }
  };
  buttons.append(
    el("button", { type: "button", class: "btn primary", text: t("approve"), on: { click: () => decide(true) } }),
    el("button", { type: "button", class: "btn", text: t("deny"), on: { click: () => decide(false) } }),
  );
  let args = approval.arguments;
  if (typeof args === "string") {
    try {
      args = JSON.parse(args);
    } catch {
      /* shown as written */
    }
  }
  card.append(el("p", { text: t("approval_wants", { tool: approval.tool }) }), el("pre", { text: JSON.stringify(args, null, 2) }), buttons);
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

async function chatScreen(id) {
  screen(t("app_title"), { backTo: "#list", chat: true });
  remember((stored) => (stored.last = id));
  const messagesBox = el("div", { class: "messages", id: "messages" });
  keepAtEnd.disconnect();
  keepAtEnd.observe(messagesBox);
  atEnd = true;
  const typing = el("p", { class: "typing", text: t("typing"), hidden: true });
  const text = el("textarea", { name: "text", rows: 1, placeholder: t("placeholder"), "aria-label": t("placeholder") });
  const file = el("input", { type: "file", name: "file", accept: "image/*,*/*", hidden: true });
  const attached = [];
  const attachedLine = el("p", { class: "muted" });
  const attach = el("button", { type: "button", class: "btn icon-only", "aria-label": t("attach"), on: { click: () => file.click() } }, paperclip());
  const send = el("button", { type: "submit", class: "btn primary", text: t("send") });
  const stop = el("button", { type: "button", class: "btn", text: t("stop"), hidden: true });
  const composer = el("form", { class: "composer" }, attach, file, text, stop, send);
  view.replaceChildren(messagesBox, typing, attachedLine, composer);
  current = { id, messagesBox, typing, stop, running: false, streamBody: null, stream: null, streamRound: null, streamText: "" };

  file.addEventListener("change", async () => {
    for (const chosen of file.files) {
      try {
        const saved = await call("POST", `/uploads?name=${encodeURIComponent(chosen.name)}&conversation_id=${encodeURIComponent(id)}`, chosen, {
          raw: true,
          headers: { "Content-Type": "application/octet-stream" },
        });
        attached.push(saved.path);
        attachedLine.textContent = attached.map((p) => p.split("/").pop()).join(", ");
      } catch (error) {
        // The server names its limit (upload_too_large): say it in the reader's words.
        if (error.code === "upload_too_large") toast(t("upload_too_large", { name: chosen.name, size: error.values?.size ?? "" }));
        else handle(error);
      }
    }
    file.value = "";
  });
  stop.addEventListener("click", async () => {
    try {
      const { stopped } = await call("POST", `/conversations/${encodeURIComponent(id)}/stop`);
      // The stream's "stopped" finishes the answer with what it had said.
      if (stopped) setRunning(false);
    } catch (error) {
      handle(error);
    }
  });
  composer.addEventListener("submit", async (event) => {
    event.preventDefault();
    const content = text.value.trim();
    if (!content) return;
    const key = `m-${crypto.randomUUID()}`;
    const sent = messageNode({ role: "user", content });
    // Sent while a turn runs, it waits for the next turn: what this turn still says
    // goes above it (placeInTurn), as the server stores it and a reload shows it.
    const queued = current.running;
    sent.classList.toggle("queued", queued);
    messagesBox.append(sent);
    text.value = "";
    // Running from now, not from the server's reply: a quick answer can come before
    // it, and must not be followed by a running state that nothing ends.
    setRunning(true);
    try {
      await call("POST", `/conversations/${encodeURIComponent(id)}/messages`, { text: content, attachments: attached.splice(0), idempotency_key: key });
      attachedLine.textContent = "";
    } catch (error) {
      setRunning(queued);
      handle(error);
    }
  });

  let data;
  try {
    data = await call("GET", `/conversations/${encodeURIComponent(id)}`);
    remember((stored) => {
      stored.messages = stored.messages || {};
      stored.messages[id] = data.messages;
    });
  } catch (error) {
    if (!(error instanceof Offline)) return handle(error);
    data = { messages: (cache().messages || {})[id] || [], approvals: [], running: false };
  }
  if (!current || current.id !== id) return;
  // A model round that only called tools has no words: nothing to show for it.
  const shown = data.messages.filter((m) => String(m.content || "").trim());
  messagesBox.replaceChildren(...shown.map(messageNode), ...data.approvals.map(approvalNode));
  composer.hidden = !online; // offline: read-only
  setRunning(data.running);
  messagesBox.lastElementChild?.scrollIntoView({ block: "end" });
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
      body: JSON.stringify({ text: text.slice(0, 5000) }),
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

// The read-only copy the app opens offline: refreshed whenever an answer lands.
async function keepCopy(id) {
  try {
    const data = await call("GET", `/conversations/${encodeURIComponent(id)}`);
    remember((stored) => {
      stored.messages = stored.messages || {};
      stored.messages[id] = data.messages;
    });
  } catch {
    /* the copy stays as it was */
  }
}

function setRunning(running) {
  if (!current) return;
  current.running = running;
  current.typing.hidden = !running;
  current.stop.hidden = !running;
}

async function settingsScreen() {
  screen(t("settings"), { backTo: "#list", settings: false });
  const language = el("select", { name: "language" }, ...locales.map((code) => el("option", { value: code, text: code === "de" ? "Deutsch" : code === "en" ? "English" : code, props: { selected: code === locale } })));
  language.addEventListener("change", async () => {
    localStorage.setItem(LOCALE_KEY, language.value);
    await loadWords(language.value);
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
        localStorage.removeItem(CACHE_KEY);
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
      current.streamBody.scrollIntoView({ block: "end" });
      return;
    }
    case "answer":
    case "error":
      if (here) {
        endTurn(event.text);
        if (event.kind === "answer" && localStorage.getItem(VOICE_KEY) === "on") speak(event.text);
      }
      break;
    case "stopped":
      if (here) endTurn(event.text, "cancelled"); // what the stopped answer had said
      return;
    case "approval":
      if (here && !current.messagesBox.querySelector(`[data-approval="${CSS.escape(event.approval_id)}"]`)) placeInTurn(approvalNode(event));
      else if (!here) toast(t("approval_wants", { tool: event.tool }));
      break;
    case "approval_resolved":
      return;
    case "notification":
      toast(event.text);
      break;
    default:
      return;
  }
  if (event.cursor) await acknowledge(event.cursor);
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
function endTurn(text = "", status = "complete") {
  if (!text.trim().startsWith(current.streamText.trim())) endAnswer(current.streamText);
  endAnswer(text, status);
  current.messagesBox.querySelectorAll(".message.user.queued").forEach((node) => node.classList.remove("queued"));
  setRunning(false);
  keepCopy(current.id);
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
if ("serviceWorker" in navigator) {
  navigator.serviceWorker.register("sw.js", { scope: "./" }).catch(() => {});
  navigator.serviceWorker.addEventListener("message", (event) => {
    if (event.data && event.data.type === "push") catchUp();
  });
}

await loadWords(localStorage.getItem(LOCALE_KEY) || (navigator.language || "en").slice(0, 2));
await start();
