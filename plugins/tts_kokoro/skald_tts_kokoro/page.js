// The member's voice page: every voice of every enabled speech engine (GET /api/tts/voices,
// the host's list, so espeak-ng's voices are here too), the one chosen (saved in the
// member's private settings as `tts.voice`, PUT /api/me/settings) and a sample button
// that plays through the shared reader (/ui/lib/speech.js, streamed from POST /api/tts).
// Every text goes in through textContent. The shell's page header is the page's one h1
// (its title); the picker is a card in the shell's classes.

import { call, node } from "/ui/lib/plugin-kit.js";
import { speak, stopSpeaking } from "/ui/lib/speech.js";

export default class KokoroVoicePage extends HTMLElement {
  async connectedCallback() {
    this.pluginId = this.getAttribute("plugin-id") || "tts_kokoro";
    this.classList.add("page");
    this.intro = node("p", undefined, "tts-intro");
    this.select = node("select", undefined, { id: "tts-voice", name: "voice" });
    this.label = node("label", undefined, { for: "tts-voice" });
    this.languages = node("p", undefined, "hint tts-languages");
    this.sample = node("button", undefined, { type: "button", class: "btn tts-sample" });
    this.message = node("p", undefined, { class: "form-status tts-message", role: "status" });
    const field = node("div", undefined, "field");
    field.append(this.label, this.select, this.languages);
    const actions = node("div", undefined, "actions");
    actions.append(this.sample);
    const card = node("section", undefined, "card");
    card.append(this.intro, field, actions, this.message);
    this.replaceChildren(card);
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
    // A language's name in the reader's language: the host's string, else the browser's
    // own list (espeak-ng speaks ~100 languages the bundles do not name), else the code.
    let names = null;
    try {
      names = new Intl.DisplayNames([this.listing.locale || "en"], { type: "language", fallback: "none" });
    } catch (error) {
      // an old browser: the bundles' names and the codes
    }
    const named = (code) => {
      try {
        return names?.of(code);
      } catch (error) {
        return undefined; // not a language tag Intl accepts
      }
    };
    const language = (code) => this.strings[`core.tts.lang.${code}`] || named(code) || code;
    // espeak-ng's voices are titled by its English language name ("Arabic (espeak-ng)"):
    // named here from the voice's own code (en-us, cmn) or its language, in the reader's words.
    // Its name is then its language, so the option does not say the language twice.
    const optionText = (engine, voice) => {
      const spoken = voice.languages.map(language).join(", ");
      if (engine.engine !== "espeak-ng") return `${voice.title} — ${spoken}`;
      const code = voice.id.slice(engine.engine.length + 1);
      const own = voice.languages[0];
      const name = named(code) || (own && (this.strings[`core.tts.lang.${own}`] || named(own)));
      return name ? `${name} (espeak-ng)` : voice.title; // a language the browser cannot name: espeak-ng's own name
    };
    this.intro.textContent = this.s("page_intro");
    this.label.textContent = this.s("voice");
    this.sample.textContent = this.s("sample");
    const automatic = node("option", this.s("automatic"));
    automatic.value = "";
    const options = [automatic];
    this.voices = new Map();
    // In the order of their names in the reader's language (not the engine's code
    // order), and two voices that would read the same (espeak-ng's Chinese voices all
    // name one language) are told apart by their codes.
    let collator;
    try {
      collator = new Intl.Collator(this.listing.locale || "en", { sensitivity: "base", numeric: true });
    } catch (error) {
      collator = new Intl.Collator();
    }
    for (const engine of this.listing.engines) {
      if (!engine.ready) continue;
      const group = document.createElement("optgroup");
      group.label = engine.engine;
      const rows = engine.voices.map((voice) => ({ voice, text: optionText(engine, voice) }));
      const seen = new Map();
      for (const row of rows) seen.set(row.text, (seen.get(row.text) || 0) + 1);
      for (const row of rows) {
        if (seen.get(row.text) < 2) continue;
        const code = row.voice.id.startsWith(`${engine.engine}:`) ? row.voice.id.slice(engine.engine.length + 1) : row.voice.id;
        row.text = engine.engine === "espeak-ng" && row.text.endsWith(" (espeak-ng)")
          ? `${row.text.slice(0, -" (espeak-ng)".length)} (${code}, espeak-ng)`
          : `${row.text} (${code})`;
      }
      rows.sort((a, b) => collator.compare(a.text, b.text) || (a.voice.id < b.voice.id ? -1 : a.voice.id > b.voice.id ? 1 : 0));
      for (const { voice, text } of rows) {
        const option = node("option", text);
        option.value = voice.id;
        group.append(option);
        this.voices.set(voice.id, voice);
      }
      options.push(group);
    }
    this.select.replaceChildren(...options);
    this.select.value = this.voices.has(this.listing.voice) ? this.listing.voice : "";
    this.languages.textContent = this.s("languages", { languages: this.listing.languages.map(language).join(", ") });
    // An engine that is not ready: a member reads that it is not available, in their
    // language (the host's `core.error.<health_code>`); an admin reads why (its words).
    const fill = (text, values = {}) => text.replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
    const why = (e) => {
      const said = e.health_code && this.strings[`core.error.${e.health_code}`];
      return said ? fill(said, e.health_values || {}) : `${e.engine}: ${this.s("unavailable", { reason: e.health })}`;
    };
    const down = this.listing.engines.filter((e) => !e.ready && e.health);
    this.message.textContent = this.voices.size ? down.map(why).join(" ") : this.s("none");
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
