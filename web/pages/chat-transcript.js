// The transcript of one conversation: messages, the streaming bubble, reasoning
// blocks, tool cards and approval cards. It renders identically from history (a
// reload, a reconnect) and from live events (seed 001 "Token streaming & reasoning
// display"): tokens grow a pending bubble in place, flushed at ~15 Hz; `done` and
// `assistant` carry the complete text and are treated as the truth; a model fallback
// or an error drops the bubble. Every piece of data reaches the page as text or
// through lib/markdown.js (marked, sanitised by DOMPurify). A streaming answer is
// rendered at most once per animation frame, and then only its last block
// (MarkdownStream): the finished blocks are rendered once.
import { el, followTypedDirection, scrollableRegion, uid } from "../lib/dom.js";
import { errorString, t } from "../lib/i18n.js";
import { copyButton, MarkdownStream, renderMarkdown } from "../lib/markdown.js";
import { hush, hushed } from "../lib/live.js";
import { button } from "../lib/ui.js";
import { addReadAloud } from "../lib/speech.js";
import { isLive, showAgentTitle } from "./chat-tasks.js";

function messageStatusLabel(status) {
  if (status === "interrupted") return t("chat.status_interrupted");
  if (status === "cancelled") return t("chat.status_cancelled");
  if (status === "error") return t("chat.status_error");
  if (status === "unanswered") return t("chat.status_unanswered");
  return "";
}

/** The answer a Stop wrote under the member's messages that waited for the next turn:
 * stored as a failed answer (what Retry takes back to answer them), yet nothing failed,
 * the member stopped it. Shown as "unanswered", not as "error", live (its event's code)
 * and from history (its reason's) alike. */
const STOPPED_UNANSWERED = "stopped_unanswered";
/** The answer recovery wrote under a turn an admin's deactivation cut: stopped, not failed. */
const STOPPED_DEACTIVATED = "stopped_deactivated";
const shownStatus = (status, code) => (status === "error" && (code === STOPPED_UNANSWERED || code === STOPPED_DEACTIVATED) ? "unanswered" : status);

/** Failures Retry cannot mend: the conversation's project was deleted, or the member
 * is no longer in it. The host refuses their Retry (409, the same code), so none is offered. */
const LASTING_FAILURES = new Set(["project_deleted", "project_left"]);
/** An answer Retry may ask for again: one that failed, or one a Stop left unanswered;
 * with its failure's `code`, not one that would only fail again (`LASTING_FAILURES`). */
const retryable = (status, code = null) => (status === "error" || status === "unanswered") && !LASTING_FAILURES.has(code);

/** Code points in `text`: the host counts a channel's characters so (a token's `at`). */
const codePoints = (text) => {
  let n = 0;
  for (let i = 0; i < text.length; i++) { const c = text.charCodeAt(i); if (c < 0xdc00 || c > 0xdfff) n++; }
  return n;
};

/**
 * Add a token event's delta to `entry` ({content, reasoning}, and `ends`: how many code
 * points of each channel it holds, counted on first use) where the host says it goes:
 * its `at` is the characters of its channel before it. What the entry holds already (a
 * read of the conversation mid-answer gave the text so far) is dropped, the rest
 * appended. False when the delta starts past the entry's end: words were missed (a read
 * from before them), and only a read of the conversation has them.
 */
export function appendDelta(entry, data) {
  const key = data.channel === "reasoning" ? "reasoning" : "content";
  let delta = data.delta || "";
  const ends = entry.ends || (entry.ends = { content: codePoints(entry.content), reasoning: codePoints(entry.reasoning) });
  if (typeof data.at === "number") {
    if (data.at > ends[key]) return false;
    let skip = ends[key] - data.at;
    if (skip > 0) {
      let i = 0;
      while (skip > 0 && i < delta.length) {
        const c = delta.charCodeAt(i++);
        if (c >= 0xd800 && c <= 0xdbff && i < delta.length) i++;
        skip--;
      }
      delta = delta.slice(i);
    }
  }
  entry[key] += delta;
  ends[key] += codePoints(delta);
  return true;
}

/** A call's result as the member reads it: one the host wrote (a rule refused it, the
 * approval expired, ...) in the reader's language by its `result_code`; a host-made
 * error with a code (a file that does not exist) by its `reason`, as a message's
 * failure is worded; a command's exit code as a label in the reader's language, its
 * output as it is; a tool's own result as it is. The export words them alike
 * (routes/chat.py `call_result`). */
function resultText(call, { admin = true } = {}) {
  if (call.result_code) return t(`chat.call_result.${call.result_code}`);
  const said = call.reason?.code ? errorString(call.reason.code, call.reason.values || {}, { admin }) : null;
  if (said) return said;
  const exit = call.name === "execute_cmd" && typeof call.result === "string" ? /^Exit code: (-?\d+)(\n|$)/.exec(call.result) : null;
  if (exit) return t("chat.exit_code", { code: exit[1] }) + call.result.slice(exit[0].length - exit[2].length);
  return call.result;
}

/** A failed call whose result is the tool's own text: words for the model (skald_host's
 * tools write "Error: 'at' must be non-empty text"), in no reader's language. The card
 * says that it failed in the reader's words and keeps the text under "Message to the
 * assistant"; it is not translated, since it is what the model was told. */
function toldTheModel(call, status) {
  return status === "error" && !call.result_code && !call.reason?.code && typeof call.result === "string" && call.result !== "";
}

function toolStatusLabel(status) {
  switch (status) {
    case "requested": return t("chat.tool_requested");
    case "awaiting_approval": return t("chat.tool_awaiting_approval");
    case "running": return t("chat.tool_running");
    case "done": return t("chat.tool_done");
    case "error": return t("chat.tool_error");
    case "denied": return t("chat.tool_denied");
    case "cancelled": return t("chat.tool_cancelled");
    case "interrupted": return t("chat.tool_interrupted");
    case "timed_out": return t("chat.tool_timed_out");  // a helper's step its run's timeout ended (subagentDone)
    default: return status || "";
  }
}

/** An execute_task call that starts background runs: it is done once they started,
 * and its badge says so — a "Done" sat above "Sub-agent … is working…". */
function startsInBackground(call) {
  if (call.name !== "execute_task") return false;
  try {
    const args = typeof call.arguments === "string" ? JSON.parse(call.arguments || "{}") : call.arguments;
    return args?.mode === "background";
  } catch {
    return false;
  }
}

const approvedDecision = (decision) => decision === "approved" || decision === "approve" || decision === "used";

function decisionLabel(decision) {
  if (decision === "withdrawn") return t("chat.approval_withdrawn");
  if (decision === "refused_by_rule") return t("chat.approval_refused_by_rule");
  if (approvedDecision(decision)) return t("chat.approval_approved");
  if (decision === "denied" || decision === "deny") return t("chat.approval_denied");
  return t("chat.approval_expired");
}

/** JSON arguments as indented text; anything else as it came. */
function prettyArguments(raw) {
  if (raw == null || raw === "") return "{}";
  try { return JSON.stringify(typeof raw === "string" ? JSON.parse(raw) : raw, null, 2); } catch { return String(raw); }
}

const FOCUSABLE = "a[href], button, input, select, textarea, [tabindex]";

/**
 * `node` made to hold what a fresh render of `text` gives, keeping every top-level node
 * that render would make alike (isEqualNode): a streamed answer's finished blocks stay
 * the nodes they were, and the focus in them (a keyboard on a code block's "Copy code"
 * as the answer ends) stays too. Replaced: what differs, e.g. the last block, streamed
 * without highlighting and with the caret. Focus inside a replaced node goes to its
 * counterpart in the new one (the same place among its focusable elements), else to
 * the message, never to <body>. Returns the nodes it added (what is new to a reader).
 */
function settleInto(node, text) {
  const fresh = renderMarkdown(text);
  const old = [...node.childNodes];
  const focused = node.contains(document.activeElement) ? document.activeElement : null;
  let moved = null; // { index, place }: the focus's top-level node was replaced
  const added = [];
  const noteFocus = (had, index) => {
    if (!focused || !had.contains(focused)) return;
    const stops = had.nodeType === Node.ELEMENT_NODE ? [had, ...had.querySelectorAll(FOCUSABLE)] : [];
    moved = { index, place: stops.indexOf(focused) };
  };
  fresh.forEach((next, index) => {
    const had = old[index];
    if (!had) { node.append(next); added.push(next); }
    else if (!had.isEqualNode(next)) { noteFocus(had, index); had.replaceWith(next); added.push(next); }
  });
  for (const [offset, extra] of old.slice(fresh.length).entries()) { noteFocus(extra, fresh.length + offset); extra.remove(); }
  if (!moved) return added;
  const counterpart = fresh[moved.index];
  const stops = counterpart?.nodeType === Node.ELEMENT_NODE ? [counterpart, ...counterpart.querySelectorAll(FOCUSABLE)] : [];
  const target = stops[moved.place];
  if (target && target.matches(FOCUSABLE)) { target.focus({ preventScroll: true }); return added; }
  const message = node.closest(".msg") || node;
  message.tabIndex = -1;
  message.focus({ preventScroll: true });
  message.addEventListener("blur", () => message.removeAttribute("tabindex"), { once: true });
  return added;
}
const nextFrame = (fn) => (document.hidden ? setTimeout(fn, 100) : requestAnimationFrame(fn));

/** How many rows a conversation opens with, and how many more "Earlier messages" draws:
 * a long conversation drawn whole (thousands of answers with code, tables and math) held
 * the page for seconds on every open, Regenerate and reconnect. The rows before it are
 * drawn when asked for, or when a search result lies among them (reveal). */
export const ROWS_AT_ONCE = 100;

// Files: a member's attachments and what the agent showed them (show_file_to_user),
// opened through the file viewer. The path only ever travels as an encoded query value
// of that one same-origin endpoint.
const SHOWN_FILE = "\u{1f4ce} ";
const fileUrl = (path) => `/api/file?path=${encodeURIComponent(path)}`;
const fileLink = (path) => el("a", { class: "file-link", href: fileUrl(path), target: "_blank", rel: "noopener", text: path.split("/").pop() || path, title: path });
const looksLikeImage = (path) => /\.(png|jpe?g|gif|webp)$/i.test(path);
const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
/** A message's attachments as { path, mime }: a stored one says the type the server sniffed
 * from its bytes; one just sent is a bare path, its type guessed from the name. */
function attachmentsOf(raw) {
  let list = raw;
  if (typeof raw === "string") { try { list = JSON.parse(raw); } catch { list = []; } }
  if (!Array.isArray(list)) return [];
  return list.map((a) => (typeof a === "string" ? { path: a } : { path: a?.path, mime: a?.mime })).filter((a) => typeof a.path === "string");
}
const isImage = (file) => (typeof file.mime === "string" ? IMAGE_TYPES.has(file.mime) : looksLikeImage(file.path));
/** An image as a thumbnail that opens it, named by its file name; any other file as a link. */
function attachmentLink(file) {
  if (!isImage(file)) return fileLink(file.path);
  const name = file.path.split("/").pop() || file.path;
  return el("a", { class: "file-link file-thumb", href: fileUrl(file.path), target: "_blank", rel: "noopener", title: file.path },
    el("img", { class: "attachment-thumb", src: fileUrl(file.path), alt: name, loading: "lazy", decoding: "async" }));
}
const filesList = (files) => (files.length ? el("ul", { class: "msg-files" }, ...files.map((f) => el("li", {}, attachmentLink(f)))) : null);

/** How a sub-agent run can end (its run's terminal states), each said in its box. */
const ENDINGS = ["completed", "cancelled", "failed", "timed_out", "interrupted"];

/** A helper's step (a call in its box) says its status. */
function setStep(step, status) {
  const badge = step.querySelector(".badge");
  badge.className = `badge tool-${status}`;
  badge.textContent = toolStatusLabel(status);
  step.dataset.status = status;
}

/** The sentence a box says for a run's ending (its {name} filled in by the box). */
function endingKey(status) {
  if (status === "cancelled") return "chat.subagent_cancelled";
  if (status === "failed") return "chat.subagent_failed";
  if (status === "timed_out") return "chat.subagent_timed_out";
  if (status === "interrupted") return "chat.subagent_interrupted";
  return "chat.subagent_done";
}

/** A helper's steps still open when its run ends, and what each then says: the run's
 * ending (no tool_done comes for them), live as after a reload. */
const OPEN_STEPS = new Set(["requested", "awaiting_approval", "running"]);
const STEP_ENDING = { cancelled: "cancelled", failed: "error", timed_out: "timed_out", interrupted: "interrupted" };

/** The server's copy of a text (`known`, checkpointed every half second) and the
 * deltas heard since the page listened (`heard`), which may repeat its end: joined
 * with that overlap once. */
function joinOverlap(known, heard) {
  for (let k = Math.min(known.length, heard.length); k > 0; k--) {
    if (known.endsWith(heard.slice(0, k))) return known + heard.slice(k);
  }
  return known + heard;
}

/**
 * The versions to flip between, by the message each starts at: an earlier version
 * (a regenerated answer, the rest of a conversation from an edited message on) is
 * kept at its branch point, and the version shown there starts at the first row shown
 * after that point. Map: first row id → { list: variants oldest first (0 is the one
 * shown), current: its index }.
 */
/** An answer that ended interrupted with nothing in it: no text, reasoning or call. */
function cutBeforeAWord(message) {
  return message.role === "assistant" && message.status === "interrupted" && !message.content
    && !message.reasoning && !(message.tool_calls || []).length;
}

function branchesOf(messages, base = 0) {
  const shown = messages.filter((m) => !m.variant);
  const starts = new Map(); // branch point → variant → its first row id
  for (const m of messages) {
    if (!m.variant) continue;
    const point = m.branch_point || 0;
    if (!starts.has(point)) starts.set(point, new Map());
    const variants = starts.get(point);
    if (!variants.has(m.variant)) variants.set(m.variant, m.id);
  }
  const branches = new Map();
  for (const [point, variants] of starts) {
    // It branches off a version not shown (`base`: the row before the part read, shown).
    if (point && point !== base && !shown.some((m) => m.id === point)) continue;
    // Not an answer a crash cut before its first word, nor a note: neither is drawn,
    // and the switcher went with it (a regenerate killed at once lost its versions).
    const first = shown.find((m) => m.id > point && !cutBeforeAWord(m) && m.role !== "note");
    if (first) variants.set(0, first.id);
    const list = [...variants.keys()].sort((a, b) => variants.get(a) - variants.get(b));
    const at = first ? first.id : null;
    if (at != null) branches.set(at, { list, current: list.indexOf(0) });
  }
  return branches;
}

/** A text as the server's search compares it (skald_host/core/text.py search_form):
 * accents dropped, case folded, "ß" as "ss" — so "Strassenbahn" finds the message with
 * "Straßenbahnhaltestelle" the server found, "creme" "Café crème", "apfel" "Äpfel". */
function searchForm(text) {
  return String(text || "").normalize("NFKD").replace(/\p{M}/gu, "").toLowerCase().replace(/ß/g, "ss").replace(/ς/g, "σ");
}

/** Whether `text` holds every word of `wanted` (searchForm'd) as a word's start, as the
 * server's search matched them. */
function holdsWords(text, wanted) {
  const form = searchForm(text);
  const starts = (word) => form.includes(word) && new RegExp(`(^|[^\\p{L}\\p{N}])${word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`, "u").test(form);
  return wanted.every(starts);
}

/** The words a search matched marked in an opened result's message, as the host matched
 * them (folded, each as a word's start) and as its snippet marks them: the whole word.
 * Done on text nodes with the DOM's own splitText, never by writing markup (the text is
 * the member's or the model's); math (KaTeX's own markup) and controls are left alone. */
function markWords(root, wanted) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
    acceptNode: (text) => (text.parentElement?.closest(".katex, mark, button, svg, .visually-hidden") ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
  });
  const texts = [];
  for (let text = walker.nextNode(); text; text = walker.nextNode()) texts.push(text);
  const pattern = new RegExp(`(^|[^\\p{L}\\p{N}])(?:${wanted.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|")})[\\p{L}\\p{N}]*`, "gu");
  for (const text of texts) {
    // The folded text, and where each of its characters came from in the text as written.
    const data = text.data;
    let form = "";
    const from = [];
    for (let at = 0; at < data.length;) {
      const character = String.fromCodePoint(data.codePointAt(at));
      const folded = searchForm(character);
      for (let i = 0; i < folded.length; i += 1) from.push(at);
      form += folded;
      at += character.length;
    }
    from.push(data.length);
    const found = [];
    for (const match of form.matchAll(pattern)) {
      const start = from[match.index + match[1].length];
      const end = from[match.index + match[0].length];
      if (end > start) found.push([start, end]);
    }
    // From the last: splitting there leaves the earlier offsets as they were.
    for (const [start, end] of found.reverse()) {
      const word = text.splitText(start);
      word.splitText(end - start);
      const mark = document.createElement("mark");
      mark.className = "search-word";
      word.replaceWith(mark);
      mark.append(word);
    }
  }
}

/** The blinking caret at the end of the text so far: inside the last paragraph,
 * list item or code block rather than on a line of its own. */
function placeCaret(body, caret) {
  let target = body.lastElementChild;
  while (target) {
    const last = target.lastElementChild;
    if (last && (/^(UL|OL|BLOCKQUOTE|PRE)$/.test(target.tagName) || (target.tagName === "LI" && /^(UL|OL)$/.test(last.tagName)))) target = last;
    else break;
  }
  (target && /^(P|LI|H[3-6]|CODE)$/.test(target.tagName) ? target : body).append(caret);
}

/** What a row of the log says, for telling a row drawn again from a new one. */
const spoken = (node) => (node.querySelector(".msg-body, .bubble") || node).textContent.trim();

/** The rows of the log a screen reader has heard: their message ids, and their words. */
function heardIn(list) {
  const ids = new Set();
  const texts = new Set();
  for (const node of list.children) {
    if (node.dataset.messageId) ids.add(node.dataset.messageId);
    const text = spoken(node);
    if (text) texts.add(text);
  }
  return { ids, texts };
}

/** The same message, or the same words (the member's message, stored since it was sent). */
const wasHeard = (node, { ids, texts }) => (node.dataset.messageId ? ids.has(node.dataset.messageId) : false) || texts.has(spoken(node));

export class Transcript {
  /**
   * @param {object} handlers decide(approvalId, decision) → Promise<{ok, error?}>
   * @param {Map} streamed the text streamed so far per message id, where the whole
   *   stream was seen (kept outside the view, so a view made mid-answer has it all)
   */
  constructor(handlers, streamed = new Map()) {
    this.handlers = handlers;
    this.streamed = streamed;
    this.author = null; // the agent's name where the page shows it (setAuthor)
    this.node = el("div", { class: "transcript", role: "log", "aria-live": "polite", "aria-relevant": "additions", tabindex: "0", "aria-label": t("chat.transcript") });
    this.list = el("div", { class: "transcript-inner" });
    // The dots are for the eye: moved about inside the live log they were read out as
    // "working" after every answer. A turn's start and end are said once, by `announcer`
    // (outside the log: the page places it after `node`).
    this.activity = el("div", { class: "activity", "aria-hidden": "true" },
      el("span", { class: "dots" }, el("span"), el("span"), el("span")));
    this.announcer = el("p", { class: "visually-hidden turn-status", role: "status" });
    // Which version shows after ‹ or › (sayVersion): apart from `announcer`, whose line
    // says the turn's state and is said again only when that changes.
    this.versionStatus = el("p", { class: "visually-hidden version-status", role: "status" });
    this.holding = false; // sayOnceAttached: the status line waits until the page is attached
    // Above the rows drawn, while older ones are not: draws the next ones above, where the
    // reader is (the view does not move), and says nothing (they are not news).
    this.earlier = el("div", { class: "earlier-messages", hidden: true },
      button(t("chat.earlier_messages"), { kind: "small", onClick: () => this.showEarlier() }));
    // Below the rows drawn while the newer ones are not (a search result's part of the
    // conversation, or a reload of the part the reader was in): reads the part after them.
    this.later = el("div", { class: "later-messages", hidden: true },
      button(t("chat.later_messages"), { kind: "small", onClick: () => this.showLater() }));
    this.node.append(this.earlier, this.list, this.later);
    this.drawn = null; // what the last load drew from: {messages, branches, rootCalls, approvals, turnStart}
    // Which part of the conversation the host gave (GET /api/conversations/<id> `part`):
    // its rows are `all`; `earlier`/`later` read the parts next to it.
    this.part = { complete: true, base: 0, earlier: null, later: null, found: null };
    this.all = [];
    this.from = 0; // the index (in drawn.messages) of the oldest row on screen
    this.followPending = false;
    this.openDetails = new Set(); // reasoning blocks and tool cards the member opened
    this.loads = 0; // renders of a whole conversation: a restore answers the one it was read for
    this.redrawing = false; // a redraw's hush holds the log (redrawQuietly)
    this.reset();
    // At the end still when the scroll is follow()'s own: the answer may have grown by more
    // than nearBottom's margin between that frame and this event, which is not the
    // reader leaving the end.
    this.followedTo = null;
    this.node.addEventListener("scroll", () => {
      this.stick = (this.stick && this.node.scrollTop === this.followedTo) || this.nearBottom();
    }, { passive: true });
    // What grows after it was drawn and followed — math once KaTeX and then its fonts
    // arrive, a thumbnail once loaded — or a transcript that gets shorter (a taller
    // composer) left a reader at the end short of it (the answer's Regenerate hidden):
    // while they are at the end, they stay there; growth does not scroll, so `stick`
    // still says where they were.
    const keepAtEnd = new ResizeObserver(() => this.follow());
    keepAtEnd.observe(this.list);
    keepAtEnd.observe(this.node);
  }

  reset() {
    this.messages = new Map(); // message id → {node}, and the member's bubble for theirs
    this.pending = new Map(); // idempotency key → bubble
    this.toolCards = new Map(); // call id → card
    this.approvals = new Map(); // approval id → panel
    this.questions = new Map(); // question id → card (a tool asking the member, RAM only)
    this.subframes = new Map(); // a running sub-agent's frame id → its progress box
    this.subCalls = new Map(); // a sub-agent's call id → its step (where a deeper one shows)
    this.subBoxes = new Map(); // frame id → its box on screen, working or done
    this.held = null; // frame id → what its events said before its box was rebuilt (restoreSubagents)
    this.stream = null;
    this.unsettled = new Set(); // views of the running turn's rounds that called tools: finished at its end
    this.running = false;
    this.stick = true;
    this.list.replaceChildren();
  }

  // -- scrolling ----------------------------------------------------------------------

  nearBottom() {
    const n = this.node;
    return n.scrollHeight - n.scrollTop - n.clientHeight < 80;
  }

  /** Keep a reader who is at the end there. At most once a frame, after what the frame
   * changed: each streamed token, tool update and resize asking for it read the whole
   * transcript's layout anew (scrollHeight), which in a long conversation took longer
   * than a frame, every time. */
  follow(force = false) {
    if (force) this.stick = true;
    if (!this.stick || this.followPending) return;
    this.followPending = true;
    nextFrame(() => {
      this.followPending = false;
      if (!this.stick) return;
      this.node.scrollTop = this.node.scrollHeight;
      this.followedTo = this.node.scrollTop;
    });
  }

  /** A search result opened (#chat/<id>?find=words): the message that holds every word
   * (as the search matched them, each as a word's start) scrolled to, marked for a
   * moment and focused, so a keyboard goes on from there. The earliest such message;
   * `snippet` (the text the list showed, "…" cut) prefers the one it came from.
   * False when none does (then the conversation opens at its end, as usual). */
  reveal(words, snippet = "") {
    const wanted = searchForm(words).split(/\s+/).filter(Boolean);
    if (!wanted.length) return false;
    const core = searchForm(String(snippet || "").replace(/…/g, " ")).trim();
    const find = () => {
      const nodes = [...this.list.querySelectorAll(".msg[data-message-id]")];
      const holding = nodes.filter((node) => holdsWords(node.textContent, wanted));
      return holding.find((n) => core && searchForm(n.textContent).includes(core)) || holding[0];
    };
    // The host read the part around the message it found (part.found): that one, drawn
    // with its part; never the whole conversation drawn to look for it (a long one froze the tab).
    const found = this.part.found != null ? this.list.querySelector(`.msg[data-message-id="${Number(this.part.found)}"]`) : null;
    const node = found || find();
    if (!node) return false;
    this.stick = false;
    node.tabIndex = -1;
    node.scrollIntoView({ block: "center" });
    node.focus({ preventScroll: true });
    node.classList.add("search-hit");
    setTimeout(() => node.classList.remove("search-hit"), 2500);
    markWords(node.querySelector(".msg-body") || node, wanted);
    node.addEventListener("blur", () => node.removeAttribute("tabindex"), { once: true });
    return true;
  }

  /** The version (a message's `variant`) among `messages` (rows as the host lists them)
   * whose earliest message not shown holds every search word: the one a search result
   * "in an earlier version" came from. Null when none does. */
  versionHolding(words, messages) {
    const wanted = searchForm(words).split(/\s+/).filter(Boolean);
    if (!wanted.length) return null;
    const hit = messages.find((m) => m.variant && holdsWords(`${m.content || ""} ${m.reasoning || ""}`, wanted));
    return hit ? hit.variant : null;
  }

  append(node) {
    this.list.append(node);
    this.pruneRetry();
    this.placeActivity();
    this.follow();
  }

  /** Retry answers the conversation's last turn: its button stays on the last answer
   * only (an older failed answer's Retry would hide the newer one, then fail). */
  pruneRetry() {
    const answers = this.list.querySelectorAll(".msg.assistant");
    // A part before the newest (a search result's): its last answer is not the last turn's.
    const last = this.windowed() ? null : answers[answers.length - 1];
    for (const retry of this.list.querySelectorAll(".msg.assistant .retry")) {
      if (retry.closest(".msg.assistant") !== last) retry.remove();
    }
  }

  // -- whole conversations --------------------------------------------------------------

  /** Render a conversation as GET /api/conversations/<id> returns it. */
  load(data, unacknowledged = []) {
    this.redrawQuietly();
    const wasStuck = this.stick || !this.list.childElementCount;
    this.reset();
    this.loads += 1;
    this.held = new Map(); // until restoreSubagents: the sub-agents' boxes are not back yet
    this.running = Boolean(data.running);
    const all = data.messages || [];
    this.part = { complete: true, base: 0, earlier: null, later: null, found: null, ...(data.part || {}) };
    this.all = all;
    this.prepare(data.resolved_approvals || []);
    const { messages, turnStart } = this.drawn;
    // The newest rows, and the running turn whole; the earlier ones when asked for
    // (showEarlier). Never more: a reload (a reconnect, Regenerate, an edit, a version
    // flip) draws again a bounded part, not every row the reader had drawn before it. A
    // part that is not the newest (a search result's, the reader's place) is drawn whole:
    // the host keeps it about a screen's rows.
    let from = this.windowed() ? 0 : Math.max(0, messages.length - ROWS_AT_ONCE);
    if (this.running && turnStart >= 0 && !this.windowed()) from = Math.min(from, turnStart);
    this.from = from;
    this.drawRows(from, messages.length, null);
    for (const approval of data.approvals || []) this.approvalRequired(approval, { quiet: true });
    for (const question of data.questions || []) this.questionAsked(question, { quiet: true });
    const drawn = new Map(); // idempotency key → the bubble this read drew for it
    for (const message of all) { // an earlier version is stored too, only not drawn (null)
      if (message.role === "user" && message.idempotency_key) drawn.set(message.idempotency_key, this.messages.get(Number(message.id))?.bubble || null);
    }
    // Queued and unsent messages go after the newest row: not below a part before it.
    for (const queued of this.windowed() ? [] : data.queued || []) {
      const bubble = this.userBubble(queued.content, { state: "queued", attachments: attachmentsOf(queued.attachments) });
      this.list.append(bubble.node);
      if (queued.idempotency_key) drawn.set(queued.idempotency_key, bubble);
    }
    // A message still in the outbox may be stored already, its ack on the way: then this
    // read drew it (stored or queued), and that bubble is the one its ack confirms.
    for (const item of this.windowed() ? [] : unacknowledged) {
      const copy = drawn.get(item.idempotency_key);
      if (copy) { copy.key = item.idempotency_key; this.pending.set(item.idempotency_key, copy); }
      else if (copy === undefined) this.addPending(item, { quiet: true });
    }
    this.pruneRetry();
    this.placeActivity();
    this.placeTurnActions();
    this.earlier.hidden = this.from <= 0 && this.part.earlier == null;
    this.later.hidden = !this.windowed();
    this.stick = wasStuck && !this.windowed();
    this.follow(this.stick);
  }

  /** Whether the rows read are a part before the newest (the newer ones not read). */
  windowed() {
    return this.part.later != null;
  }

  /** The rows to draw (drawn.messages) from those read (`all`), with their versions. */
  prepare(approvals) {
    const all = this.all;
    const branches = branchesOf(all, this.part.base || 0);
    // Earlier versions are not shown, only flipped to; nor is an answer a stopped server
    // cut before its first word (the note after it says so, and the answer follows).
    const messages = [];
    all.filter((m) => !m.variant).forEach((m, index, shown) => {
      if (cutBeforeAWord(m)) return;
      if (m.role === "note" && m.reason?.code === "answer_resumed" && index > 0 && cutBeforeAWord(shown[index - 1])) {
        // Its cut answer is not shown: the note says the answer had not begun, not that
        // one "here" was cut off (a crash-kill probe looked for it above).
        m = { ...m, reason: { ...m.reason, code: "answer_resumed_unstarted" } };
      }
      messages.push(m);
    });
    const turnStart = messages.findLastIndex((m) => m.role === "user");
    const rootCalls = new Set(all.flatMap((m) => (m.tool_calls || []).map((call) => call.id)));
    this.drawn = { messages, branches, rootCalls, approvals, turnStart };
  }

  /** Another part read (`data`, an answer of GET /api/conversations/<id>?before= or
   * ?after=) added to the rows read: how many rows to draw it added before those read. */
  merge(data, side) {
    const had = this.drawn.messages.length;
    const ids = new Set(this.all.map((m) => m.id));
    const rows = (data.messages || []).filter((m) => !ids.has(m.id));
    this.all = [...this.all, ...rows].sort((a, b) => Number(a.id) - Number(b.id));
    const part = data.part || {};
    if (side === "earlier") { this.part.earlier = part.earlier ?? null; this.part.base = part.base || 0; }
    else this.part.later = part.later ?? null;
    const seen = new Set(this.drawn.approvals.map((a) => a.id));
    const approvals = [...this.drawn.approvals, ...(data.resolved_approvals || []).filter((a) => !seen.has(a.id))];
    const first = this.drawn.messages[0]?.id;
    this.prepare(approvals);
    const added = this.drawn.messages.length - had;
    if (side !== "earlier") return 0;
    const at = first == null ? 0 : this.drawn.messages.findIndex((m) => m.id === first);
    return at < 0 ? added : at;
  }

  /** The first row in view (its id and where it stands), that a redraw keeps it there. */
  rowInView() {
    const top = this.node.getBoundingClientRect().top;
    for (const node of this.list.querySelectorAll(".msg[data-message-id]")) {
      const box = node.getBoundingClientRect();
      if (box.bottom > top) return { id: Number(node.dataset.messageId), top: box.top };
    }
    return null;
  }

  /** Whether the row `id` is among the newest part's (a reload at the newest draws it). */
  amongNewest(id) {
    if (this.windowed()) return false;
    const { messages } = this.drawn || { messages: [] };
    const index = messages.findIndex((m) => Number(m.id) === id);
    return index >= messages.length - ROWS_AT_ONCE;
  }

  /** Put the row `at` (rowInView's) back where it stood; false when it is not drawn. */
  keepInView(at) {
    const node = at && this.list.querySelector(`.msg[data-message-id="${at.id}"]`);
    if (!node) return false;
    this.node.scrollTop += node.getBoundingClientRect().top - at.top;
    this.stick = this.nearBottom() && !this.windowed();
    return true;
  }

  /** Draw the rows `start`..`end` (of this.drawn.messages) before `before` (null: at the
   * end), with what belongs to them: a fallback's note in its place, the version
   * switcher, the answered approval cards. */
  drawRows(start, end, before) {
    const { messages, branches, rootCalls, approvals, turnStart } = this.drawn;
    const rows = messages.slice(start, end);
    rows.forEach((message, offset) => {
      const index = start + offset;
      const live = this.running && message.status === "streaming" && index === messages.length - 1;
      const seen = live ? this.streamed.get(message.id) : null;
      const whole = seen && seen.content.length >= (message.content || "").length ? { ...message, ...seen } : message;
      this.list.insertBefore(this.messageNode(whole, live, this.running && index > turnStart), before);
    });
    for (const message of rows) if (message.role === "note") this.placeFallback(message.id, message.reason);
    const ids = new Set(rows.map((m) => Number(m.id)));
    for (const [id, versions] of branches) {
      if (!ids.has(Number(id))) continue;
      const meta = this.messages.get(Number(id))?.node.querySelector(".msg-meta");
      if (meta) { meta.append(this.versionSwitch(versions)); meta.hidden = false; }
    }
    // Answered cards say what they said live. A call of a drawn message has its card
    // here; one of an earlier version is not shown (nor is its card), nor one of a row not
    // drawn yet; any other call is a sub-agent's, whose card stood on its own: it stands
    // before the first message after it (drawn with that message's rows).
    for (const approval of approvals) {
      if (this.approvals.has(approval.approval_id || approval.id)) continue;
      const ownCard = !this.toolCards.has(approval.tool_call_id);
      if (ownCard && rootCalls.has(approval.tool_call_id)) continue;
      let at = before;
      if (ownCard) {
        const after = messages.findIndex((m) => m.created_at > approval.created_at);
        if (after === -1 ? end !== messages.length : after < start || after >= end) continue;
        if (after !== -1) at = this.list.querySelector(`[data-message-id="${Number(messages[after].id)}"]`) || before;
      }
      this.approvalRequired(approval, { quiet: true, decided: approval.status, before: at });
    }
  }

  /** "Earlier messages": the rows before those drawn (`all`: every one), above them,
   * the reader's view where it was. Not news: the log does not read them out. */
  async showEarlier({ quietFocus = false } = {}) {
    if (!this.drawn) return;
    if (this.from <= 0) {
      // Every row read is drawn: the part before them comes from the host.
      if (this.part.earlier == null || this.reading) return;
      const loads = this.loads;
      this.reading = true;
      const data = await this.handlers.readPart?.({ before: this.part.earlier }).finally(() => { this.reading = false; });
      if (!data || loads !== this.loads || !this.drawn) return;
      this.from += this.merge(data, "earlier");
      if (this.from <= 0) { this.earlier.hidden = this.part.earlier == null; return; }
    }
    const trigger = this.earlier.querySelector("button");
    const hadFocus = this.earlier.contains(document.activeElement);
    const anchor = this.list.firstElementChild;
    const top = anchor ? anchor.getBoundingClientRect().top : 0;
    hush(this.node);
    const start = Math.max(0, this.from - ROWS_AT_ONCE);
    const calls = this.toolCards.size;
    this.drawRows(start, this.from, anchor);
    this.from = start;
    if (this.toolCards.size > calls) this.handlers.earlierDrawn?.();
    this.pruneRetry();
    if (anchor) this.node.scrollTop += anchor.getBoundingClientRect().top - top;
    this.stick = this.nearBottom();
    this.earlier.hidden = this.from <= 0 && this.part.earlier == null;
    // The button goes with the last of them: the focus stays in the transcript, not on <body>.
    if (this.earlier.hidden && hadFocus && !quietFocus) this.node.focus({ preventScroll: true });
    else if (hadFocus) trigger.focus({ preventScroll: true });
  }

  /** "Later messages": the part after the rows read, drawn below them. The newest
   * reached, the conversation is read again as usual (live from there on). */
  async showLater() {
    if (!this.drawn || !this.windowed() || this.reading) return;
    const loads = this.loads;
    const hadFocus = this.later.contains(document.activeElement);
    this.reading = true;
    const data = await this.handlers.readPart?.({ after: this.part.later }).finally(() => { this.reading = false; });
    if (!data || loads !== this.loads || !this.drawn) return;
    const had = this.drawn.messages.length;
    const calls = this.toolCards.size;
    hush(this.node);
    this.merge(data, "later");
    this.drawRows(had, this.drawn.messages.length, null);
    if (this.toolCards.size > calls) this.handlers.earlierDrawn?.();
    this.pruneRetry();
    this.placeTurnActions();
    this.later.hidden = !this.windowed();
    if (this.later.hidden && hadFocus) this.node.focus({ preventScroll: true });
    else if (hadFocus) this.later.querySelector("button").focus({ preventScroll: true });
    if (!this.windowed()) this.handlers.reload?.();
  }

  /** A whole conversation drawn again (a reload: after Retry, Regenerate, a version flip,
   * an edit, a turn's end, a reconnect) is not news: the log is not live while `load`
   * draws it, or a screen reader read the whole conversation out again. What is new since
   * it was last live (the new answer, the other version) is then added once more, now
   * live, and so said alone. Opening a conversation says nothing: none of it is new. */
  redrawQuietly() {
    // The first read's "before" stands (a hush for controls or math alone has none).
    if (this.redrawing) { hush(this.node); return; }
    const heard = this.loads ? heardIn(this.list) : null;
    this.redrawing = true;
    hush(this.node, () => { this.redrawing = false; if (heard) this.sayNew(heard); });
  }

  /** Put each row not heard before back where it is: an addition to the live log. */
  sayNew(heard) {
    this.sayAgain([...this.list.children].filter((node) => node !== this.activity && !wasHeard(node, heard)));
  }

  /** Put `nodes` back where they are (the focus in them kept): additions to the live log. */
  sayAgain(nodes) {
    for (const node of nodes) {
      if (!node.isConnected) continue;
      const focused = node.contains(document.activeElement) ? document.activeElement : null;
      const [parent, next] = [node.parentNode, node.nextSibling];
      node.remove();
      parent.insertBefore(node, next);
      focused?.focus({ preventScroll: true });
    }
  }

  /** Controls added to a row the log has shown (its model, Copy, Read aloud, Regenerate,
   * Edit) are not news: a screen reader read "test-model Copy the answer Regenerate" out
   * after every answer, "Edit" after every message sent. aria-busy on the row did not
   * hold them back (Chromium heeds it on the live region only): the log is not live while
   * they come. A row not in the log yet is said whole as it comes. */
  quietly(row) {
    if (row.isConnected) hush(this.node);
  }

  /** What changed alongside such controls (an answer's settled words, its new tool
   * cards): added once more when the log is live again, and so said as before. */
  sayWhenLive(news) {
    if (news.length && hushed(this.node)) hush(this.node, () => this.sayAgain(news));
  }

  setRunning(running) {
    this.running = running;
    if (!running && this.stream) this.finishStream({ status: this.stream.status || "interrupted" });
    if (!running) this.settleRounds();
    this.placeActivity();
    this.placeTurnActions();
  }

  /** ‹ n / count › between the versions that start at one message. "1 / 2" is for the
   * eye; the group is described by "Version 1 of 2", which a screen reader says with it. */
  versionSwitch({ list, current }) {
    const go = (index) => this.handlers.showVersion(list[index]);
    const previous = button("‹", { kind: "quiet small", attrs: { "aria-label": t("chat.version_previous") }, onClick: () => go(current - 1) });
    const next = button("›", { kind: "quiet small", attrs: { "aria-label": t("chat.version_next") }, onClick: () => go(current + 1) });
    previous.disabled = current <= 0;
    next.disabled = current >= list.length - 1;
    const said = el("span", { class: "visually-hidden version-said", id: uid("version"), text: t("chat.version_of", { n: current + 1, count: list.length }) });
    return el("span", { class: "versions", role: "group", "aria-label": t("chat.versions"), "aria-describedby": said.id },
      previous, el("span", { class: "version-at", "aria-hidden": "true", text: t("chat.version", { n: current + 1, count: list.length }) }), said, next);
  }

  /** After ‹ or ›: "Version 1 of 2" on the polite status line. The text is put in anew
   * (a new text node), so flipping back to a version said before is said again. */
  sayVersion(group) {
    const text = group.querySelector(".version-said")?.textContent || "";
    this.versionStatus.replaceChildren(document.createTextNode(text));
  }

  /** A live region inserted already holding text is not read, nor is a log inserted
   * with its rows: a new conversation's page is built, filled and only then attached.
   * Its status line stays empty until the page has been drawn once attached, then says
   * the turn's state; the rows it was attached with are added to the log once more. */
  sayOnceAttached() {
    this.holding = true;
    // One frame to be attached (the router attaches the page as its render resolves),
    // one more to be drawn so: only then is the region known to the screen reader.
    requestAnimationFrame(() => requestAnimationFrame(() => {
      this.holding = false;
      if (!this.node.isConnected) return;
      this.sayAgain([...this.list.children].filter((row) => row !== this.activity));
      this.placeActivity();
    }));
  }

  /** Take rows off the screen from the message `id` on (or, with `after`, from the one
   * after it): what a regenerate or an edit is about to replace, so the new answer never
   * shows under the old one. What it took, for `restore` when the change is refused
   * (or a failure reads the conversation again). */
  truncate(id, { after = false } = {}) {
    const taken = { rows: [], stream: this.stream, turnActions: this.turnActions };
    const start = this.messages.get(Number(id))?.node;
    if (!start) return taken;
    let node = after ? start.nextElementSibling : start;
    while (node) {
      const next = node.nextElementSibling;
      if (node !== this.activity) {
        const removed = Number(node.dataset.messageId);
        taken.rows.push({ node, id: removed, entry: this.messages.get(removed) });
        if (!Number.isNaN(removed)) this.messages.delete(removed);
        node.remove();
      }
      node = next;
    }
    this.stream = null;
    this.turnActions = null;
    this.placeActivity();
    return taken;
  }

  /** Put back what `truncate` took: the change it made room for was refused. */
  restore(taken) {
    const at = this.activity?.parentNode === this.list ? this.activity : null;
    for (const { node, id, entry } of taken.rows) {
      this.list.insertBefore(node, at);
      if (entry) this.messages.set(id, entry);
    }
    if (!this.stream) this.stream = taken.stream;
    if (!this.turnActions) this.turnActions = taken.turnActions;
    this.placeActivity();
    this.placeTurnActions();
  }

  /** The id of the last message of the member's on screen. */
  lastUserId() {
    const nodes = [...this.list.querySelectorAll(".msg.user[data-message-id]")];
    return nodes.length ? Number(nodes[nodes.length - 1].dataset.messageId) : null;
  }

  /** Regenerate, under the last answer of an ended turn. */
  placeTurnActions() {
    this.turnActions?.remove();
    this.turnActions = null;
    // A part before the newest (a search result's, newer rows not read): its last answer
    // is not the conversation's, and Regenerate would act on the newest one instead.
    if (this.running || !this.handlers.regenerate || this.windowed()) return;
    const last = [...this.list.querySelectorAll(".msg")].filter((n) => !n.classList.contains("note")).pop();
    if (!last?.classList.contains("assistant") || retryable(last.dataset.status)) return;
    const actions = el("span", { class: "turn-actions" },
      button(t("chat.regenerate"), { kind: "quiet small regenerate", onClick: (event) => this.handlers.regenerate(event.currentTarget) }));
    const meta = last.querySelector(".msg-meta");
    meta.append(actions);
    meta.hidden = false;
    this.turnActions = actions;
    this.quietly(last);
  }

  /** The "working" dots: while a turn runs and nothing else shows progress. */
  placeActivity() {
    const busyTool = [...this.toolCards.values()].some((c) => c.status === "running");
    // What waits for the member (an approval, a tool's question), and who asks it.
    const waiting = [...this.approvals.values()].find((p) => p.pending) || [...this.questions.values()].find((q) => q.pending) || null;
    const show = this.running && !this.stream && !busyTool && !waiting;
    if (!show) this.activity.remove();
    else if (this.list.lastElementChild !== this.activity) this.list.append(this.activity);
    this.announce(waiting);
  }

  /** The status line, from the state on screen rather than from the events that led
   * there, so a reload says what the live page said: a turn that waits for the member
   * says so, and one whose answer failed is not "done". Said again only when it changes. */
  announce(waiting) {
    let key = "";
    if (this.running) {
      key = !waiting ? "chat.working"
        : waiting.question ? (waiting.agentName ? "chat.waiting_for_answer_agent" : "chat.waiting_for_answer")
          : waiting.agentName ? "chat.waiting_for_approval_agent" : "chat.waiting_for_approval";
    }
    else {
      const last = [...this.list.querySelectorAll(".msg")].filter((n) => !n.matches(".note.info")).pop();
      // The member's own message last: its answer has not begun, nothing is done yet.
      // Each ending said as what it is: a stopped or cut answer is not "done".
      if (last && !last.matches(".user")) {
        const status = last.dataset.status;
        key = last.matches(".note.error") || status === "error" ? "chat.turn_failed"
          : status === "unanswered" ? "chat.turn_stopped"
            : status === "cancelled" ? "chat.turn_cancelled"
              : status === "interrupted" ? "chat.turn_interrupted" : "chat.turn_ended";
      }
    }
    if (this.holding) return;
    const text = key ? t(key, { name: waiting?.agentName }) : "";
    if (this.announcer.textContent !== text) this.announcer.textContent = text;
  }

  // -- messages ---------------------------------------------------------------------------

  /** Who wrote the answers, as each answer's accessible name says: the agent the page
   * names (a project's conversation says which one it talks to), else "Assistant". */
  authorName() {
    return this.author || t("chat.author_assistant");
  }

  /** The agent's name, once the page knows it: the answers on screen are named so too. */
  setAuthor(name) {
    this.author = name || null;
    for (const node of this.list.querySelectorAll("article.msg.assistant")) node.setAttribute("aria-label", this.authorName());
  }

  /** `inRunningTurn`: the message belongs to the turn still running (a reload mid-turn). */
  messageNode(message, live = false, inRunningTurn = false) {
    if (message.reason) {  // a failure the host words in every language: in the reader's
      message = { ...message, content: errorString(message.reason.code, message.reason.values, { admin: this.handlers.admin !== false }) || message.content };
    }
    if (message.role === "user") {
      const bubble = this.userBubble(message.content, { id: message.id, attachments: attachmentsOf(message.attachments) });
      return bubble.node;
    }
    if (message.role === "note") return this.noteNode(message.content, message.status === "error" ? "error" : "info", message.id);
    if (message.role === "summary") {
      const details = el("details", { class: "summary-note" },
        el("summary", { text: t("chat.summary") }), el("div", { class: "md" }, renderMarkdown(message.content)));
      return el("div", { class: "msg note", "data-message-id": message.id }, details);
    }
    const view = this.assistantNode(message.id);
    view.setReasoning(message.reasoning || "");
    view.setContent(message.content || "");
    for (const call of message.tool_calls || []) view.tools.append(this.toolCard(call));
    const status = live ? "streaming" : message.status === "streaming" ? "interrupted" : shownStatus(message.status, message.reason?.code);
    this.showStatus(view, status, message.model, inRunningTurn && status === "complete" && (message.tool_calls || []).length > 0, message.model_id, message.reason?.code);
    if (live) {
      this.stream = { id: message.id, view, content: message.content || "", reasoning: message.reasoning || "", timer: null };
      view.setStreaming(true);
    }
    return view.node;
  }

  userBubble(text, { id = null, state = "sent", attachments = [] } = {}) {
    const stateNode = el("span", { class: "msg-state" });
    const bubbleBody = el("div", { class: "bubble" }, el("p", { class: "plain", dir: "auto", text }), filesList(attachments));
    const meta = el("div", { class: "msg-meta user-meta" }, stateNode, copyButton(() => text, t("chat.copy_your_message"), "copy-message"));
    // Named by who wrote it: a screen reader moving from message to message hears whose it is.
    const node = el("article", { class: "msg user", "aria-label": t("chat.author_you"), "data-state": state }, bubbleBody, meta);
    const bubble = { node, text, id, state, stateNode, body: bubbleBody, meta, edit: null };
    this.offerEdit(bubble);
    this.setBubbleState(bubble, state);
    if (id != null) { node.dataset.messageId = id; this.messages.set(Number(id), { node, bubble }); }
    return bubble;
  }

  /** Edit, once the message is stored (it has an id): at once for a loaded one, at its
   * ack for one just sent. */
  offerEdit(bubble) {
    if (bubble.id == null || bubble.edit || !this.handlers.edit) return;
    bubble.edit = button(t("chat.edit"), { kind: "quiet small edit-message", onClick: () => this.editForm(bubble, bubble.body, bubble.meta, bubble.edit) });
    bubble.meta.append(bubble.edit);
    this.quietly(bubble.node);
  }

  /** Edit a sent message in place; saving continues the conversation from it (the old
   * branch is kept as a version). */
  editForm(bubble, bubbleBody, meta, trigger) {
    const input = el("textarea", { class: "edit-input", rows: "3", "aria-label": t("chat.edit_label"), props: { value: bubble.text } });
    followTypedDirection(input);
    const save = el("button", { class: "btn primary small", type: "submit", text: t("chat.edit_save") });
    const cancel = button(t("common.cancel"), { kind: "quiet small", onClick: () => close() });
    const status = el("p", { class: "form-status error", role: "status", "aria-live": "polite" });
    const form = el("form", { class: "edit-form", novalidate: true }, input, el("div", { class: "actions" }, save, cancel), status);
    const close = () => { form.replaceWith(bubbleBody); meta.hidden = false; trigger.focus(); };
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (!input.value.trim()) { status.textContent = t("chat.edit_empty"); input.focus(); return; }
      save.disabled = true;
      const outcome = await this.handlers.edit(bubble.id, input.value);
      save.disabled = false;
      if (!outcome.ok) { status.textContent = outcome.error; input.focus(); }  // the text to change, not <body>
    });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") { event.stopPropagation(); close(); return; }
      // As in the composer, whose hint the member has read: Enter sends, Shift+Enter a new line.
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
        event.preventDefault();
        if (!save.disabled) form.requestSubmit();
      }
    });
    bubbleBody.replaceWith(form);
    meta.hidden = true;
    input.focus();
  }

  setBubbleState(bubble, state, detail = "") {
    bubble.state = state;
    bubble.node.dataset.state = state;
    const text = {
      sending: t("chat.sending"), waiting: t("chat.waiting_connection"), queued: t("chat.queued"), failed: detail || t("chat.send_failed"), retrying: detail,
    }[state] || "";
    bubble.stateNode.textContent = text;
    bubble.stateNode.hidden = !text;
  }

  assistantNode(id) {
    // dir="auto": a reply's own script sets its direction, not the interface's (an
    // English answer in an Arabic interface reads left to right, and the reverse).
    const reasoningBody = el("div", { class: "reasoning-body md", dir: "auto" });
    const reasoning = el("details", { class: "reasoning", hidden: true },
      el("summary", {}, el("span", { text: t("chat.reasoning") }), el("span", { class: "reasoning-live", text: t("chat.thinking") })),
      reasoningBody);
    const body = el("div", { class: "msg-body md", dir: "auto" });
    const caret = el("span", { class: "caret", "aria-hidden": "true" });
    const tools = el("div", { class: "tool-list" });
    const meta = el("div", { class: "msg-meta" });
    const node = el("article", { class: "msg assistant", "aria-label": this.authorName(), "data-message-id": id }, reasoning, body, tools, meta);
    this.remember(reasoning, `r:${id}`);
    const stream = new MarkdownStream(body);
    const view = {
      node, body, tools, meta, reasoning, text: "",
      /** `streaming`: only the changed tail is rendered again. */
      setContent: (text, { streaming = false } = {}) => {
        view.text = text;
        let added = [];
        if (streaming) stream.update(text);
        else { stream.release(); added = settleInto(body, text); }
        body.hidden = !text && !node.classList.contains("streaming");
        return added;
      },
      /** Streaming is said twice: the class draws the caret, aria-busy tells a screen
       * reader the words are not all there yet. One place sets both, for an answer
       * streamed live and one drawn from history mid-stream alike. */
      setStreaming: (streaming) => {
        node.classList.toggle("streaming", streaming);
        if (streaming) node.setAttribute("aria-busy", "true");
        else node.removeAttribute("aria-busy");
      },
      setReasoning: (text) => {
        reasoning.hidden = !text;
        return settleInto(reasoningBody, text);  // rendered whole each frame while it streams: what it had stays
      },
      /** `unsettled`: a round that called tools while its turn runs on: its words are
       * not the turn's answer yet, so nothing to copy or read aloud (`settleRounds`). */
      setStatus: (status, model, { unsettled = false, modelId = null, code = null } = {}) => {
        view.status = status;
        view.model = model;
        view.modelId = modelId;
        view.code = code;
        node.dataset.status = status || "complete";
        const label = messageStatusLabel(status);
        // A failed answer's text is the reason it failed, not an answer to copy.
        const done = status !== "streaming" && !retryable(status) && view.text && !unsettled;
        meta.replaceChildren(...[
          label ? el("span", { class: `badge status-${status}`, text: label }) : null,
          // A round of tool calls alone has no words to credit: no model line under its cards.
          // A failed answer names its provider too: two entries may share a label or a model
          // name, and whoever fixes it must know which entry failed.
          model && (view.text || retryable(status)) ? this.modelChip(model, modelId, status === "error") : null,
          done ? copyButton(() => view.text, t("chat.copy_answer"), "copy-message") : null,
          retryable(status, code) && this.handlers.retry ? button(t("chat.retry"), { kind: "small retry", onClick: (event) => this.handlers.retry(event.currentTarget) }) : null,
        ].filter(Boolean));
        meta.hidden = !meta.childElementCount;
      },
      caret,
    };
    if (id != null) this.messages.set(Number(id), { node, view });
    return view;
  }

  /** The model line under an answer: its entry's label, with its provider when `withProvider`. */
  modelChip(model, modelId, withProvider) {
    const label = this.handlers.modelLabel?.(model, modelId) || model;
    const provider = withProvider ? this.handlers.modelProvider?.(model, modelId) : null;
    return el("span", { class: "model", text: provider ? t("chat.model_at_provider", { model: label, provider }) : label, title: model });
  }

  /** Keep a <details>'s open state across re-renders of the same thing. */
  remember(details, key) {
    if (this.openDetails.has(key)) details.open = true;
    details.addEventListener("toggle", () => {
      if (details.open) this.openDetails.add(key); else this.openDetails.delete(key);
    });
  }

  noteNode(text, kind = "info", id = null) {
    const shown = kind === "info" && text.startsWith(SHOWN_FILE) ? text.slice(SHOWN_FILE.length).trim() : null;
    const body = shown
      ? [el("p", { class: "note-text" }, fileLink(shown)),
        looksLikeImage(shown) ? el("img", { class: "file-preview", src: fileUrl(shown), alt: shown, loading: "lazy" }) : null]
      : [el("p", { class: "note-text", text })];
    const node = el("div", { class: `msg note ${kind}${shown ? " shown-file" : ""}`, role: kind === "error" ? "alert" : null }, ...body);
    if (id != null) { node.dataset.messageId = id; this.messages.set(Number(id), { node }); }
    return node;
  }

  note(text, kind = "info", id = null) {
    if (id != null && this.messages.has(Number(id))) return;
    // An error stored as a note may already be on screen from a read that raced its event.
    const last = [...this.list.children].filter((n) => n !== this.activity).pop();
    if (last?.classList.contains("note") && last.textContent === text) return;
    this.append(this.noteNode(text, kind, id));
  }

  // -- the member's own messages --------------------------------------------------------------

  /** A message in the outbox: shown at once, confirmed by its ack. */
  addPending(item, { quiet = false } = {}) {
    const bubble = this.userBubble(item.text, { state: "sending", attachments: attachmentsOf(item.attachments) });
    bubble.key = item.idempotency_key;
    this.pending.set(item.idempotency_key, bubble);
    if (quiet) this.list.append(bubble.node); else this.append(bubble.node);
    this.follow(true);
    return bubble;
  }

  connection(open) {
    for (const bubble of this.pending.values()) {
      if (bubble.state === "sending" || bubble.state === "waiting") this.setBubbleState(bubble, open ? "sending" : "waiting");
    }
  }

  acknowledged(ack) {
    const bubble = this.pending.get(ack.idempotency_key);
    if (!bubble) return false;
    this.pending.delete(ack.idempotency_key);
    if (ack.queued) { this.setBubbleState(bubble, "queued"); return true; }
    const id = Number(ack.message_id);
    const shown = this.messages.get(id);
    if (shown && shown.node !== bubble.node) { bubble.node.remove(); return true; }
    this.adopt(bubble, id);
    return true;
  }

  /** Not stored (the server's disk, or too many at once): it stays pending, and the
   * outbox sends it again. */
  sendRetrying(key, code) {
    const bubble = this.pending.get(key);
    const reason = { disk_full: "chat.retrying_disk_full", too_fast: "chat.retrying_too_fast" }[code] || "chat.retrying_storage";
    if (bubble) this.setBubbleState(bubble, "retrying", t(reason));
  }

  sendFailed(key, error) {
    const bubble = this.pending.get(key);
    if (!bubble) return;
    this.pending.delete(key);
    this.setBubbleState(bubble, "failed", t("chat.send_failed_because", { error }));
  }

  adopt(bubble, id) {
    bubble.id = id;
    bubble.node.dataset.messageId = id;
    this.messages.set(id, { node: bubble.node, bubble });
    this.setBubbleState(bubble, "sent");
    this.offerEdit(bubble);
  }

  /** `user_message`: ours (adopt the pending bubble) or from elsewhere (a new one). */
  userMessage(data) {
    const id = Number(data.message_id);
    if (this.messages.has(id)) return true;
    if (typeof data.content !== "string") return false; // moved from the queue: the caller reloads
    const mine = [...this.pending.values()].find((b) => b.id == null && b.text === data.content);
    if (mine) { this.adopt(mine, id); return true; }
    this.append(this.userBubble(data.content, { id, attachments: attachmentsOf(data.attachments) }).node);
    return true;
  }

  // -- streaming ------------------------------------------------------------------------------

  /** The bubble for an assistant message id, made on first sight. */
  assistantView(id) {
    const known = this.messages.get(Number(id));
    if (known?.view) return known.view;
    const view = this.assistantNode(id);
    view.setStatus("complete");
    this.append(view.node);
    return view;
  }

  /** A token of a root answer: its delta goes where its `at` says (appendDelta); one
   * that starts past the text on screen means words were missed, and the conversation
   * is read again (`handlers.gap`), the read's text so far then going on from the
   * tokens that follow. */
  token(data) {
    const id = Number(data.message_id);
    if (!this.stream || this.stream.id !== id) {
      // An answer on screen that is not the open stream is settled (or was drawn
      // settled by a read that raced its end): a late token, replayed, is not news.
      if (this.messages.get(id)?.view) return;
      if (this.stream) this.finishStream({});
      const view = this.assistantView(id);
      view.setStreaming(true);
      this.stream = { id, view, content: "", reasoning: "", timer: null };
      this.placeActivity();
    }
    const stream = this.stream;
    const seen = this.streamed.get(id);
    if (seen) { stream.content = seen.content; stream.reasoning = seen.reasoning; stream.ends = { ...seen.ends }; } // already has this delta
    else if (!appendDelta(stream, data)) { this.handlers.gap?.(); return; }
    if (!stream.timer) stream.timer = nextFrame(() => this.flush());
  }

  flush() {
    const stream = this.stream;
    if (!stream) return;
    stream.timer = null;
    const { view } = stream;
    if (stream.reasoning) view.setReasoning(stream.reasoning);
    view.setContent(stream.content, { streaming: true });
    placeCaret(view.body, view.caret);
    view.node.classList.toggle("reasoning-only", !stream.content);
    this.follow();
  }

  /** Finish the open bubble in place: with the event's text when there is one. */
  finishStream({ content, reasoning, status = "complete", model, modelId, unsettled, code } = {}) {
    const stream = this.stream;
    if (!stream) return;
    stream.timer = null;
    this.stream = null;
    this.settle(stream.view, { content: content ?? stream.content, reasoning: reasoning ?? stream.reasoning, status, model, modelId, unsettled, code });
  }

  settle(view, { content, reasoning, status, model, modelId = null, unsettled = false, code = null }) {
    view.setStreaming(false);
    view.node.classList.remove("reasoning-only");
    const news = [...view.setReasoning(reasoning), ...view.setContent(content)];
    this.showStatus(view, status, model, unsettled, modelId, code);
    this.sayWhenLive(news);
    this.placeActivity();
    this.follow();
  }

  /** Settle the message `id` with what an event says is its final state: the open
   * bubble if it is that message, else its node (made when it is not on screen). */
  settleMessage(id, final) {
    if (this.stream?.id === id) { const { view } = this.stream; this.finishStream(final); return view; }
    const known = this.messages.get(id)?.view;
    if (!known && this.stream) this.finishStream({}); // a newer answer began: the open one ended
    const view = known || this.assistantView(id);
    this.settle(view, final);
    return view;
  }

  /** The view's status line, and Read aloud when it is finished: a round that called
   * tools (`unsettled`) waits for its turn's end, when `settleRounds` adds both. */
  showStatus(view, status, model, unsettled = false, modelId = null, code = null) {
    view.setStatus(status, model, { unsettled, modelId, code });
    if (unsettled) this.unsettled.add(view);
    else { this.unsettled.delete(view); addReadAloud(view.meta, view.text, status); }
    if (!view.meta.hidden) this.quietly(view.node);
  }

  /** The turn ended: its rounds that called tools are finished answers now. */
  settleRounds() {
    for (const view of this.unsettled) {
      if (!view.node.isConnected) continue;
      const versions = view.meta.querySelector(".versions"); // drawn by a read mid-turn: kept
      this.showStatus(view, view.status, view.model, false, view.modelId, view.code);
      if (versions) { view.meta.append(versions); view.meta.hidden = false; }
    }
    this.unsettled.clear();
  }

  /** `done` or `assistant`: the complete message. */
  finished(data, toolCalls = []) {
    const view = this.settleMessage(Number(data.message_id), {
      content: data.content || "", reasoning: data.reasoning || "", status: "complete", model: data.model, modelId: data.model_id,
      unsettled: toolCalls.length > 0 && this.running,
    });
    const cards = [];
    for (const call of toolCalls) {
      if (!this.toolCards.has(call.id)) cards.push(view.tools.appendChild(this.toolCard({ ...call, status: "requested" })));
    }
    this.sayWhenLive(cards);
    this.placeActivity();
    this.follow();
  }

  /** A fallback to another model: the partial bubble goes. */
  dropStream(id = null) {
    const stream = this.stream;
    if (!stream || (id != null && stream.id !== Number(id))) return;
    stream.timer = null;
    this.stream = null;
    this.messages.delete(stream.id);
    stream.view.node.remove();
    this.placeActivity();
  }

  /** `model_fallback`: its note, stored before it was announced (`note_id`), worded
   * as history words it, where a reload draws it: before the answer it is about. */
  fallback(data) {
    const text = errorString(data.code, data.values, { admin: this.handlers.admin !== false }) || t("chat.fallback", { failed: data.failed, next: data.next });
    this.note(text, "info", data.note_id ?? null);
    if (data.note_id != null) this.placeFallback(data.note_id, { code: data.code, values: data.values });
  }

  /** A fallback's note is written after the answer's row (the row exists before its
   * model is asked), yet it happened before that answer: it goes before it. */
  placeFallback(noteId, reason) {
    if (reason?.code !== "model_fallback") return;
    const note = this.messages.get(Number(noteId))?.node;
    const answer = this.messages.get(Number(reason.values?.message_id))?.node;
    if (note && answer?.parentNode === this.list) answer.before(note);
  }

  /** `answer_cancelled`: the answer a Stop cut, with the model that wrote it (the
   * turn's `cancelled` that follows names none). */
  answerCancelled(data) {
    if (this.stream?.id === Number(data.message_id)) this.finishStream({ status: "cancelled", model: data.model, modelId: data.model_id });
  }

  cancelled() {
    if (this.stream) this.finishStream({ status: "cancelled" });
  }

  /** `error`: an answer that failed is that message, its partial text replaced by the
   * reason and marked failed (as history shows it); a turn that failed as a whole
   * drops the open bubble and says so in a note. */
  failed(data, text) {
    if (data.message_id == null) {
      this.dropStream();
      this.note(text, "error");
      return;
    }
    this.settleMessage(Number(data.message_id), { content: text, reasoning: "", status: shownStatus("error", data.code), model: data.model, modelId: data.model_id, code: data.code });
  }

  // -- tool calls -------------------------------------------------------------------------------

  toolCard(call) {
    const status = el("span", { class: "badge" });
    // Both are cut at 320 px and scroll: a keyboard reaches them as a code block's.
    const args = scrollableRegion(el("pre", { class: "tool-args", text: prettyArguments(call.arguments) }), t("chat.tool_arguments_of", { tool: call.name }));
    const result = scrollableRegion(el("pre", { class: "tool-result" }), t("chat.tool_result_of", { tool: call.name }));
    const resultBlock = el("div", { class: "tool-section", hidden: true }, el("h4", { text: t("chat.tool_result") }), result);
    // Made when a call fails with its tool's own words (toldTheModel), else not there.
    let told = null;
    const tellModel = (text) => {
      if (!told) {
        const words = scrollableRegion(el("pre", { class: "tool-told" }), t("chat.tool_told_assistant_of", { tool: call.name }));
        told = { words, nodes: [el("p", { class: "tool-failed-told", text: t("chat.tool_failed_told") }),
          el("details", { class: "tool-told-details" }, el("summary", { text: t("chat.tool_told_assistant") }), words)] };
        resultBlock.append(...told.nodes);
      }
      told.words.textContent = text;
    };
    const details = el("details", { class: "tool-details" },
      el("summary", {},
        el("span", { class: "tool-icon", "aria-hidden": "true" }),
        el("span", { class: "tool-label", text: t("chat.tool_call") }),
        el("code", { class: "tool-name", text: call.name }), status),
      el("div", { class: "tool-body" },
        el("div", { class: "tool-section" }, el("h4", { text: t("chat.tool_arguments") }), args), resultBlock));
    const node = el("div", { class: "tool-card", "data-call-id": call.id }, details);
    this.remember(details, `t:${call.id}`);
    const background = startsInBackground(call);
    const card = {
      node, details, status: call.status, badge: status,
      set: (next, text, code, forModel = false) => {
        card.status = next;
        card.code = code;
        node.dataset.status = next;
        status.className = `badge tool-${next}`;
        status.textContent = next === "done" && background ? t("chat.tool_started_background") : toolStatusLabel(next);
        if (text != null && text !== "") {
          result.textContent = forModel ? "" : text;
          result.hidden = forModel;
          if (forModel) tellModel(text);
          else if (told) { for (const made of told.nodes) made.remove(); told = null; }
          resultBlock.hidden = false;
        }
        this.batchOutcome(card);
        this.placeActivity();
      },
    };
    card.set(call.status || "requested", resultText(call, { admin: this.handlers.admin !== false }), call.result_code, toldTheModel(call, call.status));
    this.toolCards.set(call.id, card);
    return node;
  }

  toolUpdate(data, status) {
    const card = this.toolCards.get(data.call_id);
    if (!card) return;
    card.set(status, resultText(data, { admin: this.handlers.admin !== false }), data.result_code, toldTheModel(data, status));
    if (status !== "awaiting_approval") {
      for (const panel of this.approvals.values()) {
        // A call stopped or cut while its card waited was never approved: the card says
        // it is no longer waiting, not "Approved".
        const outcome = status === "denied" ? "denied" : ["cancelled", "interrupted", "expired"].includes(status) ? "expired" : "approved";
        if (panel.callId !== data.call_id) continue;
        if (panel.pending) panel.resolve(outcome);
        else if (status === "denied") panel.resolve(panel.decision);  // approved, then refused as it started: the card says why
      }
    }
    this.follow();
  }

  // -- sub-agents ------------------------------------------------------------------------------

  /** `agent_start` of a sub-agent (execute_task): its progress shows in the card of the
   * call that started it — its steps, and the tail of what it writes — while it works.
   * Returns its box, or null where its call is not on screen. */
  subagentStarted(data) {
    const shown = this.subBoxes.get(data.frame_id);
    if (shown) {
      if (!this.subframes.has(data.frame_id)) {  // a run taken up again after a restart: the same frame goes on
        shown.say("chat.subagent_working");
        shown.box.classList.remove("done", ...ENDINGS.map((status) => `ended-${status}`));
        shown.box.setAttribute("aria-busy", "true");
        this.subframes.set(data.frame_id, shown);
      }
      return null;
    }
    const host = this.toolCards.get(data.spawned_by_call_id)?.node || this.subCalls.get(data.spawned_by_call_id);
    if (!host) return null;
    // One sentence with the helper's name in it ("Unteragent X ist fertig."): words
    // joined around a name are not grammatical in every language.
    const head = el("p", { class: "sub-head" });
    const steps = el("ul", { class: "sub-steps" });
    const text = el("p", { class: "sub-text", hidden: true });
    // Busy while it works: inside the transcript's live log, its text rewritten each frame
    // would be read out again and again; it is announced once, done.
    const box = el("div", { class: "subagent", role: "group", "aria-busy": "true", "data-frame-id": data.frame_id }, head, steps, text);
    // A batch's boxes in call order, however their starts interleave (`index`: the run's
    // place in its call); a reload rebuilds them in that order (restoreSubagents).
    const index = Number.isInteger(data.index) ? data.index : null;
    if (index !== null) box.dataset.index = String(index);
    const after = index === null ? null
      : [...host.children].find((child) => child.matches(".subagent[data-index]") && Number(child.dataset.index) > index);
    if (after) host.insertBefore(box, after); else host.append(box);
    // parts: message id → its text; cut: ids of messages a restart interrupted (subagentText).
    const sub = {
      box, steps, text, agent: data.agent, name: data.agent, said: "chat.subagent_working", callId: data.spawned_by_call_id,
      parts: new Map(), cut: new Set(), pending: false,
      say: (key) => { sub.said = key; head.textContent = t(key, { name: sub.name }); },
    };
    showAgentTitle(data.agent, (name) => {
      sub.name = name;
      sub.say(sub.said);
      box.setAttribute("aria-label", t("chat.subagent", { name }));
    });
    this.subframes.set(data.frame_id, sub);
    this.subBoxes.set(data.frame_id, sub);
    this.nameAskers(data.frame_id, data.agent);
    this.follow();
    return sub;
  }

  /** What a sub-agent's event says before its box is rebuilt after a (re)load: kept
   * for restoreSubagents, which continues the box with it. Null when not restoring. */
  heldFor(frameId) {
    if (!this.held || !frameId) return null;
    if (!this.held.has(frameId)) this.held.set(frameId, { texts: new Map(), steps: new Map(), done: null });
    return this.held.get(frameId);
  }

  subagentToken(data) {
    if (data.channel === "reasoning") return;
    const sub = this.subframes.get(data.frame_id);
    if (!sub) {
      const held = this.heldFor(data.frame_id);
      const id = Number(data.message_id);
      if (held) held.texts.set(id, (held.texts.get(id) || "") + (data.delta || ""));
      return;
    }
    const id = Number(data.message_id);
    sub.parts.set(id, (sub.parts.get(id) || "") + (data.delta || ""));
    if (sub.pending) return;
    sub.pending = true;
    nextFrame(() => {
      sub.pending = false;
      this.showSubagentText(sub);
    });
  }

  /** A box's text: its messages' texts in order. A message a restart cut (stored
   * interrupted) gives way to any that follows it: the run taken up again writes its
   * answer anew, and joined they read "…researchingresearching…". */
  subagentText(sub) {
    const ids = [...sub.parts.keys()];
    return ids.filter((id, index) => !(sub.cut.has(id) && index < ids.length - 1)).map((id) => sub.parts.get(id)).join("");
  }

  showSubagentText(sub) {
    const content = this.subagentText(sub);
    const tail = content.length > 240 ? `…${content.slice(-240)}` : content;
    sub.text.textContent = tail;
    sub.text.hidden = !tail;
  }

  subagentStep(data, status) {
    const sub = this.subframes.get(data.frame_id);
    if (!data.call_id) return;
    if (!sub) {
      const held = this.heldFor(data.frame_id);
      if (held) held.steps.set(data.call_id, { name: held.steps.get(data.call_id)?.name || data.name, status });
      return;
    }
    let step = this.subCalls.get(data.call_id);
    if (!step) {
      step = el("li", { class: "sub-step" }, el("code", { text: data.name || "" }), " ", el("span", { class: "badge" }));
      this.subCalls.set(data.call_id, step);
      sub.steps.append(step);
    }
    setStep(step, status);
    if (data.result_code) step.dataset.code = data.result_code;
    // A helper's call approved, then refused as it started (its access withdrawn, a rule):
    // its card says why, as the assistant's own does (toolUpdate).
    if (status === "denied") {
      for (const panel of this.approvals.values()) {
        if (panel.callId === data.call_id && !panel.pending) panel.resolve(panel.decision);
      }
    }
  }

  /** `agent_done`: the box says how the run ended, as the task strip does (a stopped
   * run is not "finished"); a run whose model failed, why — the failed answer the
   * event names (`message_id`, `error`), which after a reload is read back with the
   * run's transcript (restoreSubagents): the same text in the same place either way. */
  subagentDone(data) {
    const sub = this.subframes.get(data.frame_id);
    const status = ENDINGS.includes(data.status) ? data.status : "completed";
    // Worded by its code (a model that could not answer) in the reader's language; the
    // English the host sent for a code this shell does not know.
    const said = (data.code && errorString(data.code, data.values || {}, { admin: this.handlers.admin !== false })) || data.error;
    const failedAnswer = data.message_id != null && typeof data.error === "string" ? [Number(data.message_id), said] : null;
    if (!sub) {
      const held = this.heldFor(data.frame_id);
      if (held) {
        held.done = status;
        if (failedAnswer) held.texts.set(...failedAnswer);
      }
      return;
    }
    if (failedAnswer) {
      sub.parts.set(...failedAnswer);
      this.showSubagentText(sub);
    }
    // A helper it started that is still working ended with it (a cancel stops the whole chain).
    for (const [frameId, inner] of this.subframes) {
      if (inner !== sub && sub.box.contains(inner.box)) this.subagentDone({ frame_id: frameId, status });
    }
    // Its steps still open end with it: no tool_done comes for a call its run's end cut.
    for (const step of sub.steps.children) {
      if (STEP_ENDING[status] && OPEN_STEPS.has(step.dataset.status)) setStep(step, STEP_ENDING[status]);
    }
    sub.say(endingKey(status));
    sub.box.classList.add("done", `ended-${status}`);
    sub.box.removeAttribute("aria-busy");
    this.subframes.delete(data.frame_id);
    const card = this.toolCards.get(sub.callId);
    if (card) this.batchOutcome(card);
  }

  /** An execute_task batch (two or more runs) whose call is done says how its runs
   * ended: "Failed" when every one did, "2 of 3 failed" when some did — not "Done". */
  batchOutcome(card) {
    const boxes = [...card.node.children].filter((child) => child.matches(".subagent"));
    if (card.status !== "done" || boxes.length < 2 || boxes.some((box) => !box.classList.contains("done"))) return;
    const failed = boxes.filter((box) => !box.classList.contains("ended-completed")).length;
    if (!failed) return;
    card.badge.className = "badge tool-error";
    card.badge.textContent = failed === boxes.length ? toolStatusLabel("error") : t("chat.tool_batch_failed", { failed, total: boxes.length });
    card.node.dataset.outcome = failed === boxes.length ? "failed" : "some_failed";
  }

  /** Who asks, for an approval or a question: a helper (a sub-agent's frame) as
   * { frameId, agent } — its agent from the server, else from its box here, else
   * null until its box comes (nameAskers) — or null for the assistant itself. */
  helperOf(item) {
    const frameId = item.frame_id || null;
    const agent = item.agent || (frameId ? this.subBoxes.get(frameId)?.agent : null) || null;
    if (!agent && !((item.depth ?? 0) > 0)) return null;
    return { frameId, agent };
  }

  /** A helper's box came: the cards waiting for its name (asked before it showed) say it. */
  nameAskers(frameId, agent) {
    for (const panel of [...this.approvals.values(), ...this.questions.values()]) {
      if (panel.frameId === frameId && !panel.agent && panel.name) { panel.agent = agent; showAgentTitle(agent, panel.name); }
    }
  }

  /**
   * After a (re)load, the boxes of the conversation's sub-agent runs, which only a live
   * `agent_start` makes: each in the card (or the caller's step, for a nested run) of
   * the call that started it, callers first, with its steps and the tail of its text as
   * the server has it (a streaming answer as last checkpointed), then what its events
   * said while that was read — so the events that follow continue it. A finished run's
   * box says how it ended, as it did live.
   * @param {number} load this.loads when the runs were asked for (a newer render waits for its own)
   * @param {Array|null} runs [{run, transcript}] as GET /api/agent-runs/<id> answers
   */
  restoreSubagents(load, runs) {
    if (load !== this.loads) return;
    const held = this.held || new Map();
    this.held = null;
    // Callers first; a batch in call order, as its boxes came live: the runs come newest
    // first (a batch's last call first), so reversed, then ordered by when each was asked.
    const order = (a, b) => a.run.depth - b.run.depth || (a.run.created_at < b.run.created_at ? -1 : a.run.created_at > b.run.created_at ? 1 : 0);
    for (const { run, transcript } of [...(runs || [])].reverse().sort(order)) {
      if (!run.frame_id || this.subBoxes.has(run.frame_id)) continue;
      const sub = this.subagentStarted({ frame_id: run.frame_id, spawned_by_call_id: run.spawned_by_call_id, agent: run.agent_id });
      if (!sub) continue;
      const early = held.get(run.frame_id) || { texts: new Map(), steps: new Map(), done: null };
      const answers = (transcript || []).filter((m) => m.role === "assistant");
      for (const m of answers) {
        // A failed answer with its reason: worded as live (subagentDone), not the stored English.
        const failed = m.status === "error" && m.reason?.code ? errorString(m.reason.code, m.reason.values || {}, { admin: this.handlers.admin !== false }) : null;
        sub.parts.set(Number(m.id), failed || joinOverlap(m.content || "", early.texts.get(Number(m.id)) || ""));
        if (m.status === "interrupted") sub.cut.add(Number(m.id));
      }
      for (const [id, text] of early.texts) if (!sub.parts.has(id)) sub.parts.set(id, text);
      this.showSubagentText(sub);
      const step = (callId, name, status, code) => this.subagentStep({ frame_id: run.frame_id, call_id: callId, name, result_code: code }, status);
      for (const message of answers) for (const call of message.tool_calls || []) step(call.id, call.name, call.status, call.result_code);
      for (const [callId, { name, status }] of early.steps) step(callId, name, status);
      const ended = isLive(run.status) ? early.done : run.status;
      if (ended) this.subagentDone({ frame_id: run.frame_id, status: ended });
    }
    this.follow();
  }

  // -- approvals ----------------------------------------------------------------------------------

  /** A card asking the member; inside the call's tool card when it is on screen.
   * `decided`: a stored answer (a reload), drawn as its card ended live; the call keeps
   * the status history gives it. `before`: where a quiet card of its own goes. */
  approvalRequired(approval, { quiet = false, decided = null, before = null } = {}) {
    const id = approval.approval_id || approval.id;
    const callId = approval.call_id || approval.tool_call_id;
    const name = approval.name || approval.tool;
    if (this.approvals.has(id)) return;
    const status = el("p", { class: "approval-status", role: "status" });
    const approve = button(t("chat.approve"), { kind: "primary small", onClick: () => decide("approve") });
    const deny = button(t("chat.deny"), { kind: "small", onClick: () => decide("deny") });
    const actions = el("div", { class: "actions" }, approve, deny);
    // A helper's call: the card names the helper asking, not "the assistant" (named as
    // soon as it is known: from the server, or when the helper's box comes).
    const helper = this.helperOf(approval);
    const asker = el("span", { text: t("chat.approval_question_before") });
    const question = el("p", { class: "approval-question" }, asker, el("code", { text: name }), t("chat.approval_question_after"));
    const why = untrustedReason(approval.untrusted);
    const node = el("div", { class: "approval", role: "group", "aria-label": t("chat.approval_label", { tool: name }), "data-approval-id": id },
      question,
      ...(why ? [el("p", { class: "approval-untrusted", text: why })] : []),
      scrollableRegion(el("pre", { class: "tool-args", text: prettyArguments(approval.arguments) }), t("chat.tool_arguments_of", { tool: name })),
      actions, status);
    const panel = {
      node, callId, pending: true, frameId: helper?.frameId, agent: helper?.agent, agentName: null,
      name: (agent) => {
        panel.agentName = agent;
        asker.textContent = t("chat.approval_question_before_agent", { agent });
        this.placeActivity();
      },
      resolve: (decided) => {
        // Approved, yet the call was denied: the host asks again as a call starts, and the
        // member's access had gone meanwhile, or a rule now refuses it. "Approved." beside
        // "Denied" said neither why nor that nothing ran.
        // A helper's call has a step in its box, not a card of its own.
        const card = this.toolCards.get(callId);
        const step = card ? null : this.subCalls.get(callId);
        const callStatus = card ? card.status : step?.dataset.status;
        const callCode = card ? card.code : step?.dataset.code;
        const refused = approvedDecision(decided) && callStatus === "denied";
        const decision = refused ? (callCode === "rule" ? "refused_by_rule" : "withdrawn") : decided;
        panel.pending = false;
        panel.decision = decision;
        const hadFocus = node.contains(document.activeElement);  // settled elsewhere (another tab, a stop)
        node.classList.add("resolved");
        actions.remove();
        question.remove();
        node.querySelector(".tool-args")?.remove();
        node.querySelector(".approval-untrusted")?.remove();
        // Said once: resolved again (the call's own end, another tab's event), the same
        // words set again were read out again.
        const said = decisionLabel(decision);
        if (status.textContent !== said) status.textContent = said;
        status.className = `approval-status ${["deny", "denied", "withdrawn", "refused_by_rule"].includes(decision) ? "denied" : decision === "expired" ? "expired" : "approved"}`;
        if (hadFocus) { status.tabIndex = -1; status.focus({ preventScroll: true }); }  // never lost to <body>
        this.placeActivity();
      },
    };
    const decide = async (decision) => {
      approve.disabled = deny.disabled = true;
      status.textContent = "";
      const outcome = await this.handlers.decide(id, decision);
      if (outcome.ok) {
        panel.resolve(decision);
        // The buttons are gone: focus stays on this card's outcome, not lost to <body>.
        status.tabIndex = -1;
        status.focus({ preventScroll: true });
        return;
      }
      approve.disabled = deny.disabled = false;
      status.textContent = outcome.error;
      status.className = "approval-status error";
    };
    this.approvals.set(id, panel);
    if (panel.agent) showAgentTitle(panel.agent, panel.name);
    const card = this.toolCards.get(callId);
    if (card) {
      if (!decided) card.set("awaiting_approval");
      card.node.append(node);
      if (!quiet) this.follow();
    } else {
      const standalone = el("div", { class: "tool-card standalone", "data-call-id": callId },
        el("p", { class: "tool-standalone-head" }, el("span", { class: "tool-icon", "aria-hidden": "true" }), el("code", { class: "tool-name", text: name })), node);
      if (quiet) this.list.insertBefore(standalone, before); else this.append(standalone);
    }
    if (decided) panel.resolve(decided);
    else this.placeActivity();
  }

  approvalResolved(data) {
    const panel = this.approvals.get(data.approval_id);
    // Approved for a tool the member may no longer use: settled denied, for that reason.
    if (panel?.pending) panel.resolve(data.reason === "withdrawn" ? "withdrawn" : data.decision);
  }

  // -- questions (a running tool asks the member for input: TurnApi.ask) -------------------------

  /** A form card: the answer goes to the waiting tool only (never stored, never logged). */
  questionAsked(question, { quiet = false } = {}) {
    const id = question.question_id;
    if (!id || this.questions.has(id)) return;
    const status = el("p", { class: "approval-status", role: "status" });
    const inputs = (question.fields || []).map((f) => {
      const label = f.title || f.name;
      let input;
      if (f.type === "boolean") input = el("input", { type: "checkbox", name: f.name });
      else if (f.enum) input = el("select", { name: f.name, required: f.required }, ...(f.required ? [] : [el("option", { value: "", text: "" })]), ...f.enum.map((v) => el("option", { value: v, text: v })));
      else input = el("input", { type: f.type === "string" ? "text" : "number", step: f.type === "number" ? "any" : undefined, name: f.name, required: f.required, autocomplete: "off" });
      return el("label", { class: f.type === "boolean" ? "field check" : "field" }, el("span", { text: label }), input,
        f.description ? el("small", { class: "hint", text: f.description }) : null);
    });
    const send = button(t("chat.question_send"), { kind: "primary small", type: "submit" });
    const decline = button(t("chat.question_decline"), { kind: "small", onClick: () => answer("decline") });
    const actions = el("div", { class: "actions" }, send, decline);
    const form = el("form", { class: "question-form", on: { submit: (e) => { e.preventDefault(); answer("accept"); } } }, ...inputs, actions);
    // A helper's tool asks: the card names the helper who waits (as an approval does).
    const helper = this.helperOf(question);
    const asker = el("p", { class: "question-asker", hidden: true });
    const node = el("div", { class: "approval question", role: "group", "aria-label": t("chat.question_label"), "data-question-id": id },
      asker, el("p", { class: "approval-question", text: question.message || "" }), form, status);
    const card = {
      node, pending: true, question: true, frameId: helper?.frameId, agent: helper?.agent, agentName: null,
      name: (agent) => {
        card.agentName = agent;
        node.setAttribute("aria-label", t("chat.question_label_agent", { name: agent }));
        asker.textContent = t("chat.question_asked_by_agent", { name: agent });
        asker.hidden = false;
        this.placeActivity();
      },
      resolve: (outcome) => {
        card.pending = false;
        node.classList.add("resolved");
        form.remove();
        status.textContent = t(outcome === "accept" ? "chat.question_answered" : outcome === "decline" ? "chat.question_declined" : "chat.question_gone");
        status.className = `approval-status ${outcome === "accept" ? "approved" : "denied"}`;
        this.placeActivity();
      },
    };
    const answer = async (action) => {
      const content = {};
      if (action === "accept") {
        for (const f of question.fields || []) {
          const input = form.elements.namedItem(f.name);
          if (f.type === "boolean") content[f.name] = input.checked;
          else if (input.value !== "") content[f.name] = input.value;
        }
      }
      send.disabled = decline.disabled = true;
      status.textContent = "";
      const outcome = await this.handlers.answer(id, action, content);
      if (outcome.ok) {
        card.resolve(action);
        status.tabIndex = -1;
        status.focus({ preventScroll: true });
        return;
      }
      send.disabled = decline.disabled = false;
      status.textContent = outcome.error;
      status.className = "approval-status error";
    };
    this.questions.set(id, card);
    if (card.agent) showAgentTitle(card.agent, card.name);
    const box = el("div", { class: "tool-card standalone" }, node);
    if (quiet) this.list.append(box); else this.append(box);
    this.placeActivity();
  }

  questionResolved(data) {
    const card = this.questions.get(data.question_id);
    if (card?.pending) card.resolve(data.status);
  }

  /** A turn that ended leaves no question open: its approvals expired with it. */
  expireOpenApprovals() {
    for (const panel of this.approvals.values()) if (panel.pending) panel.resolve("expired");
  }
}


// Why a card asks that a rule would have allowed: untrusted text is in the
// conversation (check E2). ``untrusted``: {kind, values} from the server, or null.
function untrustedReason(untrusted) {
  if (!untrusted || typeof untrusted !== "object") return "";
  const values = untrusted.values || {};
  const source = untrusted.kind === "shared_note" ? t("chat.untrusted_shared_note", { path: values.path || "" })
    : untrusted.kind === "upload" ? t("chat.untrusted_upload", { name: values.name || "" })
    : untrusted.kind === "tool" ? (values.detail ? t("chat.untrusted_tool_detail", { tool: values.tool || "", detail: values.detail })
      : t("chat.untrusted_tool", { tool: values.tool || "" }))
    : t("chat.untrusted_unknown");
  return t("chat.approval_untrusted", { source });
}
