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
  var sends = 0;  // how many times the action box was sent: text kept before a send is never put back after it

  function actionBox() {
    return document.getElementById("narrate-input") || document.querySelector("#append-form textarea, #append-form input[type=text]");
  }

  // The end of the story (the draft, then the status line) just above the pinned action box.
  function storyEnd() {
    return document.getElementById("play-status") || document.getElementById("narrator");
  }

  function atEnd() {
    return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 160;
  }

  function showEnd() {
    var end = storyEnd();
    if (!end) return;
    var bar = document.querySelector("#console .action-bar");
    var covered = bar ? bar.offsetHeight : 0;  // the pinned box covers the bottom of the screen
    var top = end.getBoundingClientRect().bottom + window.scrollY - (window.innerHeight - covered);
    if (top > window.scrollY) window.scrollTo(0, top);
  }

  function focusAfterSwap(control) {
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
    if (!playSwap(event.detail.target) || !event.detail.xhr) return;
    var trigger = event.detail.requestConfig && event.detail.requestConfig.triggeringEvent;
    event.detail.xhr.playControl = (trigger && trigger.submitter) || document.activeElement || event.detail.elt;
    var box = document.getElementById("narrate-input");
    if (box && event.detail.elt === box.form) sends += 1;
    else if (box) event.detail.xhr.playKept = { text: box.value, sends: sends };
  });

  // Sending the action accepts the draft above it: with the text of its "Edit before accepting" box.
  document.addEventListener("htmx:configRequest", function (event) {
    var form = event.detail.elt;
    var edited = document.getElementById("narrator-narrative");
    if (!form || form.id !== "narrate-form" || !edited || !form.querySelector("[name=accept_draft]")) return;
    event.detail.parameters.narrative = edited.value;
  });

  // After the swap (htmx has put the focus back on an element of the same id, if it could): the
  // control's own rule, unless the player has put the focus somewhere else meanwhile.
  document.addEventListener("htmx:afterSwap", function (event) {
    if (!playSwap(event.detail.target) || !event.detail.xhr) return;
    var xhr = event.detail.xhr;
    var box = document.getElementById("narrate-input");
    var kept = xhr.playKept;
    if (box && kept && kept.text && kept.sends === sends && !box.value) box.value = kept.text;
    var control = xhr.playControl;
    var active = document.activeElement;
    var lost = !active || active === document.body || !document.body.contains(active);
    if (lost || (control && active.id && active.id === control.id)) focusAfterSwap(control);
    if (control && control.form && control.form.id === "narrate-form") showEnd();
  });

  window.addEventListener("narrator:text", function () {
    if (atEnd()) showEnd();
  });

  document.addEventListener("DOMContentLoaded", function () {
    if (!document.getElementById("console")) return;
    // New controls answer at once: htmx binds swapped content when it settles, and a quick second
    // press of an arrow must not find it unbound (it would post the plain form and reload the page).
    if (window.htmx) window.htmx.config.defaultSettleDelay = 0;
    showEnd();
    var box = actionBox();
    if (box && box.id === "narrate-input") box.focus({ preventScroll: true });
  });
})();
