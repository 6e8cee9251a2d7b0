// The Console's narrator stream. Loaded as a static file (the CSP allows no inline script).
// A narrator panel whose chosen alternative is still to be written carries
// data-narrator-stream (a same-origin POST that answers the narrative as plain text, delta
// by delta) and data-narrator-done (the panel to ask for once the stream has ended). The
// text is added with textContent, never as markup. Without JavaScript the studio narrates
// inside the form's POST instead, and this file is not needed.
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

  async function stream(element) {
    var streamUrl = element.getAttribute("data-narrator-stream");
    if (started[streamUrl]) return;
    started[streamUrl] = true;
    var out = element.querySelector("[data-narrator-text]") || element;
    try {
      var response = await fetch(streamUrl, {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRFToken": csrfToken() },
      });
      if (response.body && response.body.getReader) {
        var reader = response.body.getReader();
        var decoder = new TextDecoder();
        for (;;) {
          var part = await reader.read();
          if (part.done) break;
          out.textContent += decoder.decode(part.value, { stream: true });
        }
      } else {
        out.textContent += await response.text();
      }
    } catch (error) {
      // The panel asked for next says what happened (the alternative is marked failed).
    }
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
