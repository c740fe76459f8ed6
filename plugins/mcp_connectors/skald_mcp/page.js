// The Connectors page: one row per connector (each of a member's own has a page of its own,
// #plugin/<id>/connectors/<name>, with the OAuth and QR panels). A member sees the connectors granted to
// them and their tools, their own connectors (restart, deactivate, accept changed tools,
// the OAuth sign-in panel), the catalog to activate from, and, when allowed, a form for their own
// remote server; an admin also gets the management table (state, tools, who may
// use each connector as checkboxes, restart / accept changed tools / remove) and the
// form to add one (a stdio command as an argv list, or a streamable-HTTP address).
// Every text goes in through textContent: names and descriptions are data, not markup.
// The shell's page header is the page's one h1 (its title); sections here are cards
// with an h2, in the shell's own classes (card, btn, table, muted), so the page looks
// like the rest of the app.

import { call, confirm, node } from "/ui/lib/plugin-kit.js";

let fieldCount = 0;

// What the admin's JSON boxes take, as an example: the API's shapes (the plugin's README).
// JSON is no one's language: these stay as written in every locale.
const JSON_EXAMPLES = {
  catalog: '{"title": "Wiki", "transport": "http", "url": "https://wiki.example/mcp", "fields": [{"name": "token", "label": "API key", "header": "Authorization", "format": "Bearer {value}"}]}',
  providers: '{"issuer": "https://login.example", "client_id": "…", "client_secret": "…", "redirect_uri": "https://login.example/code"}',
};

/** A control with its visible label (a placeholder is no label: it goes once typed in),
 * as the shell's forms have them: a ``field`` with a label for the control. */
function labelled(text, control) {
  if (!control.id) control.id = `mcp-field-${(fieldCount += 1)}`;
  const field = node("div", undefined, "field mcp-field");
  field.append(Object.assign(node("label", text), { htmlFor: control.id }), control);
  return field;
}

/** A form as the shell's are: ``noValidate``, so a wrong value is refused by Skald's own
 * field error (``refuse``: aria-invalid, described by the form's line, in the reader's
 * language) and not by the browser's bubble ("Please enter a URL."), which is in the
 * browser's language and gone before a screen reader has read it. */
function newForm(attrs) {
  const made = node("form", undefined, attrs);
  made.noValidate = true;
  return made;
}

/** A shell button: ``btn`` plus ``kind`` ("primary", "small", ...) and the page's own class. */
function button(text, kind = "", className = "") {
  return node("button", text, { class: ["btn", kind, className].filter(Boolean).join(" "), type: "button" });
}

/** A card with its h2, as the shell's own sections. The heading can take the focus:
 * where it goes when the control an action started from is gone after the re-render
 * (a removed connector's row). */
function card(className, title, ...children) {
  const box = node("section", undefined, `card ${className}`);
  if (title) {
    const id = `mcp-heading-${(fieldCount += 1)}`;
    box.append(node("h2", title, { id, tabindex: "-1", "data-focus": `heading:${className}` }));
    box.setAttribute("aria-labelledby", id);
  }
  box.append(...children);
  for (const form of box.querySelectorAll("form")) nameByCard(form);
  return box;
}

/** Names ``form`` after its card's heading: the admin's page holds several forms with
 * the same "Name" box and "Add connector" or "Save" button, and a screen reader's list
 * of forms told them apart by nothing. ``card`` names the forms it is given; a form
 * added to a card later is named where it is added. */
function nameByCard(form) {
  const heading = form.closest("section.card")?.querySelector("h2[id]");
  if (heading && !form.hasAttribute("aria-label")) form.setAttribute("aria-labelledby", heading.id);
  return form;
}

/** A form's or a section's own status line, beside what the reader acted on: one line
 * at the page's top is off screen on a phone when the form is at the bottom. It can
 * take the focus, so an error with no field to point at is still where the reader is.
 * ``key`` finds its counterpart once the page is drawn again (``act``'s ``redraw``). */
function statusLine(key = "") {
  const line = node("p", "", { id: `mcp-status-${(fieldCount += 1)}`, class: "form-status error mcp-status", role: "status", "aria-live": "polite", tabindex: "-1" });
  if (key) line.dataset.status = key;
  return line;
}

/** Stable keys (``<prefix>:<name>``, a button by its text: buttons have no name) on a
 * container's controls, so the focus finds its counterpart after the page is drawn again. */
function keyControls(container, prefix) {
  for (const control of container.querySelectorAll("input, select, textarea, button")) {
    const own = control.name || (control.tagName === "BUTTON" ? control.textContent : control.type);
    if (!control.dataset.focus) control.dataset.focus = `${prefix}:${own}`;
  }
  return container;
}

/** Whether a member's own connector has a Restart: not while it waits for its sign-in
 * (there is nothing to start), nor once the admin withdrew it (its tools reach nobody,
 * so a new session would change nothing the member can see). */
function restartable(connector) {
  return connector.state !== "needs_oauth" && connector.state !== "withdrawn";
}

/** Run ``work`` (a form's submission, which may wait for a server to start) with the
 * form busy: its submit button disabled (no second click adds it twice), ``progress``
 * shown, ``aria-busy`` for assistive technology; all back as they were when it ends
 * (the page is usually drawn anew by then). */
async function busy(form, submit, progress, work) {
  if (form.getAttribute("aria-busy") === "true") return;
  const running = work(); // first: it notes where the focus is, before the button is disabled
  submit.disabled = true;
  progress.hidden = false;
  form.setAttribute("aria-busy", "true");
  try {
    await running;
  } finally {
    submit.disabled = false;
    progress.hidden = true;
    form.removeAttribute("aria-busy");
  }
}

/** The line ``busy`` shows while a form waits: what is happening, and that it may take a while. */
function progressLine(text) {
  const line = node("p", text, { class: "muted mcp-busy", role: "status" });
  line.hidden = true;
  return line;
}

/** The "none yet" line of an empty list or table. */
const none = (text) => node("p", text, "muted mcp-none");

function format(text, values) {
  return text.replace(/\{(\w+)\}/g, (all, key) => (key in values ? String(values[key]) : all));
}

function lines(text) {
  return text.split("\n").map((l) => l.trim()).filter(Boolean);
}

/** ``Name<separator>value`` lines as ``{values}``, or ``{bad}``: the first line that is
 * not one, by its number and first word (not the whole line: it may hold the secret).
 * Dropping such a line would add the connector without the header the admin
 * believes is set. A header needs a value; an environment variable may be empty. */
function pairs(text, separator) {
  const values = {};
  const numbered = text.split("\n").map((line, index) => [index + 1, line.trim()]);
  for (const [number, line] of numbered.filter(([, line]) => line)) {
    const at = line.indexOf(separator);
    const name = at > 0 ? line.slice(0, at).trim() : "";
    const value = at > 0 ? line.slice(at + 1).trim() : "";
    if (!name || /\s/.test(name) || (separator === ":" && !value)) {
      return { bad: { number, start: (line.split(/[\s:=]/)[0] || "…").slice(0, 40) } };
    }
    values[name] = value;
  }
  return { values };
}

/** One checkbox per member (who may use a connector or a template). ``access`` null:
 * every member the plugin is granted to, shown as the "everyone" box. A member's box
 * calls ``toggle(memberId, checked)``, which changes that one member only: sending the
 * whole list this page saw would undo a change made since it was drawn (another tab,
 * another admin). ``saveAll`` is the "everyone" box's: null, or every member listed
 * (the admin too: the admin holds every plugin). */
function accessBoxes(members, access, toggle, saveAll, everyone) {
  const out = [];
  if (everyone !== undefined) {
    const label = node("label", undefined, "check small mcp-everyone");
    const box = Object.assign(node("input"), { type: "checkbox", checked: access === null });
    box.addEventListener("change", () => saveAll(box.checked ? null : members.map((m) => m.id)));
    label.append(box, node("span", everyone));
    out.push(label);
    if (access === null) return out;
  }
  for (const member of members) {
    const label = node("label", undefined, "check small");
    const box = Object.assign(node("input"), { type: "checkbox", checked: access.includes(member.id) });
    box.dataset.member = member.id;
    box.addEventListener("change", () => toggle(member.id, box.checked));
    label.append(box, node("span", member.display_name || member.username));
    out.push(label);
  }
  return out;
}

export default class ConnectorsPage extends HTMLElement {
  async connectedCallback() {
    this.pluginId = this.getAttribute("plugin-id") || "mcp";
    this.base = `/api/plugin/${encodeURIComponent(this.pluginId)}`;
    this.classList.add("page"); // the shell's page grid: cards one under the other
    // The page's own line: for what belongs to no form (the page could not be loaded).
    this.message = node("p", "", { id: `mcp-message-${(fieldCount += 1)}`, class: "mcp-message form-status error", role: "alert", tabindex: "-1" });
    await this.render();
  }

  /** ``#plugin/<id>/connectors/<name>`` (or a ``connector`` attribute): one of the
   * member's own connectors on a page of its own. */
  detailName() {
    if (this.hasAttribute("connector")) return this.getAttribute("connector");
    const parts = location.hash.slice(1).split("/").map(decodeURIComponent);
    return parts[0] === "plugin" && parts[1] === this.pluginId && parts[2] === "connectors" && parts[3] ? parts[3] : null;
  }

  detailLink(name) {
    return `#plugin/${encodeURIComponent(this.pluginId)}/connectors/${encodeURIComponent(name)}`;
  }

  async renderDetail(name) {
    // A connector's own page: its state and tools, changed tools to accept, and the
    // sign-in panels (OAuth copy-paste, QR device login); deactivation.
    const s = this.s;
    const back = Object.assign(node("a", s.back, "mcp-back"), { href: `#plugin/${encodeURIComponent(this.pluginId)}/connectors` });
    const c = await call("GET", `${this.base}/my/connectors/${encodeURIComponent(name)}`);
    const status = statusLine("detail");
    const box = card("mcp-detail", c.name, status, node("p", `${s.col_state}: ${s["state_" + c.state] || c.state}`, "mcp-state"));
    box.dataset.name = c.name;
    if (c.template) box.append(node("p", `${s.from_template}: ${c.template_title || c.template} (v${c.version})`, "muted"));
    // The admin took the template away: it is not "running" for the member any more.
    if (c.state === "withdrawn") box.append(node("p", s.withdrawn_notice, "mcp-withdrawn hint"));
    if (c.update) box.append(this.updateForm(c, status));
    if (c.url) box.append(node("p", c.url, "muted"));
    if (c.error) box.append(this.failure(c));
    if (c.state === "reconnecting") box.append(this.reconnecting());
    box.append(node("p", `${s.col_tools}: ${c.tools.join(", ") || "—"}`, "mcp-tools"));
    if (c.pending.length) {
      box.append(node("p", format(s.pending, { tools: c.pending.join(", ") }), "mcp-pending hint"), this.withheld(c.pending_tools));
      const accept = button(s.accept, "primary");
      accept.addEventListener("click", () => this.accept(`${this.base}/my/connectors/${encodeURIComponent(c.name)}/accept`, c.pending_tools, status));
      box.append(accept);
    }
    // Signed in and running: say so, with a way to sign in again, not the code form.
    if (c.state === "needs_oauth" || (c.oauth && c.state !== "ready")) box.append(this.oauthPanel(c.name, status));
    else if (c.oauth) box.append(this.signedIn(c.name, status));
    if (c.login === "qr") box.append(this.qrPanel(c.name, c.state));
    const remove = button(s.deactivate, "", "mcp-deactivate");
    remove.addEventListener("click", () =>
      this.deactivate(c.name, status, async () => {
        location.hash = back.getAttribute("href");
        if (this.hasAttribute("connector")) this.removeAttribute("connector");
      }),
    );
    box.append(node("div", undefined, "actions"));
    if (restartable(c)) box.lastChild.append(this.restartOwn(c.name, status));
    box.lastChild.append(remove);
    keyControls(box, `detail:${c.name}`);
    const backLine = node("p", undefined, "back");
    backLine.append(back);
    return [backLine, box];
  }

  /** The Restart of the member's own connector ``name``: a new session, as the admin's
   * Restart of a global one (a failed one, or one reconnecting by itself, at once). */
  restartOwn(name, status) {
    const restart = button(this.s.restart, "small", "mcp-restart");
    restart.addEventListener("click", () => this.act(() => call("POST", `${this.base}/my/connectors/${encodeURIComponent(name)}/restart`), { status }));
    return restart;
  }

  /** What "reconnecting" means: the session was lost and comes back by itself. */
  reconnecting() {
    return node("p", this.s.reconnecting_notice, "mcp-reconnecting hint");
  }

  /** Deactivate the member's connector ``name`` once they confirm: it deletes its
   * values, stored key and sign-in, which one stray click must not do. */
  async deactivate(name, status, after = async () => {}) {
    const s = this.s;
    const message = format(s.confirm_deactivate, { name });
    if (!(await confirm({ title: s.confirm_deactivate_title, message, confirmLabel: s.deactivate }))) return;
    await this.act(
      async () => {
        await call("DELETE", `${this.base}/my/connectors/${encodeURIComponent(name)}`);
        await after();
      },
      { status, focus: "heading:mcp-own" }, // back on the list, where the connector was
    );
  }

  /** Accept the withheld ``tools`` as this page shows them: each with the hash it was
   * drawn at, so a tool the server changed again since is refused (409), not accepted
   * unseen; the page is then drawn again with what the tools say now, and says why. */
  accept(path, tools, status) {
    const shown = Object.fromEntries((tools || []).map((t) => [t.name, t.hash]));
    return this.act(() => call("POST", path, { tools: shown }), { status, redraw: true });
  }

  /** What each withheld tool now says and takes, shown before anyone accepts it (a
   * name alone is accepting blind): its description and input schema, as text. */
  withheld(tools) {
    const s = this.s;
    const list = node("ul", undefined, "stack mcp-withheld");
    for (const t of tools || []) {
      const item = node("li", undefined, "mcp-withheld-tool");
      item.dataset.tool = t.name;
      item.append(
        node("strong", t.name),
        node("p", `${s.tool_description}: ${t.description || "—"}`, "mcp-withheld-description"),
        node("p", s.tool_schema, "muted small"),
        node("pre", JSON.stringify(t.input_schema, null, 2), "mcp-withheld-schema"),
      );
      list.append(item);
    }
    return list;
  }

  /** The template's newer version: update in place, keeping the member's values where
   * they go as before; a template that moved asks for them again (its fields). */
  updateForm(c, status) {
    const s = this.s;
    const form = newForm("stack mcp-update");
    form.append(node("p", format(s.update_to, { version: c.update.version, current: c.version }), "hint"));
    if (c.update.moved) form.append(node("p", s.update_moved, "hint"));
    const inputs = {};
    for (const f of c.update.fields) {
      const input = Object.assign(node("input"), { name: f.name, type: f.secret ? "password" : "text", autocomplete: "off" });
      inputs[f.name] = input;
      form.append(labelled(f.label || f.name, input));
    }
    form.append(node("div", undefined, "actions"));
    form.lastChild.append(Object.assign(button(s.update, "primary", "mcp-update-button"), { type: "submit" }));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const values = Object.fromEntries(Object.entries(inputs).map(([k, input]) => [k, input.value]));
      const body = c.update.moved ? { values } : {};
      this.act(() => call("POST", `${this.base}/my/connectors/${encodeURIComponent(c.name)}/update`, body), { status, fields: inputs });
    });
    return form;
  }

  /** After a sign-in: a line that says so and a way to sign in again (the code form,
   * shown on demand). */
  signedIn(name, status) {
    const s = this.s;
    const box = node("div", undefined, "stack mcp-signed-in");
    const again = button(s.sign_in_again, "", "mcp-sign-in-again");
    again.addEventListener("click", () => {
      const panel = this.oauthPanel(name, status);
      box.replaceWith(panel);
      panel.querySelector("button")?.focus();
    });
    box.append(node("p", s.signed_in, "mcp-signed-in-line"), node("div", undefined, "actions"));
    box.lastChild.append(again);
    return box;
  }

  async render() {
    try {
      const mine = await call("GET", `${this.base}/mine`);
      this.s = mine.strings;
      const name = this.detailName();
      if (name) {
        this.replaceChildren(this.message, ...(await this.renderDetail(name)));
        return;
      }
      // The admin's servers first: what the empty "available to you" line says depends on them.
      const servers = mine.is_admin ? (await call("GET", `${this.base}/servers`)).servers : null;
      // The chat agents the reader may start, each with the connector tools it offers
      // them (the host's own rule): the list never promises tools no assistant of theirs
      // is given (a companion with a fixed tool list uses none). Null: not known (no chat).
      const assistants = await call("GET", "/api/chat/status").then((status) => status.agents, () => null);
      const parts = [this.message, this.asks(), this.mine(mine.connectors, servers, assistants), ...this.own(mine)];
      if (mine.is_admin) parts.push(...(await this.admin(servers)));
      this.replaceChildren(...parts);
    } catch (error) {
      this.message.textContent = error.message;
      this.replaceChildren(this.message);
    }
  }

  /** The connectors granted to the reader. ``servers``: the admin's list (null for a
   * member), so an admin is not told to ask their administrator. */
  mine(connectors, servers, assistants = null) {
    const s = this.s;
    const box = card("mcp-mine", s.mine_title);
    if (connectors.length === 0) {
      const empty = servers === null ? s.mine_empty : servers.length ? s.mine_empty_admin_access : s.mine_empty_admin;
      box.append(none(empty));
      return box;
    }
    // Which of the reader's assistants (by title) is offered which tool.
    const users = (tool) => (assistants || []).filter((a) => (a.member_tools || []).includes(tool)).map((a) => a.title || a.id);
    const names = (list) => list.map((a) => a.title || a.id).join(", ");
    const usesAny = assistants === null || connectors.some((c) => c.tools.some((tool) => users(tool).length));
    box.append(node("p", usesAny ? s.mine_intro : format(s.mine_intro_unused, { assistants: names(assistants) }), "hint mcp-mine-intro"));
    const list = node("ul", undefined, "roster");
    for (const c of connectors) {
      const offered = assistants === null ? c.tools : c.tools.filter((tool) => users(tool).length);
      const tools = offered.length ? `: ${offered.join(", ")}` : "";
      const item = node("li", `${c.name} (${s["state_" + c.state] || c.state})${tools}`, "mcp-connector");
      if (c.reason) item.append(node("p", c.reason, "mcp-unavailable hint"));
      if (assistants !== null && usesAny && c.tools.length) {
        const using = [...new Set(c.tools.flatMap(users))];
        if (!using.length) item.append(node("p", format(s.mine_not_offered, { assistants: names(assistants) }), "mcp-not-offered hint"));
        else if (using.length < assistants.length) item.append(node("p", format(s.mine_offered_by, { assistants: using.join(", ") }), "mcp-offered-by hint"));
      }
      list.append(item);
    }
    box.append(list);
    return box;
  }

  own(mine) {
    const s = this.s;
    const out = [];
    const ownList = node("ul", undefined, "roster");
    const ownStatus = statusLine("own");
    const box = card("mcp-own", s.own_title, ownStatus, mine.own.length ? ownList : none(s.own_none));
    for (const c of mine.own) {
      const row = node("li", undefined, "mcp-own-connector");
      row.dataset.name = c.name;
      const open = Object.assign(node("a", c.name, "mcp-open"), { href: this.detailLink(c.name) });
      open.addEventListener("click", (event) => {
        if (location.hash.startsWith(`#plugin/${this.pluginId}/`)) return; // the app routes it
        event.preventDefault(); // mounted on its own (no router): show it in place
        this.setAttribute("connector", c.name);
        this.render();
      });
      open.dataset.focus = `own-open:${c.name}`;
      row.append(open, node("span", ` (${s["state_" + c.state] || c.state}) `, "mcp-state"));
      if (c.tools.length) row.append(node("span", c.tools.join(", "), "mcp-tools muted"));
      if (c.error) row.append(this.failure(c));
      if (c.state === "reconnecting") row.append(this.reconnecting());
      if (c.state === "withdrawn") row.append(node("p", s.withdrawn_notice, "mcp-withdrawn hint"));
      if (c.update) row.append(node("p", format(s.update_to, { version: c.update.version, current: c.version }), "mcp-update hint"));
      const actions = node("div", undefined, "actions");
      if (c.pending.length) {
        row.append(node("p", format(s.pending, { tools: c.pending.join(", ") }), "mcp-pending hint"), this.withheld(c.pending_tools));
        const accept = button(s.accept, "small primary");
        accept.addEventListener("click", () => this.accept(`${this.base}/my/connectors/${encodeURIComponent(c.name)}/accept`, c.pending_tools, ownStatus));
        actions.append(accept);
      }
      if (c.state === "needs_oauth" || (c.login === "qr" && c.state !== "ready")) {
        // Signing in is on the connector's own page.
        actions.append(Object.assign(node("a", c.state === "needs_oauth" ? s.sign_in : s.link_device, "btn small primary mcp-sign-in-link"), { href: this.detailLink(c.name) }));
        actions.lastChild.addEventListener("click", (event) => {
          if (location.hash.startsWith(`#plugin/${this.pluginId}/`)) return;
          event.preventDefault();
          this.setAttribute("connector", c.name);
          this.render();
        });
      }
      if (restartable(c)) actions.append(this.restartOwn(c.name, ownStatus));
      const remove = button(s.deactivate, "small", "mcp-deactivate");
      remove.addEventListener("click", () => this.deactivate(c.name, ownStatus));
      actions.append(remove);
      row.append(actions);
      keyControls(actions, `own:${c.name}`);
      for (const link of actions.querySelectorAll("a")) link.dataset.focus = `own-sign-in:${c.name}`;
      ownList.append(row);
    }
    out.push(box);
    const templates = node("ul", undefined, "roster");
    const catalog = card("mcp-catalog", s.catalog_title, mine.catalog.length ? templates : none(s.catalog_none));
    for (const t of mine.catalog) {
      const form = newForm({ class: "stack mcp-template", "aria-label": t.title });
      form.dataset.name = t.name;
      form.append(node("strong", t.title), node("p", t.description, "muted"));
      if (t.update_available) form.append(node("p", s.update_available, "mcp-update hint"));
      if (t.activated) {
        // Activated already: say so, and lead to the activation (its page has the update).
        const line = node("div", undefined, "actions");
        const open = Object.assign(node("a", t.update_available ? s.update : s.open_connector, "btn small mcp-open-active"), { href: this.detailLink(t.name) });
        open.addEventListener("click", (event) => {
          if (location.hash.startsWith(`#plugin/${this.pluginId}/`)) return; // the app routes it
          event.preventDefault();
          this.setAttribute("connector", t.name);
          this.render();
        });
        line.append(node("span", s.active, "badge mcp-active"), open);
        form.append(line);
      } else if (mine.may_activate) {
        const inputs = {};
        for (const f of t.fields) {
          const input = Object.assign(node("input"), { name: f.name, type: f.secret ? "password" : "text", autocomplete: "off" });
          inputs[f.name] = input;
          form.append(labelled(f.label, input));
        }
        const status = statusLine();
        const progress = progressLine(s.activating);
        const submit = Object.assign(button(s.activate, "primary"), { type: "submit" });
        form.append(node("div", undefined, "actions"), progress, status);
        form.querySelector(".actions").append(submit);
        keyControls(form, `template:${t.name}`);
        form.addEventListener("submit", (event) => {
          event.preventDefault();
          const values = Object.fromEntries(Object.entries(inputs).map(([k, input]) => [k, input.value]));
          busy(form, submit, progress, () => this.act(() => call("POST", `${this.base}/my/connectors`, { template: t.name, values }), { status, fields: inputs }));
        });
      }
      const item = node("li");
      item.append(form);
      templates.append(item);
    }
    out.push(catalog);
    if (mine.may_add_remote) {
      const form = newForm("stack mcp-remote");
      const name = Object.assign(node("input"), { name: "name", maxLength: 24 });
      const url = Object.assign(node("input"), { name: "url", type: "url", placeholder: "https://" });
      const headers = Object.assign(node("textarea"), { name: "headers" });
      const add = Object.assign(button(s.add, "primary"), { type: "submit" });
      const status = statusLine();
      const progress = progressLine(s.activating);
      form.append(node("p", s.remote_hint, "hint"), labelled(s.name, name), labelled(s.url, url), labelled(s.headers, headers), node("div", undefined, "actions"), progress, status);
      form.querySelector(".actions").append(add);
      keyControls(form, "remote");
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        const given = pairs(headers.value, ":");
        if (given.bad) return this.refuse(status, format(s.bad_header_line, given.bad), headers);
        const remote = { name: name.value.trim(), url: url.value.trim(), headers: given.values };
        busy(form, add, progress, () => this.act(() => call("POST", `${this.base}/my/connectors`, { remote }), { status, fields: { name, url, headers } }));
      });
      out.push(card("mcp-remote-card", s.remote_title, form));
    }
    return out;
  }

  asks() {
    // What a connector asks during a call (elicitation): polled; the answer goes to the
    // server and is kept nowhere.
    const s = this.s;
    const box = node("section", undefined, "mcp-asks stack");
    box.hidden = true; // no empty gap in the page while nothing asks
    const seen = new Map();
    const draw = (items) => {
      const ids = new Set(items.map((e) => e.id));
      for (const [id, form] of seen) {
        if (!ids.has(id)) {
          form.remove();
          seen.delete(id);
        }
      }
      for (const e of items) {
        if (seen.has(e.id)) continue;
        const form = newForm("card stack mcp-ask");
        form.dataset.id = e.id;
        form.append(node("h2", s.elicit_title), node("p", e.message));
        const inputs = {};
        for (const f of e.fields) {
          let input;
          if (f.enum) {
            input = node("select");
            for (const value of f.enum) input.append(Object.assign(node("option", value), { value }));
          } else {
            input = node("input");
            input.type = f.type === "boolean" ? "checkbox" : f.type === "string" ? "text" : "number";
          }
          input.name = f.name;
          inputs[f.name] = [f, input];
          form.append(labelled(f.title, input));
        }
        const decline = button(s.elicit_decline, "", "mcp-ask-decline");
        const status = statusLine();
        form.append(node("div", undefined, "actions"), status);
        form.querySelector(".actions").append(Object.assign(button(s.elicit_accept, "primary"), { type: "submit" }), decline);
        const send = (body) =>
          call("POST", `${this.base}/my/elicitations/${encodeURIComponent(e.id)}`, body).then(
            () => {
              form.remove();
              box.hidden = !box.children.length;
            },
            (error) => this.refuse(status, error.message),
          );
        form.addEventListener("submit", (event) => {
          event.preventDefault();
          const content = {};
          for (const [name, [f, input]] of Object.entries(inputs)) {
            if (f.type === "boolean") content[name] = input.checked;
            else if (input.value !== "") content[name] = f.type === "string" ? input.value : Number(input.value);
          }
          send({ action: "accept", content });
        });
        decline.addEventListener("click", () => send({ action: "decline" }));
        seen.set(e.id, form);
        box.append(form);
      }
      box.hidden = !box.children.length;
    };
    const poll = async () => {
      if (!box.isConnected) return; // re-rendered or left: a newer box polls
      try {
        draw((await call("GET", `${this.base}/my/elicitations`)).elicitations);
      } catch (error) {
        // the next poll tries again
      }
      setTimeout(poll, 1500);
    };
    setTimeout(poll, 0);
    return box;
  }

  qrPanel(name, drawnState) {
    // The device login: ask the connector once as the panel is drawn (login/check, a
    // POST: it starts a connector that is not running and records what it says), then
    // poll login/status (a GET: reads only, writes nothing), show the QR code while the
    // server wants a scan (a PNG data URL only), and offer to link another device once
    // linked. Linked (or unlinked) since the page was drawn: the page is drawn again, so
    // its state and tools say so too (``drawnState``: the connector's state the page shows).
    const s = this.s;
    const panel = node("div", undefined, "stack mcp-qr");
    const line = node("p", "", "mcp-qr-state");
    const image = node("img");
    image.alt = s.qr_alt;
    image.hidden = true;
    const reset = button(s.login_reset, "", "mcp-login-reset");
    reset.hidden = true;
    const path = `${this.base}/my/connectors/${encodeURIComponent(name)}/login`;
    const show = (status) => {
      panel.dataset.state = status.state;
      line.textContent = status.message || s["state_" + (status.state === "ready" ? "ready" : "needs_login")];
      const qr = typeof status.qr === "string" && status.qr.startsWith("data:image/png;base64,") ? status.qr : null;
      image.hidden = !qr;
      if (qr) image.src = qr;
      reset.hidden = status.state !== "ready";
    };
    const poll = async (first = false) => {
      if (!panel.isConnected) return;
      try {
        const status = first ? await call("POST", `${path}/check`) : await call("GET", `${path}/status`);
        show(status);
        if (status.state === "ready") {
          if (drawnState === "needs_login") this.act(async () => {});
          return;
        }
        // Drawn as linked, but the device is gone: the check recorded it, the page follows.
        if (first && drawnState === "ready" && (status.state === "need_scan" || status.state === "logged_out")) this.act(async () => {});
      } catch (error) {
        line.textContent = error.message;
      }
      setTimeout(poll, 1500);
    };
    reset.addEventListener("click", async () => {
      try {
        show(await call("POST", `${path}/reset`));
        this.act(async () => {}); // no longer linked: the page's state and tools follow
      } catch (error) {
        line.textContent = error.message;
      }
    });
    panel.append(line, image, reset);
    setTimeout(() => poll(true), 0);
    return panel;
  }

  oauthPanel(name, status) {
    // The copy-paste flow: open the provider's page, approve, paste the code it shows.
    const s = this.s;
    const panel = node("div", undefined, "stack mcp-oauth");
    const start = button(s.sign_in, "primary", "mcp-sign-in");
    const code = Object.assign(node("input"), { name: "code", autocomplete: "off" });
    const complete = button(s.complete, "", "mcp-complete");
    let state = null;
    start.addEventListener("click", async () => {
      try {
        const { url } = await call("POST", `${this.base}/my/connectors/${encodeURIComponent(name)}/oauth/start`);
        state = new URL(url).searchParams.get("state");
        panel.dataset.url = url;
        window.open(url, "_blank", "noopener");
      } catch (error) {
        this.refuse(status, error.message);
      }
    });
    complete.addEventListener("click", () => {
      // Nothing pasted yet: said beside the field, not sent (the sign-in stays open).
      if (!code.value.trim()) {
        this.refuse(status, s.code_missing, code);
        return;
      }
      this.act(() => call("POST", `${this.base}/my/connectors/${encodeURIComponent(name)}/oauth/complete`, { state, code: code.value.trim() }), { status, fields: { code } });
    });
    const startLine = node("div", undefined, "actions");
    startLine.append(start);
    const completeLine = node("div", undefined, "actions");
    completeLine.append(complete);
    panel.append(startLine, labelled(s.paste_code, code), completeLine);
    return panel;
  }

  /** Run ``work`` (a call), then draw the page again. A refusal goes to ``status``
   * (the form's or section's own line) and the focus to the field it names, one of
   * ``fields`` (``"*"``: the field for any name not listed, a JSON text's), else to
   * the line. After the re-render the focus is back on the counterpart of the control
   * it was on, else on ``focus`` or the heading of the section it was in: drawing the
   * page anew would otherwise leave it on the body, and a keyboard user at the top. */
  async act(work, { status = this.message, fields = {}, focus = null, redraw = false } = {}) {
    status.textContent = "";
    for (const field of Object.values(fields)) field.removeAttribute("aria-invalid");
    this.unmark(status);
    const active = this.contains(document.activeElement) ? document.activeElement : null;
    const heading = active?.closest("section")?.querySelector(":scope > h2");
    const keys = [active?.dataset.focus, focus, heading?.dataset.focus].filter(Boolean);
    try {
      await work();
    } catch (error) {
      if (redraw && error.status === 409) {
        // Refused because what the page showed is out of date: show it as it is now,
        // and say why on the same section's line of the new drawing.
        const key = status.dataset.status;
        await this.render();
        status = (key && this.querySelector(`[data-status="${CSS.escape(key)}"]`)) || this.message;
      }
      this.refuse(status, error.message, error.field ? fields[error.field] || fields["*"] : null);
      return;
    }
    await this.render();
    if (keys.length) this.refocus(keys);
  }

  /** Say why on ``status`` and take the reader there: to ``field``, marked invalid and
   * described by the line, or to the line itself. */
  refuse(status, text, field = null) {
    this.unmark(status);
    status.textContent = text;
    if (field) {
      field.setAttribute("aria-invalid", "true");
      // Beside its hint, if it has one (the JSON boxes' example): not instead of it.
      const described = (field.getAttribute("aria-describedby") || "").split(/\s+/).filter(Boolean);
      if (!described.includes(status.id)) field.setAttribute("aria-describedby", [...described, status.id].join(" "));
    }
    (field || status).focus();
  }

  /** No field is marked wrong by ``status`` any more (a refusal of an earlier try, as
   * the shell's clearFieldErrors): not invalid, nor described by a line saying another
   * field's reason. */
  unmark(status) {
    if (!status.id) return;
    for (const field of this.querySelectorAll(`[aria-describedby~="${CSS.escape(status.id)}"]`)) {
      field.removeAttribute("aria-invalid");
      const rest = field.getAttribute("aria-describedby").split(/\s+/).filter((id) => id && id !== status.id);
      if (rest.length) field.setAttribute("aria-describedby", rest.join(" ")); else field.removeAttribute("aria-describedby");
    }
  }

  /** The focus onto the first of ``keys`` (``data-focus``) still on the page, or the
   * page's message when only that is left. */
  refocus(keys) {
    for (const key of keys) {
      const target = this.querySelector(`[data-focus="${CSS.escape(key)}"]`);
      if (target && !target.closest("[hidden]")) {
        target.focus();
        return;
      }
    }
    if (this.message.textContent) this.message.focus();
  }

  /** Why a connector failed: a sentence for its cause in the reader's words, the
   * technical detail (secrets masked by the server) folded under it. An error without
   * a cause is the plugin's own sentence, shown as it is. */
  failure(connector) {
    const s = this.s;
    const box = node("div", undefined, "mcp-error error-text small");
    if (!connector.cause) {
      box.textContent = connector.error;
      return box;
    }
    const details = node("details", undefined, "mcp-error-detail");
    details.append(node("summary", s.technical_detail), node("code", connector.error));
    box.append(node("span", s["cause_" + connector.cause] || s.cause_other, "mcp-cause"), details);
    return box;
  }

  async admin(servers) {
    const s = this.s;
    let members = [];
    try {
      members = (await call("GET", "/api/admin/members")).members;
    } catch (error) {
      // the table still works without names
    }
    const status = statusLine("servers"); // the table's actions' (restart, access, accept, remove)
    const table = node("table", undefined, "table mcp-servers");
    const head = node("tr");
    for (const title of [s.col_name, s.col_kind, s.col_state, s.col_tools, s.col_access]) head.append(node("th", title, { scope: "col" }));
    head.append(node("th", s.col_actions, { scope: "col", class: "row-actions" }));
    const body = node("tbody");
    table.append(node("thead"), body);
    table.firstChild.append(head);
    for (const server of servers) {
      const row = node("tr", undefined, "mcp-server");
      row.dataset.name = server.name;
      const state = node("td", s["state_" + server.state] || server.state);
      if (server.error) state.append(this.failure(server)); // why, where the admin looks: not only in the log
      if (server.state === "reconnecting") state.append(this.reconnecting());
      const tools = node("td");
      tools.append(node("div", server.tools.filter((t) => t.offered).map((t) => t.exposed_as).join(", ")));
      if (server.pending.length) tools.append(node("div", format(s.pending, { tools: server.pending.join(", ") }), "mcp-pending hint"), this.withheld(server.pending_tools));
      const access = node("td");
      const one = (memberId) => `${this.base}/servers/${encodeURIComponent(server.name)}/access/${encodeURIComponent(memberId)}`;
      access.append(...accessBoxes(members, server.access, (memberId, checked) => this.act(() => call(checked ? "PUT" : "DELETE", one(memberId)), { status })));
      for (const box of access.querySelectorAll("input")) box.dataset.focus = `access:${server.name}:${box.dataset.member}`;
      const actions = node("td", undefined, "row-actions");
      const restart = button(s.restart, "small", "mcp-restart");
      restart.dataset.focus = `restart:${server.name}`;
      restart.addEventListener("click", () => this.act(() => call("POST", `${this.base}/servers/${encodeURIComponent(server.name)}/restart`), { status }));
      actions.append(restart);
      if (server.pending.length) {
        const accept = button(s.accept, "small primary");
        accept.dataset.focus = `accept:${server.name}`;
        accept.addEventListener("click", () => this.accept(`${this.base}/servers/${encodeURIComponent(server.name)}/accept`, server.pending_tools, status));
        actions.append(accept);
      }
      const remove = button(s.remove, "small danger-text", "mcp-remove");
      remove.dataset.focus = `remove:${server.name}`;
      remove.addEventListener("click", async () => {
        const message = format(s.confirm_remove, { name: server.name });
        if (await confirm({ title: s.confirm_remove_title, message, confirmLabel: s.remove })) {
          this.act(() => call("DELETE", `${this.base}/servers/${encodeURIComponent(server.name)}`), { status });
        }
      });
      actions.append(remove);
      row.append(node("td", server.name), node("td", server.transport === "stdio" ? `stdio: ${server.command}` : server.url), state, tools, access, actions);
      body.append(row);
    }
    const wrap = node("div", undefined, "table-wrap");
    wrap.append(table);
    return [
      card("mcp-admin", s.admin_title, node("p", s.admin_intro, "hint mcp-intro"), status, servers.length ? wrap : none(s.servers_none)),
      card("mcp-add-card", s.add_title, this.form(members)),
      ...(await this.adminCatalog(members)),
    ];
  }

  async adminCatalog(members) {
    // The catalog's templates and the sign-in providers, as JSON (the API's shapes: see
    // the plugin's README). A provider's client secret comes back masked.
    const s = this.s;
    const [{ templates }, { providers }] = await Promise.all([call("GET", `${this.base}/catalog`), call("GET", `${this.base}/providers`)]);
    const editor = (title, kind, rows, className) => {
      const list = node("ul", undefined, "roster");
      const listStatus = statusLine();
      const box = card(className, title, listStatus, rows.length ? list : none(kind === "catalog" ? s.templates_none : s.providers_none));
      for (const row of rows) {
        const item = node("li", undefined, "stack");
        item.dataset.name = row.name;
        const remove = button(s.remove, "small danger-text");
        remove.dataset.focus = `${kind}-remove:${row.name}`;
        remove.addEventListener("click", () => this.act(() => call("DELETE", `${this.base}/${kind}/${encodeURIComponent(row.name)}`), { status: listStatus }));
        const top = node("div", undefined, "actions");
        top.append(node("strong", row.name), remove);
        item.append(top);
        if (kind === "catalog") {
          // Who may see and activate this template (per-template access).
          const access = node("div", undefined, "mcp-template-access");
          const path = `${this.base}/catalog/${encodeURIComponent(row.name)}/access`;
          const toggle = (memberId, checked) => this.act(() => call(checked ? "PUT" : "DELETE", `${path}/${encodeURIComponent(memberId)}`), { status: listStatus });
          const saveAll = (chosen) => this.act(() => call("PUT", path, { members: chosen }), { status: listStatus });
          access.append(node("span", s.col_access, "label-text"), ...accessBoxes(members, row.access, toggle, saveAll, s.everyone));
          for (const box of access.querySelectorAll("input")) box.dataset.focus = `${kind}-access:${row.name}:${box.dataset.member || "everyone"}`;
          item.append(access);
        }
        const { access: _access, grant_by_default: _default, ...shown } = row;
        item.append(node("pre", JSON.stringify(shown, null, 2)));
        list.append(item);
      }
      const form = newForm("stack");
      const name = Object.assign(node("input"), { name: "name", maxLength: 24 });
      const body = Object.assign(node("textarea"), { name: "body", rows: 6, cols: 60, placeholder: JSON_EXAMPLES[kind] });
      // What the box takes, with an example that stays when the box is typed in (the
      // placeholder goes): said with the box (aria-describedby), as a field's hint.
      const hint = node("p", undefined, { id: `mcp-hint-${(fieldCount += 1)}`, class: "hint" });
      hint.append(`${kind === "catalog" ? s.template_json_hint : s.provider_json_hint} `, node("code", JSON_EXAMPLES[kind]));
      body.setAttribute("aria-describedby", hint.id);
      const status = statusLine();
      form.append(labelled(s.name, name), labelled(s.template_json, body), hint, node("div", undefined, "actions"), status);
      form.querySelector(".actions").append(Object.assign(button(s.save, "primary"), { type: "submit" }));
      keyControls(form, kind);
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        let parsed;
        try {
          parsed = JSON.parse(body.value || "{}");
        } catch (error) {
          // The browser's own message is in the browser's language, not the reader's.
          return this.refuse(status, s.invalid_json, body);
        }
        // Every field but the name is in the JSON text.
        this.act(() => call("PUT", `${this.base}/${kind}/${encodeURIComponent(name.value.trim())}`, parsed), { status, fields: { name, "*": body } });
      });
      box.append(form);
      nameByCard(form);
      return box;
    };
    return [editor(s.catalog_admin_title, "catalog", templates, "mcp-admin-catalog"), editor(s.providers_title, "providers", providers, "mcp-admin-providers")];
  }

  form(members) {
    const s = this.s;
    const form = newForm("stack mcp-add");
    form.append(node("p", s.add_hint, "hint"));
    const shown = {}; // transport → the fields only it uses
    const field = (label, input, only) => {
      const wrap = labelled(label, input);
      if (only) (shown[only] ||= []).push(wrap);
      form.append(wrap);
      return input;
    };
    const name = field(s.name, Object.assign(node("input"), { name: "name", maxLength: 24 }));
    const transport = field(s.transport, node("select"));
    transport.name = "transport";
    for (const value of ["stdio", "http"]) transport.append(Object.assign(node("option", value), { value }));
    const command = field(s.command, Object.assign(node("input"), { name: "command" }), "stdio");
    const args = field(s.args, Object.assign(node("textarea"), { name: "args" }), "stdio");
    const env = field(s.env, Object.assign(node("textarea"), { name: "env" }), "stdio");
    const url = field(s.url, Object.assign(node("input"), { name: "url", type: "url", placeholder: "https://" }), "http");
    const headers = field(s.headers, Object.assign(node("textarea"), { name: "headers" }), "http");
    // Only the fields of the chosen kind: a command means nothing to an HTTP connector.
    const showKind = () => {
      for (const [kind, wraps] of Object.entries(shown)) for (const wrap of wraps) wrap.hidden = kind !== transport.value;
    };
    transport.addEventListener("change", showKind);
    showKind();
    const submit = Object.assign(button(s.add, "primary"), { type: "submit" });
    const status = statusLine();
    const progress = progressLine(s.adding);
    form.append(node("div", undefined, "actions"), progress, status);
    form.querySelector(".actions").append(submit);
    keyControls(form, "add");
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const stdio = transport.value === "stdio";
      const given = stdio ? pairs(env.value, "=") : pairs(headers.value, ":");
      if (given.bad) return this.refuse(status, format(stdio ? s.bad_env_line : s.bad_header_line, given.bad), stdio ? env : headers);
      const body = { name: name.value.trim(), transport: transport.value };
      if (stdio) Object.assign(body, { command: command.value.trim(), args: lines(args.value), env: given.values });
      else Object.assign(body, { url: url.value.trim(), headers: given.values });
      // Default access at the connector's birth: every member, as for a plugin, the
      // admin included (the admin holds every plugin, and sees every template); the
      // admin's job is removal.
      body.access = members.map((m) => m.id);
      // The answer waits for the server's first answer (up to half a minute for one that hangs).
      busy(form, submit, progress, () => this.act(() => call("POST", `${this.base}/servers`, body), { status, fields: { name, command, args, env, url, headers } }));
    });
    return form;
  }
}
