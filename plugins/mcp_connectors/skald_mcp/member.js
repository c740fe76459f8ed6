// A section of a member's page in the admin's Members area (WebPage slot
// "member_admin"): the connectors this member may use. One checkbox per global
// connector (its grants) and per catalog template the admin restricted (its access);
// a template open to everyone with the plugin says so. Changing a box writes the same
// grants as the Connectors page (one write path, so the two cannot disagree), this
// member's alone, and a revocation takes effect before the answer comes back. Every
// text goes in through textContent.

import { call, node } from "/ui/lib/plugin-kit.js";

export default class MemberConnectors extends HTMLElement {
  async connectedCallback() {
    this.base = `/api/plugin/${encodeURIComponent(this.getAttribute("plugin-id") || "mcp")}`;
    this.memberId = this.getAttribute("member-id") || "";
    if (!this.memberId) {
      // Opened by its address (#plugin/mcp/member-grants), not as a section of a member's
      // page: there is no member to show (asking with an empty id answered "Not found").
      // The Members list is where each member's page, with this section, opens.
      location.replace("#members");
      return;
    }
    this.message = node("p", "", "mcp-message");
    await this.render();
  }

  async render() {
    try {
      const data = await call("GET", `${this.base}/members/${encodeURIComponent(this.memberId)}/grants`);
      const s = data.strings;
      const list = node("ul", undefined, "checks mcp-member-grants");
      // A box grants or revokes this member alone (``…/access/<member>``): sending the
      // list this page saw would undo another member's grant made since it was drawn.
      const box = (label, checked, path, note) => {
        const item = node("li");
        const wrap = node("label");
        const input = Object.assign(node("input"), { type: "checkbox", checked });
        input.addEventListener("change", async () => {
          this.message.textContent = "";
          try {
            await call(input.checked ? "PUT" : "DELETE", `${path}/${encodeURIComponent(this.memberId)}`);
            await this.render();
          } catch (error) {
            this.message.textContent = error.message;
          }
        });
        wrap.append(input, document.createTextNode(" " + label));
        item.append(wrap);
        if (note) item.append(node("span", " " + note, "muted"));
        return item;
      };
      for (const c of data.servers) {
        list.append(box(c.name, c.granted, `${this.base}/servers/${encodeURIComponent(c.name)}/access`));
      }
      for (const t of data.templates) {
        if (t.access === null) {
          const item = node("li");
          item.append(node("span", `${t.title} (${t.name}) `), node("span", s.everyone, "muted"));
          list.append(item);
        } else {
          list.append(box(`${t.title} (${t.name})`, t.granted, `${this.base}/catalog/${encodeURIComponent(t.name)}/access`, s.template));
        }
      }
      const parts = [this.message];
      if (!data.servers.length && !data.templates.length) parts.push(node("p", s.none, "muted"));
      else parts.push(node("p", s.hint, "hint"), list);
      this.replaceChildren(...parts);
    } catch (error) {
      this.message.textContent = error.message;
      this.replaceChildren(this.message);
    }
  }
}
