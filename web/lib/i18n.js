// UI strings come from /api/i18n (the host's bundles; ours are under `core.`).
// Pages call t() while rendering, so switching language is: load, re-render.

let strings = {};
let locale = "en";
let locales = ["en"];

export async function loadLocale(wanted) {
  const response = await fetch(`/api/i18n?locale=${encodeURIComponent(wanted || "en")}`, { headers: { Accept: "application/json" } });
  const data = await response.json().catch(() => ({}));
  strings = data.strings || {};
  locale = data.locale || "en";
  locales = data.locales || ["en"];
  document.documentElement.lang = locale;
  document.documentElement.dir = textDirection(locale);
  try { localStorage.setItem(SHOWN_KEY, locale); } catch { /* storage off: nothing remembered */ }
}

// The language this browser last showed the app in: its next sign-in page speaks it, so
// a member reading German meets a German form after a restart, not the browser's English.
const SHOWN_KEY = "skald.locale";

/** The language last shown in this browser (read before anything loads one). */
export function lastShownLocale() {
  try { return localStorage.getItem(SHOWN_KEY); } catch { return null; }
}

/** The first of `tags` (a browser's languages, best first) that `offered` has: the
 * whole tag (pt-BR), else its language (de-AT → de), compared ignoring case; null for none. */
export function matchLocale(tags, offered) {
  const byCase = new Map(offered.map((code) => [String(code).toLowerCase(), code]));
  for (const tag of tags) {
    const whole = String(tag || "").trim().replace(/_/g, "-").toLowerCase();
    const found = byCase.get(whole) ?? byCase.get(whole.split("-")[0]);
    if (found) return found;
  }
  return null;
}

/** The browser's preferred language if the host has it, else `otherwise` (English). */
export function browserLocale(otherwise = "en") {
  return matchLocale(navigator.languages || [navigator.language || "en"], locales) ?? otherwise;
}

// Scripts written right to left, for a browser whose Intl.Locale has no text info
// (Firefox, older Safari): Arabic, Hebrew, Persian, Urdu, Pashto, Yiddish, Dhivehi,
// Central Kurdish, Sindhi, Uyghur.
const RIGHT_TO_LEFT = new Set(["ar", "he", "iw", "fa", "ur", "ps", "yi", "ji", "dv", "ckb", "sd", "ug"]);

/** "rtl" for a language written right to left ("ar", "he-IL", "fa"), else "ltr": what
 * <html dir> says, so the layout (logical CSS properties, grid and flex order) mirrors. */
export function textDirection(code) {
  const tag = String(code || "en");
  if (RIGHT_TO_LEFT.has(tag.toLowerCase().split(/[-_]/)[0])) return "rtl";
  try {
    const info = new Intl.Locale(tag);
    // getTextInfo() in newer engines, the textInfo getter in older Chromium and Safari.
    const direction = (typeof info.getTextInfo === "function" ? info.getTextInfo() : info.textInfo)?.direction;
    return direction === "rtl" ? "rtl" : "ltr";
  } catch {
    return "ltr"; // not a tag Intl reads: the list above did not name it either
  }
}

export const currentLocale = () => locale;
export const availableLocales = () => [...locales];

/** The key to read for `count` things: `<key>.one` / `<key>.other` (any category of
 * Intl.PluralRules for the locale: zero, one, two, few, many, other) when the bundle has
 * them, `.other` when the locale's category is missing, else the key itself. */
function pluralKey(key, count) {
  if (typeof count !== "number" || !(`core.${key}.other` in strings)) return key;
  const category = new Intl.PluralRules(locale).select(count);
  return `core.${key}.${category}` in strings ? `${key}.${category}` : `${key}.other`;
}

/** t("members.title"), t("error.login_throttled", {seconds: 30}); a missing key shows itself.
 * With a numeric `values.count` a key may have plural forms (see pluralKey). */
export function t(key, values = {}) {
  key = pluralKey(key, values?.count);
  const text = strings[`core.${key}`] ?? key;
  return text.replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
}

/** A size in the reader's number format ("901,1 KiB" in German). */
export function formatSize(bytes) {
  if (bytes == null) return "";
  const number = (value, digits) => value.toLocaleString(document.documentElement.lang || undefined, { minimumFractionDigits: digits, maximumFractionDigits: digits });
  if (bytes < 1024) return `${number(bytes, 0)} B`;
  if (bytes < 1024 * 1024) return `${number(bytes / 1024, 1)} KiB`;
  if (bytes < 1024 ** 3) return `${number(bytes / 1024 / 1024, 1)} MiB`;
  return `${number(bytes / 1024 ** 3, 2)} GiB`;
}

/** `values` with each `<name>` that has a byte count `<name>_bytes` beside it (a limit,
 * "1.5 GiB" as the server words it in English) said by formatSize in the reader's number
 * format, as every size the shell shows ("1,50 GiB"), and each that has a number
 * `<name>_number` beside it in the reader's digits, as a form's hint says it ("at most
 * 1.000" beside "Zwischen 1 und 1.000"); the server's own readers word them alike
 * (skald_host/core/i18n.py `sized`). */
function sized(values) {
  const out = { ...values };
  for (const [name, value] of Object.entries(values)) {
    if (name.endsWith("_bytes") && Number.isInteger(value) && value >= 0) out[name.slice(0, -"_bytes".length)] = formatSize(value);
    else if (name.endsWith("_number") && Number.isFinite(value)) {
      out[name.slice(0, -"_number".length)] = value.toLocaleString(currentLocale());
    }
  }
  return out;
}

/** HTTP statuses a provider refuses with until its settings change (never retried: llm/client.py NEVER_RETRY less 422). */
const SETTINGS_REFUSALS = new Set([401, 403, 404]);

/** The reader's words for an API error code ({"code": "password_too_short",
 * "values": {...}}), or null when there are none (then show the server's message).
 * `admin: false`: the reader cannot fix the cause (a provider's address), so a code's
 * `error.<code>.member` wording, when there is one, says what they can do instead.
 * A wait of a minute or more (`values.seconds`) is said in whole minutes, rounded up,
 * by a code's `error.<code>.minutes` forms where it has them: "in 893 seconds" asked
 * the reader to do the arithmetic. */
export function errorString(code, values = {}, { admin = true } = {}) {
  if (!code || !(`core.error.${code}` in strings)) return null;
  values = sized(values || {});
  // A refusal only a change of settings ends (a wrong API key, no access, no such
  // model): Retry cannot help, and `error.<code>.settings` says so, and who can fix it.
  if (SETTINGS_REFUSALS.has(Number(values.status)) && `core.error.${code}.settings` in strings) code = `${code}.settings`;
  if (!admin && `core.error.${code}.member` in strings) return t(`error.${code}.member`, values);
  const seconds = Number(values.seconds);
  if (seconds >= 60 && `core.error.${code}.minutes.other` in strings) {
    return t(`error.${code}.minutes`, { ...values, count: Math.ceil(seconds / 60) });
  }
  return t(`error.${code}`, values);
}

/** A plugin's own string (`<plugin id>.<key>` in the merged table: its bundle's key,
 * in the reader's language, English underneath), or null when the plugin has none. */
export function pluginString(pluginId, key) {
  return strings[`${pluginId}.${key}`] ?? null;
}

/** A language's own name ("Deutsch"), falling back to its code. */
export function localeName(code) {
  const key = `core.locale.${code}`;
  return strings[key] ?? code;
}

/** Text the host seeded as a string key (a preset role's label, a built-in rule's
 * note: "core.seed.…") in the reader's language; anything else as written. */
export function seeded(text) {
  const value = String(text ?? "");
  return value.startsWith("core.seed.") ? (strings[value] ?? value) : value;
}

/** What to send back for a seeded field: the key itself while the shown text is unchanged. */
export const unseeded = (original, edited) => (edited === seeded(original) ? original : edited);
