// Markdown for assistant (and member) messages, by well-kept libraries vendored under
// web/vendor (see its README): marked (GitHub-flavoured: tables, task lists,
// strikethrough), highlight.js for code, KaTeX for math, and DOMPurify over all of it.
//
// What reaches the page:
// - Raw HTML in a model's answer stays text: marked reads no HTML (its html and tag
//   tokenizers are off, their renderers escape), and DOMPurify removes whatever else
//   could run (check F1).
// - Links only for absolute http(s) URLs, opening in a new tab without a referrer or
//   opener; any other link stays text with its URL beside it.
// - Images are never loaded: they show as their alt text and their URL, so nothing an
//   answer says makes the browser fetch from another origin (check E3).
// - Math is rendered by KaTeX into placeholders after sanitising: KaTeX builds the
//   nodes itself (its styles set through the DOM, which the CSP allows), from TeX that
//   reached the placeholder as text. KaTeX is loaded on first use.
//
// Streaming (MarkdownStream): the blocks an answer has finished are rendered once and
// kept; only the last block, still growing, is rendered again on each update.
//
// Bounded work per message: marked has no limit of its own, and a hostile answer froze the
// tab (400 kB of "*a" and "_a": one 29 s task; a list 1,000 deep: 16 s; 5 MB of "x": 4 s;
// 5,000 formulas: every page switch after it 8-15 s). A message longer than PLAIN_ABOVE
// characters, or nested deeper than MAX_NESTING, is shown as plain text (selectable and
// copyable as ever) with a button that formats it on demand; at most MAX_MATH formulas of a
// message are drawn by KaTeX, the rest show their TeX. A streamed answer keeps to the same.
import { Marked, Tokenizer } from "../vendor/marked/marked.esm.js";
import DOMPurify from "../vendor/dompurify/purify.es.js";
import hljs from "../vendor/highlight/highlight.min.js";
import { scrollableRegion } from "./dom.js";
import { t } from "./i18n.js";
import { hush, liveRegionOf } from "./live.js";

/** The largest size, in em, a formula may ask for (KaTeX's maxSize). */
const MATH_MAX_EM = 20;

// KaTeX (~600 kB) is loaded the first time an answer has math, not with every page.
let katex = null;
let loadingKatex = null;

/** The URL if it is an absolute http(s) URL, else null (javascript:, data:, relative …). */
export function safeUrl(raw) {
  const text = String(raw || "").trim();
  if (!/^https?:\/\//i.test(text)) return null;
  try {
    const url = new URL(text);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch {
    return null;
  }
}

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escape = (text) => String(text ?? "").replace(/[&<>"']/g, (c) => ESCAPES[c]);

// -- math: $…$ and \(…\) inline, $$…$$ and \[…\] as blocks ------------------------------

const mathBlock = {
  name: "mathBlock",
  level: "block",
  start: (src) => src.match(/^ {0,3}(\$\$|\\\[)/m)?.index,
  tokenizer(src) {
    const match = /^ {0,3}(?:\$\$([\s\S]+?)\$\$|\\\[([\s\S]+?)\\\])[ \t]*(?:\n|$)/.exec(src);
    if (match) return { type: "mathBlock", raw: match[0], tex: (match[1] ?? match[2]).trim() };
    return undefined;
  },
  renderer: (token) => `<div class="md-math display" data-tex="${escape(token.tex)}">${escape(token.tex)}</div>\n`,
};

const mathInline = {
  name: "mathInline",
  level: "inline",
  start: (src) => src.match(/\$|\\\(/)?.index,
  tokenizer(src) {
    // $$…$$ inside a line is display math too: else the rule below took "$\int…$" out
    // of it and left a "$" on each side.
    const display = /^\$\$(?!\$)((?:\\.|[^\\$])+?)\$\$(?!\$)/.exec(src);
    if (display && display[1].trim()) return { type: "mathInline", raw: display[0], tex: display[1].trim(), display: true };
    // $x$ but not "$5 and $6": no space inside the dollars, no digit right after the closing one.
    const match = /^\$(?!\s)((?:\\.|[^\\\n$])+?)(?<!\s)\$(?!\d)/.exec(src) || /^\\\(((?:\\.|[^\\\n])+?)\\\)/.exec(src);
    if (match) return { type: "mathInline", raw: match[0], tex: match[1] };
    return undefined;
  },
  renderer: (token) => `<span class="md-math${token.display ? " display" : ""}" data-tex="${escape(token.tex)}">${escape(token.tex)}</span>`,
};

// -- marked, with the renderers that keep the rules above -----------------------------

let highlighting = true; // off for the block still streaming: highlighted once, when it is done

/** A bare URL in the text, as GFM finds it, but ending before a quote or ">": with HTML
 * shown as text, `<img src="http://x/y.png">` must not link "http://x/y.png%22%3E". */
function bareUrl(src) {
  const token = Tokenizer.prototype.url.call(this, src);
  if (!token || token.href.startsWith("mailto:")) return token;
  const end = token.raw.search(/["<>]/);
  if (end < 0) return token;
  let raw = token.raw.slice(0, end);
  for (let before = null; before !== raw;) {
    before = raw;
    raw = this.rules.inline._backpedal.exec(raw)?.[0] ?? "";
  }
  if (!/^(https?:\/\/|www\.)[^/]/i.test(raw) || /^(https?:\/\/|www\.)$/i.test(raw)) return undefined;
  const href = /^www\./i.test(raw) ? `http://${raw}` : raw;
  return { ...token, raw, text: raw, href, tokens: [{ type: "text", raw, text: raw }] };
}

function createMarked() {
  const marked = new Marked({ gfm: true, breaks: true });
  marked.use({
    extensions: [mathBlock, mathInline],
    // No HTML in answers at all: "<div>" is text like any other, so it neither swallows
    // the markdown after it (as an HTML block would) nor becomes markup.
    tokenizer: { html: () => undefined, tag: () => undefined, url: bareUrl },
    renderer: {
      html: ({ text }) => escape(text),
      heading({ tokens, depth }) {
        // The page's h1 is the conversation's title, so a message's headings start at h2:
        // "#" and "##" are both h2 (answers mostly open with "##", which as h3 skipped a
        // level under the h1: axe heading-order), "###" h3, and so on.
        const level = Math.max(2, Math.min(6, depth));
        return `<h${level} class="md-heading">${this.parser.parseInline(tokens)}</h${level}>\n`;
      },
      link({ href, tokens }) {
        const label = this.parser.parseInline(tokens);
        const url = safeUrl(href);
        if (!url) return `${label}<span class="md-url"> (${escape(href)})</span>`;
        return `<a href="${escape(url)}" title="${escape(url)}">${label}</a>`;
      },
      image({ href, text }) {
        const label = text ? t("chat.image_alt", { alt: text }) : t("chat.image");
        const url = href ? `<span class="md-image-url">${escape(href)}</span>` : "";
        return `<span class="md-image" title="${escape(t("chat.image_not_loaded"))}"><span class="md-image-label">${escape(label)}</span>${url}</span>`;
      },
      // A column's alignment ("|---:|") as a class: DOMPurify keeps classes and drops
      // `align`, and no answer gets to set a style of its own.
      tablecell({ tokens, header, align }) {
        const tag = header ? "th" : "td";
        const aligned = ["left", "center", "right"].includes(align) ? ` class="md-align-${align}"` : "";
        return `<${tag}${aligned}>${this.parser.parseInline(tokens)}</${tag}>\n`;
      },
      code({ text, lang }) {
        const language = /^[\w+-]{1,30}$/.test(lang || "") ? lang.toLowerCase() : "";
        let body = escape(text);
        if (highlighting && language && hljs.getLanguage(language)) {
          try { body = hljs.highlight(text, { language, ignoreIllegals: true }).value; } catch { /* shown plain */ }
        }
        const attrs = language ? ` data-language="${escape(language)}" class="hljs language-${escape(language)}"` : ' class="hljs"';
        return `<pre class="md-code"><code${attrs}>${body}</code></pre>\n`;
      },
    },
  });
  return marked;
}

const marked = createMarked();

// -- sanitising ------------------------------------------------------------------------

const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_TAGS: ["style", "img", "svg", "math", "form", "button", "iframe", "object", "embed", "video", "audio", "picture", "source", "link", "meta", "base"],
  FORBID_ATTR: ["style", "srcset", "src", "action", "formaction"],
  ALLOWED_URI_REGEXP: /^https?:\/\//i,
};

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    if (node.hasAttribute("href") && safeUrl(node.getAttribute("href"))) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
      node.setAttribute("referrerpolicy", "no-referrer");
    } else {
      node.removeAttribute("href");
    }
  }
});

/** Sanitised nodes for HTML that marked made; math (up to `mathBudget` formulas) and code
 * blocks finished. */
function toFragment(html, mathBudget = MAX_MATH) {
  const fragment = DOMPurify.sanitize(html, PURIFY);
  capMath(fragment, mathBudget);
  renderMath(fragment);
  for (const box of fragment.querySelectorAll("li > input")) {
    box.type = "checkbox";
    box.disabled = true;
    const item = box.closest("li");
    // Named by its item's text; the checkbox itself says whether it is done.
    box.setAttribute("aria-label", item.textContent.trim().slice(0, 200) || (box.checked ? t("chat.task_done") : t("chat.task_open")));
    item.classList.add("task");
  }
  for (const pre of fragment.querySelectorAll("pre.md-code")) addCodeCopy(pre);
  for (const table of fragment.querySelectorAll("table")) {
    // A table wider than the message scrolls in a box of its own, which a keyboard must
    // reach too (axe scrollable-region-focusable); the box, not the table, is the region,
    // so the table keeps its rows and columns for a screen reader.
    const box = document.createElement("div");
    box.className = "md-table";
    table.replaceWith(box);
    box.append(table);
    scrollableRegion(box, t("chat.table"));
  }
  return fragment;
}

/** Math placeholders under `root` rendered by KaTeX; until it is loaded they show their
 * TeX, and are rendered (wherever they are on the page by then) once it is. */
function renderMath(root) {
  const nodes = root.querySelectorAll(".md-math[data-tex]:not(.rendered)");
  if (!nodes.length) return;
  if (!katex) {
    loadingKatex ||= import("../vendor/katex/katex.js")
      .then((module) => { katex = module.default; renderMath(document); })
      .catch(() => { loadingKatex = null; }); // not loaded: the TeX stays as text
    return;
  }
  for (const node of nodes) {
    // Math drawn on the page already (KaTeX loaded after it showed its TeX) is not news:
    // a live region around it (the chat's log) does not read it out again.
    const region = node.isConnected ? liveRegionOf(node) : null;
    if (region) hush(region);
    try {
      // maxSize: a size the TeX names (\rule{9999em}{9999em}) is capped at 20 em; the
      // default (none) let one formula push the rest of a conversation 190,000 px away.
      katex.render(node.dataset.tex, node, {
        displayMode: node.classList.contains("display"), throwOnError: false, output: "htmlAndMathml", maxSize: MATH_MAX_EM,
      });
      node.classList.add("rendered");
    } catch { /* KaTeX failed: the TeX stays as text */ }
  }
}

// -- copying ---------------------------------------------------------------------------

/** Put text on the clipboard; a page served over plain http (no Clipboard API) uses a
 * selected textarea instead. */
export async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) { await navigator.clipboard.writeText(text); return true; }
  } catch { /* fall through */ }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "visually-hidden";
  document.body.append(area);
  area.select();
  let ok = false;
  try { ok = document.execCommand("copy"); } catch { ok = false; }
  area.remove();
  return ok;
}

/** A button that copies what `read()` returns and says so for a moment. */
export function copyButton(read, label = t("chat.copy"), className = "copy-button") {
  const button = document.createElement("button");
  button.type = "button";
  button.className = `btn quiet small ${className}`;
  button.textContent = label;
  const live = document.createElement("span");
  live.className = "visually-hidden";
  live.setAttribute("role", "status");
  button.addEventListener("click", async () => {
    const ok = await copyText(read());
    button.textContent = ok ? t("chat.copied") : t("chat.copy_failed");
    live.textContent = button.textContent;
    setTimeout(() => { button.textContent = label; live.textContent = ""; }, 1500);
  });
  const wrap = document.createElement("span");
  wrap.className = "copy-wrap";
  wrap.append(button, live);
  return wrap;
}

function addCodeCopy(pre) {
  const code = pre.querySelector("code");
  const language = code?.dataset.language || "";
  const head = document.createElement("div");
  head.className = "code-head";
  const name = document.createElement("span");
  name.className = "code-language";
  name.textContent = language;
  head.append(name, copyButton(() => code?.textContent || "", t("chat.copy_code"), "copy-code"));
  // Beside the <pre>, not in it: a <pre> holds phrasing content only, and a screen
  // reader read "python Copy code" as the code's first line.
  const block = document.createElement("div");
  block.className = "md-code-block";
  pre.replaceWith(block);
  block.append(head, pre);
  // A long line scrolls sideways.
  scrollableRegion(pre, language ? t("chat.code_named", { language }) : t("chat.code"));
}

// -- limits ------------------------------------------------------------------------------

/** Longer messages are plain text until asked: ~0.3 s of marked's worst case here, far
 * above a long ordinary answer (a few thousand words). */
export const PLAIN_ABOVE = 50_000;
/** Deeper nesting (lists, quotes) is plain text: marked's work grows with depth squared. */
export const MAX_NESTING = 16;
/** KaTeX draws at most this many formulas per message; the rest show their TeX. */
export const MAX_MATH = 100;

// A line opening more than MAX_NESTING levels: indented past them (a list item per ~2-4
// columns) or that many ">" / list markers in a row.
const DEEP = new RegExp(`^(?:[ \\t]{${MAX_NESTING * 4},}\\S|(?:[ \\t]{0,3}(?:>|[-*+]|\\d{1,9}[.)])[ \\t]){${MAX_NESTING},})`, "m");

/** Why `text` is shown as plain text ("long", "deep"), or null when it is formatted. */
export function tooHeavy(text) {
  if (text.length > PLAIN_ABOVE) return "long";
  return DEEP.test(text) ? "deep" : null;
}

/** A plain-text view shows this much at first: laying out 5 MB of text took seconds too. */
export const PLAIN_SHOWN = 200_000;

/** The plain-text view of a heavy message, with a button that formats it on demand (and
 * one that shows all of it, when it is longer than PLAIN_SHOWN). `view.text` is the whole
 * message; a stream sets it as the message grows. */
function plainView(text, why) {
  const body = document.createElement("div");
  body.className = "md-plain";
  body.textContent = text.slice(0, PLAIN_SHOWN);
  const note = document.createElement("p");
  note.className = "md-plain-note";
  const say = document.createElement("span");
  say.textContent = t(why === "long" ? "chat.plain_long" : "chat.plain_deep", { count: text.length });
  const button = document.createElement("button");
  button.type = "button";
  button.className = "btn quiet small";
  button.textContent = t("chat.show_formatted");
  const whole = document.createElement("button");
  whole.type = "button";
  whole.className = "btn quiet small";
  whole.textContent = t("chat.show_whole_text");
  note.append(say, " ", button, " ", whole);
  const view = document.createElement("div");
  view.className = "md-plain-view";
  view.append(note, body);
  view.text = text;
  view.showWhole = () => { whole.hidden = view.text.length <= PLAIN_SHOWN; };
  view.showWhole();
  whole.addEventListener("click", () => { body.textContent = view.text; view.whole = true; whole.remove(); });
  button.addEventListener("click", () => {
    button.disabled = true;
    button.textContent = t("chat.formatting");
    // A moment first, so "Formatting…" shows before the long task starts.
    setTimeout(() => view.replaceWith(...formatted(view.text)), 30);
  });
  return view;
}

/** A stream's plain-text view grown to `text`: only what is new is added to the page. */
function growPlain(view, text) {
  const body = view.querySelector(".md-plain");
  const shown = view.whole ? text.length : Math.min(text.length, PLAIN_SHOWN);
  const had = view.whole ? view.text.length : Math.min(view.text.length, PLAIN_SHOWN);
  if (shown > had) body.append(text.slice(had, shown));
  view.text = text;
  view.showWhole?.();
}

/** TeX past the message's budget stays source: `$…$` as written, not drawn. */
function capMath(fragment, budget) {
  let left = budget;
  for (const node of fragment.querySelectorAll(".md-math[data-tex]")) {
    if (left > 0) { left -= 1; continue; }
    const display = node.classList.contains("display");
    node.textContent = display ? `$$${node.dataset.tex}$$` : `$${node.dataset.tex}$`;
    node.removeAttribute("data-tex");
    node.classList.add("md-math-source");
  }
}

// -- rendering ---------------------------------------------------------------------------

const normalise = (text) => String(text ?? "").replace(/\r\n?/g, "\n");

function formatted(text) {
  highlighting = true;
  return [...toFragment(marked.parse(text), MAX_MATH).childNodes];
}

/** Markdown text → an array of DOM nodes (a heavy message: its plain-text view). */
export function renderMarkdown(text) {
  const source = normalise(text);
  const why = tooHeavy(source);
  return why ? [plainView(source, why)] : formatted(source);
}

/**
 * One streaming message body: `update(text)` with the whole text so far renders only
 * what changed. Blocks followed by another are finished: rendered once and kept. The
 * last block is rendered again (without highlighting) until the next one starts.
 */
export class MarkdownStream {
  constructor(container) {
    this.container = container;
    this.reset();
  }

  reset() {
    this.text = "";
    this.stable = 0; // characters of text rendered as finished blocks
    this.tail = [];
    this.math = MAX_MATH; // formulas the finished blocks may still draw
    this.plain = null; // a heavy answer's plain-text view, once it became one
    this.owned = true; // the container holds what this stream rendered, nothing else
    this.container.replaceChildren();
  }

  /** The container was filled some other way (a whole render): start afresh next time. */
  release() {
    this.owned = false;
  }

  update(raw) {
    const text = normalise(raw);
    if (!this.owned || !text.startsWith(this.text.slice(0, this.stable))) this.reset();
    if (this.plain && !text.startsWith(this.text)) this.reset();
    const why = this.plain ? "long" : tooHeavy(text);
    if (why) {
      // Heavy: plain text from here on, grown by what is new rather than set again.
      if (!this.plain) {
        this.plain = plainView(text, why);
        this.tail = [];
        this.container.replaceChildren(this.plain);
      } else {
        growPlain(this.plain, text);
      }
      this.text = text;
      return;
    }
    this.text = text;
    const rest = text.slice(this.stable);
    const tokens = marked.lexer(rest);
    let last = tokens.length - 1;
    while (last > 0 && tokens[last].type === "space") last -= 1;
    let open = tokens;
    const finished = tokens.slice(0, Math.max(last, 0));
    const consumed = finished.map((token) => token.raw).join("");
    if (finished.length && rest.startsWith(consumed)) {
      finished.links = tokens.links;
      const done = toFragment(marked.parser(finished), this.math);
      this.math = Math.max(0, this.math - done.querySelectorAll(".md-math:not(.md-math-source)").length);
      for (const node of this.tail) node.remove();
      this.tail = [];
      this.container.append(done);
      this.stable += consumed.length;
      open = tokens.slice(finished.length);
      open.links = tokens.links;
    }
    highlighting = false;
    const fragment = toFragment(marked.parser(open), this.math);
    highlighting = true;
    for (const node of this.tail) node.remove();
    this.tail = [...fragment.childNodes];
    this.container.append(fragment);
  }
}
