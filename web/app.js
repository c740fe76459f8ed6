// First-run setup, sign-in and the signed-in landing view. Everything rendered from
// data goes through textContent (never innerHTML), so names and messages stay inert.
const app = document.getElementById("app");
let strings = {};
let csrfToken = null;

const t = (key, values = {}) =>
  (strings[`core.${key}`] ?? key).replace(/\{(\w+)\}/g, (_, name) => String(values[name] ?? ""));

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "text") node.textContent = value;
    else if (value === true) node.setAttribute(name, "");
    else if (value !== false && value != null) node.setAttribute(name, value);
  }
  node.append(...children);
  return node;
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (csrfToken && method !== "GET") headers["X-CSRF-Token"] = csrfToken;
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: "same-origin" });
  const data = await response.json().catch(() => ({}));
  return { status: response.status, headers: response.headers, data };
}

async function loadStrings(locale) {
  const { data } = await api("GET", `/api/i18n?locale=${encodeURIComponent(locale)}`);
  strings = data.strings || {};
  document.documentElement.lang = data.locale || "en";
}

function field(id, labelKey, type = "text", extra = {}) {
  return [el("label", { for: id, text: t(labelKey) }), el("input", { id, name: id, type, required: true, ...extra })];
}

function form(titleKey, introKey, fields, submitKey, onSubmit) {
  const error = el("p", { class: "error", role: "alert" });
  const button = el("button", { type: "submit", text: t(submitKey) });
  const node = el("form", { class: "card", novalidate: true },
    el("h1", { text: t(titleKey) }),
    introKey ? el("p", { class: "intro", text: t(introKey) }) : "",
    ...fields, button, error);
  node.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    button.disabled = true;
    try { await onSubmit(new FormData(node), error); } finally { button.disabled = false; }
  });
  return node;
}

function renderSetup(locales) {
  const select = el("select", { id: "locale", name: "locale" }, ...locales.map((l) => el("option", { value: l, text: l })));
  select.value = document.documentElement.lang;
  select.addEventListener("change", async () => { await loadStrings(select.value); renderSetup(locales); });
  app.replaceChildren(form("setup.title", "setup.intro", [
    ...field("username", "setup.username", "text", { autocomplete: "username" }),
    ...field("display_name", "setup.display_name", "text", { required: false }),
    ...field("password", "setup.password", "password", { autocomplete: "new-password", minlength: "8" }),
    ...field("password_repeat", "setup.password_repeat", "password", { autocomplete: "new-password" }),
    el("label", { for: "locale", text: t("setup.locale") }), select,
    el("label", { class: "check" }, el("input", { type: "checkbox", name: "encrypted", checked: true }), t("setup.encrypted")),
  ], "setup.submit", async (data, error) => {
    if (data.get("password") !== data.get("password_repeat")) { error.textContent = t("setup.mismatch"); return; }
    const { status, data: body } = await api("POST", "/api/setup", {
      username: data.get("username"), display_name: data.get("display_name"), password: data.get("password"),
      locale: data.get("locale"), encrypted: data.get("encrypted") === "on",
    });
    if (status === 201) { csrfToken = body.csrf_token; renderSignedIn(body.member); }
    else error.textContent = body.error || t("common.error", { message: status });
  }));
}

function renderLogin() {
  app.replaceChildren(form("login.title", null, [
    ...field("username", "login.username", "text", { autocomplete: "username" }),
    ...field("password", "login.password", "password", { autocomplete: "current-password" }),
  ], "login.submit", async (data, error) => {
    const { status, headers, data: body } = await api("POST", "/api/auth/login", { username: data.get("username"), password: data.get("password") });
    if (status === 200) { csrfToken = body.csrf_token; await loadStrings(body.member.locale || navigator.language.slice(0, 2)); renderSignedIn(body.member); }
    else if (status === 429) error.textContent = t("login.throttled", { seconds: headers.get("Retry-After") || "60" });
    else if (status === 401) error.textContent = t("login.failed");
    else error.textContent = body.error || t("common.error", { message: status });
  }));
}

async function renderSignedIn(member) {
  const { data: session } = await api("GET", "/api/auth/session");
  const logout = el("button", { type: "button", text: t("common.logout") });
  logout.addEventListener("click", async () => { await api("POST", "/api/auth/logout"); csrfToken = null; renderLogin(); });
  const card = el("section", { class: "card" }, el("h1", { text: member.display_name || member.username }));
  if (session && session.secure_transport === false) card.prepend(el("p", { class: "warning", text: t("warning.insecure_transport") }));
  card.append(logout);
  app.replaceChildren(card);
}

async function start() {
  await loadStrings(navigator.language.slice(0, 2));
  const session = await api("GET", "/api/auth/session");
  if (session.status === 200) { csrfToken = session.data.csrf_token; await loadStrings(session.data.member.locale || "en"); return renderSignedIn(session.data.member); }
  const { data } = await api("GET", "/api/setup");
  if (data.needs_setup) renderSetup(data.locales || ["en"]); else renderLogin();
}

start();
