// The member's Telegram page: linked or not, the chat's name, a pairing-code form and an
// unlink button. Status comes from the plugin's own /status route (with the strings in
// the member's language); pairing and unlinking go through the host's per-member config
// write, PUT /api/plugins/<id>/my-config, which the plugin turns into a binding.
// Every text goes in through textContent: a chat name is data, not markup.

import { call, node } from "/ui/lib/plugin-kit.js";

export default class TelegramPage extends HTMLElement {
  async connectedCallback() {
    this.pluginId = this.getAttribute("plugin-id") || "telegram";
    this.heading = node("h1", "Telegram");
    this.line = node("p");
    this.line.className = "telegram-status";
    this.message = node("p");
    this.message.className = "telegram-message";
    this.code = node("input");
    this.code.name = "code";
    this.code.maxLength = 32;
    this.code.autocomplete = "off";
    this.codeLabel = node("label");
    this.linkButton = node("button", "Link");
    this.linkButton.type = "submit";
    this.form = node("form");
    this.form.append(this.codeLabel, this.code, this.linkButton);
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.save({ code: this.code.value });
    });
    this.unlinkButton = node("button", "Unlink");
    this.unlinkButton.type = "button";
    this.unlinkButton.className = "telegram-unlink";
    this.unlinkButton.addEventListener("click", () => this.save({ unlink: true }));
    this.replaceChildren(this.heading, this.line, this.form, this.unlinkButton, this.message);
    await this.refresh();
  }

  async refresh() {
    try {
      const status = await call("GET", `/api/plugin/${encodeURIComponent(this.pluginId)}/status`);
      const s = status.strings;
      this.heading.textContent = s.page_title;
      this.codeLabel.textContent = `${s.page_code} `;
      this.linkButton.textContent = s.page_link;
      this.unlinkButton.textContent = s.page_unlink;
      this.line.textContent = status.line;
      this.form.hidden = status.linked;
      this.unlinkButton.hidden = !status.linked;
      this.strings = s;
    } catch (error) {
      this.line.textContent = error.message;
    }
  }

  async save(config) {
    this.message.textContent = "";
    try {
      await call("PUT", `/api/plugins/${encodeURIComponent(this.pluginId)}/my-config`, { config });
      this.code.value = "";
      if (config.code && this.strings) this.message.textContent = this.strings.page_done;
    } catch (error) {
      this.message.textContent = error.message;
    }
    await this.refresh();
  }
}
