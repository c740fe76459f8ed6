// The task strip of a conversation: its sub-agent runs that are still going, those
// that failed lately and, briefly, those cancelled (seed 004: "everything auditable").
// Read from the server, so it is the same after a reload; refreshed when a run starts
// or ends (socket events).
// A run opens to its transcript; a live one can be cancelled.
import { api } from "../lib/api.js";
import { el, uid } from "../lib/dom.js";
import { currentLocale, errorString, t } from "../lib/i18n.js";
import * as socket from "../lib/socket.js";
import { button, errorText, statusLine } from "../lib/ui.js";

const LIVE = new Set(["queued", "running", "waiting_delegates"]);
const REFRESH_ON = new Set(["agent_queued", "agent_start", "agent_done", "turn_finished", "cancelled"]);
const STOPS = "summary, a[href], button, [tabindex]"; // where a keyboard can be in a task item

export const taskStatus = (status) => t(`chat.task_status_${status}`);
export const isLive = (status) => LIVE.has(status);

// An agent's title in the reader's language, as the Helpers page shows it (the
// definitions carry it; a plugin's agent is titled in the plugin's own bundle, so the
// UI strings alone can't say it). Read once per page and language; an agent that is
// not listed, or a failed read, shows its id.
let titles = null; // { locale, read: Promise<Map<agent id, title>> }

function agentTitles() {
  const locale = currentLocale();
  if (titles?.locale !== locale) {
    const entry = { locale };
    entry.read = api("GET", "/api/agent-definitions").then((response) => {
      if (!response.ok) { if (titles === entry) titles = null; return new Map(); } // asked again next time
      return new Map((response.data.definitions || []).map((d) => [d.id, d.title || d.id]));
    });
    titles = entry;
  }
  return titles.read;
}

/** The Helpers page read the definitions already: the chat need not ask again. */
export function knowAgentTitles(definitions) {
  titles = { locale: currentLocale(), read: Promise.resolve(new Map(definitions.map((d) => [d.id, d.title || d.id]))) };
}

/** Write an agent's name with `write(name)`: its id at once (nothing waits for the
 * read), its title as soon as that is known. */
export function showAgentTitle(agentId, write) {
  write(agentId);
  agentTitles().then((known) => {
    const title = known.get(agentId);
    if (title && title !== agentId) write(title);
  });
}

/** A run's error in the reader's language: by its code where it has one (a model that
 * could not answer, rounds that ran out: worded as a turn's failure is), else where the
 * host wrote it (the coordinator records these few in English); anything else (a tool's
 * message, a run written before codes) as it came. */
function runError(run, admin) {
  const error = run.error;
  const coded = run.reason?.code ? errorString(run.reason.code, run.reason.values || {}, { admin }) : null;
  if (coded) return coded;
  if (error === "cancelled") return t("chat.task_error_cancelled");
  if (error === "the server was shutting down") return t("chat.task_error_shutting_down");
  if (error === "the server stopped while this ran") return t("chat.task_error_server_stopped");
  if (error === "cut off because the member's data was locked (signed out or the session ended)") return t("chat.task_error_locked");
  if (error === "stopped because an admin paused the member's account") return t("chat.task_error_deactivated");
  if (error === "this was cut off before it finished") return t("chat.task_error_cut_off");
  if (error === "the server stopped before this started") return t("chat.task_error_server_stopped_before_start");
  const timeout = /^the run did not finish within (\d+(?:\.\d+)?) s$/.exec(error);
  if (timeout) return t("chat.task_error_timed_out", { seconds: timeout[1] });
  return error;
}

/** A call's status in a run's transcript, in the reader's language (as the chat's steps say it). */
const CALL_STATUSES = new Set(["requested", "awaiting_approval", "running", "done", "error", "denied", "cancelled", "interrupted"]);
const callStatus = (status) => (CALL_STATUSES.has(status) ? t(`chat.tool_${status}`) : status || "");

function transcriptOf(detail, admin) {
  const list = el("ol", { class: "task-transcript" });
  // A fallback's note is written after the answer's row (the row exists before its
  // model is asked), yet it happened before that answer: it goes before it, as in the chat.
  const messages = [...(detail.transcript || [])];
  for (const note of messages.filter((m) => m.role === "note" && m.reason?.code === "model_fallback")) {
    const answer = messages.findIndex((m) => m.id === note.reason.values?.message_id);
    if (answer < 0 || answer > messages.indexOf(note)) continue;
    messages.splice(messages.indexOf(note), 1);
    messages.splice(answer, 0, note);
  }
  const notes = new Set();
  for (const message of messages) {
    // A note is the host's (a model fallback inside the run): said, not asked or answered.
    const role = message.role === "note" ? null
      : el("span", { class: "task-role", text: message.role === "user" ? t("chat.task_asked") : t("chat.task_answered") });
    const said = (message.reason?.code && errorString(message.reason.code, message.reason.values || {}, { admin })) || message.content || "";
    if (message.role === "note") notes.add(said);
    const item = el("li", { class: `task-message ${message.role}` }, ...(role ? [role] : []), el("span", { class: "task-text", text: said }));
    for (const call of message.tool_calls || []) item.append(el("code", { class: "task-call", text: `${call.name}: ${callStatus(call.status)}` }));
    list.append(item);
  }
  // The run's error, unless a note of the run said it already (the round limit: "Stopped after 6 rounds…" once).
  const error = detail.run.error ? runError(detail.run, admin) : null;
  if (error && !notes.has(error)) list.append(el("li", { class: "task-message error", text: error }));
  return list;
}

export function taskStrip(conversationId, { admin = true } = {}) {
  agentTitles(); // read alongside the runs, so a row is titled before it paints
  const list = el("ul", { class: "task-list" });
  const status = statusLine();
  const node = el("section", { class: "task-strip", "aria-label": t("chat.tasks_label"), hidden: true },
    el("h2", { class: "task-strip-title", text: t("chat.tasks_label") }), list, status.node);
  let timer = null;
  let leaving = null; // the read that drops the cancelled runs shown (the server's window)

  const row = (run) => {
    const agent = el("span", { class: "task-agent", id: uid("task-agent") });
    const what = el("span", { class: "task-what", id: uid("task-what"), text: run.task });
    // Named by its helper and task: a <details> is a group, unnamed without it.
    const details = el("details", { class: `task-item status-${run.status}`, "data-run-id": run.id, "aria-labelledby": `${agent.id} ${what.id}` });
    showAgentTitle(run.agent_id, (name) => { agent.textContent = name; });
    const summary = el("summary", {},
      agent,
      el("span", { class: "task-state", text: taskStatus(run.status) }),
      what);
    details.append(summary);
    details.addEventListener("toggle", async () => {
      if (!details.open || details.dataset.loaded) return;
      const response = await api("GET", `/api/agent-runs/${encodeURIComponent(run.id)}`);
      if (!response.ok) { status.error(errorText(response)); return; }
      details.dataset.loaded = "1";
      details.append(transcriptOf(response.data, admin));
    });
    if (LIVE.has(run.status)) {
      const cancel = button(t("chat.task_cancel"), { kind: "quiet small danger-text", onClick: async () => {
        // Disabled, the focused button dropped the keyboard's focus to <body>: it waits on
        // its task's summary, which the refresh then keeps (saying the new status).
        const hadFocus = document.activeElement === cancel;
        if (hadFocus) summary.focus({ preventScroll: true });
        cancel.disabled = true;
        const response = await api("POST", `/api/agent-runs/${encodeURIComponent(run.id)}/cancel`);
        if (!response.ok) {
          cancel.disabled = false;
          if (hadFocus && document.activeElement === summary) cancel.focus({ preventScroll: true });
          status.error(errorText(response));
          return;
        }
        refresh();
      } });
      details.append(el("p", { class: "task-actions" }, cancel));
    }
    return el("li", {}, details);
  };

  /** Read the strip again; resolves to every run read, or null. */
  const refresh = async () => {
    const response = await api("GET", `/api/conversations/${encodeURIComponent(conversationId)}/runs?strip=1`);
    if (!response.ok) { status.error(errorText(response)); return null; }
    status.clear();
    const open = new Set([...list.querySelectorAll("details[open]")].map((d) => d.dataset.runId));
    // Every row is made anew: the focus in one (a keyboard on a task) went to <body> with
    // it. It goes to the same place in the same task, else to that task's summary (its
    // Cancel gone once it ended), else to the task now in its place.
    const focused = list.contains(document.activeElement) ? document.activeElement : null;
    const had = focused?.closest("details");
    const place = had && { id: had.dataset.runId, stop: [...had.querySelectorAll(STOPS)].indexOf(focused), index: [...list.children].indexOf(had.parentElement) };
    const runs = (response.data.runs || []).filter((r) => r.depth === 1 || !LIVE.has(r.status));
    list.replaceChildren(...runs.map(row));
    const items = [...list.querySelectorAll("details")];
    for (const details of items) if (open.has(details.dataset.runId)) details.open = true;
    if (place) {
      const same = items.find((d) => d.dataset.runId === place.id);
      const target = same ? same.querySelectorAll(STOPS)[place.stop] || same.querySelector("summary")
        : items[Math.min(place.index, items.length - 1)]?.querySelector("summary");
      target?.focus({ preventScroll: true });
    }
    node.hidden = runs.length === 0;
    // A cancelled run shows as "Cancelled" for a short while (the server's
    // cancelled_seconds), then leaves: read again once that has passed, as no event
    // may come to do it.
    clearTimeout(leaving);
    leaving = null;
    if (runs.some((r) => r.status === "cancelled") && response.data.cancelled_seconds) {
      leaving = setTimeout(refresh, response.data.cancelled_seconds * 1000 + 500);
    }
    return response.data.runs || [];
  };

  const off = socket.onMessage((message) => {
    const data = message.type === "event" && message.event?.kind === "chat" ? message.event.data : null;
    if (!data || data.conversation_id !== conversationId || !REFRESH_ON.has(data.type)) return;
    clearTimeout(timer);
    timer = setTimeout(refresh, 150);
  });
  refresh();
  return { node, refresh, dispose: () => { off(); clearTimeout(timer); clearTimeout(leaving); } };
}
