// The story view's keyboard and focus (saves/console.html). Loaded as a static file (the CSP
// allows no inline script); without JavaScript the page works as plain forms and the action
// box has `autofocus`.
// - Enter in the action box sends it, Shift+Enter breaks the line (a chat front end's keys).
// - After a play control answers (an htmx swap of #console or #narrator), focus goes back to
//   the control used when it says so (`data-focus="self"`: the swipe arrows, so a second press
//   swipes again) and it still exists and is enabled, else to the action box. Focus is moved
//   only when the swap took it away (a control that was replaced), never from where the
//   player put it meanwhile (typing the next action while the narrator writes).
// - Text typed in the action box survives a control's answer that re-renders the box, unless
//   the answer puts text there itself (Undo, Impersonate).
// - The page opens at the end of the story, and follows the narration while it streams when
//   the player is at the end already.
(function () {
  "use strict";
  var control = null;
  var keptText = null;

  function actionBox() {
    return document.getElementById("narrate-input") || document.querySelector("#append-form textarea, #append-form input[type=text]");
  }

  function storyEnd() {
    return document.getElementById("narrator");
  }

  function atEnd() {
    return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 160;
  }

  function showEnd() {
    var end = storyEnd();
    if (end && end.scrollIntoView) end.scrollIntoView({ block: "end" });
  }

  function focusLost() {
    var active = document.activeElement;
    return !active || active === document.body || !document.body.contains(active);
  }

  function focusAfterSwap() {
    var target = null;
    if (control && control.getAttribute("data-focus") === "self" && control.id) {
      var again = document.getElementById(control.id);
      if (again && !again.disabled) target = again;
      else {
        var group = again && again.closest("[role=group]");
        var other = group && group.querySelector("button:not([disabled])");
        if (other) target = other;
      }
    }
    target = target || actionBox();
    if (target) target.focus({ preventScroll: target === actionBox() });
  }

  document.addEventListener("keydown", function (event) {
    var box = event.target;
    if (!box || box.id !== "narrate-input" || event.key !== "Enter") return;
    if (event.shiftKey || event.altKey || event.isComposing || event.keyCode === 229) return;
    event.preventDefault();
    var form = box.form;
    if (form.requestSubmit) form.requestSubmit();
    else form.submit();
  });

  function playSwap(target) {
    return target && (target.id === "console" || target.id === "narrator");
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    if (!playSwap(event.detail.target)) return;
    var trigger = event.detail.requestConfig && event.detail.requestConfig.triggeringEvent;
    control = (trigger && trigger.submitter) || document.activeElement || event.detail.elt;
    var box = document.getElementById("narrate-input");
    keptText = box && event.detail.elt !== box.form ? box.value : null;
  });

  document.addEventListener("htmx:afterSettle", function (event) {
    if (!playSwap(event.detail.target)) return;
    var box = document.getElementById("narrate-input");
    if (box && keptText && !box.value) box.value = keptText;
    keptText = null;
    if (focusLost()) focusAfterSwap();
    if (control && control.form && control.form.id === "narrate-form") showEnd();
    control = null;
  });

  window.addEventListener("narrator:text", function () {
    if (atEnd()) showEnd();
  });

  document.addEventListener("DOMContentLoaded", function () {
    if (!document.getElementById("console")) return;
    showEnd();
    var box = actionBox();
    if (box && box.id === "narrate-input") box.focus({ preventScroll: true });
  });
})();
