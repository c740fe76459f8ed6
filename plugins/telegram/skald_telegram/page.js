// The member's Telegram page: linked or not, the chat's name, a pairing-code form and an
// unlink button. Status comes from the plugin's own /status route (with the strings in
// the member's language); pairing and unlinking go through the host's per-member config
// write, PUT /api/plugins/<id>/my-config, which the plugin turns into a binding.
// Every text goes in through textContent: a chat name is data, not markup.
// The shell's page header is the page's one h1; this page is one card in the shell's classes.

import { call, node } from "/ui/lib/plugin-kit.js";

export default class TelegramPage extends HTMLElement {
  async connectedCallback() {
    this.pluginId = this.getAttribute("plugin-id") || "telegram";
    this.classList.add("page");
    // Focusable from the script only: where the focus goes when the control that held it
    // is hidden (keepPlace).
    this.line = node("p", undefined, { class: "telegram-status", tabindex: "-1" });
    // For the admin while the bot is not running: the plugin's page, which says why.
    this.why = node("a", undefined, { class: "telegram-why", href: `#plugin-detail?id=${encodeURIComponent(this.pluginId)}` });
    this.whyLine = node("p", undefined, { hidden: true });
    this.whyLine.append(this.why);
    this.message = node("p", undefined, { class: "telegram-message form-status", role: "status" });
    this.code = node("input", undefined, { id: "telegram-code", name: "code", maxlength: 32, autocomplete: "off" });
    this.codeLabel = node("label", undefined, { for: "telegram-code" });
    this.linkButton = node("button", "Link", { class: "btn primary", type: "submit" });
    const field = node("div", undefined, "field");
    field.append(this.codeLabel, this.code);
    const actions = node("div", undefined, "actions");
    actions.append(this.linkButton);
    this.form = node("form", undefined, "stack");
    this.form.append(field, actions);
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.save({ code: this.code.value });
    });
    this.unlinkButton = node("button", "Unlink", { class: "btn telegram-unlink", type: "button" });
    this.unlinkButton.addEventListener("click", () => this.save({ unlink: true }));
    this.unlinkLine = node("div", undefined, "actions");
    this.unlinkLine.append(this.unlinkButton);
    const card = node("section", undefined, "card");
    card.append(this.line, this.whyLine, this.form, this.unlinkLine, this.message);
    this.replaceChildren(card);
    await this.refresh();
  }

  async refresh() {
    try {
      const status = await call("GET", `/api/plugin/${encodeURIComponent(this.pluginId)}/status`);
      const s = status.strings;
      this.codeLabel.textContent = s.page_code;
      this.linkButton.textContent = s.page_link;
      this.unlinkButton.textContent = s.page_unlink;
      this.line.textContent = status.line;
      this.why.textContent = status.why_link || "";
      this.whyLine.hidden = !status.why_link;
      this.form.hidden = status.linked || !status.running; // no code to link while the bot is not running
      this.unlinkLine.hidden = !status.linked;
      this.strings = s;
    } catch (error) {
      this.line.textContent = error.message;
    }
  }

  async save(config) {
    this.message.textContent = "";
    const held = [this.form, this.unlinkLine].find((part) => part.contains(document.activeElement));
    try {
      await call("PUT", `/api/plugins/${encodeURIComponent(this.pluginId)}/my-config`, { config });
      this.code.value = "";
      if (config.code && this.strings) this.message.textContent = this.strings.page_done;
    } catch (error) {
      this.message.textContent = error.message;
    }
    await this.refresh();
    this.keepPlace(held);
  }

  /** Linking hides the form that held the focus (unlinking, the Unlink button), and the
   * browser would drop it to the page's body: a keyboard or screen-reader user lost their
   * place. It goes to what the page offers now: the code field when the form shows, else
   * the status line that says which chat is linked. */
  keepPlace(held) {
    if (!held || !held.hidden) return;
    (this.form.hidden ? this.line : this.code).focus();
  }
}
