// The Console's narrator stream. Loaded as a static file (the CSP allows no inline script).
// A narrator panel whose chosen alternative is still to be written carries
// data-narrator-stream (a same-origin POST that answers the narrative as plain text, delta
// by delta) and data-narrator-done (the panel to ask for once the stream has ended). The
// text is added with textContent, never as markup. Without JavaScript the studio narrates
// inside the form's POST instead, and this file is not needed.
// While the text arrives, [data-narrator-stats] shows the elapsed time, the time to the
// first text and the tokens so far (estimated as the studio does, 4 characters a token);
// the Stop button (hidden without JavaScript) posts to data-narrator-stop with the text
// shown so far, then stops reading: the draft keeps that text, editable, never appended.
(function () {
  "use strict";
  // Each stream URL is read once per page: an alternative that could not be claimed (already
  // streamed, or refused) must not start the same request again in a loop.
  var started = {};

  function csrfToken() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (error) {
      return "";
    }
  }

  function finish(element) {
    // The playtester acted while the text arrived (chose another alternative, regenerated,
    // discarded): their answer already replaced this panel, so asking for it again could only
    // put an older state back over theirs.
    if (!document.body.contains(element)) return;
    var url = element.getAttribute("data-narrator-done");
    if (window.htmx) {
      window.htmx.ajax("GET", url, { target: "#narrator", swap: "outerHTML" });
    } else {
      window.location.reload();
    }
  }

  function seconds(ms) {
    return (ms / 1000).toFixed(1) + " s";
  }

  function statsText(began, firstAt, chars) {
    var now = Date.now();
    var text = seconds(now - began) + " elapsed";
    text += firstAt ? " · first text after " + seconds(firstAt - began) : " · waiting for the first text";
    if (chars) text += " · about " + Math.max(1, Math.round(chars / 4)) + " tokens so far";
    return text;
  }

  async function stop(element, out, controller, button) {
    button.disabled = true;
    button.textContent = "Stopping…";
    var body = new FormData();
    body.append("shown_text", out.textContent);
    try {
      await fetch(element.getAttribute("data-narrator-stop"), {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRFToken": csrfToken() },
        body: body,
      });
    } catch (error) {
      // The reader is closed below either way; the panel says what was kept.
    }
    controller.abort();
  }

  async function stream(element) {
    var streamUrl = element.getAttribute("data-narrator-stream");
    if (started[streamUrl]) return;
    started[streamUrl] = true;
    var out = element.querySelector("[data-narrator-text]") || element;
    var panel = element.closest("#narrator") || document;
    var stats = panel.querySelector("[data-narrator-stats]");
    var button = panel.querySelector("#narrator-stop");
    var controller = new AbortController();
    var began = Date.now();
    var firstAt = 0;
    var timer = null;
    if (stats) {
      stats.textContent = statsText(began, firstAt, 0);
      timer = window.setInterval(function () { stats.textContent = statsText(began, firstAt, out.textContent.length); }, 250);
    }
    if (button && element.getAttribute("data-narrator-stop")) {
      button.hidden = false;
      button.addEventListener("click", function (event) {
        event.preventDefault();
        stop(element, out, controller, button);
      });
    }
    try {
      var response = await fetch(streamUrl, {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRFToken": csrfToken() },
        signal: controller.signal,
      });
      if (response.body && response.body.getReader) {
        var reader = response.body.getReader();
        var decoder = new TextDecoder();
        for (;;) {
          var part = await reader.read();
          if (part.done) break;
          var piece = decoder.decode(part.value, { stream: true });
          if (piece && !firstAt) firstAt = Date.now();
          out.textContent += piece;
          window.dispatchEvent(new CustomEvent("narrator:text"));  // play.js keeps the end in view
        }
      } else {
        out.textContent += await response.text();
        window.dispatchEvent(new CustomEvent("narrator:text"));
      }
    } catch (error) {
      // Stopped, or the connection broke: the panel asked for next says what happened.
    }
    if (timer) window.clearInterval(timer);
    finish(element);
  }

  function scan(root) {
    var scope = root && root.querySelectorAll ? root : document;
    if (scope.matches && scope.matches("[data-narrator-stream]")) stream(scope);
    scope.querySelectorAll("[data-narrator-stream]").forEach(stream);
  }

  if (window.htmx) {
    window.htmx.onLoad(scan);
  } else {
    document.addEventListener("DOMContentLoaded", function () { scan(document); });
  }
})();
