// The web shell: first-run setup or sign-in, then a sidebar (host pages, admin
// pages, the plugin pages this member may see) and a content area routed by
// location.hash. Every string comes from /api/i18n; every piece of data is set
// through textContent or attribute/property setters (see lib/dom.js).
import "./components/plugin-page-host.js";
import { api, setCsrfToken, whenSessionLost } from "./lib/api.js";
import { el, link, uid } from "./lib/dom.js";
import { availableLocales, browserLocale, currentLocale, errorString, lastShownLocale, loadLocale, seeded, t } from "./lib/i18n.js";
import { icon } from "./lib/icons.js";
import { stopIdleWatch, watchIdleSession } from "./lib/idle-warning.js";
import { applyTheme, loadMemberTheme, themeSwitch } from "./lib/theme.js";
import { DIRTY, busy, confirmDialog, errorText, markSaved, notice, pageHeader, sayIn, setPasswordMinLength } from "./lib/ui.js";
import * as socket from "./lib/socket.js";
import { renderLogin, renderSetup, renderSetupRefused } from "./pages/auth.js";
import { renderAccount } from "./pages/account.js";
import { forgetOwnPasswordLater, ownPasswordPostponed, renderOwnPassword } from "./pages/own-password.js";
import { renderApprovals } from "./pages/approvals.js";
import { renderAgents } from "./pages/chat-agents.js";
import { draftsFor, endChat, renderChat } from "./pages/chat.js";
import { renderMember, renderMembers } from "./pages/members.js";
import { renderMemory } from "./pages/memory.js";
import { renderModels } from "./pages/models.js";
import { renderPluginDetail } from "./pages/plugin-detail.js";
import { renderCatalog } from "./pages/plugin-catalog.js";
import { renderPluginPage } from "./pages/plugin-page.js";
import { renderRoles } from "./pages/roles.js";
import { renderSchedules } from "./pages/schedules.js";
import { renderSettings } from "./pages/settings.js";
import { renderProjects } from "./pages/projects.js";
import { renderSharedFolders } from "./pages/shared-folders.js";
import { renderReports } from "./pages/reports.js";
import { renderSystemAgents } from "./pages/system-agents.js";
import { renderUsage } from "./pages/usage.js";

const root = document.getElementById("app");

const HOST_PAGES = [
  { id: "chat", label: "nav.chat", render: renderChat, needs: "chat" },
  { id: "projects", label: "nav.projects", render: renderProjects },
  { id: "memory", label: "nav.memory", render: renderMemory },
  { id: "schedules", label: "nav.schedules", render: renderSchedules, needs: "chat" },
  { id: "reports", label: "nav.reports", render: renderReports, needs: "system_agents" },
  { id: "system-agents", label: "nav.system_agents", render: renderSystemAgents, needs: "system_agents" },
  { id: "agents", label: "nav.agents", render: renderAgents, needs: "chat" },
  { id: "account", label: "nav.account", render: renderAccount },
];
const ADMIN_PAGES = [
  { id: "plugins", label: "nav.plugins", render: renderCatalog },
  { id: "members", label: "nav.members", render: (ctx) => (ctx.rest[0] ? renderMember(ctx) : renderMembers(ctx)) },
  { id: "shared-folders", label: "nav.shared_folders", render: renderSharedFolders },
  { id: "roles", label: "nav.roles", render: renderRoles },
  { id: "models", label: "nav.models", render: renderModels },
  { id: "usage", label: "nav.usage", render: renderUsage },
  { id: "approvals", label: "nav.approvals", render: renderApprovals },
  { id: "settings", label: "nav.settings", render: renderSettings },
];
/** The host's pages a member whose role asks for the simple interface (the session's
 * ui_mode, seed 001 "Role-driven interface") is offered: Chat, and My account for their
 * password and language. The plugin pages an admin granted them stay: that grant was
 * the admin's choice for them. Hiding is no access control: the server decides. */
const SIMPLE_PAGES = new Set(["chat", "account"]);
const simpleMode = () => state.session?.ui_mode === "simple";
const inView = (page) => !simpleMode() || SIMPLE_PAGES.has(page.id) || page.id === "plugin";

const HIDDEN_PAGES = [
  { id: "plugin-detail", admin: true, parent: "plugins", render: renderPluginDetail },
  { id: "plugin", render: renderPluginPage },
];

const state = { session: null, pages: [], navToken: 0, shell: null, chat: true, system_agents: true, supervision: null };

// Background work (a system agent) tells the member something while any page is open:
// shown for a while, then gone; the same text reaches their home channel, if any.
socket.onMessage(async (message) => {
  if (message.type !== "event" || message.event?.kind !== "notification") return;
  const text = String(message.event.data?.text || "");
  if (!text) return;
  // A supervisor named just now stays above the page until OK (see supervisionNotice),
  // not only for the toast's 15 seconds: the same words need no toast as well.
  if (await refreshSupervision() && state.shell?.supervision?.querySelector("p")?.textContent === text) return;
  const toast = el("p", { class: "notice toast", role: "status", "data-testid": "toast", text });
  document.body.append(toast);
  setTimeout(() => toast.remove(), 15000);
});

// The admin changed this member's role, its capabilities or their grants: the session
// is read again, so the next page drawn offers what the role now allows (it showed the
// old role's until a full reload). An admin made a member, or the reverse, gets the
// shell of their new standing.
socket.onMessage(async (message) => {
  if (message.type !== "event" || message.event?.kind !== "access_changed" || !state.session) return;
  const response = await api("GET", "/api/auth/session");
  if (!response.ok || !state.session || response.data.member.id !== state.session.member.id) return;
  const was = state.session.member;
  const wasMode = state.session.ui_mode;
  state.session = response.data;
  setCsrfToken(response.data.csrf_token);
  if (was.is_admin !== response.data.member.is_admin || wasMode !== response.data.ui_mode) {
    buildShell();
    await route({ focus: false });
  } else if (state.shell) {
    const role = state.shell.sidebar?.querySelector(".who-role");
    if (role) role.textContent = seeded(response.data.member.role_label || response.data.member.role);
  }
});

function parseHash() {
  const raw = location.hash.slice(1).replace(/^\/+/, "") || "chat"; // "#/models" is "#models"
  const [path, query = ""] = raw.split("?", 2);
  const parts = path.split("/").map((part) => { try { return decodeURIComponent(part); } catch { return part; } });
  return { name: parts[0] || "chat", rest: parts.slice(1), params: new URLSearchParams(query) };
}

function findPage(name) {
  const host = HOST_PAGES.find((p) => p.id === name);
  if (host) return host;
  const admin = ADMIN_PAGES.find((p) => p.id === name);
  if (admin) return { ...admin, admin: true };
  return HIDDEN_PAGES.find((p) => p.id === name) || null;
}

// -- the shell ----------------------------------------------------------------------

function navLink(route, text, key) {
  return el("li", {}, link(route, text, { "data-route": key }));
}

function buildShell() {
  const member = state.session.member;
  const menuButton = el("button", {
    class: "menu-button", type: "button", "aria-controls": "sidebar", "aria-expanded": "false",
    on: { click: () => setMenu(menuButton.getAttribute("aria-expanded") !== "true") },
  }, el("span", { class: "menu-icon", "aria-hidden": "true" }), el("span", { text: t("nav.menu") }));
  const signOut = el("button", { class: "btn quiet small", type: "button", text: t("common.logout"), on: { click: logout } });
  const hostList = el("ul", { class: "nav-list" }, ...hostNavItems());
  const pluginList = el("ul", { class: "nav-list" });
  const pluginSection = el("div", { class: "nav-section", hidden: true },
    el("h2", { class: "nav-heading", text: t("nav.plugin_pages") }), pluginList);
  // The links scroll in their own box and the footer sits below it: pinned over one
  // scrolling sidebar, the footer covered the last links, focused ones too. On a short
  // screen the whole sidebar scrolls instead (app.css), or the links had no room.
  const sidebar = el("nav", { id: "sidebar", class: "sidebar", "aria-label": t("nav.label") },
    el("p", { class: "brand", text: t("app.name") }),
    el("div", { class: "sidebar-links" },
      el("div", { class: "nav-section" }, hostList),
      member.is_admin ? el("div", { class: "nav-section" },
        el("h2", { class: "nav-heading", text: t("nav.admin") }),
        el("ul", { class: "nav-list" }, ...ADMIN_PAGES.map((p) => navLink(`#${p.id}`, t(p.label), p.id)))) : null,
      pluginSection),
    el("div", { class: "nav-footer" },
      el("p", { class: "who" }, el("span", { class: "who-name", text: member.display_name || member.username }),
        el("span", { class: "who-role", text: seeded(member.role_label || member.role) })),
      signOut,
      themeSwitch()));
  const content = el("main", { id: "content", class: "content", tabindex: "-1" });
  // The first stop of the tab order: past the menu and the sidebar to the page itself.
  const skip = el("a", {
    class: "skip-link", href: "#content", text: t("nav.skip"),
    on: { click: (event) => { event.preventDefault(); content.classList.remove("route-focus"); content.focus(); } },
  });
  content.addEventListener("blur", () => content.classList.remove("route-focus"));
  const banner = state.session.secure_transport === false ? notice("warning", t("warning.insecure_transport")) : null;
  // Safe mode (a restored copy looked at beside the live server): the member's
  // scheduled prompts wait, and they are told so above every page.
  const safeMode = state.session.safe_mode ? notice("info", t("warning.safe_mode")) : null;
  const supervision = supervisionNotice();
  const shell = el("div", { class: "shell" },
    skip,
    el("header", { class: "topbar" }, menuButton, el("span", { class: "brand", text: t("app.name") })),
    el("div", { class: "sidebar-column" }, sidebar),
    el("div", { class: "main-column" }, banner, safeMode, supervision, content));
  // What the phone's open menu covers: inert while it is open (see setMenu).
  const behind = [skip, shell.querySelector(".main-column")];
  state.shell = { menuButton, sidebar, content, hostList, pluginSection, pluginList, behind, supervision };
  root.replaceChildren(shell);
  showOverflow(sidebar.querySelector(".sidebar-links"));
  renderPluginNav();
}

/** Mark which edges of the links' box have links beyond them (more-above, more-below:
 * app.css fades that edge), as it scrolls and as it or its sections change size (a
 * plugin's pages added, a window made shorter). */
function showOverflow(box) {
  const update = () => {
    box.classList.toggle("more-above", box.scrollTop > 1);
    box.classList.toggle("more-below", box.scrollTop + box.clientHeight < box.scrollHeight - 1);
  };
  box.addEventListener("scroll", update, { passive: true });
  const watch = new ResizeObserver(update);
  watch.observe(box);
  for (const section of box.children) watch.observe(section);
  update();
}

/** The current page's link in view (block "nearest": the links do not move when it is
 * already shown). At 1280x800 #settings opened with its link below the links' box. */
function showCurrentLink() {
  const current = state.shell?.sidebar.querySelector("a[aria-current=page]");
  if (current && current.getClientRects().length) current.scrollIntoView({ block: "nearest", inline: "nearest" });
}

/** Who started supervising the member since they last said OK (README: the member is
 * told): the live notice reaches an open page or a home channel only, so one signed out
 * then reads it here at their next sign-in, in their language, until OK. OK passes back
 * the time the server gave: a supervisor named after it is still to be told. */
function supervisionNotice() {
  const news = state.supervision;
  if (!news?.added?.length) return null;
  const words = el("p", { id: uid("supervision"), text: t("account.supervision_added", { names: news.added.join(", ") }) });
  const failed = el("p", { class: "form-status error", role: "alert" });
  const ok = el("button", { class: "btn small", type: "button", text: t("common.ok"), "aria-describedby": words.id });
  ok.addEventListener("click", () => busy(ok, async () => {
    const response = await api("POST", "/api/me/supervision/seen", { through: news.added_through });
    if (!response.ok) { failed.textContent = errorText(response); return; }
    state.supervision = response.data;
    placeSupervisionNotice({ focus: true });
  }));
  return el("div", { class: "notice info supervision-added", role: "status", "data-testid": "supervision-added" },
    words, el("div", { class: "actions" }, ok), failed);
}

/** Put the notice as state.supervision has it above the page (or take it away). With
 * `focus` (its OK was pressed, and is gone): a newer notice's OK, else the page's
 * heading, never <body>. */
function placeSupervisionNotice({ focus = false } = {}) {
  if (!state.shell) return;
  const before = state.shell.supervision;
  const node = supervisionNotice();
  if (before && node) before.replaceWith(node);
  else if (before) before.remove();
  else if (node) state.shell.content.before(node);
  state.shell.supervision = node;
  if (!focus) return;
  const heading = state.shell.content.querySelector("h1");
  const target = node?.querySelector("button") || heading || state.shell.content;
  if (target === heading) heading.tabIndex = -1;
  target.focus({ preventScroll: true });
}

/** Read again who is still to be told of (a notification came: it may be that a
 * supervisor was named now). True when the notice shows. */
async function refreshSupervision() {
  if (!state.shell) return false;
  const response = await api("GET", "/api/me/privacy");
  if (!response.ok || !state.shell) return false;
  state.supervision = response.data.supervision_news;
  placeSupervisionNotice();
  return Boolean(state.shell.supervision);
}

function setMenu(open) {
  if (!state.shell) return;
  state.shell.menuButton.setAttribute("aria-expanded", String(open));
  state.shell.sidebar.classList.toggle("open", open);
  // On a phone the open menu covers the page: Tab must not wander to controls nobody
  // can see, nor a screen reader read them.
  for (const node of state.shell.behind) node.inert = open;
  if (open) showCurrentLink(); // the phone's menu opens at the page one is on
}

const menuOpen = () => state.shell?.menuButton.getAttribute("aria-expanded") === "true";

/** The open menu's tab stops: its button, then what the sidebar shows. */
function menuStops() {
  const { menuButton, sidebar } = state.shell;
  const controls = sidebar.querySelectorAll("a[href], button, select, input, textarea, [tabindex]:not([tabindex='-1'])");
  return [menuButton, ...[...controls].filter((node) => !node.disabled && node.getClientRects().length > 0)];
}

// The menu is a phone's: one that stays open past a widening window would keep the
// page inert behind a sidebar that no longer covers it.
matchMedia("(max-width: 700px)").addEventListener("change", (event) => { if (!event.matches) setMenu(false); });

function renderPluginNav() {
  const { pluginSection, pluginList } = state.shell;
  // A section of another page (``slot``, e.g. a member's admin page) is no sidebar entry.
  const pages = state.pages.filter((p) => (p.slot || "sidebar") === "sidebar")
    .sort((a, b) => (a.priority - b.priority) || String(a.title).localeCompare(String(b.title)));
  pluginList.replaceChildren(...pages.map((p) => {
    const route = `#plugin/${encodeURIComponent(p.plugin_id)}/${encodeURIComponent(p.page_id)}`;
    const item = navLink(route, p.title, `plugin/${p.plugin_id}/${p.page_id}`);
    item.firstChild.prepend(icon(p.icon));
    return item;
  }));
  pluginSection.hidden = pages.length === 0;
  markActive(parseHash());
}

/** The links to the host's own pages the member has: Chat with chat, Reports and System
 * agents while a system agent's plugin is on (enterShell). */
function hostNavItems() {
  return HOST_PAGES.filter((p) => (!p.needs || state[p.needs]) && inView(p)).map((p) => navLink(`#${p.id}`, t(p.label), p.id));
}

/** Whether some system agent's plugin is on: Reports and System agents are in the menu
 * only then (an admin is sent the agents of a plugin that is off as well). */
const someAgentOn = (response) => !response.ok || (response.data.agents || []).some((agent) => agent.plugin_enabled);

/** Re-read the pages this member may see (grants and toggles apply per request). With
 * `agents` (a plugin was turned on or off) whether a system agent's plugin is on, too. */
async function refreshNav({ agents = false } = {}) {
  const [response, found] = await Promise.all([api("GET", "/api/plugins/pages"), agents ? api("GET", "/api/system-agents") : null]);
  if (!state.shell) return;
  if (found && someAgentOn(found) !== state.system_agents) {
    state.system_agents = someAgentOn(found);
    state.shell.hostList.replaceChildren(...hostNavItems());
    markActive(parseHash());
  }
  if (!response.ok) return;
  const pages = response.data.pages || [];
  if (JSON.stringify(pages) !== JSON.stringify(state.pages)) {
    state.pages = pages;
    renderPluginNav();
  }
}

function markActive(where) {
  if (!state.shell) return;
  const page = findPage(where.name);
  const key = where.name === "plugin" ? `plugin/${where.rest[0]}/${where.rest[1]}` : (page?.parent || where.name);
  const before = state.shell.sidebar.querySelector("a[aria-current=page]");
  for (const anchor of state.shell.sidebar.querySelectorAll("a[data-route]")) {
    if (anchor.dataset.route === key) anchor.setAttribute("aria-current", "page");
    else anchor.removeAttribute("aria-current");
  }
  // Another page (not the same one drawn again after a save): its link in view.
  if (state.shell.sidebar.querySelector("a[aria-current=page]") !== before) showCurrentLink();
}

/** `arrived`: the member has just signed in (or set up this instance): the page puts
 * the focus on its first task, as a chat page on the message box. */
function context(where, { arrived = false } = {}) {
  return {
    ...where,
    arrived,
    session: state.session,
    member: state.session.member,
    pages: () => state.pages,
    refreshNav: () => refreshNav({ agents: true }), // after a plugin's switch
    // After an add, a save or a delete: see Afterwards (the focus, what is said).
    rerender: (after = null) => route({ focus: false, after }),
    relocalize,
    // The page's own navigation (after a create or a delete) is its decision: it asks
    // nothing about the page's unsaved changes.
    navigate: (hash) => { forgetUnsaved(); if (location.hash === hash) route(); else location.hash = hash; },
  };
}

/**
 * @typedef {string | ((content: HTMLElement) => Element | null | undefined)} Place
 *   A CSS selector within the page, or a function finding the element in it.
 * @typedef {object} Afterwards What a page's re-render after an add, a save or a delete
 *   does besides drawing it again (``ctx.rerender(after)``):
 * @property {Place | Place[]} [focus] Where the focus goes (the first place found that
 *   can take it: the row added or edited, the next row after a delete, a heading), when
 *   it was in the page; else the counterpart of the control that had it (refocus).
 * @property {Place} [status] The status line (role=status) that says `say`.
 * @property {string} [say] The outcome ("Rule added."), said once the page is drawn.
 */

async function route({ focus = true, arrived = false, after = null } = {}) {
  if (!state.shell) return;
  const token = ++state.navToken;
  shownHash = location.hash;
  const where = parseHash();
  setMenu(false);
  markActive(where);
  const { content } = state.shell;
  const page = findPage(where.name);
  const navUpdate = refreshNav();
  if (where.name === "plugin") await navUpdate; // the page list decides what may mount
  let node;
  if (!page) {
    node = el("div", {}, pageHeader(t("notfound.title")), notice("info", t("notfound.text")), link("#chat", t("notfound.home")));
  } else if (page.admin && !state.session.member.is_admin) {
    node = el("div", {}, pageHeader(t("forbidden.title")), notice("info", t("forbidden.text")));
  } else if (!inView(page)) {
    // A typed or old address of a page the role's simple interface leaves out: said so,
    // not a page drawn half-usable for a member it was never offered to.
    node = el("div", {}, pageHeader(t("simple_view.title")), notice("info", t("simple_view.text")), link("#chat", t("simple_view.home")));
  } else {
    content.setAttribute("aria-busy", "true");
    try {
      node = await page.render(context(where, { arrived }));
    } catch (error) {
      node = el("div", {}, pageHeader(t("common.failed_page")), notice("error", error?.message || String(error)));
    }
    content.removeAttribute("aria-busy");
  }
  if (token !== state.navToken) return; // a newer navigation won
  const kept = focus ? null : focusedControl(content);
  content.replaceChildren(node);
  if (kept) refocus(content, kept, after?.focus);
  if (after?.say) announce(content, after.status, after.say);
  const heading = content.querySelector("h1");
  document.title = heading ? `${heading.textContent} · ${t("app.name")}` : t("app.name");
  if (focus) {
    // A new page starts at its top: letting focus scroll it put its title under the
    // phone's sticky top bar. No ring (app.css): after a key (Enter in the message box,
    // Alt+Left) Chromium drew :focus-visible round the whole page, which nobody moved
    // the focus to; the skip link's jump, which someone did, keeps its ring.
    content.classList.add("route-focus");
    content.focus({ preventScroll: true });
    window.scrollTo(0, 0);
  }
}

/** What a page's re-render (``ctx.rerender``, after an add or a save) must not lose: the
 * control that had focus, named by what a new render of it keeps (its tag and name or
 * label, and its place among its like), or null when focus was not in the page. */
function focusedControl(content) {
  // A button busy() disabled while its request ran has lost focus to <body> already:
  // the control focused last in the page stands for it.
  let active = document.activeElement;
  if (!active || active === document.body) active = lastFocused;
  if (!active || active === content || !content.contains(active)) return null;
  const like = (node) => node.tagName === active.tagName && sameName(node, active);
  return { tag: active.tagName, name: controlName(active), index: [...content.querySelectorAll(active.tagName)].filter(like).indexOf(active) };
}

let lastFocused = null;
document.addEventListener("focusin", (event) => { lastFocused = event.target; });

const controlName = (node) => node.getAttribute("name") || node.getAttribute("aria-label") || node.textContent.trim().slice(0, 80);
const sameName = (a, b) => controlName(a) === controlName(b);

/** The element of the page at ``place`` (see Place), or null. */
function placed(content, place) {
  if (!place) return null;
  try {
    return (typeof place === "function" ? place(content) : content.querySelector(place)) || null;
  } catch {
    return null; // a selector that does not parse finds nothing
  }
}

/** Focus the first of the ``wanted`` places the page has (a heading or a card takes the
 * focus as a heading does: tabindex -1); else the re-rendered page's counterpart of
 * ``kept``; else its heading, so that focus never falls back to <body> (a screen reader
 * would start over at the top of a long page). */
function refocus(content, kept, wanted = null) {
  for (const place of [wanted].flat()) {
    const target = placed(content, place);
    if (!target || target.disabled || target.closest("[hidden]")) continue;
    if (target.tabIndex < 0 && !target.hasAttribute("tabindex")) target.tabIndex = -1;
    target.focus({ preventScroll: true });
    target.scrollIntoView?.({ block: "nearest" });
    if (document.activeElement === target) return;
  }
  const twins = [...content.querySelectorAll(kept.tag)].filter((node) => controlName(node) === kept.name && !node.disabled);
  const target = twins[Math.min(Math.max(kept.index, 0), twins.length - 1)];
  if (target) { target.focus({ preventScroll: true }); return; }
  const heading = content.querySelector("h1");
  if (heading) { heading.tabIndex = -1; heading.focus({ preventScroll: true }); } else content.focus({ preventScroll: true });
}

/** Say ``text`` in the re-rendered page's status line at ``place``. Once the page is
 * drawn: a live region filled as it is inserted is not announced. */
function announce(content, place, text) {
  const line = placed(content, place);
  if (!line) return;
  requestAnimationFrame(() => { if (line.isConnected) sayIn(line, "ok", text); });
}

/** The language changed: new strings, then the whole shell again (no reload). */
async function relocalize(locale) {
  // The server words a preset role's label in the member's language: read it again, or
  // the sidebar and My account keep the old language's "Member" until a reload.
  const [, session] = await Promise.all([loadLocale(locale), api("GET", "/api/auth/session")]);
  if (session.ok) Object.assign(state.session.member, session.data.member);
  state.session.locale = locale;
  buildShell();
  await route({ focus: false });
}

// -- session ------------------------------------------------------------------------

/** The shell for a signed-in member. After a page load (`arrived` false) the focus is
 * left at the document's start, as a browser leaves it: the first Tab reaches the skip
 * link. After a sign-in or the setup the form that had the focus is gone: the focus goes
 * where a navigation puts it (the page, or the chat's message box), not to <body>. */
async function enterShell(known = null, { arrived = false } = {}) {
  const response = known || await api("GET", "/api/auth/session");
  if (!response.ok) return showLogin();
  state.session = response.data;
  draftsFor(response.data.member.id);
  setCsrfToken(response.data.csrf_token);
  await loadLocale(response.data.locale || response.data.member.locale || browserLocale());
  // A password an admin chose (at the member's creation or a reset) opens their data
  // and the admin knows it: before anything else, the member is asked to choose their
  // own, which they can only postpone by saying so (see pages/own-password.js).
  const member = response.data.member;
  if (member.password_set_by_admin && !ownPasswordPostponed(member.id)) {
    document.title = `${t("own_password.title")} · ${t("app.name")}`;
    state.shell = null;
    await new Promise((resolve) => renderOwnPassword(root, member, resolve));
    if (state.session !== response.data) return; // signed out meanwhile (the session ended)
  }
  // The session lists the role's capabilities (an admin's: "*"; pages read them as
  // ctx.session.capabilities, web/lib/capabilities.js); the shell's Chat still follows the
  // chat status, which answers 403 without chat.use.
  // Reports and System agents are in the menu only while some system agent is there
  // (the System agents plugin, or another's) with its plugin on: an admin is sent the
  // agents of a plugin that is off too, to set them up beforehand, and the two links
  // showed with the plugin off. A link to them still opens the page.
  // Who started supervising them while they were away is said above every page (see
  // supervisionNotice), from what My account reads too.
  const [pages, chat, agents, privacy] = await Promise.all([
    api("GET", "/api/plugins/pages"), api("GET", "/api/chat/status"), api("GET", "/api/system-agents"), api("GET", "/api/me/privacy"),
    loadMemberTheme()]);
  state.pages = pages.ok ? pages.data.pages || [] : [];
  state.supervision = privacy.ok ? privacy.data.supervision_news : null;
  state.chat = chat.status !== 403;
  state.system_agents = someAgentOn(agents);
  // The socket opens with the shell, whatever page the member lands on: a notification
  // (the toast above) and messages queued in an earlier session need no visit to Chat.
  if (state.chat) socket.connect(response.data.member.id);
  buildShell();
  watchIdleSession(response.data.idle_seconds); // warned before an idle session ends
  await route({ focus: arrived, arrived });
}

function showLogin(message = "", { forget = false } = {}) {
  stopIdleWatch();
  endChat({ forget }); // a message still unsent stays queued for this member's next sign-in
  forgetOwnPasswordLater(); // "Not now" holds until the next sign-in
  state.session = null;
  state.shell = null;
  state.pages = [];
  document.title = t("app.name");
  renderLogin(root, () => enterShell(null, { arrived: true }), message);
}

async function logout() {
  // The socket goes first: the server closes it (1008) as it ends the session, and that
  // close must not draw a "session ended" sign-in form that this one then replaces,
  // emptying what the member has begun to type there.
  endChat({ forget: true });
  await api("POST", "/api/auth/logout");
  setCsrfToken(null);
  showLogin("", { forget: true });
}

// -- unsaved changes -------------------------------------------------------------------
// A form of an admin page with a submit button holds its changes until saved (a member's
// "Can sign in" too): leaving it with changes asks first, in the app and on closing the
// tab. A form is marked on input, and unmarked when its status line says it succeeded
// (statusLine's ok, lib/ui.js) or it is reset; a page drawn again has fresh forms. A form
// whose submit only asks for something (the usage period) says data-guard="off". Not
// the chat's composer: chat is no admin page (its drafts are kept, see chat.js).

function guarded(form) {
  if (!(form instanceof HTMLFormElement) || form.dataset.guard === "off" || !state.shell?.content.contains(form)) return false;
  return Boolean(findPage(parseHash().name)?.admin) && Boolean(form.querySelector("button[type=submit], input[type=submit]"));
}

function markUnsaved(event) {
  const target = event.target;
  const form = target?.form || target?.closest?.("form");
  if (guarded(form)) form.dataset[DIRTY] = "";
}
document.addEventListener("input", markUnsaved, true);
document.addEventListener("change", markUnsaved, true);
document.addEventListener("reset", (event) => markSaved(event.target instanceof HTMLFormElement ? event.target : null), true);

const unsavedForm = () => state.shell?.content.querySelector(`form[data-${DIRTY}]`) || null;
const forgetUnsaved = () => state.shell?.content.querySelectorAll(`form[data-${DIRTY}]`).forEach(markSaved);

window.addEventListener("beforeunload", (event) => {
  if (!unsavedForm()) return;
  event.preventDefault();
  event.returnValue = ""; // older browsers ask only with it set
});

/** The hash the page shown was drawn for: where "Stay" goes back to. */
let shownHash = location.hash;
let asking = false;

async function hashChanged() {
  if (asking) return;
  if (state.shell && unsavedForm() && location.hash !== shownHash) {
    const wanted = location.hash;
    // The address goes back at once (no second hashchange: replaceState fires none), so
    // the address never names a page other than the one shown.
    history.replaceState(history.state, "", shownHash || location.pathname + location.search);
    asking = true;
    const leave = await confirmDialog({
      title: t("common.unsaved_title"), message: t("common.unsaved_text"),
      confirmLabel: t("common.unsaved_leave"), cancelLabel: t("common.unsaved_stay"),
    }).finally(() => { asking = false; });
    if (!leave) return;
    forgetUnsaved();
    location.hash = wanted; // fires hashchange again, now without unsaved changes
    return;
  }
  route();
}

whenSessionLost((code) => {
  // An admin's deactivation or password reset said as such, to the session's holder only
  // (the server tells the token whose session it ended; a sign-in is never told).
  const why = ["account_deactivated", "password_reset"].includes(code) ? errorString(code) : null;
  showLogin(why || t("login.session_ended"));
});
window.addEventListener("hashchange", hashChanged);
document.addEventListener("keydown", (event) => {
  if (!menuOpen()) return;
  if (event.key === "Escape") {
    setMenu(false);
    state.shell.menuButton.focus(); // not lost to <body> with the menu it was in
    return;
  }
  if (event.key !== "Tab") return;
  // Focus goes round the open menu and its button; the page behind is inert.
  const stops = menuStops();
  const at = stops.indexOf(document.activeElement);
  const next = event.shiftKey ? (at <= 0 ? stops.at(-1) : null) : (at === stops.length - 1 || at < 0 ? stops[0] : null);
  if (next) { event.preventDefault(); next.focus(); }
});

async function start() {
  applyTheme();
  const shown = lastShownLocale();
  await loadLocale((navigator.language || "en").slice(0, 2));
  if (browserLocale() !== currentLocale()) await loadLocale(browserLocale());
  // Setup's status says whether a session is there: a visitor's first page asks
  // /api/auth/session only with one, so the console shows no 401 for signing in.
  const setup = await api("GET", "/api/setup");
  setPasswordMinLength(setup.data?.password_min_length);
  if (setup.data.signed_in) {
    const session = await api("GET", "/api/auth/session");
    if (session.ok) return enterShell(session);
  }
  // The setup page speaks the browser's language and offers the others. Sign-in speaks
  // what this browser last showed (the member's language, after a restart too), else the
  // browser's, else the instance's: never a language the reader did not ask for when
  // the instance has theirs.
  if (setup.data.needs_setup && setup.data.setup_allowed === false) return renderSetupRefused(root);
  if (setup.data.needs_setup) return renderSetup(root, () => enterShell(null, { arrived: true }));
  const offered = availableLocales();
  const wanted = (offered.includes(shown) && shown) || browserLocale(null) || setup.data.locale;
  if (wanted && wanted !== currentLocale()) await loadLocale(wanted);
  showLogin();
}

start();
