// A safe subset of Markdown for assistant (and member) messages, built straight into
// DOM nodes through lib/dom.js — never through an HTML parser — so raw HTML in a
// model's answer stays text (check F1). What it renders: paragraphs and line breaks,
// headings, **bold**, *italic*, `code`, fenced code blocks, lists, block quotes, rules
// and links. Links are made only for http(s) URLs and open in a new tab without a
// referrer. Images are never loaded: they show as their alt text and their URL, so
// nothing an answer says can make the browser fetch from another origin (check E3).
import { el } from "./dom.js";
import { t } from "./i18n.js";

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;

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

function anchor(href, children) {
  return el("a", { href, target: "_blank", rel: "noopener noreferrer", referrerpolicy: "no-referrer", title: href }, ...children);
}

// -- inline ---------------------------------------------------------------------------

// Each rule: a sticky-free regex searched from the current position; the earliest
// match wins, ties go to the first rule. `build` turns the match into nodes.
const INLINE = [
  { re: /(`+)([\s\S]*?[^`])\1(?!`)/, build: (m) => el("code", { text: m[2].replace(/^ (.*) $/s, "$1") }) },
  {
    re: /!\[([^\]\n]*)\]\(\s*<?((?:[^()\s<>]|\([^()\s]*\))*)>?(?:\s+"[^"\n]*")?\s*\)/,
    build: (m) => el("span", { class: "md-image", title: t("chat.image_not_loaded") },
      el("span", { class: "md-image-label", text: m[1] ? t("chat.image_alt", { alt: m[1] }) : t("chat.image") }),
      m[2] ? el("span", { class: "md-image-url", text: m[2] }) : null),
  },
  {
    re: /\[([^\]\n]+)\]\(\s*<?((?:[^()\s<>]|\([^()\s]*\))*)>?(?:\s+"[^"\n]*")?\s*\)/,
    build: (m, ctx) => {
      const href = safeUrl(m[2]);
      const label = inline(m[1], { ...ctx, links: false });
      if (!href || !ctx.links) return [...label, el("span", { class: "md-url", text: ` (${m[2]})` })];
      return anchor(href, label);
    },
  },
  {
    re: /<(https?:\/\/[^>\s]+)>/i,
    build: (m, ctx) => { const href = safeUrl(m[1]); return href && ctx.links ? anchor(href, [m[1]]) : m[0]; },
  },
  {
    re: /\bhttps?:\/\/[^\s<>"'`]*[^\s<>"'`.,:;!?)\]}*_]/i,
    build: (m, ctx) => { const href = safeUrl(m[0]); return href && ctx.links ? anchor(href, [m[0]]) : m[0]; },
  },
  { re: /\*\*(?=\S)([\s\S]*?\S)\*\*/, build: (m, ctx) => el("strong", {}, inline(m[1], ctx)) },
  { re: /(?<![\w_])__(?=\S)([\s\S]*?\S)__(?![\w_])/, build: (m, ctx) => el("strong", {}, inline(m[1], ctx)) },
  { re: /\*(?=[^\s*])([^*]*?[^\s*])\*/, build: (m, ctx) => el("em", {}, inline(m[1], ctx)) },
  { re: /(?<![\w_])_(?=[^\s_])([^_]*?[^\s_])_(?![\w_])/, build: (m, ctx) => el("em", {}, inline(m[1], ctx)) },
  { re: /~~(?=\S)([\s\S]*?\S)~~/, build: (m, ctx) => el("del", {}, inline(m[1], ctx)) },
];

function inline(text, ctx = { links: true }) {
  const out = [];
  let rest = text;
  while (rest) {
    let best = null;
    for (const rule of INLINE) {
      const match = rule.re.exec(rest);
      if (match && (best === null || match.index < best.match.index)) best = { rule, match };
    }
    if (!best) { out.push(rest); break; }
    if (best.match.index > 0) out.push(rest.slice(0, best.match.index));
    const built = best.rule.build(best.match, ctx);
    out.push(...(Array.isArray(built) ? built : [built]));
    rest = rest.slice(best.match.index + best.match[0].length);
  }
  return out;
}

/** Lines of one paragraph, with the line breaks the author typed kept. */
function lines(texts) {
  const out = [];
  texts.forEach((line, index) => {
    if (index) out.push(el("br"));
    out.push(...inline(line.trim()));
  });
  return out;
}

// -- blocks ---------------------------------------------------------------------------

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || ITEM.test(line);
}

function codeBlock(language, body) {
  const code = el("code", { text: body });
  if (/^[\w+-]{1,30}$/.test(language)) code.dataset.language = language;
  return el("pre", { class: "md-code" }, code);
}

/** A list starting at lines[start]; returns [node, next index]. */
function list(source, start) {
  const first = ITEM.exec(source[start]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const node = el(ordered ? "ol" : "ul");
  if (ordered && parseInt(first[2], 10) !== 1) node.setAttribute("start", String(parseInt(first[2], 10)));
  let index = start;
  let item = null;
  let texts = [];
  const closeItem = () => { if (item) { item.prepend(...lines(texts)); texts = []; } };
  while (index < source.length) {
    const line = source[index];
    if (!line.trim()) {
      // A blank line inside a list: it goes on if an item of the same list follows.
      let next = index + 1;
      while (next < source.length && !source[next].trim()) next += 1;
      const after = ITEM.exec(source[next] || "");
      if (!after || after[1].length < indent || /\d/.test(after[2]) !== ordered) break;
      index = next;
      continue;
    }
    const match = ITEM.exec(line);
    if (match && match[1].length <= indent + 1 && /\d/.test(match[2]) === ordered && match[1].length >= indent) {
      closeItem();
      item = el("li");
      node.append(item);
      texts = [match[3]];
      index += 1;
    } else if (match && match[1].length > indent + 1 && item) {
      closeItem();
      const [nested, next] = list(source, index);
      item.append(nested);
      index = next;
    } else if (line.trim() && item && !startsBlock(line)) {
      texts.push(line); // a continuation line of this item, indented or lazy
      index += 1;
    } else {
      break;
    }
  }
  closeItem();
  return [node, index];
}

function blocks(source) {
  const out = [];
  let index = 0;
  while (index < source.length) {
    const line = source[index];
    if (!line.trim()) { index += 1; continue; }
    let match = FENCE.exec(line);
    if (match) {
      const fence = match[1];
      const body = [];
      index += 1;
      // An unclosed fence (a stream mid-block) runs to the end of the text.
      while (index < source.length && !new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`).test(source[index])) {
        body.push(source[index]);
        index += 1;
      }
      index += 1;
      out.push(codeBlock(match[2], body.join("\n")));
      continue;
    }
    match = HEADING.exec(line);
    if (match) {
      out.push(el(`h${Math.min(6, match[1].length + 2)}`, { class: "md-heading" }, inline(match[2])));
      index += 1;
      continue;
    }
    if (RULE.test(line)) { out.push(el("hr")); index += 1; continue; }
    if (QUOTE.test(line)) {
      const inner = [];
      while (index < source.length && QUOTE.test(source[index])) {
        inner.push(QUOTE.exec(source[index])[1]);
        index += 1;
      }
      out.push(el("blockquote", {}, blocks(inner)));
      continue;
    }
    if (ITEM.test(line)) {
      const [node, next] = list(source, index);
      out.push(node);
      index = next;
      continue;
    }
    const texts = [];
    while (index < source.length && source[index].trim() && (!texts.length || !startsBlock(source[index]))) {
      texts.push(source[index]);
      index += 1;
    }
    out.push(el("p", {}, lines(texts)));
  }
  return out;
}

/** Markdown text → an array of DOM nodes (elements and text nodes only). */
export function renderMarkdown(text) {
  const source = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  return blocks(source);
}
