// Read aloud: POST /api/tts answers a WAV streamed sentence by sentence (its header says
// "length unknown"), so the samples are played through Web Audio as they arrive rather
// than after the whole reply is made. One reading at a time: starting one stops the last.
// The text goes in the request body, never in a URL.

import { csrf } from "./api.js";
import { el } from "./dom.js";
import { errorString, t } from "./i18n.js";

let current = null;

/** Stop the reading in progress (if any). */
export function stopSpeaking() {
  const playing = current;
  current = null;
  if (!playing) return;
  playing.controller.abort();
  playing.context.close().catch(() => {});
  playing.onEnd?.();
}

const int16ToFloat = (bytes) => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(bytes.byteLength / 2);
  for (let i = 0; i < out.length; i += 1) out[i] = view.getInt16(i * 2, true) / 32768;
  return out;
};

/** Speak `text` (`voice`, `locale` optional). Resolves when the stream is read; `onEnd`
 * runs when playback finished or was stopped. Rejects with the server's reason. */
export async function speak(text, { voice, locale, onEnd } = {}) {
  stopSpeaking();
  const context = new AudioContext();
  const playing = { controller: new AbortController(), context, onEnd };
  current = playing;
  const headers = { "Content-Type": "application/json", Accept: "audio/wav, application/json" };
  // The shell's token; a page mounted on its own asks the session for it.
  const token = csrf() || (await fetch("/api/auth/session", { headers: { Accept: "application/json" } })
    .then((r) => r.json()).catch(() => ({}))).csrf_token;
  if (token) headers["X-CSRF-Token"] = token;
  let response;
  try {
    response = await fetch("/api/tts", {
      method: "POST", headers, credentials: "same-origin", signal: playing.controller.signal,
      body: JSON.stringify({ text, ...(voice ? { voice } : {}), ...(locale ? { locale } : {}) }),
    });
  } catch (error) {
    if (current === playing) stopSpeaking();
    throw error;
  }
  if (!response.ok) {
    const data = await response.json().catch(() => ({}));
    if (current === playing) stopSpeaking();
    throw new Error(errorString(data.code, data.values) || data.error || `HTTP ${response.status}`);
  }
  const reader = response.body.getReader();
  let rate = 0;
  let pending = new Uint8Array(0);
  let at = context.currentTime + 0.05;
  let last = null;
  const play = (bytes) => {
    const samples = int16ToFloat(bytes);
    if (!samples.length) return;
    const buffer = context.createBuffer(1, samples.length, rate);
    buffer.copyToChannel(samples, 0);
    const source = context.createBufferSource();
    source.buffer = buffer;
    source.connect(context.destination);
    at = Math.max(at, context.currentTime + 0.02);
    source.start(at);
    at += buffer.duration;
    last = source;
  };
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (current !== playing) return;
      if (value) {
        const joined = new Uint8Array(pending.length + value.length);
        joined.set(pending);
        joined.set(value, pending.length);
        pending = joined;
      }
      if (!rate && pending.length >= 44) {
        rate = new DataView(pending.buffer, pending.byteOffset).getUint32(24, true);
        pending = pending.slice(44);
      }
      // Play in pieces of a quarter second or more (and the rest at the end).
      const even = pending.length - (pending.length % 2);
      if (rate && even && (done || even >= rate * 0.5)) {
        play(pending.subarray(0, even));
        pending = pending.slice(even);
      }
      if (done) break;
    }
  } catch (error) {
    if (current !== playing) return; // stopped: the abort is expected
    throw error;
  }
  const finish = () => { if (current === playing) stopSpeaking(); };
  if (last) last.onended = finish; else finish();
}

/** The read-aloud button of a settled answer (in its meta line); added once. */
export function addReadAloud(meta, content, status) {
  meta.querySelector(".read-aloud")?.remove();
  if (status !== "complete" || !content || !String(content).trim()) return;
  const label = t("tts.read_aloud");
  // Drawn icons, not the 🔊/⏹ emoji: a machine without an emoji font showed an empty box.
  const speaker = el("span", { class: "icon speaker-icon", "aria-hidden": "true" });
  const stop = el("span", { class: "icon stop-icon", "aria-hidden": "true" });
  const node = el("button", { class: "btn small read-aloud", type: "button", title: label, "aria-label": label }, speaker);
  const idle = () => { node.replaceChildren(speaker); node.setAttribute("aria-label", label); node.title = label; node.dataset.state = "idle"; };
  node.addEventListener("click", async () => {
    if (node.dataset.state === "playing") { stopSpeaking(); return; }
    node.replaceChildren(stop);
    node.dataset.state = "playing";
    node.setAttribute("aria-label", t("tts.stop"));
    node.title = t("tts.stop");
    try {
      await speak(content, { onEnd: idle });
    } catch (error) {
      idle();
      node.title = t("tts.failed", { message: error.message });
      node.dataset.state = "failed";
    }
  });
  idle();
  meta.append(node);
  meta.hidden = false;
}
