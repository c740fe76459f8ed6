// The member's one WebSocket (/api/ws): events out of their bus, small commands in.
//
// It reconnects with backoff until the tab signs out. Chat messages go through an
// outbox: each carries an idempotency key made once, when the member pressed Enter,
// and stays in the outbox until the server acknowledges it. A message typed while the
// socket is down waits there and is sent on reconnect; a message whose ack was lost
// with the connection is sent again with the same key, and the server stores it once.
// The outbox lives in sessionStorage too, so even a reload of the tab loses nothing.
// An error that says `retry_after` (the server could not store it: a full disk, or too
// many messages at once) keeps the message in the outbox, and it is sent again after
// that many seconds.
// A close with 1008 means the session ended: sign-in.
// A close with 4029 means the member has too many tabs open (each holds a socket, and the
// server takes only so many): the state is "refused", and the tab tries again only when it
// is looked at again or asked to send, never in a loop.
// A connection can die without a close (the network gone, a laptop asleep, a proxy that
// dropped it): the socket stays OPEN and nothing arrives. So every ping expects an
// answer (the server's pong, or any message) within PONG_TIMEOUT_MS; without one the
// socket is given up and reconnected, as after a close.
import { api, signalSessionLost } from "./api.js";

const PING_MS = 25_000;
const PONG_TIMEOUT_MS = 10_000;
const MAX_BACKOFF_MS = 15_000;

/** The heartbeat's intervals; a test shortens them by setting `window.__skaldSocketTimings`
 * ({ pingMs, pongTimeoutMs }) before the page loads. */
function timing(name, otherwise) {
  const value = window.__skaldSocketTimings?.[name];
  return Number.isFinite(value) && value > 0 ? value : otherwise;
}

const listeners = new Set();
const stateListeners = new Set();
let socket = null;
let wanted = false;
let state = "idle"; // idle | connecting | open | reconnecting | refused
const TOO_MANY_SOCKETS = 4029;
let attempt = 0;
let everOpened = false;
let retryTimer = null;
let pingTimer = null;
let pongTimer = null; // set while a ping waits for its answer
let storageKey = null;
let outbox = new Map(); // idempotency_key → {conversation_id, text, idempotency_key, created}
const retries = new Map(); // idempotency_key → timer of a send the server could not store yet

function setState(next) {
  if (state === next) return;
  state = next;
  for (const fn of stateListeners) fn(state);
}

function persist() {
  if (!storageKey) return;
  try {
    if (outbox.size) sessionStorage.setItem(storageKey, JSON.stringify([...outbox.values()]));
    else sessionStorage.removeItem(storageKey);
  } catch { /* storage full or disabled: the in-memory outbox still holds them */ }
}

function restore() {
  outbox = new Map();
  if (!storageKey) return;
  try {
    for (const item of JSON.parse(sessionStorage.getItem(storageKey) || "[]")) {
      if (item && typeof item.idempotency_key === "string") outbox.set(item.idempotency_key, item);
    }
  } catch { /* a damaged entry: start empty */ }
}

function transmit(item) {
  if (socket?.readyState !== WebSocket.OPEN) return false;
  const message = { type: "send", conversation_id: item.conversation_id, text: item.text, idempotency_key: item.idempotency_key };
  if (item.attachments?.length) message.attachments = item.attachments;
  socket.send(JSON.stringify(message));
  return true;
}

function retryLater(key, seconds) {
  clearTimeout(retries.get(key));
  retries.set(key, setTimeout(() => {
    retries.delete(key);
    const item = outbox.get(key);
    if (item) transmit(item); // socket down meanwhile: the reconnect sends the outbox anyway
  }, seconds * 1000 * (0.75 + Math.random() * 0.5)));
}

function dispatch(message) {
  for (const fn of [...listeners]) {
    try { fn(message); } catch (error) { console.error(error); }
  }
}

function scheduleRetry() {
  clearTimeout(retryTimer);
  const delay = Math.min(MAX_BACKOFF_MS, 500 * 2 ** attempt) * (0.75 + Math.random() * 0.5);
  attempt += 1;
  retryTimer = setTimeout(open, delay);
}

function open() {
  clearTimeout(retryTimer);
  if (!wanted || socket) return;
  setState(everOpened ? "reconnecting" : "connecting");
  const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/api/ws`;
  const ws = new WebSocket(url);
  socket = ws;
  let opened = false;
  ws.addEventListener("open", () => {
    opened = true;
    attempt = 0;
    const reconnected = everOpened;
    everOpened = true;
    setState("open");
    for (const item of outbox.values()) transmit(item);
    clearInterval(pingTimer);
    clearTimeout(pongTimer);
    pongTimer = null;
    pingTimer = setInterval(() => {
      if (ws.readyState !== WebSocket.OPEN) return;
      ws.send('{"type":"ping"}');
      // No answer in time: the connection is dead though the socket says OPEN.
      if (!pongTimer) pongTimer = setTimeout(() => lost(ws), timing("pongTimeoutMs", PONG_TIMEOUT_MS));
    }, timing("pingMs", PING_MS));
    dispatch({ type: "socket_open", reconnected });
  });
  ws.addEventListener("message", (event) => {
    if (socket !== ws) return; // one given up as dead: its late messages are not news
    clearTimeout(pongTimer); // anything at all says the connection lives
    pongTimer = null;
    let message;
    try { message = JSON.parse(event.data); } catch { return; }
    if (!message || typeof message !== "object") return;
    if ((message.type === "ack" || message.type === "error") && message.idempotency_key && outbox.has(message.idempotency_key)) {
      if (message.type === "error" && message.retry_after > 0) retryLater(message.idempotency_key, message.retry_after);
      else { outbox.delete(message.idempotency_key); persist(); }
    }
    // Events queued together on the server arrive as one "events" message, in order.
    const events = message.type === "events" && Array.isArray(message.events) ? message.events.map((event) => ({ type: "event", event })) : [message];
    for (const item of events) dispatch(item);
  });
  ws.addEventListener("close", async (event) => {
    if (socket !== ws) return;
    socket = null;
    clearInterval(pingTimer);
    clearTimeout(pongTimer);
    pongTimer = null;
    if (!wanted) return;
    if (event.code === 1008) { stop(); signalSessionLost(event.reason || null); return; }
    if (event.code === TOO_MANY_SOCKETS) {
      clearTimeout(retryTimer);
      attempt = 0;
      setState("refused");
      dispatch({ type: "socket_closed", code: event.code });
      return;
    }
    setState("reconnecting");
    // 1001: the server is stopping (it cut the running answers, and said so first).
    dispatch({ type: "socket_closed", code: event.code });
    if (!opened) {
      // The handshake was refused: a 401 here ends the session through api().
      const probe = await api("GET", "/api/chat/status");
      if (probe.status === 401 || !wanted) return;
    }
    scheduleRetry();
  });
}

/** A socket that stopped answering: closed without waiting for a close that a dead
 * connection may never deliver, and reconnected at once (then with backoff). */
function lost(ws) {
  if (socket !== ws) return;
  socket = null;
  clearInterval(pingTimer);
  clearTimeout(pongTimer);
  pongTimer = null;
  try { ws.close(4000, "no answer to ping"); } catch { /* closing already */ }
  if (!wanted) return;
  setState("reconnecting");
  dispatch({ type: "socket_closed" });
  attempt = 0;
  scheduleRetry();
}

/** Open the socket for this signed-in member (idempotent). */
export function connect(memberId) {
  const key = `skald.outbox.${memberId}`;
  if (storageKey !== key) { storageKey = key; restore(); }
  wanted = true;
  if (!socket) open();
}

/** Sign-out or session end: close for good, forget nothing queued unless asked. */
export function stop({ forget = false } = {}) {
  wanted = false;
  clearTimeout(retryTimer);
  clearInterval(pingTimer);
  clearTimeout(pongTimer);
  pongTimer = null;
  for (const timer of retries.values()) clearTimeout(timer);
  retries.clear();
  const ws = socket;
  socket = null;
  ws?.close(1000);
  everOpened = false;
  attempt = 0;
  if (forget) { outbox.clear(); persist(); }
  setState("idle");
}

export const connectionState = () => state;

export function onMessage(fn) { listeners.add(fn); return () => listeners.delete(fn); }
export function onState(fn) { stateListeners.add(fn); return () => stateListeners.delete(fn); }

/** Queue a chat message; returns its outbox item (sent now if the socket is open).
 * `attachments` are agent paths the upload endpoint returned. */
export function sendChat(conversationId, text, attachments = []) {
  const item = { conversation_id: conversationId, text, idempotency_key: crypto.randomUUID(), created: Date.now() };
  if (attachments.length) item.attachments = attachments;
  outbox.set(item.idempotency_key, item);
  persist();
  transmit(item);
  if (!socket && wanted) open();
  return item;
}

/** Messages for a conversation that the server has not acknowledged yet. */
export const unacknowledged = (conversationId) => [...outbox.values()].filter((m) => m.conversation_id === conversationId);

/** A command over the socket (stop, approve); false when it is not open. */
export function command(message) {
  if (socket?.readyState !== WebSocket.OPEN) return false;
  socket.send(JSON.stringify(message));
  return true;
}

// Back online, or the tab is looked at again: try now rather than at the backoff's pace.
function retryNow() {
  if (wanted && !socket) { attempt = 0; open(); }
}
window.addEventListener("online", retryNow);
document.addEventListener("visibilitychange", () => { if (document.visibilityState === "visible") retryNow(); });
