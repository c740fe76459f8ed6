// #account: the member's own language and password, and who can read what of theirs.
import { api } from "../lib/api.js";
import { el, present } from "../lib/dom.js";
import { availableLocales, localeName, seeded, t } from "../lib/i18n.js";
import { busy, clearFieldErrors, errorText, field, markField, pageHeader, sayIn, section, showFormError, statusLine } from "../lib/ui.js";

/** Saved by its button, as the instance's language is (settings.js): saved on "change",
 *  the first ArrowDown through the list redrew the whole shell in another language. */
function languageSection(ctx) {
  const member = ctx.member;
  const select = el("select", { name: "locale" },
    el("option", { value: "", text: t("account.language_default") }),
    ...availableLocales().map((code) => el("option", { value: code, text: localeName(code) })));
  select.value = member.locale || "";
  const status = statusLine();
  const [wrapper] = field(t("account.language"), select, { hint: t("account.language_hint") });
  const submit = el("button", { class: "btn primary", type: "submit", text: t("common.save") });
  const form = el("form", { class: "stack language-form", novalidate: true }, wrapper, el("div", { class: "actions" }, submit), status.node);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    status.clear();
    busy(submit, async () => {
      const response = await api("PUT", "/api/me/locale", { locale: select.value || null });
      if (!response.ok) { status.error(errorText(response)); return; }
      member.locale = select.value || null;
      await ctx.relocalize(response.data.locale);
      // The page was rebuilt in the new language: its Save keeps the place, and says so.
      const again = document.querySelector("#content form.language-form");
      again?.querySelector("button[type=submit]")?.focus();
      const said = again?.querySelector(".form-status");
      if (said) sayIn(said, "ok", t("account.language_saved", { language: localeName(response.data.locale) }));
    });
  });
  return section(t("account.language_title"), form);
}

/** Where background notes (scheduled results, the notify tool) reach the member: the
 *  web or a channel that can reach them now (a linked chat, a paired phone). Shown when
 *  there is a choice, or when the chosen channel cannot reach them any more: then the
 *  notes stay here on the web, and a note says why (it went when a new choice is saved). */
function homeSourceSection() {
  const block = section(t("account.home_title"));
  block.hidden = true;
  api("GET", "/api/me/home-source").then((response) => {
    if (!response.ok) return;
    const { choices = [], fallback = null, titles = {} } = response.data;
    if (choices.length < 2 && !fallback) return;
    const title = (choice) => choice === "web" ? t("account.home_web") : titles[choice] || choice;
    const note = fallback ? el("p", { class: "notice warning", role: "status", "data-testid": "home-fallback",
      text: t(`account.home_fallback_${fallback.reason}`, { channel: title(fallback.source) }) }) : null;
    const select = el("select", { name: "home_source" }, ...choices.map((choice) => el("option", { value: choice, text: title(choice) })));
    select.value = response.data.home_source;
    const status = statusLine();
    const [wrapper] = field(t("account.home_source"), select, { hint: t("account.home_hint") });
    select.addEventListener("change", async () => {
      status.clear();
      select.setAttribute("aria-busy", "true"); // not disabled: that dropped the focus to <body>
      const saved = await api("PUT", "/api/me/home-source", { home_source: select.value });
      select.removeAttribute("aria-busy");
      if (saved.ok) {
        if (!saved.data.fallback) note?.remove();
        status.ok(t("account.home_saved"));
      } else status.error(errorText(saved));
    });
    // Only the web to choose from: the note alone, no one-option list.
    block.append(el("div", { class: "stack" }, ...present(note, choices.length > 1 ? wrapper : null, status.node)));
    block.hidden = false;
  });
  return block;
}

/** "What the admin can read": the providers and plugins that reach this member now
 *  (GET /api/me/privacy, from their current access) and what the admin can and
 *  cannot see. Filled when the answer comes; the rest of the page does not wait. */
function privacySection(member, onFacts = () => {}) {
  const body = el("div", { class: "stack privacy", "data-testid": "privacy" },
    el("p", { class: "hint", text: t("account.privacy_loading") }));
  const block = section(t("account.privacy_title"), body);
  const list = (items) => el("ul", {}, ...items.map((item) => el("li", {}, item)));
  const part = (title, ...children) => el("div", { class: "stack" }, el("h3", { text: title }), ...children);
  api("GET", "/api/me/privacy").then((response) => {
    if (!response.ok) { body.replaceChildren(el("p", { class: "notice error", role: "alert", text: errorText(response) })); return; }
    const facts = response.data;
    onFacts(facts);
    const byProvider = new Map();
    for (const model of facts.models) {
      const key = `${model.provider}\u0000${model.endpoint}`;
      if (!byProvider.has(key)) byProvider.set(key, { ...model, names: [] });
      byProvider.get(key).names.push(model.label || model.model);
    }
    const providers = [...byProvider.values()].map((p) =>
      t("account.privacy_provider", { provider: p.provider, endpoint: p.endpoint, models: p.names.join(", ") }));
    const models = !facts.chat ? el("p", { text: t("account.privacy_models_no_chat") })
      : providers.length === 0 ? el("p", { text: t("account.privacy_models_none") })
      : list(providers);
    const plugins = facts.plugins.length === 0 ? el("p", { text: t("account.privacy_plugins_none") })
      : list(facts.plugins.map((plugin) => plugin.manages_own_access ? t("account.privacy_plugin_own", { title: plugin.title }) : plugin.title));
    // Said as it is while the password is still the one an admin chose: the admin knows
    // what opens the data until the member chooses their own.
    const cannot = [!facts.encrypted ? t("account.privacy_cannot_pages")
      : member?.password_set_by_admin ? t("account.privacy_cannot_private_admin_password")
      : t("account.privacy_cannot_private")];
    const can = [
      ...(facts.encrypted ? [] : [t("account.privacy_can_plain")]),
      t("account.privacy_can_directory"),
      t("account.privacy_can_usage"),
      t("account.privacy_can_files"),
      t("account.privacy_can_providers"),
      t("account.privacy_can_code"),
    ];
    const supervision = facts.supervision || { supervised: false };
    // Said where the reader looks for it: the review's reports do reach people, an admin among them perhaps.
    if (supervision.supervised && supervision.reviewed) cannot.push(t("account.privacy_cannot_supervised"));
    body.replaceChildren(...present(
      el("p", { text: t("account.privacy_intro") }),
      supervision.supervised ? part(t("account.supervision_title"),
        el("p", { "data-testid": "supervised", text: t("account.supervision_text", { names: supervision.supervisors.join(", ") }) }),
        el("p", { text: supervision.reviewed ? t("account.supervision_review") : t("account.supervision_no_review") })) : null,
      part(t("account.privacy_models_title"), el("p", { text: t("account.privacy_models_text") }), models),
      part(t("account.privacy_plugins_title"), el("p", { text: t("account.privacy_plugins_text") }), plugins),
      part(t("account.privacy_cannot_title"), list(cannot)),
      part(t("account.privacy_can_title"), list(can))));
  });
  return block;
}

/** The mobile connector's pairings end with every other session at a password change:
 *  said before it happens, when the member can use it (GET /api/me/privacy lists it). */
const MOBILE_PLUGIN = "mobile-connector";

function passwordSection(member, facts, onChanged) {
  // Whose password this is, for the browser's password manager (it saves and fills a
  // new password under a user name; Chrome asks for one in every password form).
  // Hidden from everyone, the reader included: the page says whose account it is.
  const username = el("input", { type: "text", name: "username", autocomplete: "username", hidden: true, readonly: true, value: member?.username || "" });
  const current = el("input", { type: "password", name: "current_password", autocomplete: "current-password", required: true });
  const fresh = el("input", { type: "password", name: "new_password", autocomplete: "new-password", required: true, minlength: "8" });
  const repeat = el("input", { type: "password", name: "repeat", autocomplete: "new-password", required: true });
  const submit = el("button", { class: "btn primary", type: "submit", text: t("account.password_submit") });
  const hint = el("p", { class: "hint", "data-testid": "password-hint", text: t("account.password_hint") });
  facts.then((known) => {
    if ((known?.plugins || []).some((plugin) => plugin.id === MOBILE_PLUGIN)) hint.textContent = t("account.password_hint_phones");
  });
  const status = statusLine();
  const form = el("form", { class: "stack", novalidate: true },
    username,
    field(t("account.password_current"), current)[0],
    field(t("account.password_new"), fresh)[0],
    field(t("account.password_repeat"), repeat)[0],
    hint,
    el("div", { class: "actions" }, submit), status.node);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearFieldErrors(form, status);
    // Every refusal is marked on the field that is wrong, which takes the focus: not
    // left on "Repeat" or the button.
    if (!current.value || !fresh.value) { markField(form, status, current.value ? "new_password" : "current_password", t("account.password_missing")); return; }
    if (fresh.value !== repeat.value) { markField(form, status, "repeat", t("setup.mismatch")); return; }
    busy(submit, async () => {
      const response = await api("POST", "/api/auth/password", { current_password: current.value, new_password: fresh.value });
      if (response.ok) { form.reset(); status.ok(t("account.password_changed")); onChanged(); }
      else if (response.status === 403) markField(form, status, "current_password", t("account.password_wrong"));
      // The policy's refusals (password_common, password_too_short, ...) name no field.
      else showFormError(form, status, response);
    });
  });
  return section(t("account.password_title"), form);
}

export function renderAccount(ctx) {
  const m = ctx.member;
  const facts = el("dl", { class: "facts" },
    el("dt", { text: t("members.username") }), el("dd", { text: m.username }),
    el("dt", { text: t("members.display_name") }), el("dd", { text: m.display_name || "—" }),
    el("dt", { text: t("members.role") }), el("dd", { text: seeded(m.role_label || m.role) }),
    el("dt", { text: t("members.encrypted") }), el("dd", { text: m.encrypted ? t("common.yes") : t("common.no") }));
  let known;
  const privacyFacts = new Promise((resolve) => { known = resolve; });
  const privacy = privacySection(m, known);
  const changed = () => {
    if (!m.password_set_by_admin) return;
    m.password_set_by_admin = false; // the password is theirs now: the privacy text says so
    const again = privacySection(m);
    privacy.replaceWith(again);
  };
  return el("div", { class: "page" },
    pageHeader(t("account.title"), t("account.intro")),
    section(t("account.profile_title"), facts),
    languageSection(ctx),
    homeSourceSection(),
    privacy,
    passwordSection(m, privacyFacts, changed));
}
