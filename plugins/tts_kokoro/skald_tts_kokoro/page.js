// The member's voice page: every voice of every enabled speech engine (GET /api/tts/voices,
// the host's list, so espeak-ng's voices are here too), the one chosen (saved in the
// member's private settings as `tts.voice`, PUT /api/me/settings) and a sample button
// that plays through the shared reader (/ui/lib/speech.js, streamed from POST /api/tts).
// Every text goes in through textContent.

import { call, node } from "/ui/lib/plugin-kit.js";
import { speak, stopSpeaking } from "/ui/lib/speech.js";

export default class KokoroVoicePage extends HTMLElement {
  async connectedCallback() {
    this.pluginId = this.getAttribute("plugin-id") || "tts_kokoro";
    this.heading = node("h1");
    this.intro = node("p");
    this.label = node("label");
    this.select = node("select");
    this.select.name = "voice";
    this.languages = node("p");
    this.languages.className = "tts-languages";
    this.sample = node("button");
    this.sample.type = "button";
    this.sample.className = "btn tts-sample";
    this.message = node("p");
    this.message.className = "tts-message";
    this.message.setAttribute("role", "status");
    this.label.append(this.select);
    this.replaceChildren(this.heading, this.intro, this.label, this.languages, this.sample, this.message);
    this.select.addEventListener("change", () => this.save());
    this.sample.addEventListener("click", () => this.playSample());
    await this.refresh();
  }

  disconnectedCallback() {
    stopSpeaking();
  }

  s(key, values = {}) {
    const text = this.strings[`${this.pluginId}.${key}`] ?? key;
    return text.replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
  }

  async refresh() {
    try {
      this.listing = await call("GET", "/api/tts/voices");
      const i18n = await call("GET", `/api/i18n?locale=${encodeURIComponent(this.listing.locale)}`);
      this.strings = i18n.strings || {};
    } catch (error) {
      this.strings = this.strings || {};
      this.message.textContent = error.message;
      return;
    }
    const language = (name) => this.strings[`core.tts.lang.${name}`] || name;
    this.heading.textContent = this.s("page_title");
    this.intro.textContent = this.s("page_intro");
    this.label.prepend(`${this.s("voice")} `);
    this.sample.textContent = this.s("sample");
    const automatic = node("option", this.s("automatic"));
    automatic.value = "";
    const options = [automatic];
    this.voices = new Map();
    for (const engine of this.listing.engines) {
      if (!engine.ready) continue;
      const group = document.createElement("optgroup");
      group.label = engine.engine;
      for (const voice of engine.voices) {
        const option = node("option", `${voice.title} — ${voice.languages.map(language).join(", ")}`);
        option.value = voice.id;
        group.append(option);
        this.voices.set(voice.id, voice);
      }
      options.push(group);
    }
    this.select.replaceChildren(...options);
    this.select.value = this.voices.has(this.listing.voice) ? this.listing.voice : "";
    this.languages.textContent = this.s("languages", { languages: this.listing.languages.map(language).join(", ") });
    const down = this.listing.engines.filter((e) => !e.ready && e.health);
    this.message.textContent = this.voices.size
      ? down.map((e) => `${e.engine}: ${this.s("unavailable", { reason: e.health })}`).join(" ")
      : this.s("none");
  }

  async save() {
    try {
      await call("PUT", "/api/me/settings", { "tts.voice": this.select.value || null });
      this.message.textContent = this.s("saved");
    } catch (error) {
      this.message.textContent = error.message;
    }
  }

  /** A sample in the member's language when the voice speaks it, else in English (or
   * the voice's own language): a voice picker must let every voice be heard. */
  async playSample() {
    const voice = this.voices.get(this.select.value);
    const own = (this.listing.locale || "en").slice(0, 2);
    const speaks = !voice || voice.languages.includes(own);
    const locale = speaks ? own : voice.languages.includes("en") ? "en" : voice.languages[0];
    const text = speaks ? this.s("sample_text") : (this.strings[`${this.pluginId}.sample_text_en`] || "Hello! This is how I sound.");
    this.message.textContent = "";
    try {
      await speak(text, { voice: voice ? voice.id : undefined, locale });
    } catch (error) {
      this.message.textContent = error.message;
    }
  }
}
