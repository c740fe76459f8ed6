// JSON over fetch with the session cookie and the CSRF header on every write
// (the backend refuses a cookie-authenticated write without it).

let csrfToken = null;
let onSessionLost = null;

export const setCsrfToken = (token) => { csrfToken = token || null; };

/** The CSRF token of this session, for a request that needs a raw response (speech). */
export const csrf = () => csrfToken;

/** Called once when a member request answers 401: the session ended elsewhere. The
 * handler is given the answer's code (or the socket close's reason): an admin's
 * deactivation or password reset is said as such ("account_deactivated", "password_reset"). */
export const whenSessionLost = (handler) => { onSessionLost = handler; };

/** The member socket learnt that the session ended (close 1008, its reason a code). */
export function signalSessionLost(code = null) {
  if (!csrfToken || !onSessionLost) return;
  csrfToken = null;
  onSessionLost(code);
}

/** Where the time of this browser's last request is kept: every request starts the
 * session's idle time again on the server, in any of its tabs (lib/idle-warning.js). */
export const LAST_REQUEST_KEY = "skald.last-request";

/** Note a request to the server now. */
export function noteRequest() {
  try { localStorage.setItem(LAST_REQUEST_KEY, String(Date.now())); } catch { /* storage off: this tab's timer alone */ }
  lastRequest = Date.now();
}
let lastRequest = Date.now();

/** When this browser last asked the server anything (ms since the epoch). */
export function lastRequestAt() {
  let shared = 0;
  try { shared = Number(localStorage.getItem(LAST_REQUEST_KEY)) || 0; } catch { /* storage off */ }
  return Math.max(lastRequest, shared);
}

export async function api(method, path, body, { keepalive = false } = {}) {
  noteRequest();
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (csrfToken && method !== "GET") headers["X-CSRF-Token"] = csrfToken;
  let response;
  try {
    // keepalive: the request outlives the page (a save made just before a reload).
    response = await fetch(path, {
      method, headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body), keepalive,
    });
  } catch (error) {
    return { ok: false, status: 0, data: { error: error.message }, headers: new Headers() };
  }
  const data = await response.json().catch(() => ({}));
  if (response.status === 401 && csrfToken && onSessionLost && !path.startsWith("/api/auth/")) {
    csrfToken = null;
    onSessionLost(data?.code || null);
  }
  return { ok: response.ok, status: response.status, data, headers: response.headers };
}

/** A raw-body upload (a File or Blob) to `path`; the answer is read like api()'s.
 * `extraHeaders` e.g. the chat upload's X-Filename. */
export async function upload(path, blob, extraHeaders = {}) {
  noteRequest();
  const headers = { Accept: "application/json", "Content-Type": "application/octet-stream", ...extraHeaders };
  if (csrfToken) headers["X-CSRF-Token"] = csrfToken;
  let response;
  try {
    response = await fetch(path, { method: "POST", headers, credentials: "same-origin", body: blob });
  } catch (error) {
    return { ok: false, status: 0, data: { error: error.message }, headers: new Headers() };
  }
  const data = await response.json().catch(() => ({}));
  return { ok: response.ok, status: response.status, data, headers: response.headers };
}
