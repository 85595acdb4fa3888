/*
 * AgentChat website widget.
 *
 * Embed with:
 *   <script src="https://YOUR-AGENTCHAT/widget.js" data-agentchat-id="pub_..." async></script>
 *
 * Draws a chat bubble in the corner of the page (inside a shadow root, so the page's styles
 * and the widget's do not mix). The conversation belongs to this browser: a random visitor
 * id is kept in localStorage, and "New conversation" replaces it. Replies stream as
 * server-sent events from POST /api/widget/{publicId}/chat. Only pages whose origin is in
 * the integration's allowed origins are served.
 */
(function () {
  "use strict";
  var script = document.currentScript;
  if (!script) return;
  var publicId = script.getAttribute("data-agentchat-id");
  if (!publicId) {
    console.warn("AgentChat widget: the script tag needs data-agentchat-id");
    return;
  }
  var base = new URL(script.src, location.href).origin;
  var api = base + "/api/widget/" + encodeURIComponent(publicId);
  var storageKey = "agentchat:visitor:" + publicId;

  function newVisitorId() {
    var bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.prototype.map
      .call(bytes, function (b) { return ("0" + b.toString(16)).slice(-2); })
      .join("");
  }
  function visitorId() {
    var id = null;
    try { id = localStorage.getItem(storageKey); } catch (e) { /* storage blocked */ }
    if (!id) {
      id = newVisitorId();
      try { localStorage.setItem(storageKey, id); } catch (e) { /* kept for this page only */ }
    }
    return id;
  }
  var visitor = visitorId();

  var host = document.createElement("div");
  host.setAttribute("data-agentchat-widget", publicId);
  var root = host.attachShadow({ mode: "open" });
  var css =
    ":host{all:initial}" +
    ".ac{position:fixed;right:20px;bottom:20px;z-index:2147483000;font:14px/1.45 system-ui,sans-serif;color:#1f2430}" +
    ".bubble{display:flex;align-items:center;justify-content:center;width:56px;height:56px;border-radius:50%;border:0;background:#3451d1;color:#fff;font-size:24px;cursor:pointer;box-shadow:0 4px 14px rgba(0,0,0,.25)}" +
    ".panel{position:absolute;right:0;bottom:70px;width:340px;max-width:calc(100vw - 40px);height:460px;max-height:calc(100vh - 110px);display:flex;flex-direction:column;background:#fff;border-radius:12px;box-shadow:0 8px 30px rgba(0,0,0,.25);overflow:hidden}" +
    ".panel[hidden]{display:none}" +
    "header{display:flex;align-items:center;gap:8px;padding:10px 12px;background:#3451d1;color:#fff}" +
    "header h2{flex:1;margin:0;font-size:15px}" +
    "header button{background:transparent;border:1px solid rgba(255,255,255,.6);color:#fff;border-radius:6px;cursor:pointer;padding:2px 8px}" +
    ".log{flex:1;overflow-y:auto;padding:12px;display:flex;flex-direction:column;gap:8px;background:#f6f7fb}" +
    ".msg{max-width:85%;padding:8px 10px;border-radius:10px;white-space:pre-wrap;word-wrap:break-word}" +
    ".user{align-self:flex-end;background:#3451d1;color:#fff}" +
    ".assistant{align-self:flex-start;background:#fff;border:1px solid #dde1ee}" +
    ".notice{align-self:center;color:#5b6275;font-size:13px;text-align:center}" +
    ".error{align-self:stretch;color:#9b1c1c;background:#fdecec;border:1px solid #f5c2c2}" +
    ".rate{align-self:flex-start;display:flex;gap:4px;margin-top:-4px}" +
    ".rate button{display:flex;align-items:center;border:1px solid #dde1ee;background:#fff;color:#5b6275;border-radius:6px;cursor:pointer;padding:3px 6px}" +
    ".rate button[data-rating=down] svg{transform:rotate(180deg)}" +
    ".rate button[aria-pressed=true]{background:#e3e8fb;border-color:#3451d1;color:#3451d1}" +
    "form{display:flex;gap:6px;padding:8px;border-top:1px solid #dde1ee}" +
    "textarea{flex:1;box-sizing:border-box;resize:none;height:40px;padding:8px;border:1px solid #c8cde0;border-radius:8px;font:inherit}" +
    "form button{border:0;border-radius:8px;background:#3451d1;color:#fff;padding:0 14px;cursor:pointer}" +
    "form button:disabled{opacity:.5;cursor:default}";
  root.innerHTML =
    '<div class="ac">' +
    '<div class="panel" role="dialog" aria-label="Chat" hidden>' +
    '<header><h2 class="title">Chat</h2>' +
    '<button type="button" class="restart">New conversation</button>' +
    '<button type="button" class="close" aria-label="Close chat">×</button></header>' +
    '<div class="log" role="log" aria-live="polite"></div>' +
    '<form><textarea aria-label="Message" placeholder="Type a message…" maxlength="32000"></textarea>' +
    '<button type="submit">Send</button></form>' +
    "</div>" +
    '<button type="button" class="bubble" aria-label="Open chat" aria-expanded="false">' +
    '<svg viewBox="0 0 24 24" width="26" height="26" aria-hidden="true"><path fill="currentColor" ' +
    'd="M6 3h12a3 3 0 0 1 3 3v8a3 3 0 0 1-3 3h-7l-5 4v-4H6a3 3 0 0 1-3-3V6a3 3 0 0 1 3-3z"/></svg></button>' +
    "</div>";
  // The styles go in as a constructed stylesheet: the host page's Content Security Policy
  // governs <style> elements and style attributes, not stylesheets built by a script it
  // allowed, so the widget looks right on pages without 'unsafe-inline' too. Browsers
  // without constructed stylesheets get a <style> element carrying this script tag's nonce
  // (the one the page's policy gave it, if any).
  if (typeof CSSStyleSheet === "function" && "adoptedStyleSheets" in root && "replaceSync" in CSSStyleSheet.prototype) {
    var sheet = new CSSStyleSheet();
    sheet.replaceSync(css);
    root.adoptedStyleSheets = [sheet];
  } else {
    var style = document.createElement("style");
    if (script.nonce) style.nonce = script.nonce;
    style.textContent = css;
    root.insertBefore(style, root.firstChild);
  }

  var panel = root.querySelector(".panel");
  var bubble = root.querySelector(".bubble");
  var log = root.querySelector(".log");
  var form = root.querySelector("form");
  var input = root.querySelector("textarea");
  var send = root.querySelector("form button");
  var title = root.querySelector(".title");
  var loaded = false;
  var busy = false;

  function add(kind, text) {
    var el = document.createElement("div");
    el.className = "msg " + kind;
    el.textContent = text;
    log.appendChild(el);
    log.scrollTop = log.scrollHeight;
    return el;
  }

  // A thumb pointing up (Material Design's "thumb_up" path); turned over for "down" by the
  // stylesheet.
  var THUMB =
    '<svg viewBox="0 0 24 24" width="14" height="14" aria-hidden="true"><path fill="currentColor" ' +
    'd="M1 21h4V9H1v12zm22-11c0-1.1-.9-2-2-2h-6.31l.95-4.57.03-.32c0-.41-.17-.79-.44-1.06L14.17 1 7.59 7.59C7.22 7.95 7 8.45 7 9v10c0 1.1.9 2 2 2h9c.83 0 1.54-.5 1.84-1.22l3.02-7.05c.09-.23.14-.47.14-.73v-2z"/></svg>';

  // Thumbs under reply `el` (message `id`), showing `feedback`; a press rates the reply, a
  // press on the pressed one clears its rating.
  function thumbs(el, id, feedback) {
    var bar = document.createElement("div");
    bar.className = "rate";
    var current = feedback ? feedback.rating : null;
    var buttons = [["up", "Helpful"], ["down", "Not helpful"]].map(function (r) {
      var b = document.createElement("button");
      b.type = "button";
      b.innerHTML = THUMB;
      b.setAttribute("aria-label", r[1]);
      b.setAttribute("data-rating", r[0]);
      b.addEventListener("click", function () {
        var next = current === r[0] ? null : r[0];
        var url = api + "/messages/" + encodeURIComponent(id) + "/feedback";
        var request = next
          ? fetch(url, {
              method: "PUT",
              credentials: "omit",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ visitorId: visitor, rating: next }),
            })
          : fetch(url + "?visitorId=" + encodeURIComponent(visitor), { method: "DELETE", credentials: "omit" });
        request.then(function (res) {
          if (res.ok) {
            current = next;
            show();
          }
        }).catch(function () { /* the rating stays as shown */ });
      });
      bar.appendChild(b);
      return b;
    });
    function show() {
      buttons.forEach(function (b) {
        b.setAttribute("aria-pressed", String(b.getAttribute("data-rating") === current));
      });
    }
    show();
    el.insertAdjacentElement("afterend", bar);
  }

  function errorText(res, body) {
    if (body && body.message) return body.message;
    if (res.status === 429) return "Too many messages right now; please wait a moment.";
    return "The chat is not available (HTTP " + res.status + ").";
  }

  function getJson(url) {
    return fetch(url, { credentials: "omit" }).then(function (res) {
      return res.json().catch(function () { return null; }).then(function (body) {
        if (!res.ok) throw new Error(errorText(res, body));
        return body;
      });
    });
  }

  function load() {
    loaded = true;
    getJson(api)
      .then(function (info) {
        title.textContent = info.name;
        panel.setAttribute("aria-label", info.name);
        if (!info.available) add("notice", "This chat is not connected to an agent yet.");
        else if (info.welcomeMessage) add("assistant", info.welcomeMessage);
        return getJson(api + "/messages?visitorId=" + encodeURIComponent(visitor));
      })
      .then(function (history) {
        if (!history) return;
        history.messages.forEach(function (m) {
          var el = add(m.role === "user" ? "user" : "assistant", m.content);
          if (m.role === "assistant" && m.id) thumbs(el, m.id, m.feedback);
        });
      })
      .catch(function (e) {
        add("error", e.message);
        send.disabled = true;
      });
  }

  function toggle(open) {
    panel.hidden = !open;
    bubble.setAttribute("aria-expanded", String(open));
    bubble.setAttribute("aria-label", open ? "Close chat" : "Open chat");
    if (open) {
      if (!loaded) load();
      input.focus();
    }
  }

  // Reads a server-sent event stream, calling onData with each event's data.
  function readEvents(body, onData) {
    var reader = body.getReader();
    var decoder = new TextDecoder();
    var buffer = "";
    function pump() {
      return reader.read().then(function (step) {
        if (step.done) return;
        buffer += decoder.decode(step.value, { stream: true }).replace(/\r\n/g, "\n");
        var end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          var block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          var data = block
            .split("\n")
            .filter(function (l) { return l.indexOf("data:") === 0; })
            .map(function (l) { return l.slice(5).replace(/^ /, ""); })
            .join("\n");
          if (data) onData(data);
        }
        return pump();
      });
    }
    return pump();
  }

  function ask(text) {
    busy = true;
    send.disabled = true;
    add("user", text);
    var reply = add("assistant", "");
    reply.setAttribute("aria-busy", "true");
    fetch(api + "/chat", {
      method: "POST",
      credentials: "omit",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ visitorId: visitor, message: text }),
    })
      .then(function (res) {
        if (!res.ok) {
          return res.json().catch(function () { return null; }).then(function (body) {
            throw new Error(errorText(res, body));
          });
        }
        return readEvents(res.body, function (data) {
          if (data === "[DONE]") return;
          var frame;
          try { frame = JSON.parse(data); } catch (e) { return; }
          if (frame.error) throw new Error(frame.message || frame.error);
          if (frame.chunk) {
            reply.textContent += frame.chunk;
            log.scrollTop = log.scrollHeight;
          }
        });
      })
      .catch(function (e) {
        if (!reply.textContent) reply.remove();
        add("error", e.message || "The reply was interrupted.");
      })
      .then(function () {
        reply.removeAttribute("aria-busy");
        busy = false;
        send.disabled = false;
        if (!reply.isConnected || !reply.textContent) return;
        // The stored reply's id, for its thumbs: the conversation's last reply.
        return getJson(api + "/messages?visitorId=" + encodeURIComponent(visitor)).then(function (history) {
          var last = history.messages.filter(function (m) { return m.role === "assistant"; }).pop();
          // A reply cut short is not stored as complete: then the last one is an older reply.
          if (last && last.id && last.content === reply.textContent && reply.isConnected) {
            thumbs(reply, last.id, last.feedback);
          }
        });
      })
      .catch(function () { /* no thumbs for this reply */ });
  }

  bubble.addEventListener("click", function () { toggle(panel.hidden); });
  root.querySelector(".close").addEventListener("click", function () { toggle(false); });
  root.querySelector(".restart").addEventListener("click", function () {
    visitor = newVisitorId();
    try { localStorage.setItem(storageKey, visitor); } catch (e) { /* page only */ }
    log.textContent = "";
    add("notice", "New conversation started.");
  });
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var text = input.value.trim();
    if (!text || busy) return;
    input.value = "";
    ask(text);
  });
  input.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      form.requestSubmit();
    }
  });

  function mount() { document.body.appendChild(host); }
  if (document.body) mount();
  else document.addEventListener("DOMContentLoaded", mount);
})();
