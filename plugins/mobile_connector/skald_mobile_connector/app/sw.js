// The app's service worker: the shell (this app's files and the host's web libraries it
// imports) is cached so the app opens without the server; a push shows a notification
// that says only that something is new (the payload carries nothing else).
// Every module the app imports, all the way down (the host sends them no-cache: offline,
// only this cache has them).
const CACHE = "skald-mobile-v10"; // v10: the shared highlight stylesheet; v9: KaTeX's (math read twice without it)
// The host's string table (/api/i18n) too: the shared Markdown renderer words its code
// blocks' and images' labels from it.
const SHELL = [
  "./", "app.js", "app.css", "manifest.webmanifest", "icon.svg", "strings?locale=en", "strings?locale=de", "/api/i18n?locale=en", "/api/i18n?locale=de",
  "/ui/lib/plugin-kit.js", "/ui/lib/api.js", "/ui/lib/dom.js", "/ui/lib/markdown.js", "/ui/lib/i18n.js", "/ui/lib/ui.js", "/ui/lib/live.js",
  "/ui/vendor/marked/marked.esm.js", "/ui/vendor/dompurify/purify.es.js", "/ui/vendor/highlight/highlight.min.js",
  "/ui/vendor/katex/katex.min.css", "/ui/lib/highlight.css",
];
// What a push shows, in the app's language: the app keeps it here (app.js keepPushWords,
// from its locale files, so a new file words it too). English until the app has run.
const PUSH_WORDS = "skald-mobile-push-words";
const FALLBACK = { title: "Skald", body: "You have something new." };

async function pushWords() {
  try {
    const cache = await caches.open(PUSH_WORDS);
    const hit = await cache.match(new URL("push-words", self.registration.scope).href);
    const words = hit ? await hit.json() : null;
    if (words && typeof words.title === "string" && typeof words.body === "string") return words;
  } catch {
    /* never kept, or unreadable: the fallback */
  }
  return FALLBACK;
}

self.addEventListener("install", (event) => {
  event.waitUntil(caches.open(CACHE).then((cache) => cache.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches.keys().then((keys) => Promise.all(keys.filter((k) => k !== CACHE && k !== PUSH_WORDS).map((k) => caches.delete(k)))).then(() => self.clients.claim()),
  );
});

// Network first for the shell (a new version shows at once), the cache when offline.
// Only the shell's own files and the public string table: the API (and its endless
// stream) is never touched here;
// the app keeps its own read-only copy of the last conversations.
self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== "GET" || url.origin !== self.location.origin) return;
  const shell = new Set(SHELL.map((path) => new URL(path, self.registration.scope).pathname));
  if (!shell.has(url.pathname)) return;
  event.respondWith(
    fetch(event.request)
      .then((response) => {
        if (response.ok) {
          const copy = response.clone();
          caches.open(CACHE).then((cache) => cache.put(event.request, copy));
        }
        return response;
      })
      .catch(() => caches.match(event.request).then((hit) => hit || caches.match(new URL("./", self.registration.scope).href))),
  );
});

self.addEventListener("push", (event) => {
  event.waitUntil(
    pushWords()
      .then((words) => self.registration.showNotification(words.title, { body: words.body, lang: words.lang, icon: "icon.svg", tag: "skald-new" }))
      .then(() => self.clients.matchAll({ type: "window" }).then((clients) => clients.forEach((client) => client.postMessage({ type: "push" })))),
  );
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  event.waitUntil(
    self.clients.matchAll({ type: "window" }).then((clients) => (clients.length ? clients[0].focus() : self.clients.openWindow("./"))),
  );
});
