// First-run setup and sign-in: the two screens before the shell.
import { api, setCsrfToken } from "../lib/api.js";
import { el, uid } from "../lib/dom.js";
import { availableLocales, currentLocale, loadLocale, localeName, t } from "../lib/i18n.js";
import { errorText, passwordMinLength } from "../lib/ui.js";

export function input(labelKey, name, type = "text", extra = {}, hint = null) {
  const id = uid(name);
  const error = el("p", { class: "field-error", id: `${id}-error` });
  // A rule the value must meet, said before a refusal does (a password's length).
  const rule = hint ? el("p", { class: "hint", id: `${id}-hint`, text: hint }) : null;
  return [
    el("label", { for: id, text: t(labelKey) }),
    el("input", { id, name, type, required: true, "aria-describedby": rule ? `${rule.id} ${error.id}` : error.id, ...extra }),
    rule,
    error,
  ].filter(Boolean);
}

/** Mark a field wrong (or right, with ""), with its message under it. */
export function fieldError(form, name, message) {
  const field = form.elements.namedItem(name);
  const error = field && document.getElementById(`${field.id}-error`);
  if (!field || !error) return;
  error.textContent = message;
  if (message) field.setAttribute("aria-invalid", "true"); else field.removeAttribute("aria-invalid");
}

const USERNAME = /^[\p{L}\p{N}_.@-]{1,64}$/u;

// "This tab was signed in": set by a sign-in or the setup here, kept over reloads in
// the tab's sessionStorage (a flag, nothing secret). A page that loads to the sign-in
// form with it set had a session the server no longer knows (a restart locks everyone,
// or a sign-out elsewhere), and says so; a first visit does not.
const SIGNED_IN = "skald.signedIn";

function rememberSignedIn() {
  try { sessionStorage.setItem(SIGNED_IN, "1"); } catch { /* storage off: no notice after a restart */ }
}

/** Whether the tab was signed in; forgotten as it is asked, so it is said once. */
function takeSignedIn() {
  try {
    const was = sessionStorage.getItem(SIGNED_IN) === "1";
    sessionStorage.removeItem(SIGNED_IN);
    return was;
  } catch { return false; }
}

/** `after`: what follows the form's alert (a quiet hint, another way out). */
export function authCard(titleKey, introKey, fields, submitKey, onSubmit, before = null, after = null) {
  const error = el("p", { class: "error", role: "alert" });
  const submit = el("button", { class: "btn primary wide", type: "submit", text: t(submitKey) });
  const form = el("form", { class: "card auth-card", novalidate: true },
    el("p", { class: "brand-mark", text: t("app.name") }),
    el("h1", { text: t(titleKey) }),
    introKey ? el("p", { class: "intro", text: t(introKey) }) : null,
    before, ...fields, submit, error, after);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    submit.disabled = true;
    try { await onSubmit(new FormData(form), error, form); } finally { submit.disabled = false; }
  });
  return el("main", { class: "auth-screen" }, form);
}

/** First run: create the administrator; signs in and calls onDone(). */
export function renderSetup(root, onDone, kept = null) {
  const localeId = uid("locale");
  const encryptHintId = uid("encrypt-hint");
  const select = el("select", { id: localeId, name: "locale" },
    ...availableLocales().map((code) => el("option", { value: code, text: localeName(code) })));
  select.value = currentLocale();
  select.addEventListener("change", async () => {
    // The page is drawn again in the new language: what was typed stays.
    const form = root.querySelector("form");
    const values = Object.fromEntries(["username", "display_name", "password", "password_repeat"].map((n) => [n, form.elements.namedItem(n).value]));
    values.encrypted = form.elements.namedItem("encrypted").checked;
    await loadLocale(select.value);
    renderSetup(root, onDone, values);
    root.querySelector("select[name=locale]")?.focus();
  });
  root.replaceChildren(authCard("setup.title", "setup.intro", [
    ...input("setup.username", "username", "text", { autocomplete: "username" }),
    ...input("setup.display_name", "display_name", "text", { required: false, autocomplete: "name" }),
    ...input("setup.password", "password", "password", { autocomplete: "new-password", minlength: String(passwordMinLength()) },
      t("setup.password_rule", { min: passwordMinLength() })),
    ...input("setup.password_repeat", "password_repeat", "password", { autocomplete: "new-password" }),
    el("label", { for: localeId, text: t("setup.locale") }), select,
    el("label", { class: "check" }, el("input", { type: "checkbox", name: "encrypted", "aria-describedby": encryptHintId, props: { checked: true } }), el("span", { text: t("setup.encrypted") })),
    // What the choice means when the password is forgotten, before it is made (as the
    // Add-member form's members.encrypt_hint says it for a member).
    el("p", { class: "hint", id: encryptHintId, "data-testid": "setup-encrypt-hint", text: t("setup.encrypt_hint") }),
  ], "setup.submit", async (data, error, form) => {
    const username = String(data.get("username") || "").trim();
    const password = String(data.get("password") || "");
    const problems = {
      username: !username ? t("setup.username_missing") : !USERNAME.test(username) || !username.replace(/\./g, "") ? t("setup.username_invalid") : "",
      password: password.length < passwordMinLength() ? t("setup.password_short") : password.trim() === "" ? t("setup.password_short")
        : password.toLowerCase() === username.toLowerCase() ? t("setup.password_is_username") : "",
      password_repeat: password && data.get("password_repeat") !== password ? t("setup.mismatch") : "",
    };
    for (const [name, message] of Object.entries(problems)) fieldError(form, name, message);
    // A field's problem is said once, under it: the focus lands there and reads it as the
    // field's description. The form's alert is for what belongs to no field.
    const first = Object.keys(problems).find((name) => problems[name]);
    if (first) { form.elements.namedItem(first).focus(); return; }
    const response = await api("POST", "/api/setup", {
      username: data.get("username"), display_name: data.get("display_name"), password: data.get("password"),
      locale: data.get("locale"), encrypted: data.get("encrypted") === "on",
    });
    if (response.status === 201) { rememberSignedIn(); setCsrfToken(response.data.csrf_token); await onDone(); return; }
    // The server's refusal of one field (a breached password, a taken name) is marked on
    // that field and takes the focus there, as the form's own checks do.
    const name = response.data?.field;
    if (name && form.elements.namedItem(name)) { fieldError(form, name, errorText(response)); form.elements.namedItem(name).focus(); }
    else error.textContent = errorText(response);
  }));
  if (kept) {
    const form = root.querySelector("form");
    for (const name of ["username", "display_name", "password", "password_repeat"]) form.elements.namedItem(name).value = kept[name] || "";
    form.elements.namedItem("encrypted").checked = kept.encrypted;
    return;
  }
  root.querySelector("input")?.focus();
}

/** First run, opened by a name the server refuses setup through (GET /api/setup's
 * `setup_allowed`): the refusal at once, not a form that cannot succeed. */
export function renderSetupRefused(root) {
  root.replaceChildren(el("main", { class: "auth-screen" },
    el("div", { class: "card auth-card" },
      el("p", { class: "brand-mark", text: t("app.name") }),
      el("h1", { text: t("setup.title") }),
      el("p", { class: "notice error", "data-testid": "setup-refused", text: t("error.setup_host_refused") }))));
}

/** Sign in; `message` explains why we are here (e.g. the session ended). */
export function renderLogin(root, onDone, message = "") {
  // An empty root: the page has just loaded. Later the form replaces the shell, after a
  // sign-out here (nothing to explain) or an ended session (`message` says so).
  const justLoaded = !root.firstElementChild;
  if (takeSignedIn() && justLoaded && !message) message = t("login.session_ended");
  root.replaceChildren(authCard("login.title", null, [
    ...input("login.username", "username", "text", { autocomplete: "username" }),
    ...input("login.password", "password", "password", { autocomplete: "current-password" }),
  ], "login.submit", async (data, error, form) => {
    // Checked here as the setup form checks its fields: an empty field is said under it,
    // with the focus there, and the server is not asked (it could only say "wrong").
    const problems = {
      username: String(data.get("username") || "").trim() ? "" : t("login.username_missing"),
      password: data.get("password") ? "" : t("login.password_missing"),
    };
    for (const [name, message] of Object.entries(problems)) fieldError(form, name, message);
    const first = Object.keys(problems).find((name) => problems[name]);
    if (first) { form.elements.namedItem(first).focus(); return; }
    const response = await api("POST", "/api/auth/login", { username: data.get("username"), password: data.get("password") });
    if (response.status === 200) { rememberSignedIn(); setCsrfToken(response.data.csrf_token); await onDone(); }
    else if (response.status === 401) error.textContent = t("login.failed");
    else error.textContent = errorText(response);
  }, message ? el("p", { class: "notice info", role: "status", text: message }) : null,
  // Quiet, and no link: there is no self-service reset; an admin sets a new password.
  el("p", { class: "hint forgot", "data-testid": "login-forgot", text: t("login.forgot") })));
  root.querySelector("input")?.focus();
}
