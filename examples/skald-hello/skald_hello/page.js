// The Hello page: an ES-module fragment the Skald web shell mounts at #plugin/hello/main.
//
// The shell dynamic-imports this file from /api/plugin/hello/page.js, registers the
// default-exported HTMLElement subclass and mounts it with a `plugin-id` attribute. The
// fragment talks to the host only through HTTP with the member's session: its own routes
// under /api/plugin/<id>/…, plus /api/plugins/mine and PUT /api/plugins/<id>/my-config
// for the member's own settings. Every text goes in through textContent, never innerHTML:
// a nickname is data, not markup.

import { call, node } from "/ui/lib/plugin-kit.js";

export default class HelloPage extends HTMLElement {
  async connectedCallback() {
    this.pluginId = this.getAttribute("plugin-id") || "hello";
    // Every word comes from the plugin's strings, in the member's language, through
    // its route (showGreeting); until then the elements stay empty. No heading of its
    // own: the shell's header above the page already shows its title, as its one h1.
    this.line = node("p");
    this.line.className = "hello-greeting";
    this.nickname = node("input");
    this.nickname.name = "nickname";
    this.nickname.maxLength = 40;
    // The shell's classes give the page its look: `btn primary` is the shell's Save (a
    // bare <button> is the browser's grey one).
    this.save = node("button", "", { class: "btn primary", type: "submit" });
    this.label = node("span");
    const field = node("label"); // wrapping the input names it for screen readers
    field.append(this.label, " ", this.nickname);
    this.form = node("form");
    this.form.append(field, this.save);
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.saveNickname();
    });
    this.replaceChildren(this.line, this.form);
    await Promise.all([this.showGreeting(), this.showNickname()]);
  }

  async showGreeting() {
    try {
      const data = await call("GET", `/api/plugin/${encodeURIComponent(this.pluginId)}/greeting`);
      this.line.textContent = data.greeting;
      this.label.textContent = data.strings.nickname;
      this.save.textContent = data.strings.save;
    } catch (error) {
      this.line.textContent = error.message;
    }
  }

  async showNickname() {
    try {
      const { plugins } = await call("GET", "/api/plugins/mine");
      const mine = plugins.find((plugin) => plugin.id === this.pluginId);
      this.nickname.value = (mine && mine.user_config.nickname) || "";
    } catch (error) {
      this.nickname.value = "";
    }
  }

  async saveNickname() {
    try {
      await call("PUT", `/api/plugins/${encodeURIComponent(this.pluginId)}/my-config`, {
        config: { nickname: this.nickname.value || null },
      });
      await this.showGreeting();
    } catch (error) {
      this.line.textContent = error.message;
    }
  }
}
